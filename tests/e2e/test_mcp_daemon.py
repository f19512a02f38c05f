"""MCP against a real ``powercontext serve`` process, through the SDK's real client session.

Everything goes over a real socket to uvicorn: the shared auth middleware, the /mcp route, the
SDK session manager run by the app lifespan, and the services in worker threads. Each scenario
runs on both protocol eras the SDK speaks (2026-07-28 negotiated by ``mode="auto"``, and the
2025 initialize handshake), since MCP hosts in the field use either.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client, MCPError
from mcp.types import CallToolResult

from powercontext_runtime.mcp.tools import TOOLS
from tests.e2e.helpers import (
    CHANGES,
    GET,
    HANDOFF_GET,
    LIST,
    assert_envelope,
    create_token,
    mcp_session,
    new_scope,
    remember,
    secret_part,
    served_operations,
    valid_bodies,
)
from tests.support.daemon import Daemon

pytestmark = pytest.mark.e2e

MODES = ["auto", "legacy"]
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
SOURCE = {"name": "content", "source_id": "s1"}


async def _capture_source(client: Client, scope: str) -> None:
    """Capture ``SOURCE`` in ``scope``: a proposal's evidence must exist there."""
    _ok(await client.call_tool("capture_content_source", {
        "scope_id": scope, "source_id": SOURCE["source_id"], "content": "the task result",
    }))  # fmt: skip


def _run(
    daemon: Daemon, mode: str, scenario: Callable[[Client], Awaitable[None]], token: str = ""
) -> None:
    async def main() -> None:
        async with mcp_session(daemon, token or daemon.token, mode) as client:
            await scenario(client)

    anyio.run(main)


def _ok(result: CallToolResult) -> dict[str, Any]:
    assert not result.is_error, result.content
    body = json.loads(result.content[0].text)  # type: ignore[union-attr]
    assert body == result.structured_content
    return body


def _error(result: CallToolResult, code: str) -> dict[str, Any]:
    assert result.is_error
    body = json.loads(result.content[0].text)  # type: ignore[union-attr]
    assert set(body) == {"error"} and set(body["error"]) == {"code", "message", "details"}
    assert body["error"]["code"] == code, body
    return body["error"]


def _experience(marker: str) -> dict[str, str]:
    return {
        "situation": f"deploying {marker} on friday",
        "action": f"ran the {marker} migration first",
        "outcome": f"the {marker} rollout succeeded",
        "lesson": f"always migrate {marker} before deploying",
    }


@pytest.mark.parametrize("mode", MODES)
def test_tools_list_is_exactly_the_allow_list(module_daemon: Daemon, mode: str) -> None:
    async def scenario(client: Client) -> None:
        tools = (await client.list_tools()).tools
        names = {tool.name for tool in tools}
        assert names == EXPECTED_TOOLS
        assert not names & {"prepare_context", "bootstrap_context", "record_bootstrap_receipt"}
        assert not [n for n in names if "token" in n or "bootstrap" in n or "prepare" in n]
        for tool in tools:
            assert tool.input_schema["type"] == "object"
            assert tool.input_schema["additionalProperties"] is False
            assert "scope_id" in tool.input_schema["required"]
            read_only = tool.annotations is not None and tool.annotations.read_only_hint is True
            assert read_only == (tool.name in READ_ONLY), tool.name

    _run(module_daemon, mode, scenario)


@pytest.mark.parametrize("mode", MODES)
def test_remember_search_get_round_trip(module_daemon: Daemon, mode: str) -> None:
    scope = new_scope("mcp-memory")
    text = "the billing worker retries webhooks with exponential backoff"

    async def scenario(client: Client) -> None:
        written = _ok(await client.call_tool(
            "remember_memory",
            {"scope_id": scope, "kind": "convention", "text": text, "tags": ["billing"]},
        ))  # fmt: skip
        assert written["memory"]["revision"] == 1
        citation = written["entry"]["citation"]
        found = _ok(await client.call_tool(
            "search_memory", {"scope_id": scope, "query": "billing webhooks backoff"}
        ))  # fmt: skip
        assert [(h["citation"], h["text"]) for h in found["hits"]] == [(citation, text)]
        entry = _ok(await client.call_tool(
            "get_memory_entry", {"scope_id": scope, "citation": citation}
        ))  # fmt: skip
        assert entry == written["entry"]
        # The same JSON the HTTP endpoint returns for the same read.
        with module_daemon.client() as http:
            assert http.post(GET, json={"scope_id": scope, "citation": citation}).json() == entry

    _run(module_daemon, mode, scenario)


@pytest.mark.parametrize("mode", MODES)
def test_experience_review_round_trip(module_daemon: Daemon, mode: str) -> None:
    scope = new_scope("mcp-review")

    async def scenario(client: Client) -> None:
        await _capture_source(client, scope)
        proposed = _ok(await client.call_tool("propose_experience", {
            "scope_id": scope, "proposal": _experience("zanzibar"), "source_refs": [SOURCE],
        }))  # fmt: skip
        assert (proposed["status"], proposed["version"]) == ("pending", 1)
        pending = _ok(await client.call_tool("list_artifact_candidates", {"scope_id": scope}))
        assert [c["candidate_id"] for c in pending["candidates"]] == [proposed["candidate_id"]]
        approved = _ok(await client.call_tool("approve_artifact_candidate", {
            "scope_id": scope, "candidate_id": proposed["candidate_id"], "expected_version": 1,
        }))  # fmt: skip
        assert approved["status"] == "approved"
        artifact = approved["result_artifact"]
        assert artifact["family"] == "experience"
        read = _ok(await client.call_tool(
            "get_experience", {"scope_id": scope, "artifact": artifact}
        ))  # fmt: skip
        assert read["reference"] == artifact
        assert read["content"] == _experience("zanzibar")
        assert read["source_refs"] == [SOURCE]
        # Approval is terminal: a second approval is a typed conflict, not a second artifact.
        _error(await client.call_tool("approve_artifact_candidate", {
            "scope_id": scope, "candidate_id": proposed["candidate_id"], "expected_version": 1,
        }), "candidate_terminal")  # fmt: skip
        left = _ok(await client.call_tool("list_artifact_candidates", {"scope_id": scope}))
        assert left["candidates"] == []

    _run(module_daemon, mode, scenario)


@pytest.mark.parametrize("mode", MODES)
def test_pending_and_rejected_candidates_never_reach_search(
    module_daemon: Daemon, mode: str
) -> None:
    scope = new_scope("mcp-unsearchable")

    async def scenario(client: Client) -> None:
        await _capture_source(client, scope)
        pending = _ok(await client.call_tool("propose_experience", {
            "scope_id": scope, "proposal": _experience("quokkapending"), "source_refs": [SOURCE],
        }))  # fmt: skip
        rejected = _ok(await client.call_tool("propose_experience", {
            "scope_id": scope, "proposal": _experience("wombatrejected"), "source_refs": [SOURCE],
        }))  # fmt: skip
        _ok(await client.call_tool("reject_artifact_candidate", {
            "scope_id": scope, "candidate_id": rejected["candidate_id"], "expected_version": 1,
            "decision_reason": "not a real lesson",
        }))  # fmt: skip
        # A Memory entry in the same scope proves the search itself works here.
        _ok(await client.call_tool("remember_memory", {
            "scope_id": scope, "kind": "fact", "text": "quokkapending wombatrejected memory",
        }))  # fmt: skip
        for query in (
            "quokkapending migration rollout",
            "wombatrejected migration rollout",
            "deploying friday migrate",
        ):
            found = _ok(
                await client.call_tool("search_memory", {"scope_id": scope, "query": query})
            )
            texts = " ".join(hit["text"] for hit in found["hits"])
            assert "rollout" not in texts and "migrate" not in texts, found
            assert "friday" not in texts, found
        statuses = {pending["candidate_id"]: "pending", rejected["candidate_id"]: "rejected"}
        for candidate_id, status in statuses.items():
            got = _ok(await client.call_tool(
                "get_artifact_candidate", {"scope_id": scope, "candidate_id": candidate_id}
            ))  # fmt: skip
            assert got["status"] == status

    _run(module_daemon, mode, scenario)


@pytest.mark.parametrize("mode", MODES)
def test_handoff_round_trip_is_the_http_json(module_daemon: Daemon, mode: str) -> None:
    """Structured results use the wire (alias) names, e.g. the Handoff's ``schema`` key: the
    SDK client validates them against the advertised output schema and rejects ``schema_``."""
    scope = new_scope("mcp-handoff")
    content = {"schema": "powercontext.handoff.v1", "objective": "ship the importer",
               "state": ["parser done"], "disposition": "continuable",
               "next_action": "write the CLI", "omissions": []}  # fmt: skip

    async def scenario(client: Client) -> None:
        committed = _ok(await client.call_tool(
            "commit_handoff", {"scope_id": scope, "base": None, "content": content}
        ))  # fmt: skip
        assert committed["content"] == content
        read = _ok(await client.call_tool(
            "get_handoff", {"scope_id": scope, "artifact": committed["reference"]}
        ))  # fmt: skip
        with module_daemon.client() as http:
            served = http.post(HANDOFF_GET, json={"scope_id": scope,
                                                  "artifact": committed["reference"]})  # fmt: skip
        assert served.status_code == 200, served.text
        assert read == committed == served.json()

    _run(module_daemon, mode, scenario)


@pytest.mark.parametrize("mode", MODES)
def test_invalid_arguments_are_invalid_request(module_daemon: Daemon, mode: str) -> None:
    scope = new_scope("mcp-invalid")

    async def scenario(client: Client) -> None:
        error = _error(await client.call_tool(
            "remember_memory", {"scope_id": scope, "kind": "fact", "text": "x", "extra": 1}
        ), "invalid_request")  # fmt: skip
        assert ["arguments", "extra"] in [e["loc"] for e in error["details"]["errors"]]
        _error(await client.call_tool("search_memory", {"scope_id": scope}), "invalid_request")
        _error(await client.call_tool(
            "search_memory", {"scope_id": scope, "query": "q", "limit": 0}
        ), "invalid_request")  # fmt: skip
        _error(await client.call_tool("propose_experience", {
            "scope_id": scope, "proposal": _experience("x"),  # no evidence at all
        }), "invalid_request")  # fmt: skip
        _error(await client.call_tool("propose_experience", {
            "scope_id": scope, "proposal": _experience("x"), "source_refs": [SOURCE] * 33,
        }), "invalid_request")  # fmt: skip
        listed = _ok(await client.call_tool("list_memory_entries", {"scope_id": scope}))
        assert listed["entries"] == []  # nothing was written by the refused calls

    _run(module_daemon, mode, scenario)


def _tool_arguments(daemon: Daemon, scope: str) -> dict[str, dict[str, Any]]:
    """Schema-valid arguments for every tool of the runtime's table, in ``scope``.

    A tool's name is its HTTP operationId, so the served OpenAPI document maps it to the HTTP
    path whose valid body (``helpers.valid_bodies``) it takes: nothing here is hand-copied, and
    a new tool without a valid body fails loudly instead of being skipped.
    """
    with daemon.client() as http:
        paths = {op["operationId"]: path for _, path, op in served_operations(http)}
    bodies = valid_bodies(scope)
    return {tool.name: bodies[paths[tool.name]] for tool in TOOLS}


@pytest.mark.parametrize("mode", MODES)
def test_every_tool_needs_a_valid_token_and_a_granted_scope(
    module_daemon: Daemon, mode: str
) -> None:
    """Spec 08 § Auth for ``/mcp``, tool by tool: no or a wrong token → HTTP 401 on the call's
    POST (the SDK surfaces it as an ``MCPError``); a token lacking the scope → ``isError`` with
    ``scope_forbidden``. The same call with the right token and scope goes through, so a 401
    or 403 can only come from the credentials."""
    granted, foreign = new_scope("mcp-granted"), new_scope("mcp-foreign")
    # Every capability, so that only the scope grant can refuse (capabilities have their own
    # matrix in tests/runtime/test_token_capabilities.py).
    token = create_token(
        module_daemon, f"mcp-matrix-{mode}-{granted[-12:]}", granted,
        capabilities=("read", "write", "propose", "review", "admin"),
    )  # fmt: skip
    token_id = token.split("_", 2)[1]
    wrong = [None, "pc_nope_nope", f"pc_{token_id}_{secret_part(token)[:-1]}x"]
    with module_daemon.client() as http:
        # A real citation in the foreign scope: the refusal must win over a successful read.
        seeded = remember(http, foreign, "owned by another team")["entry"]
    inside = _tool_arguments(module_daemon, granted)
    outside = _tool_arguments(module_daemon, foreign)
    for arguments in outside.values():
        if "citation" in arguments:
            arguments["citation"] = seeded["citation"]
    sent: dict[str, str | None] = {"authorization": f"Bearer {token}"}
    statuses: list[int] = []

    async def credentials(request: httpx2.Request) -> None:
        value = sent["authorization"]
        if value is None:
            request.headers.pop("Authorization", None)
        else:
            request.headers["Authorization"] = value

    async def record(response: httpx2.Response) -> None:
        # Only the call itself: the SDK may also fetch tools/list (e.g. for output schemas).
        if json.loads(response.request.content or b"{}").get("method") == "tools/call":
            statuses.append(response.status_code)

    async def main() -> None:
        # The handshake happens with the granted token; credentials change per call after it.
        async with mcp_session(
            module_daemon, token, mode, on_request=credentials, on_response=record
        ) as client:
            for tool in TOOLS:
                sent["authorization"] = f"Bearer {token}"
                statuses.clear()
                allowed = await client.call_tool(tool.name, inside[tool.name])
                assert statuses == [200], (tool.name, statuses)
                if allowed.is_error:  # e.g. not_found for the made-up ids: the call ran
                    error = json.loads(allowed.content[0].text)["error"]  # type: ignore[union-attr]
                    assert error["code"] not in ("unauthorized", "scope_forbidden"), tool.name
                for credential in wrong:
                    sent["authorization"] = None if credential is None else f"Bearer {credential}"
                    statuses.clear()
                    with pytest.raises(MCPError):
                        await client.call_tool(tool.name, inside[tool.name])
                    assert statuses == [401], (tool.name, credential, statuses)
                sent["authorization"] = f"Bearer {token}"
                statuses.clear()
                _error(await client.call_tool(tool.name, outside[tool.name]), "scope_forbidden")
                assert statuses == [200], (tool.name, statuses)

    anyio.run(main)
    with module_daemon.client() as http:  # the foreign scope is untouched
        listed = http.post(LIST, json={"scope_id": foreign}).json()
        assert [e["text"] for e in listed["entries"]] == ["owned by another team"]
        changes = http.post(CHANGES, json={"scope_id": foreign}).json()["changes"]
        assert len(changes) == 1


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("token", [None, "pc_nope_nope"], ids=["no-token", "wrong-token"])
def test_no_or_wrong_token_is_401(module_daemon: Daemon, mode: str, token: str | None) -> None:
    """The SDK client raises (a generic MCPError: it does not surface the status itself)."""
    statuses: list[int] = []

    async def record(response: httpx2.Response) -> None:
        statuses.append(response.status_code)

    async def main() -> None:
        async with mcp_session(module_daemon, token, mode, on_response=record):
            raise AssertionError("the MCP handshake must not succeed")

    with pytest.raises(BaseException) as caught:
        anyio.run(main)
    leaves = _leaves(caught.value)
    assert leaves and all(isinstance(e, MCPError) for e in leaves), leaves
    assert statuses and set(statuses) == {401}, statuses
    # And the plain HTTP answer is the usual envelope with the Bearer challenge.
    headers = {} if token is None else {"Authorization": f"Bearer {token}"}
    response = httpx2.post(
        f"{module_daemon.url}/mcp",
        json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        headers={**headers, "Accept": "application/json"},
    )
    assert response.status_code == 401
    assert response.headers["www-authenticate"] == "Bearer"
    assert response.json()["error"]["code"] == "unauthorized"


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in _leaves(inner)]
    return [exc]


def test_the_log_stays_private_and_clean(module_daemon: Daemon) -> None:
    """After MCP traffic: no 500s, no stored text in the log, /mcp logged under its path."""
    scope = new_scope("mcp-log")
    secret = "SENTINEL-mcp-private-text"

    async def scenario(client: Client) -> None:
        _ok(await client.call_tool(
            "remember_memory", {"scope_id": scope, "kind": "fact", "text": secret}
        ))  # fmt: skip
        _error(await client.call_tool(
            "remember_memory", {"scope_id": scope, "kind": "fact", "text": secret, "x": secret}
        ), "invalid_request")  # fmt: skip

    _run(module_daemon, "auto", scenario)
    log = module_daemon.log_text()
    assert secret not in log
    assert '"internal_error"' not in log
    assert scope not in log
    mcp_lines = [json.loads(line) for line in log.splitlines() if '"path":"/mcp"' in line]
    assert mcp_lines and all(line["status"] in (200, 202, 401) for line in mcp_lines)
    # The committed OpenAPI document served by the daemon has no MCP path.
    with module_daemon.client() as http:
        assert not [p for p in http.get("/openapi.json").json()["paths"] if "mcp" in p]
        assert_envelope(http.get("/mcp", headers={"Accept": "text/event-stream"}), 405)


@pytest.mark.parametrize("mode", MODES)
def test_concurrent_calls_on_one_session(module_daemon: Daemon, mode: str) -> None:
    """Stateless POSTs in flight together: each write gets its own revision, none is lost."""
    scope = new_scope("mcp-concurrent")

    async def scenario(client: Client) -> None:
        results: list[dict[str, Any]] = []

        async def remember(i: int) -> None:
            results.append(_ok(await client.call_tool(
                "remember_memory", {"scope_id": scope, "kind": "fact", "text": f"mcp note {i}"}
            )))  # fmt: skip

        async with anyio.create_task_group() as tg:
            for i in range(8):
                tg.start_soon(remember, i)
        assert sorted(r["memory"]["revision"] for r in results) == list(range(1, 9))
        listed = _ok(await client.call_tool("list_memory_entries", {"scope_id": scope}))
        assert len(listed["entries"]) == 8

    _run(module_daemon, mode, scenario)
