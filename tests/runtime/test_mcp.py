"""MCP in-process (spec 03 § MCP): the pinned tool set, strict schemas, HTTP parity, errors.

The SDK's real client talks Streamable HTTP to the ASGI app through httpx2's ASGITransport, so
the whole stack runs (RequestMiddleware auth, the /mcp route, the SDK session manager started
by the app lifespan) without a network. Both protocol eras the SDK speaks are exercised: the
2026-07-28 per-request path (``mode="auto"`` negotiates it) and the 2025 handshake path.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from fastapi import FastAPI
from fastapi.routing import APIRoute
from mcp import Client, MCPError
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult

from powercontext_runtime.composition import Runtime
from powercontext_runtime.contract.memory import CaptureSourceRequest
from powercontext_runtime.http import create_app
from powercontext_runtime.http.bootstrap_routes import bootstrap_router
from powercontext_runtime.http.review_routes import review_router
from powercontext_runtime.http.routes import router
from powercontext_runtime.http.task_result_routes import task_result_router
from powercontext_runtime.mcp import NEVER_EXPOSED, TOOLS
from powercontext_runtime.mcp.server import build_server, call

BASE = "http://localhost"
SCOPE = "git:example.com/acme/api"
EXPECTED_TOOLS = {
    "search_memory", "list_memory_entries", "get_memory_entry", "remember_memory",
    "revise_memory_entry", "retire_memory_entry", "propose_experience", "get_experience",
    "list_experiences", "propose_skill", "get_skill", "list_skills", "list_artifact_candidates",
    "get_artifact_candidate", "approve_artifact_candidate", "reject_artifact_candidate",
    "revise_artifact_candidate", "capture_content_source", "commit_handoff", "get_handoff",
    "record_task_result", "list_task_results", "get_task_result",
}  # fmt: skip
READ_ONLY = {
    "search_memory", "list_memory_entries", "get_memory_entry", "get_experience", "get_skill",
    "list_experiences", "list_skills", "list_artifact_candidates", "get_artifact_candidate",
    "get_handoff", "list_task_results", "get_task_result",
}  # fmt: skip
MODES = ["auto", "legacy"]


def _token(runtime: Runtime) -> str:
    runtime.ensure_local_token()
    return runtime.settings.token_file.read_text().strip()


@asynccontextmanager
async def _client(
    app: FastAPI, token: str | None, mode: str = "auto", statuses: list[int] | None = None
) -> AsyncIterator[Client]:
    """The SDK client over Streamable HTTP; ``statuses`` collects every HTTP status seen."""
    headers = {} if token is None else {"Authorization": f"Bearer {token}"}

    async def record(response: httpx2.Response) -> None:
        if statuses is not None:
            statuses.append(response.status_code)

    async with (
        app.router.lifespan_context(app),
        httpx2.AsyncClient(
            transport=httpx2.ASGITransport(app=app),
            base_url=BASE,
            headers=headers,
            event_hooks={"response": [record]},
        ) as http,
        Client(streamable_http_client(f"{BASE}/mcp", http_client=http), mode=mode) as client,
    ):
        yield client


def _run(runtime: Runtime, scenario: Callable[[Client], Awaitable[None]], **kw: Any) -> None:
    async def main() -> None:
        async with _client(create_app(runtime), kw.pop("token", _token(runtime)), **kw) as c:
            await scenario(c)

    anyio.run(main)


def _ok(result: CallToolResult) -> dict[str, Any]:
    assert not result.is_error, result.content
    text = json.loads(result.content[0].text)  # type: ignore[union-attr]
    assert text == result.structured_content
    return text


def _error(result: CallToolResult, code: str) -> dict[str, Any]:
    """The tool error carries exactly the HTTP error envelope as its only text block."""
    assert result.is_error
    assert result.structured_content is None
    assert len(result.content) == 1 and result.content[0].type == "text"
    body = json.loads(result.content[0].text)
    assert set(body) == {"error"} and set(body["error"]) == {"code", "message", "details"}
    assert body["error"]["code"] == code, body
    return body["error"]


# -- the tool set and its schemas ---------------------------------------------------------------


def test_the_table_is_the_allow_list() -> None:
    names = [tool.name for tool in TOOLS]
    assert len(names) == len(set(names))
    assert set(names) == EXPECTED_TOOLS
    assert not set(names) & NEVER_EXPOSED
    assert {t.name for t in TOOLS if t.read_only} == READ_ONLY
    for name in names:
        assert not any(word in name for word in ("prepare", "bootstrap", "receipt", "token"))
    for tool in TOOLS:  # authorisation reads scope_id: every tool must require one
        assert tool.request.model_fields["scope_id"].is_required(), tool.name


def test_each_tool_mirrors_its_http_operation() -> None:
    """Same operationId, same request model, same response model as the HTTP route."""
    routes = {r.operation_id: r
              for r in (*router.routes, *review_router.routes, *bootstrap_router.routes,
                        *task_result_router.routes)
              if isinstance(r, APIRoute)}  # fmt: skip
    assert "prepare_context" in routes  # served over HTTP, deliberately not over MCP
    for tool in TOOLS:
        route = routes[tool.name]
        (body,) = route.dependant.body_params
        assert body.field_info.annotation is tool.request, tool.name
        assert route.response_model is tool.response, tool.name


@pytest.mark.parametrize("mode", MODES)
def test_tools_list_is_exact_strict_and_annotated(sqlite_runtime: Runtime, mode: str) -> None:
    async def scenario(client: Client) -> None:
        listed = (await client.list_tools()).tools
        assert {tool.name for tool in listed} == EXPECTED_TOOLS
        by_name = {tool.name: tool for tool in TOOLS}
        for tool in listed:
            spec = by_name[tool.name]
            assert tool.input_schema == spec.request.model_json_schema()
            assert tool.output_schema == spec.response.model_json_schema(mode="serialization")
            assert tool.description
            for schema in _object_schemas(tool.input_schema):
                assert schema.get("additionalProperties") is False or _free_dict(schema), schema
            read_only = tool.annotations is not None and tool.annotations.read_only_hint is True
            assert read_only == (tool.name in READ_ONLY), tool.name

    _run(sqlite_runtime, scenario, mode=mode)


def _object_schemas(schema: Any) -> list[dict[str, Any]]:
    """Every object-typed (sub)schema of a JSON schema."""
    found: list[dict[str, Any]] = []
    if isinstance(schema, dict):
        if schema.get("type") == "object":
            found.append(schema)
        for value in schema.values():
            found.extend(_object_schemas(value))
    elif isinstance(schema, list):
        for value in schema:
            found.extend(_object_schemas(value))
    return found


def _free_dict(schema: dict[str, Any]) -> bool:
    # ``dict[str, Any]`` fields (a candidate's proposal, source metadata) are free-form on
    # HTTP too; the service validates them against the family's typed model.
    return "properties" not in schema and schema.get("additionalProperties", True) is True


def test_mcp_adds_nothing_to_the_openapi_document(sqlite_runtime: Runtime) -> None:
    document = create_app(sqlite_runtime).openapi()
    assert not [path for path in document["paths"] if "mcp" in path]


# -- calls --------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_remember_search_get_round_trip(sqlite_runtime: Runtime, mode: str) -> None:
    async def scenario(client: Client) -> None:
        text = "the deploy script needs the staging flag"
        written = _ok(await client.call_tool(
            "remember_memory", {"scope_id": SCOPE, "kind": "fact", "text": text}
        ))  # fmt: skip
        citation = written["entry"]["citation"]
        found = _ok(await client.call_tool(
            "search_memory", {"scope_id": SCOPE, "query": "deploy staging flag"}
        ))  # fmt: skip
        assert [hit["citation"] for hit in found["hits"]] == [citation]
        entry = _ok(await client.call_tool(
            "get_memory_entry", {"scope_id": SCOPE, "citation": citation}
        ))  # fmt: skip
        assert entry == written["entry"]
        # Byte-for-byte the same JSON the HTTP service returns.
        assert entry == sqlite_runtime.memory.get(
            _request("get_memory_entry", {"scope_id": SCOPE, "citation": citation})
        ).model_dump(mode="json")

    _run(sqlite_runtime, scenario, mode=mode)


@pytest.mark.parametrize("mode", MODES)
def test_record_list_get_a_task_result_and_cite_it(sqlite_runtime: Runtime, mode: str) -> None:
    """An agent records its task's result, finds it again and cites it in a proposal; the
    secret in its check's command never comes back."""

    async def scenario(client: Client) -> None:
        task = {
            "goal": "Make the nightly import idempotent",
            "outcome": "failed",
            "checks": [{"command": "DB_PASSWORD=SENTINEL-mcp-pw make test", "exit_status": 2}],
        }
        body = {"scope_id": SCOPE, "task_id": "mcp-run-1", "task": task}
        recorded = _ok(await client.call_tool("record_task_result", body))
        assert recorded["source"] == {"name": "task-result", "source_id": "task-result/mcp-run-1"}
        assert recorded["redactions"] == 1
        again = _ok(await client.call_tool("record_task_result", body))
        assert again == recorded  # idempotent: the same position
        changed = {**body, "task": {**task, "outcome": "succeeded"}}
        _error(await client.call_tool("record_task_result", changed), "task_result_conflict")
        listed = _ok(await client.call_tool("list_task_results", {"scope_id": SCOPE}))
        assert [(r["source"], r["failed_checks"]) for r in listed["task_results"]] == [
            (recorded["source"], 1)
        ]
        found = _ok(await client.call_tool(
            "get_task_result", {"scope_id": SCOPE, "task_id": "mcp-run-1"}
        ))  # fmt: skip
        assert found["task"]["checks"][0]["command"] == "DB_PASSWORD=[REDACTED] make test"
        _error(await client.call_tool(
            "get_task_result", {"scope_id": SCOPE, "task_id": "never"}
        ), "task_result_not_found")  # fmt: skip
        proposal = {"situation": "s", "action": "a", "outcome": "o", "lesson": "l"}
        candidate = _ok(await client.call_tool("propose_experience", {
            "scope_id": SCOPE, "proposal": proposal, "source_refs": [recorded["source"]],
        }))  # fmt: skip
        assert candidate["source_refs"] == [recorded["source"]]

    _run(sqlite_runtime, scenario, mode=mode)


def _request(name: str, arguments: dict[str, Any]) -> Any:
    return next(t for t in TOOLS if t.name == name).request.model_validate(arguments)


@pytest.mark.parametrize("mode", MODES)
def test_invalid_arguments_are_an_invalid_request_tool_error(
    sqlite_runtime: Runtime, mode: str
) -> None:
    secret = "SENTINEL-echo-check"

    async def scenario(client: Client) -> None:
        error = _error(await client.call_tool(
            "search_memory", {"scope_id": SCOPE, "query": "q", "surprise": secret}
        ), "invalid_request")  # fmt: skip
        assert error["message"] == "the request is invalid"
        assert {"loc": ["arguments", "surprise"], "msg": "Extra inputs are not permitted",
                "type": "extra_forbidden"} in error["details"]["errors"]  # fmt: skip
        for arguments in (
            {},
            {"scope_id": 7, "query": "q"},
            {"scope_id": " padded", "query": "q"},
            {"scope_id": SCOPE, "query": "q", "limit": 51},
            {"scope_id": SCOPE, "query": "q", "limit": "5"},  # strict: no coercion
            {"scope_id": SCOPE, "query": secret * 1000},
        ):
            result = await client.call_tool("search_memory", arguments)
            _error(result, "invalid_request")
            assert secret not in result.content[0].text  # type: ignore[union-attr]
        # Model-level rules run too: a proposal needs 1..32 evidence references.
        _error(await client.call_tool("propose_experience", {
            "scope_id": SCOPE, "proposal": _experience("x"),
        }), "invalid_request")  # fmt: skip

    _run(sqlite_runtime, scenario, mode=mode)


@pytest.mark.parametrize("mode", MODES)
def test_a_token_without_the_scope_is_scope_forbidden(sqlite_runtime: Runtime, mode: str) -> None:
    token = sqlite_runtime.tokens.create(
        "limited", ["git:example.com/acme/*"], ["read", "write", "propose"]
    )

    async def scenario(client: Client) -> None:
        _ok(await client.call_tool("list_memory_entries", {"scope_id": SCOPE}))
        other = "git:example.com/other/x"
        for name, arguments in (
            ("list_memory_entries", {"scope_id": other}),
            ("remember_memory", {"scope_id": other, "kind": "fact", "text": "nope"}),
            ("list_artifact_candidates", {"scope_id": other}),
        ):
            _error(await client.call_tool(name, arguments), "scope_forbidden")
        assert sqlite_runtime.memory.list(_request("list_memory_entries", {"scope_id": other}))\
            .entries == []  # fmt: skip

    _run(sqlite_runtime, scenario, mode=mode, token=token)


def test_typed_errors_keep_their_code_and_details(sqlite_runtime: Runtime) -> None:
    _capture_source(sqlite_runtime)

    async def scenario(client: Client) -> None:
        missing = {"memory_ref": {"family": "memory", "artifact_id": "memory", "revision": 1},
                   "entry_id": "mem_ent_x", "entry_version_id": "mem_ver_x"}  # fmt: skip
        _error(await client.call_tool(
            "get_memory_entry", {"scope_id": SCOPE, "citation": missing}
        ), "memory_not_found")  # fmt: skip
        candidate = _ok(await client.call_tool("propose_experience", {
            "scope_id": SCOPE, "proposal": _experience("x"), "source_refs": [_SOURCE],
        }))  # fmt: skip
        error = _error(await client.call_tool("approve_artifact_candidate", {
            "scope_id": SCOPE, "candidate_id": candidate["candidate_id"], "expected_version": 2,
        }), "candidate_conflict")  # fmt: skip
        assert error["details"] == {"expected_version": 2, "current_version": 1}

    _run(sqlite_runtime, scenario)


def test_unexpected_failures_are_generic_and_logged_by_type_only(
    sqlite_runtime: Runtime, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def explode(_req: object) -> None:
        raise RuntimeError("SELECT secret FROM memory -- SENTINEL")

    monkeypatch.setattr(sqlite_runtime.memory, "search", explode)

    async def scenario(client: Client) -> None:
        result = await client.call_tool("search_memory", {"scope_id": SCOPE, "query": "q"})
        error = _error(result, "internal_error")
        assert error == {"code": "internal_error", "message": "internal error", "details": None}

    with caplog.at_level(logging.ERROR, logger="powercontext.mcp"):
        _run(sqlite_runtime, scenario)
    records = [r for r in caplog.records if r.name == "powercontext.mcp"]
    assert [(r.getMessage(), r.error_type, r.operation) for r in records] == [  # type: ignore[attr-defined]
        ("internal_error", "RuntimeError", "search_memory")
    ]
    assert "SENTINEL" not in caplog.text


def test_an_unknown_tool_is_a_protocol_error(sqlite_runtime: Runtime) -> None:
    async def scenario(client: Client) -> None:
        for name in ("prepare_context", "bootstrap_context", "record_bootstrap_receipt", "nope"):
            with pytest.raises(MCPError, match="unknown tool"):
                await client.call_tool(name, {"scope_id": SCOPE, "query": "q"})

    _run(sqlite_runtime, scenario)


def test_a_call_without_a_principal_is_refused(sqlite_runtime: Runtime) -> None:
    """Fail closed: a message that bypassed the authenticated HTTP stack gets nothing."""
    tool = next(t for t in TOOLS if t.name == "list_memory_entries")

    async def main() -> None:
        for request in (None, object()):
            result = await call(sqlite_runtime, tool, request, {"scope_id": SCOPE})
            _error(result, "unauthorized")

    anyio.run(main)
    assert build_server(sqlite_runtime).name == "powercontext"


# -- HTTP surface of /mcp -----------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_no_or_wrong_token_is_401_before_mcp(sqlite_runtime: Runtime, mode: str) -> None:
    """The SDK client reports a non-JSON-RPC 401 only as a generic MCPError; the hook sees 401."""
    for token in (None, "pc_nope_nope"):
        statuses: list[int] = []

        async def main(token: str | None = token, statuses: list[int] = statuses) -> None:
            async with _client(create_app(sqlite_runtime), token, mode, statuses):
                raise AssertionError("the handshake must not succeed")

        with pytest.raises(BaseException) as caught:
            anyio.run(main)
        leaves = _leaves(caught.value)
        assert leaves and all(isinstance(e, MCPError) for e in leaves), leaves
        assert statuses and set(statuses) == {401}, statuses


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in _leaves(inner)]
    return [exc]


def test_plain_http_edges_of_the_endpoint(sqlite_runtime: Runtime) -> None:
    token = _token(sqlite_runtime)
    app = create_app(sqlite_runtime)
    headers = {"Authorization": f"Bearer {token}", "Accept": "application/json"}
    listing = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}

    async def main() -> None:
        transport = httpx2.ASGITransport(app=app)
        async with httpx2.AsyncClient(transport=transport, base_url=BASE) as http:
            # Outside the app lifespan the SDK has no task group: a clean 503, not a 500.
            down = await http.post("/mcp", json=listing, headers=headers)
            assert (down.status_code, down.json()["error"]["code"]) == (503, "runtime_not_ready")
            async with app.router.lifespan_context(app):
                up = await http.post(
                    "/mcp", json=listing, headers={**headers, "MCP-Protocol-Version": "2025-06-18"}
                )
                assert up.status_code == 200
                assert up.headers["content-type"].startswith("application/json")
                assert "mcp-session-id" not in up.headers  # stateless
                assert up.headers["x-request-id"]
                assert len(up.json()["result"]["tools"]) == len(EXPECTED_TOOLS)
                for method in ("GET", "DELETE"):
                    refused = await http.request(method, "/mcp", headers=headers)
                    assert refused.status_code == 405
                    assert refused.headers["allow"] == "POST"
                    assert refused.json()["error"]["code"] == "method_not_allowed"
                anonymous = await http.post("/mcp", json=listing)
                assert anonymous.status_code == 401
                assert anonymous.headers["www-authenticate"] == "Bearer"
                assert anonymous.json()["error"]["code"] == "unauthorized"

    anyio.run(main)


async def _list_tools(http: httpx2.AsyncClient, token: str, n: int = 1) -> httpx2.Response:
    """One stateless ``tools/list`` POST (2025 protocol header, plain JSON answer)."""
    return await http.post(
        "/mcp",
        json={"jsonrpc": "2.0", "id": n, "method": "tools/list"},
        headers={
            "Authorization": f"Bearer {token}",
            "Accept": "application/json",
            "MCP-Protocol-Version": "2025-06-18",
        },
    )


def test_concurrent_first_requests_start_one_session_manager(
    sqlite_runtime: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The SDK starts with the first MCP request; requests racing it wait for the one start."""
    from powercontext_runtime.mcp import endpoint, server

    made: list[object] = []

    def counting(*args: Any, **kwargs: Any) -> Any:
        made.append(manager := server.session_manager(*args, **kwargs))
        return manager

    monkeypatch.setattr(endpoint, "_load_server", lambda: _Wrapped(counting))
    token = _token(sqlite_runtime)
    app = create_app(sqlite_runtime)
    mcp_route = next(r for r in app.routes if getattr(r, "path", None) == "/mcp")
    mcp = mcp_route.endpoint  # type: ignore[attr-defined]
    statuses: list[int] = []

    async def one(http: httpx2.AsyncClient, n: int) -> None:
        reply = await _list_tools(http, token, n)
        statuses.append(reply.status_code)
        assert len(reply.json()["result"]["tools"]) == len(EXPECTED_TOOLS)

    async def main() -> None:
        transport = httpx2.ASGITransport(app=app)
        async with httpx2.AsyncClient(transport=transport, base_url=BASE) as http:
            for _lifespan in range(2):  # a fresh manager for each lifespan
                async with app.router.lifespan_context(app):
                    assert not mcp.started
                    await http.get("/v1/health")  # other routes do not start it
                    assert not mcp.started
                    async with anyio.create_task_group() as group:
                        for n in range(8):
                            group.start_soon(one, http, n)
                    assert mcp.started
                assert not mcp.started

    anyio.run(main)
    assert statuses == [200] * 16
    assert len(made) == 2 and made[0] is not made[1]


_FRESH_PROCESS = """
import sys, anyio
from pathlib import Path
import powercontext_runtime.cli.main  # what `powercontext serve` loads first
from powercontext_runtime.composition import Runtime
from powercontext_runtime.http import create_app
from powercontext_runtime.settings import Settings

runtime = Runtime.open(Settings.load(env={}, home=Path(sys.argv[1])))
runtime.ensure_local_token()
token = runtime.settings.token_file.read_text().strip()
app = create_app(runtime)
heavy = ("mcp", "httpx")  # the MCP SDK, and the client only configured endpoints use

async def main():
    async with app.router.lifespan_context(app):
        print("started:", sorted(m for m in heavy if m in sys.modules))
        import httpx2

        transport = httpx2.ASGITransport(app=app)
        async with httpx2.AsyncClient(transport=transport, base_url="http://localhost") as http:
            reply = await http.post(
                "/mcp",
                json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                headers={
                    "Authorization": f"Bearer {token}",
                    "Accept": "application/json",
                    "MCP-Protocol-Version": "2025-06-18",
                },
            )
        print("status:", reply.status_code, len(reply.json()["result"]["tools"]))
        print("after /mcp:", "mcp" in sys.modules)

anyio.run(main)
runtime.close()
"""


def test_a_daemon_loads_the_mcp_sdk_on_the_first_mcp_request(tmp_path: Path) -> None:
    """A fresh interpreter, as `powercontext serve`: the app starts without the SDK (≈ 23 MiB
    resident) or httpx and loads the SDK when MCP is first called."""
    done = subprocess.run(
        [sys.executable, "-c", _FRESH_PROCESS, str(tmp_path / "home")],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "HOME": str(tmp_path)},
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "started: []",
        f"status: 200 {len(EXPECTED_TOOLS)}",
        "after /mcp: True",
    ]


class _Wrapped:
    """A stand-in for the ``server`` module whose ``session_manager`` is replaced."""

    def __init__(self, session_manager: Callable[..., Any]) -> None:
        self.session_manager = session_manager


def test_a_failed_start_is_a_clean_503_and_the_next_request_tries_again(
    sqlite_runtime: Runtime, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from powercontext_runtime.mcp import endpoint, server

    attempts: list[int] = []

    def flaky() -> Any:
        attempts.append(1)
        if len(attempts) == 1:
            raise ImportError("stand-in: the SDK is broken")
        return server

    monkeypatch.setattr(endpoint, "_load_server", flaky)
    token = _token(sqlite_runtime)
    app = create_app(sqlite_runtime)

    async def main() -> None:
        transport = httpx2.ASGITransport(app=app)
        async with (
            httpx2.AsyncClient(transport=transport, base_url=BASE) as http,
            app.router.lifespan_context(app),
        ):
            failed = await _list_tools(http, token)
            assert failed.status_code == 503
            assert failed.json()["error"]["code"] == "runtime_not_ready"
            served = await _list_tools(http, token)
            assert served.status_code == 200

    with caplog.at_level(logging.ERROR, logger="powercontext.mcp"):
        anyio.run(main)
    assert len(attempts) == 2
    [record] = [r for r in caplog.records if r.getMessage() == "mcp_start_failed"]
    assert record.error_type == "ImportError"  # type: ignore[attr-defined]
    assert "stand-in" not in caplog.text


# -- fixtures for the review tools --------------------------------------------------------------

_SOURCE = {"name": "content", "source_id": "s1"}


def _capture_source(runtime: Runtime, scope: str = SCOPE) -> None:
    """Capture ``_SOURCE`` in ``scope``: a proposal's evidence must exist there."""
    runtime.sources.capture(
        CaptureSourceRequest(scope_id=scope, source_id=_SOURCE["source_id"], content="evidence")
    )


def _experience(marker: str) -> dict[str, str]:
    return {
        "situation": f"situation {marker}",
        "action": f"action {marker}",
        "outcome": f"outcome {marker}",
        "lesson": f"lesson {marker}",
    }
