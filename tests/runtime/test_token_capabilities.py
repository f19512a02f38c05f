"""Capabilities end to end inside one process (issue 15 #2): the local tokens of each role, the
upgrade of databases made before capabilities, scope patterns, and MCP (both backends where a
database is involved)."""

from __future__ import annotations

import logging
import stat
from typing import Any

import anyio
import pytest
from mcp import Client
from sqlalchemy import select

from powercontext_runtime.cli.main import main as cli_main
from powercontext_runtime.composition import Runtime
from powercontext_runtime.http import create_app
from powercontext_runtime.settings import Settings
from powercontext_runtime.store.schema import tokens
from tests.runtime.test_mcp import (
    _SOURCE,
    _capture_source,
    _client,
    _error,
    _experience,
    _ok,
)

SCOPE = "git:example.com/acme/api"
AGENT = ["read", "write", "propose"]
EVERY = ["read", "write", "propose", "review", "admin"]


def _local_rows(rt: Runtime) -> dict[str, Any]:
    with rt.db.read() as conn:
        rows = conn.execute(select(tokens).where(tokens.c.revoked_at.is_(None))).all()
    return {row.name: row for row in rows}


def test_the_runtime_keeps_an_operator_and_an_agent_token(runtime: Runtime) -> None:
    assert runtime.ensure_local_token() is True
    auth = runtime.settings.token_file.parent
    assert sorted(p.name for p in auth.iterdir()) == ["agent-token", "token"]
    for path in auth.iterdir():
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
    operator = runtime.authenticator.principal_for(runtime.settings.token_file.read_text().strip())
    agent = runtime.authenticator.principal_for(
        runtime.settings.agent_token_file.read_text().strip()
    )
    assert operator is not None and agent is not None
    assert sorted(operator.capabilities) == sorted(EVERY) and operator.scopes == ("*",)
    assert sorted(agent.capabilities) == sorted(AGENT) and agent.scopes == ("*",)
    assert operator.principal_id != agent.principal_id
    assert runtime.ensure_local_token() is False  # both valid: nothing re-issued


def test_a_database_from_before_capabilities_is_upgraded(
    backend: str, request: pytest.FixtureRequest, tmp_path: Any, caplog: pytest.LogCaptureFixture
) -> None:
    from tests.support.backends import database_url_for

    url = database_url_for(backend, request, tmp_path)
    settings = Settings.load(env={}, home=tmp_path / "home", database_url=url)
    old = Runtime.open(settings)
    try:
        old.ensure_local_token()
        operator_secret = settings.token_file.read_text().strip()
        agent_secret = settings.agent_token_file.read_text().strip()
        legacy_secret = old.tokens.create("ci", ["git:acme/*"], ["read", "review"])
        # What an older release left: no capability or principal columns at all.
        with old.db.engine.begin() as conn:
            conn.exec_driver_sql("ALTER TABLE tokens DROP COLUMN capabilities")
            conn.exec_driver_sql("ALTER TABLE bootstrap_receipts DROP COLUMN principal_id")
    finally:
        old.close()
    upgraded = Runtime.open(settings)
    try:
        legacy = upgraded.authenticator.principal_for(legacy_secret)
        assert legacy is not None and sorted(legacy.capabilities) == sorted(AGENT)  # no review
        # The operator's token had lost its capabilities too: start-up gives them back in
        # place, so whoever holds the secret (POWERCONTEXT_TOKEN, a script) keeps working.
        with caplog.at_level(logging.WARNING, logger="powercontext.auth"):
            assert upgraded.ensure_local_token() is False
        auth = [r.getMessage() for r in caplog.records if r.name == "powercontext.auth"]
        assert auth == ["local_token_upgraded"]
        assert settings.token_file.read_text().strip() == operator_secret
        kept = upgraded.authenticator.principal_for(operator_secret)
        assert kept is not None and sorted(kept.capabilities) == sorted(EVERY)
        agent = upgraded.authenticator.principal_for(agent_secret)  # an agent's share already
        assert agent is not None and sorted(agent.capabilities) == sorted(AGENT)
        assert settings.agent_token_file.read_text().strip() == agent_secret
    finally:
        upgraded.close()


def test_a_token_file_holding_another_old_token_is_reissued_and_logged(
    sqlite_runtime: Runtime, caplog: pytest.LogCaptureFixture
) -> None:
    """Only the operator's own local token is upgraded in place: another token of an older
    release copied into auth/token never gains review; the file is replaced and the log says
    which file and why."""
    rt = sqlite_runtime
    copied = rt.tokens.create("ci", ["*"], ["read"])
    with rt.db.engine.begin() as conn:  # as an older release stored it: no capabilities
        conn.execute(tokens.update().values(capabilities=None))
    rt.settings.token_file.parent.mkdir(mode=0o700)
    rt.settings.token_file.write_text(copied + "\n")
    with caplog.at_level(logging.WARNING, logger="powercontext.auth"):
        assert rt.ensure_local_token() is True
    reissued = [r for r in caplog.records if r.getMessage() == "local_token_reissued"]
    assert [(r.token_file, r.code) for r in reissued] == [  # type: ignore[attr-defined]
        (str(rt.settings.token_file), "capabilities_changed")
    ]
    assert not [r for r in caplog.records if r.getMessage() == "local_token_upgraded"]
    still = rt.authenticator.principal_for(copied)
    assert still is not None and sorted(still.capabilities) == sorted(AGENT)  # no review
    assert rt.settings.token_file.read_text().strip() != copied


def test_a_replaced_local_token_is_refused_saying_what_happened(runtime: Runtime) -> None:
    """A data dir that a release before this one upgraded had its local token replaced: whoever
    still holds the old secret gets a 401 that says so and what to use (HTTP, MCP's
    transport), not a bare refusal; a token that was never valid still gets the bare one."""
    from fastapi.testclient import TestClient

    from powercontext_runtime.services.auth import local_token_name

    rt = runtime
    name = local_token_name(rt.settings.token_file, "operator")
    old = rt.tokens.rotate_local(name, tuple(AGENT))  # the operator's file, the wrong share
    rt.settings.token_file.parent.mkdir(mode=0o700, exist_ok=True)
    rt.settings.token_file.write_text(old + "\n")
    assert rt.ensure_local_token() is True  # replaced, as that release did on upgrade
    with TestClient(create_app(rt), base_url="http://localhost") as http:
        for path in ("/v1/capabilities", "/mcp"):
            refused = http.post(path, json={}, headers={"Authorization": f"Bearer {old}"})
            assert refused.status_code == 401, path
            error = refused.json()["error"]
            assert error["code"] == "token_replaced"
            assert "auth/token" in error["message"] and old not in refused.text
        forged = old[:-4] + ("AAAA" if not old.endswith("AAAA") else "BBBB")
        bare = http.post("/v1/capabilities", headers={"Authorization": f"Bearer {forged}"})
        assert bare.status_code == 401 and bare.json()["error"]["code"] == "unauthorized"
        current = rt.settings.token_file.read_text().strip()
        assert (
            http.get("/v1/capabilities", headers={"Authorization": f"Bearer {current}"}).status_code
            == 200
        )


@pytest.mark.parametrize(
    "pattern", [" x", "x ", "", "a\u200b*", "git:a\u202e/*", "a**", "*a*", "x" * 300]
)
def test_token_create_refuses_a_pattern_that_cannot_match(
    tmp_path: Any, pattern: str, capsys: pytest.CaptureFixture[str]
) -> None:
    home = tmp_path / "home"
    code = cli_main(["token", "create", "--name", "t", "--scope", pattern, "--data-dir", str(home)])
    assert code == 1
    assert "scope pattern" in capsys.readouterr().err
    rt = Runtime.open(Settings.load(env={}, home=home))
    try:
        assert [t.name for t in rt.tokens.list()] == []
    finally:
        rt.close()


def test_token_create_rejects_an_unknown_capability(tmp_path: Any) -> None:
    args = ["token", "create", "--name", "t", "--scope", "*", "--capability", "root"]
    with pytest.raises(SystemExit) as caught:
        cli_main([*args, "--data-dir", str(tmp_path)])
    assert caught.value.code == 2


# -- MCP: the same table as HTTP -----------------------------------------------------------------

REVIEW_TOOLS = {
    "approve_artifact_candidate", "reject_artifact_candidate", "revise_artifact_candidate",
}  # fmt: skip


def _mcp(runtime: Runtime, token: str, scenario: Any) -> None:
    async def main() -> None:
        async with _client(create_app(runtime), token) as client:
            await scenario(client)

    anyio.run(main)


def test_an_agent_token_sees_and_runs_no_review_tools(sqlite_runtime: Runtime) -> None:
    sqlite_runtime.ensure_local_token()
    agent = sqlite_runtime.settings.agent_token_file.read_text().strip()
    operator = sqlite_runtime.settings.token_file.read_text().strip()
    _capture_source(sqlite_runtime)
    proposed: dict[str, Any] = {}

    async def as_agent(client: Client) -> None:
        names = {tool.name for tool in (await client.list_tools()).tools}
        assert names and not names & REVIEW_TOOLS
        proposed.update(_ok(await client.call_tool("propose_experience", {
            "scope_id": SCOPE, "proposal": _experience("x"), "source_refs": [_SOURCE],
        })))  # fmt: skip
        decision = {"scope_id": SCOPE, "candidate_id": proposed["candidate_id"],
                    "expected_version": proposed["version"]}  # fmt: skip
        error = _error(
            await client.call_tool("approve_artifact_candidate", decision), "capability_forbidden"
        )
        assert error["details"] == {"required": "review"}
        _error(await client.call_tool("reject_artifact_candidate", {**decision, "reason": "r"}),
               "capability_forbidden")  # fmt: skip

    async def as_operator(client: Client) -> None:
        names = {tool.name for tool in (await client.list_tools()).tools}
        assert names >= REVIEW_TOOLS
        approved = _ok(await client.call_tool("approve_artifact_candidate", {
            "scope_id": SCOPE, "candidate_id": proposed["candidate_id"],
            "expected_version": proposed["version"],
        }))  # fmt: skip
        assert approved["status"] == "approved"

    _mcp(sqlite_runtime, agent, as_agent)
    _mcp(sqlite_runtime, operator, as_operator)


@pytest.mark.parametrize("capability", EVERY)
def test_each_mcp_tool_needs_the_same_capability_as_its_route(
    sqlite_runtime: Runtime, capability: str
) -> None:
    from powercontext_runtime.http.bootstrap_routes import bootstrap_router
    from powercontext_runtime.http.review_routes import review_router
    from powercontext_runtime.http.routes import router
    from powercontext_runtime.http.task_result_routes import task_result_router
    from tests.e2e.test_capabilities import NEEDS
    from tests.runtime.test_mcp import TOOLS

    by_operation = {}
    routes = (*router.routes, *review_router.routes, *bootstrap_router.routes,
              *task_result_router.routes)  # fmt: skip
    for route in routes:
        operation = getattr(route, "operation_id", None)
        if operation and getattr(route, "path", "") in NEEDS:
            by_operation[operation] = NEEDS[route.path]
    token = sqlite_runtime.tokens.create(f"only-{capability}", [SCOPE], [capability])

    async def scenario(client: Client) -> None:
        listed = {tool.name for tool in (await client.list_tools()).tools}
        for tool in TOOLS:
            needed = by_operation[tool.name]
            assert (tool.name in listed) == (needed == capability), tool.name
            result = await client.call_tool(tool.name, {"scope_id": SCOPE})
            if needed == capability:  # past authorisation: the arguments are what is wrong
                text = result.content[0].text  # type: ignore[union-attr]
                assert "capability_forbidden" not in text, tool.name
            else:
                _error(result, "capability_forbidden")

    _mcp(sqlite_runtime, token, scenario)
