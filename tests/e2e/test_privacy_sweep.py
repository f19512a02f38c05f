"""Privacy sweep (spec 08 § Privacy, spec 07 § Diagnostics): sentinels stay where they belong.

Unique sentinel strings go into a scope id, session ids, transcript paths, prompts, Memory
entries, Experience and Skill proposals and Handoff text. They travel through the real HTTP
API, the real MCP endpoint and the real hook processes of both plugins (``python -m
powercontext_codex|powercontext_claude_code hook session-start|user-prompt-submit``, the
command the hosts run), on the success paths and on the error paths: 401, 403, 404, 409, 413
and 422 answers, and the runtime down. Afterwards no sentinel may appear in the runtime's
stderr log, any hook's stderr diagnostics, anything the hooks wrote to disk (the rotated
diagnostic log file, the local receipt store — but for the prompts the capture spool keeps while
the runtime is down, 0600), the runtime's bootstrap receipt rows (beyond
the ``scope_id`` key a receipt is filed under) or any error body, HTTP or MCP.

Each sentinel is also asserted present where it legitimately belongs — the injected packs, the
captured prompt, the stored proposals and Handoff — so a sentinel that never reached the
system, or a check that reads the wrong place, cannot pass for privacy.
"""

from __future__ import annotations

import json
import sqlite3
import stat
import subprocess
import uuid
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp import Client
from mcp.types import CallToolResult

from tests.e2e.helpers import (
    CANDIDATES_GET,
    FLUSH,
    GET,
    HANDOFF_COMMIT,
    LIST,
    PLUGIN_DATA_VARS,
    PLUGIN_HOOK_MODULES,
    REMEMBER,
    SEARCH,
    SOURCES,
    assert_envelope,
    citation,
    create_token,
    hook_env,
    mcp_session,
    remember,
    run_hook_process,
    secret_part,
)
from tests.support.daemon import Daemon

pytestmark = pytest.mark.e2e

JSON = {"content-type": "application/json"}
DIAGNOSTIC_KEYS = {
    "component", "event", "outcome", "http_status", "context_status", "content_bytes",
    "duration_ms", "spooled", "delivered", "dropped", "pending",
}  # fmt: skip
QUERY = "deploy checklist smoke tests"


class Sentinels:
    """Per-run sentinel strings sharing one random tag; the tag alone is what leak checks seek.

    Looking for the lower-cased tag rather than each whole sentinel also catches a leak that
    was cut short, re-cased or tokenised (e.g. ``sentinel memory <tag>`` in a term list).
    """

    def __init__(self) -> None:
        self.tag = uuid.uuid4().hex[:12]

    def __call__(self, what: str) -> str:
        return f"SENTINEL-{what}-{self.tag}"

    def assert_absent(self, where: str, text: str) -> None:
        assert self.tag not in text.lower(), f"a sentinel leaked into {where}: {text[:2000]}"


def _tool_result(result: CallToolResult) -> tuple[bool, str, dict[str, Any]]:
    text = result.content[0].text  # type: ignore[union-attr]
    return result.is_error, text, json.loads(text)


def _write_through_mcp(daemon: Daemon, scope: str, mark: Sentinels, outsider: str) -> list[str]:
    """Experience (approved), Skill and Handoff written over MCP, plus failing calls.

    Returns every error text MCP answered; asserts each sentinel is stored where it belongs.
    """
    errors: list[str] = []
    evidence = [{"name": "content", "source_id": mark("evidence")}]

    async def ok(client: Client, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        failed, text, body = _tool_result(await client.call_tool(name, arguments))
        assert not failed, (name, text)
        return body

    async def refused(client: Client, name: str, arguments: dict[str, Any], code: str) -> None:
        failed, text, body = _tool_result(await client.call_tool(name, arguments))
        assert failed and body["error"]["code"] == code, (name, text)
        errors.append(text)

    async def main() -> None:
        async with mcp_session(daemon, daemon.token) as client:
            await ok(client, "capture_content_source", {  # a proposal's evidence must exist
                "scope_id": scope, "source_id": mark("evidence"), "content": "the task result",
            })  # fmt: skip
            # A task result: its secret is redacted before storage, the rest stored as sent.
            task = {"goal": mark("task-goal"), "outcome": "failed", "checks": [{
                "command": f"DB_PASSWORD={mark('task-secret')} make test", "exit_status": 1,
                "output_tail": f"{mark('task-output')}\nAuthorization: Bearer {mark('task-auth')}",
            }]}  # fmt: skip
            recorded = await ok(
                client,
                "record_task_result",
                {"scope_id": scope, "task_id": "sweep-1", "task": task},
            )
            assert recorded["redactions"] == 2
            stored = json.dumps(
                await ok(client, "get_task_result", {"scope_id": scope, "task_id": "sweep-1"})
            )
            assert mark("task-goal") in stored and mark("task-output") in stored
            assert mark("task-secret") not in stored and mark("task-auth") not in stored
            await refused(client, "record_task_result", {
                "scope_id": scope, "task": {**task, "goal": mark("task-cap") * 100},
            }, "invalid_request")  # fmt: skip
            proposed = await ok(client, "propose_experience", {
                "scope_id": scope,
                "proposal": {"situation": f"deploy checklist {mark('experience')} on friday",
                             "action": "ran the smoke tests first", "outcome": "a calm deploy",
                             "lesson": "run the deploy checklist smoke tests before shipping"},
                "source_refs": evidence, "reason": mark("proposal-reason"),
            })  # fmt: skip
            approved = await ok(client, "approve_artifact_candidate", {
                "scope_id": scope, "candidate_id": proposed["candidate_id"], "expected_version": 1,
            })  # fmt: skip
            assert approved["status"] == "approved"
            skill = await ok(client, "propose_skill", {
                "scope_id": scope,
                "proposal": {"name": "smoke-deploy", "description": mark("skill"),
                             "instructions": "run make smoke", "validation": ["make smoke"]},
                "source_refs": evidence,
            })  # fmt: skip
            assert mark("skill") in json.dumps(skill)
            handoff = {"schema": "powercontext.handoff.v1", "objective": mark("handoff"),
                       "state": [f"half done {mark('handoff-state')}"],
                       "disposition": "continuable"}  # fmt: skip
            committed = await ok(
                client, "commit_handoff", {"scope_id": scope, "base": None, "content": handoff}
            )
            read = await ok(
                client, "get_handoff", {"scope_id": scope, "artifact": committed["reference"]}
            )
            assert read["content"]["objective"] == mark("handoff")
            # Error results carrying sentinels in what was sent.
            await refused(client, "commit_handoff",  # stale base: a typed conflict
                          {"scope_id": scope, "base": None, "content": handoff},
                          "artifact_conflict")  # fmt: skip
            # An unknown field's *name* is echoed as the error's location (the caller's own
            # request structure, by design); its value never is.
            await refused(client, "remember_memory", {
                "scope_id": scope, "kind": "fact", "text": mark("extra"), "extra": mark("value"),
            }, "invalid_request")  # fmt: skip
            await refused(client, "search_memory",
                          {"scope_id": scope, "query": mark("too-long") * 400},
                          "invalid_request")  # fmt: skip
            await refused(client, "get_artifact_candidate",
                          {"scope_id": scope, "candidate_id": mark("candidate")},
                          "candidate_not_found")  # fmt: skip
            await refused(client, "propose_skill", {  # evidence named by position, never by id
                "scope_id": scope,
                "proposal": {"name": "n", "description": "d", "instructions": "i",
                             "validation": ["v"]},
                "source_refs": [{"name": "content", "source_id": mark("missing-evidence")}],
            }, "evidence_not_found")  # fmt: skip
        async with mcp_session(daemon, outsider) as client:
            await refused(client, "remember_memory",
                          {"scope_id": scope, "kind": "fact", "text": mark("forbidden")},
                          "scope_forbidden")  # fmt: skip

    anyio.run(main)
    return errors


def _provoke_http_errors(daemon: Daemon, scope: str, mark: Sentinels, outsider: str) -> list[str]:
    """4xx answers to requests full of sentinels; returns every error body."""
    bodies: list[str] = []

    def expect(response: httpx.Response, status: int) -> None:
        assert_envelope(response, status)
        bodies.append(response.text)

    source = {"scope_id": scope, "source_id": mark("source-id"), "content": mark("source")}
    with daemon.client() as http:
        assert http.post(SOURCES, json=source).status_code == 202
        expect(http.post(SOURCES, json={**source, "content": mark("other-content")}), 409)
        ghost = citation(1, mark("entry-id"), mark("version-id"))
        expect(http.post(GET, json={"scope_id": scope, "citation": ghost}), 404)
        unknown = {"scope_id": scope, "candidate_id": mark("candidate")}
        expect(http.post(CANDIDATES_GET, json=unknown), 404)
        handoff = {"schema": "powercontext.handoff.v1", "objective": mark("stale"),
                   "state": ["s"], "disposition": "blocked"}  # fmt: skip
        stale = {"scope_id": scope, "base": None, "content": handoff}
        expect(http.post(HANDOFF_COMMIT, json=stale), 409)
        expect(http.post(REMEMBER, json={"scope_id": scope, "kind": "fact",
                                         "text": mark("long") * 600}), 422)  # fmt: skip
        expect(http.post(REMEMBER, json={"scope_id": f"{scope}\u0007", "kind": "fact",
                                         "text": mark("control")}), 422)  # fmt: skip
        expect(http.post(SEARCH, json={"scope_id": scope, "query": "q",
                                       "unknown": mark("unknown-value")}), 422)  # fmt: skip
        malformed = f'{{"scope_id": "{scope}", "query": "{mark("malformed")}'.encode()
        expect(http.post(SEARCH, content=malformed, headers=JSON), 422)
        huge = json.dumps({"scope_id": scope, "query": mark("huge") * 50_000}).encode()
        expect(http.post(SEARCH, content=huge, headers=JSON), 413)
        expect(http.post(f"/v1/{mark('path')}", json={"scope_id": scope}), 404)
    with daemon.client(outsider) as http:
        expect(http.post(REMEMBER, json={"scope_id": scope, "kind": "fact",
                                         "text": mark("forbidden")}), 403)  # fmt: skip
    with daemon.client(f"pc_{mark('token-id')}_{mark('token-secret')}") as http:
        expect(http.post(SEARCH, json={"scope_id": scope, "query": mark("query")}), 401)
    return bodies


def _start_event(host: str, session: str, cwd: Path, transcript: str) -> dict[str, Any]:
    event: dict[str, Any] = {
        "session_id": session, "transcript_path": transcript, "cwd": str(cwd),
        "hook_event_name": "SessionStart", "source": "startup", "model": "stub-model",
    }  # fmt: skip
    if host == "codex":
        event["permission_mode"] = "default"
    return event


def _prompt_event(
    host: str, session: str, cwd: Path, transcript: str, prompt: str
) -> dict[str, Any]:
    event: dict[str, Any] = {
        "session_id": session, "transcript_path": transcript, "cwd": str(cwd),
        "hook_event_name": "UserPromptSubmit", "permission_mode": "default", "prompt": prompt,
    }  # fmt: skip
    if host == "codex":
        event.update(turn_id=f"{session}-turn", model="stub-model")
    else:
        event["prompt_id"] = f"{session}-prompt"
    return event


class HookRuns:
    """Runs the plugins' real hook commands and keeps every stderr they wrote."""

    def __init__(self) -> None:
        self.stderr: list[str] = []

    def run(
        self, host: str, hook: str, event: dict[str, Any], env: dict[str, str], outcome: str
    ) -> str | None:
        """One hook process; ``outcome`` must be among its diagnostic lines (debug is on, so
        even a success writes one). Returns the injected ``additionalContext`` or ``None``."""
        done: subprocess.CompletedProcess[bytes] = run_hook_process(
            (PLUGIN_HOOK_MODULES[host], "hook", hook), event, env
        )
        stderr = done.stderr.decode()
        self.stderr.append(stderr)
        lines = [json.loads(line) for line in stderr.splitlines()]
        assert lines and all(set(line) <= DIAGNOSTIC_KEYS for line in lines), stderr
        assert outcome in [line["outcome"] for line in lines], (host, hook, stderr)
        if not done.stdout:
            return None
        return str(json.loads(done.stdout)["hookSpecificOutput"]["additionalContext"])


def _receipt_rows(database: Path) -> list[dict[str, Any]]:
    conn = sqlite3.connect(f"file:{database}?mode=ro", uri=True)
    conn.row_factory = sqlite3.Row
    try:
        return [dict(row) for row in conn.execute("SELECT * FROM bootstrap_receipts")]
    finally:
        conn.close()


def _captured_sources(database: Path, scope: str) -> list[str]:
    conn = sqlite3.connect(f"file:{database}?mode=ro", uri=True)
    try:
        rows = conn.execute("SELECT content FROM sources WHERE scope_id = ?", (scope,))
        return [str(content) for (content,) in rows]
    finally:
        conn.close()


def test_sentinels_stay_out_of_logs_diagnostics_receipts_and_error_bodies(
    daemon: Daemon, tmp_path: Path
) -> None:
    mark = Sentinels()
    scope = f"git:example.com/acme/{mark('scope')}"
    outsider = create_token(daemon, f"outsider-{mark.tag}", "git:example.com/elsewhere/*")
    bogus = f"pc_000000000000_{uuid.uuid4().hex}"
    project = tmp_path / mark("cwd")
    project.mkdir()

    # -- content written through HTTP and MCP, error answers provoked on both -----------------
    with daemon.client() as http:
        remember(http, scope, f"Deploy checklist {mark('memory')}: run the smoke tests first")
        remember(http, scope, f"Start here {mark('bootstrap')}: read docs/deploy.md first",
                 tags=["bootstrap-context"])  # fmt: skip
    error_bodies = _write_through_mcp(daemon, scope, mark, outsider)
    error_bodies += _provoke_http_errors(daemon, scope, mark, outsider)

    # -- the real hook processes of both plugins, runtime up ---------------------------------
    hooks = HookRuns()
    data_dirs: dict[str, Path] = {}
    envs: dict[str, dict[str, str]] = {}
    prompt = f"{QUERY} {mark('prompt')}\nremember: tag releases as {mark('directive')}"
    for host in PLUGIN_HOOK_MODULES:
        data_dirs[host] = tmp_path / f"{host}-data"
        env = hook_env(daemon, scope, tmp_path, POWERCONTEXT_CAPTURE_PROMPTS="1",
                       POWERCONTEXT_DEBUG="1", POWERCONTEXT_DEADLINE_SECONDS="10")  # fmt: skip
        env.pop("PLUGIN_DATA")
        env[PLUGIN_DATA_VARS[host]] = str(data_dirs[host])
        envs[host] = env
        session = f"{mark('session')}-{host}"
        transcript = str(project / f"{mark('transcript')}.jsonl")
        start = _start_event(host, session, project, transcript)
        pack = hooks.run(host, "session-start", start, env, "injected")
        assert pack is not None and mark("bootstrap") in pack  # the sentinel did travel
        local = (data_dirs[host] / "bootstrap-receipts.json").read_text()
        assert len(json.loads(local)["sessions"]) == 1  # the receipt the next prompt uses
        mark.assert_absent(f"the {host} local receipt store", local)

        asked = _prompt_event(host, session, project, transcript, prompt)
        recalled = hooks.run(host, "user-prompt-submit", asked, env, "injected")
        assert recalled is not None
        assert mark("memory") in recalled and mark("experience") in recalled
        # Error paths of the hooks: a rejected token, a token lacking the scope.
        for token, outcome in ((bogus, "authentication_failed"), (outsider, "forbidden")):
            wrong = {**env, "POWERCONTEXT_TOKEN": token}
            retried = {**start, "session_id": f"{session}-{outcome}"}
            assert hooks.run(host, "session-start", retried, wrong, outcome) is None
            assert hooks.run(host, "user-prompt-submit", asked, wrong, outcome) is None

    with daemon.client() as http:
        # The captured prompts are processed: the directive they carried becomes Memory.
        flushed = http.post(FLUSH, json={"scope_id": scope}).json()
        assert flushed["status"] == "processed", flushed
        entries = http.post(LIST, json={"scope_id": scope}).json()["entries"]
        assert any(mark("directive") in entry["text"] for entry in entries)
    token = daemon.token
    assert daemon.stop() == 0  # flushes every log line written after a response went out

    # -- the runtime down: the hooks fail open ------------------------------------------------
    for host, env in envs.items():
        session = f"{mark('session')}-{host}-down"
        transcript = str(project / f"{mark('transcript')}.jsonl")
        hooks.run(host, "session-start", _start_event(host, session, project, transcript), env,
                  "server_unavailable")  # fmt: skip
        asked = _prompt_event(host, session, project, transcript, prompt)
        hooks.run(host, "user-prompt-submit", asked, env, "server_unavailable")

    # -- nothing leaked ----------------------------------------------------------------------
    log = daemon.log_text()
    requests = [json.loads(line) for line in log.splitlines() if '"http_request"' in line]
    assert {200, 202, 401, 403, 404, 409, 413, 422} <= {line["status"] for line in requests}
    assert {"/mcp", "/v1/context/prepare", "/v1/context/bootstrap"} <= {
        line["path"] for line in requests
    }
    mark.assert_absent("the runtime log", log)

    assert len(hooks.stderr) == 16
    for stderr in hooks.stderr:
        mark.assert_absent("hook stderr", stderr)

    assert len(error_bodies) == 19
    for body in error_bodies:
        mark.assert_absent("an error body", body)

    receipts = _receipt_rows(daemon.home / "powercontext.db")
    assert {row["integration"] for row in receipts} == set(PLUGIN_HOOK_MODULES)
    assert {row["state"] for row in receipts} == {"injected"}
    for row in receipts:
        # Spec 05: a receipt is filed under its scope and names its items by exact reference
        # (scope, citation, digest). Those are the only places the scope id may appear; the
        # prompt, the contents, the session (event) id and the transcript path never do.
        assert row["scope_id"] == scope
        assert {item["scope_id"] for item in json.loads(row["items"])} == {scope}
        mark.assert_absent("a receipt row", json.dumps(row).replace(scope, "<the scope id>"))

    # Everything written outside the runtime's data dir: its log, and all the hooks persisted
    # (diagnostic logs, receipt stores, lock files), wherever they put it.
    written = [p for p in tmp_path.rglob("*") if p.is_file() and daemon.home not in p.parents]
    for host, directory in data_dirs.items():
        assert (directory / "diagnostics.log").stat().st_size > 0, host
        assert (directory / "bootstrap-receipts.json") in written, host
    # The prompts of the down runs wait in each plugin's capture spool: the one place besides
    # the runtime's database meant to hold a prompt (and its scope) — private, and token-free.
    spooled = [p for p in written if p.parent.name == "capture-spool" and p.suffix == ".json"]
    assert {p.parent.parent for p in spooled} == set(data_dirs.values())
    for path in written:
        text = path.read_text(encoding="utf-8", errors="replace")
        if path in spooled:
            assert mark("prompt") in text
            assert stat.S_IMODE(path.stat().st_mode) == 0o600
            assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
        else:
            mark.assert_absent(str(path.relative_to(tmp_path)), text)
        for secret in (secret_part(token), secret_part(outsider), secret_part(bogus)):
            assert secret not in text, path

    # The prompt did reach the runtime, as captured source content.
    assert any(mark("prompt") in content for content in _captured_sources(
        daemon.home / "powercontext.db", scope))  # fmt: skip
