"""The SessionStart hook (spec 05 § Host side) against the stub runtime, in-process.

Checked everywhere: exit 0; stdout is exactly one ``SessionStart`` envelope or nothing; at most
one diagnostic line per operation; the content is printed only after the runtime confirmed the
receipt claim; the local receipt file holds the receipt of the last *delivered* pack only.
"""

from __future__ import annotations

import io
import json
import time
from pathlib import Path
from typing import Any

import pytest

from powercontext_hook_kit import StandardHostAdapter, run_hook
from powercontext_hook_kit.receipts import ReceiptStore
from tests.hook_kit.bootstrap_support import (
    BOOTSTRAP,
    CONFLICT,
    PACK,
    PACK_ITEMS,
    PROFILE,
    RECEIPT_ID,
    RECEIPTS,
    SCOPE,
    bootstrap_body,
    bootstrap_document,
    digest,
    receipt_body,
    run_session_start,
    session_event,
    session_key,
    stored_receipts,
)
from tests.hook_kit.conftest import TOKEN, event, hook_env, run_in_process
from tests.hook_kit.stub import (
    HANDOFF_NEXT,
    PREPARE,
    Reply,
    StubRuntime,
    dead_port,
    next_handoff_body,
    prepared_body,
)

SLACK = 0.75
SESSION_START = "SessionStart"


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "plugin-data"


@pytest.fixture
def env(stub: StubRuntime, data_dir: Path) -> dict[str, str]:
    return hook_env(stub.url, data_dir)


@pytest.fixture
def enabled(env: dict[str, str]) -> dict[str, str]:
    return {**env, "POWERCONTEXT_BOOTSTRAP": "1"}


def ready(stub: StubRuntime, content: str = PACK, **fields: Any) -> None:
    stub.replies[BOOTSTRAP] = Reply(200, bootstrap_body(content, **fields))
    stub.replies[RECEIPTS] = Reply(200, receipt_body(fields.get("receipt_id", RECEIPT_ID)))


def seed(data_dir: Path, receipt_id: str = "rcpt_old", session: str = "sess-1") -> ReceiptStore:
    store = ReceiptStore(str(data_dir))
    assert store.put(session, receipt_id)
    return store


def requests_to(stub: StubRuntime, path: str) -> list[dict[str, Any]]:
    return [request.json() for request in stub.requests if request.path == path]


# --- the switch ------------------------------------------------------------------------------


def test_disabled_still_asks_with_enabled_false_and_injects_nothing(
    stub: StubRuntime, env: dict[str, str], data_dir: Path
) -> None:
    stub.replies[BOOTSTRAP] = Reply(200, bootstrap_body(None, ephemeral=False))
    seed(data_dir)
    run = run_session_start(session_event(), {**env, "POWERCONTEXT_DEBUG": "1"})
    assert (run.code, run.stdout) == (0, b"")
    [request] = stub.requests
    assert request.path == BOOTSTRAP
    assert request.headers["Authorization"] == f"Bearer {TOKEN}"
    assert request.json() == {
        "scope_id": SCOPE,
        "enabled": False,
        "profile": PROFILE,
        "lifecycle": "startup",
        "integration": "codex",
        "event_id": "sess-1",
        "max_bytes": 4096,
        "handoff_ref": None,
    }
    [line] = run.lines
    assert line["component"] == "powercontext.codex.session-start"
    assert (line["event"], line["outcome"], line["context_status"]) == (
        "context_bootstrap",
        "disabled",
        "skipped",
    )
    assert stored_receipts(data_dir) == {}  # the stale receipt is gone


def test_disabled_is_silent_without_debug(stub: StubRuntime, env: dict[str, str]) -> None:
    stub.replies[BOOTSTRAP] = Reply(200, bootstrap_body(None, ephemeral=True))
    run = run_session_start(session_event(), env)
    assert (run.code, run.stdout, run.stderr) == (0, b"", "")
    assert stub.paths() == [BOOTSTRAP]


def test_a_ready_pack_although_disabled_is_refused(stub: StubRuntime, env: dict[str, str]) -> None:
    ready(stub)
    run = run_session_start(session_event(), env)
    assert run.stdout == b""
    assert run.outcome("context_bootstrap") == "invalid_response"
    assert stub.paths() == [BOOTSTRAP]  # never claimed


# --- ready: claim, then inject ---------------------------------------------------------------


class _Snapshotting(io.BytesIO):
    """stdout that remembers which requests the runtime had seen when the hook printed."""

    def __init__(self, stub: StubRuntime) -> None:
        super().__init__()
        self.stub = stub
        self.paths_at_write: list[str] | None = None

    def write(self, data: Any) -> int:
        if self.paths_at_write is None:
            self.paths_at_write = self.stub.paths()
        return super().write(data)


def test_ready_is_claimed_before_the_exact_pack_is_printed(
    stub: StubRuntime, enabled: dict[str, str], data_dir: Path
) -> None:
    ready(stub)
    stdout = _Snapshotting(stub)
    stderr = io.StringIO()
    payload = io.BytesIO(json.dumps(session_event()).encode())
    code = run_hook(StandardHostAdapter("codex"), "session-start", payload, stdout, stderr, enabled)
    assert code == 0
    assert stdout.paths_at_write == [HANDOFF_NEXT, BOOTSTRAP, RECEIPTS]
    assert stdout.getvalue().endswith(b"\n") and stdout.getvalue().count(b"\n") == 1
    assert json.loads(stdout.getvalue()) == {
        "hookSpecificOutput": {"hookEventName": SESSION_START, "additionalContext": PACK}
    }
    assert stderr.getvalue() == ""  # success is silent
    assert requests_to(stub, BOOTSTRAP)[0]["enabled"] is True
    assert requests_to(stub, RECEIPTS) == [
        {"scope_id": SCOPE, "receipt_id": RECEIPT_ID, "state": "injected"}
    ]
    assert stored_receipts(data_dir)[session_key("sess-1")]["receipt_id"] == RECEIPT_ID


def test_success_lines_only_in_debug(stub: StubRuntime, enabled: dict[str, str]) -> None:
    ready(stub)
    run = run_session_start(session_event(), {**enabled, "POWERCONTEXT_DEBUG": "1"})
    assert run.injected(SESSION_START) == PACK
    claim, bootstrap = run.lines
    assert (claim["event"], claim["outcome"], claim["http_status"]) == (
        "bootstrap_receipt",
        "injected",
        200,
    )
    assert (bootstrap["event"], bootstrap["outcome"], bootstrap["context_status"]) == (
        "context_bootstrap",
        "injected",
        "ready",
    )
    assert bootstrap["content_bytes"] == len(PACK.encode("utf-8"))


def test_claude_code_names_its_integration(stub: StubRuntime, enabled: dict[str, str]) -> None:
    ready(stub)
    payload = session_event()
    for key in ("model", "permission_mode"):  # Claude Code's SessionStart has neither
        del payload[key]
    run = run_session_start(payload, enabled, host="claude-code")
    assert run.injected(SESSION_START) == PACK
    assert requests_to(stub, BOOTSTRAP)[0]["integration"] == "claude-code"


def test_the_budget_is_the_bootstrap_setting(stub: StubRuntime, enabled: dict[str, str]) -> None:
    ready(stub)
    size = len(PACK.encode("utf-8"))
    run = run_session_start(
        session_event(), {**enabled, "POWERCONTEXT_BOOTSTRAP_MAX_BYTES": str(size)}
    )
    assert run.injected(SESSION_START) == PACK
    assert requests_to(stub, BOOTSTRAP)[-1]["max_bytes"] == size
    run = run_session_start(
        session_event(), {**enabled, "POWERCONTEXT_BOOTSTRAP_MAX_BYTES": str(size - 1)}
    )
    assert run.stdout == b""
    assert run.outcome("context_bootstrap") == "invalid_response"


# --- a claim that does not succeed -----------------------------------------------------------


def test_a_rejected_claim_injects_nothing_and_clears_the_local_receipt(
    stub: StubRuntime, enabled: dict[str, str], data_dir: Path
) -> None:
    ready(stub)
    stub.replies[RECEIPTS] = Reply(409, CONFLICT)
    seed(data_dir)
    run = run_session_start(session_event(), enabled)
    assert (run.code, run.stdout) == (0, b"")
    [line] = run.lines  # the bootstrap line only repeats the verdict: debug only
    assert (line["event"], line["outcome"], line["http_status"]) == (
        "bootstrap_receipt",
        "receipt_rejected",
        409,
    )
    assert stored_receipts(data_dir) == {}


def test_a_rejected_claim_in_debug_explains_both_operations(
    stub: StubRuntime, enabled: dict[str, str]
) -> None:
    ready(stub)
    stub.replies[RECEIPTS] = Reply(409, CONFLICT)
    run = run_session_start(session_event(), {**enabled, "POWERCONTEXT_DEBUG": "1"})
    assert run.outcome("bootstrap_receipt") == "receipt_rejected"
    assert run.outcome("context_bootstrap") == "receipt_rejected"


@pytest.mark.parametrize(
    ("reply", "outcome"),
    [
        (Reply(401, b"{}"), "authentication_failed"),
        (Reply(403, b"{}"), "forbidden"),
        (Reply(404, b"{}"), "version_mismatch"),
        (Reply(500, b"{}"), "server_unavailable"),
        (Reply(422, b"{}"), "invalid_response"),
        (Reply(200, receipt_body("rcpt_someone_else")), "invalid_response"),
        (Reply(200, receipt_body(state="failed")), "invalid_response"),
        (Reply(200, b'{"receipt_id":"rcpt_0123456789abcdef"}'), "invalid_response"),
        (
            Reply(200, b'{"receipt_id":"rcpt_0123456789abcdef","state":"injected","x":1}'),
            "invalid_response",
        ),
        (Reply(hang_up=True), "server_unavailable"),
    ],
)
def test_every_failed_claim_injects_nothing(
    stub: StubRuntime, enabled: dict[str, str], data_dir: Path, reply: Reply, outcome: str
) -> None:
    ready(stub)
    stub.replies[RECEIPTS] = reply
    seed(data_dir)
    run = run_session_start(session_event(), enabled)
    assert (run.code, run.stdout) == (0, b"")
    assert run.outcome("bootstrap_receipt") == outcome
    assert stored_receipts(data_dir) == {}


def test_a_claim_that_cannot_finish_in_the_deadline_injects_nothing(
    stub: StubRuntime, enabled: dict[str, str]
) -> None:
    ready(stub)
    stub.replies[BOOTSTRAP] = Reply(200, bootstrap_body(), delay=0.3)
    stub.replies[RECEIPTS] = Reply(200, receipt_body(), delay=5)
    started = time.monotonic()
    run = run_session_start(session_event(), {**enabled, "POWERCONTEXT_DEADLINE_SECONDS": "0.8"})
    assert run.stdout == b""
    assert run.outcome("bootstrap_receipt") == "server_unavailable"
    assert time.monotonic() - started < 0.8 + SLACK


# --- nothing to inject -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("document", "outcome"),
    [
        (bootstrap_document(None, status="empty"), "empty"),
        (bootstrap_document(None, status="empty", ephemeral=True), "empty"),
        (bootstrap_document(None), "skipped"),
        (bootstrap_document(None, state="failed"), "skipped"),
        (bootstrap_document(None, state="injected"), "skipped"),
    ],
)
def test_empty_and_skipped_inject_nothing_and_clear(
    stub: StubRuntime, enabled: dict[str, str], data_dir: Path, document: dict, outcome: str
) -> None:
    stub.replies[BOOTSTRAP] = Reply(200, json.dumps(document).encode())
    seed(data_dir)
    run = run_session_start(session_event(), enabled)
    assert (run.code, run.stdout) == (0, b"")
    [line] = run.lines
    assert (line["event"], line["outcome"], line["context_status"]) == (
        "context_bootstrap",
        outcome,
        document["status"],
    )
    assert stub.paths() == [HANDOFF_NEXT, BOOTSTRAP]
    assert stored_receipts(data_dir) == {}


def test_a_replayed_delivery_keeps_the_matching_local_receipt(
    stub: StubRuntime, enabled: dict[str, str], data_dir: Path
) -> None:
    stub.replies[BOOTSTRAP] = Reply(200, bootstrap_body(None, state="injected"))
    seed(data_dir, RECEIPT_ID)
    before = stored_receipts(data_dir)
    run = run_session_start(session_event(), enabled)
    assert run.stdout == b""
    assert run.outcome("context_bootstrap") == "skipped"
    assert stored_receipts(data_dir) == before


def test_a_replayed_delivery_never_rebuilds_a_consumed_receipt(
    stub: StubRuntime, enabled: dict[str, str], data_dir: Path
) -> None:
    stub.replies[BOOTSTRAP] = Reply(200, bootstrap_body(None, state="injected"))
    run = run_session_start(session_event(), enabled)
    assert run.stdout == b""
    assert stored_receipts(data_dir) == {}
    seed(data_dir, "rcpt_another")  # a different receipt is stale: cleared
    run_session_start(session_event(), enabled)
    assert stored_receipts(data_dir) == {}


def test_a_replay_of_another_session_leaves_ours_alone(
    stub: StubRuntime, enabled: dict[str, str], data_dir: Path
) -> None:
    stub.replies[BOOTSTRAP] = Reply(200, bootstrap_body(None))
    seed(data_dir, "rcpt_mine", session="sess-other")
    run_session_start(session_event(), enabled)
    assert ReceiptStore(str(data_dir)).get("sess-other") == "rcpt_mine"


# --- lifecycle and event id ------------------------------------------------------------------


@pytest.mark.parametrize("source", ["startup", "resume", "clear", "compact", "fork", "restore"])
def test_each_lifecycle_source_is_passed_through(
    stub: StubRuntime, enabled: dict[str, str], source: str
) -> None:
    ready(stub)
    run = run_session_start(session_event(source), enabled)
    assert run.injected(SESSION_START) == PACK
    [request] = requests_to(stub, BOOTSTRAP)
    assert request["lifecycle"] == source
    assert request["event_id"] == ("sess-1" if source == "startup" else None)


@pytest.mark.parametrize("source", [None, "", "Startup", "reload", 7, ["startup"]])
def test_an_unknown_source_is_skipped_without_a_request(
    stub: StubRuntime, enabled: dict[str, str], data_dir: Path, source: object
) -> None:
    seed(data_dir)
    run = run_session_start(session_event(source), enabled)  # type: ignore[arg-type]
    assert (run.stdout, run.outcome("context_bootstrap")) == (b"", "skipped")
    assert stub.requests == []
    assert stored_receipts(data_dir) == {}


def test_a_missing_source_is_skipped(stub: StubRuntime, enabled: dict[str, str]) -> None:
    payload = session_event()
    del payload["source"]
    run = run_session_start(payload, enabled)
    assert (run.stdout, run.outcome("context_bootstrap")) == (b"", "skipped")
    assert stub.requests == []


def test_startup_without_a_session_id_has_no_event_id(
    stub: StubRuntime, enabled: dict[str, str]
) -> None:
    ready(stub)
    payload = session_event()
    del payload["session_id"]
    run = run_session_start(payload, enabled)
    assert run.injected(SESSION_START) == PACK  # injected, just not remembered for a prompt
    assert requests_to(stub, BOOTSTRAP)[0]["event_id"] is None


def test_an_overlong_session_id_becomes_a_stable_digest(
    stub: StubRuntime, enabled: dict[str, str]
) -> None:
    stub.replies[BOOTSTRAP] = Reply(200, bootstrap_body(None))
    long_id = "s" * 300
    for _ in range(2):
        run_session_start(session_event(session_id=long_id), enabled)
    first, second = (request["event_id"] for request in requests_to(stub, BOOTSTRAP))
    assert first == second == digest(long_id)
    assert len(first) <= 256


# --- the runtime cannot answer ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "outcome"),
    [
        (401, "authentication_failed"),
        (403, "forbidden"),
        (404, "version_mismatch"),
        (409, "invalid_response"),  # bootstrap_request_conflict
        (422, "invalid_response"),
        (503, "server_unavailable"),
    ],
)
def test_http_failures_fail_open_and_clear(
    stub: StubRuntime,
    enabled: dict[str, str],
    data_dir: Path,
    status: int,
    outcome: str,
) -> None:
    stub.replies[BOOTSTRAP] = Reply(status, b'{"error":{"code":"x","message":"SENTINEL"}}')
    seed(data_dir)
    run = run_session_start(session_event(), enabled)
    assert (run.code, run.stdout) == (0, b"")
    [line] = run.lines
    assert (line["event"], line["outcome"], line["http_status"]) == (
        "context_bootstrap",
        outcome,
        status,
    )
    assert stub.paths() == [HANDOFF_NEXT, BOOTSTRAP]
    assert stored_receipts(data_dir) == {}


def test_a_hanging_runtime_is_unavailable(
    stub: StubRuntime, enabled: dict[str, str], data_dir: Path
) -> None:
    stub.replies[BOOTSTRAP] = Reply(200, bootstrap_body(), delay=5)
    seed(data_dir)
    started = time.monotonic()
    run = run_session_start(session_event(), enabled)
    assert (run.code, run.stdout) == (0, b"")
    assert run.outcome("context_bootstrap") == "server_unavailable"
    assert time.monotonic() - started < 1.0 + SLACK
    assert stored_receipts(data_dir) == {}


def test_connection_refused_is_unavailable(tmp_path: Path) -> None:
    data_dir = tmp_path / "plugin-data"
    env = hook_env(f"http://127.0.0.1:{dead_port()}", data_dir, POWERCONTEXT_BOOTSTRAP="1")
    seed(data_dir)
    run = run_session_start(session_event(), env)
    assert (run.code, run.stdout) == (0, b"")
    [line] = run.lines
    assert (line["event"], line["outcome"]) == ("context_bootstrap", "server_unavailable")
    assert "http_status" not in line
    assert stored_receipts(data_dir) == {}


INVALID = {
    "digest mismatch": bootstrap_document(pack_digest=digest(PACK + " ")),
    "digest upper case": bootstrap_document(pack_digest=digest(PACK).upper()),
    "digest missing on ready": bootstrap_document(pack_digest=None),
    "over budget": bootstrap_document("x" * 4097),
    "bytes mismatch": bootstrap_document(content_bytes=len(PACK)),  # characters, not bytes
    "ready with ephemeral receipt": bootstrap_document(ephemeral=True),
    "ready with injected receipt": bootstrap_document(state="injected"),
    "ready without items": bootstrap_document(items=[]),
    "ready blank": bootstrap_document(" \n ", items=PACK_ITEMS),
    "extra key": bootstrap_document(mode="fast"),
    "extra receipt key": bootstrap_document(
        receipt={"receipt_id": RECEIPT_ID, "state": "pending", "ephemeral": False, "x": 1}
    ),
    "extra item key": bootstrap_document(items=[{**PACK_ITEMS[0], "content": "x"}]),
    "wrong schema": bootstrap_document(schema="powercontext.bootstrap-context.v2"),
    "prepared schema": bootstrap_document(schema="powercontext.prepared-context.v1"),
    "unknown status": bootstrap_document(status="partial"),
    "unknown item kind": bootstrap_document(items=[{**PACK_ITEMS[0], "kind": "transcript"}]),
    "bad item digest": bootstrap_document(items=[{**PACK_ITEMS[0], "content_digest": "sha256:"}]),
    "citation not an object": bootstrap_document(items=[{**PACK_ITEMS[0], "citation": "mem_1"}]),
    "negative omitted": bootstrap_document(omitted=-1),
    "skipped with content": bootstrap_document(PACK, status="skipped", state="skipped"),
    "skipped with items": bootstrap_document(None) | {"items": PACK_ITEMS},
    "skipped pending": bootstrap_document(None, state="pending"),
    "empty injected": bootstrap_document(None, status="empty", state="injected"),
    "receipt id with space": bootstrap_document(receipt_id="rcpt 1"),
    "receipt id too long": bootstrap_document(receipt_id="r" * 129),
    "missing receipt": {
        key: value for key, value in bootstrap_document().items() if key != "receipt"
    },
}


@pytest.mark.parametrize("name", sorted(INVALID))
def test_invalid_bootstrap_responses_are_never_injected(
    stub: StubRuntime, enabled: dict[str, str], data_dir: Path, name: str
) -> None:
    stub.replies[BOOTSTRAP] = Reply(200, json.dumps(INVALID[name]).encode())
    stub.replies[RECEIPTS] = Reply(200, receipt_body())
    seed(data_dir)
    run = run_session_start(session_event(), enabled)
    assert (run.code, run.stdout) == (0, b""), name
    [line] = run.lines
    assert (line["event"], line["outcome"], line["http_status"]) == (
        "context_bootstrap",
        "invalid_response",
        200,
    )
    assert stub.paths() == [HANDOFF_NEXT, BOOTSTRAP]  # never claimed
    assert stored_receipts(data_dir) == {}


def test_a_duplicate_key_is_refused(stub: StubRuntime, enabled: dict[str, str]) -> None:
    body = bootstrap_body()
    stub.replies[BOOTSTRAP] = Reply(200, body[:-1] + b',"content":"something else"}')
    run = run_session_start(session_event(), enabled)
    assert (run.stdout, run.outcome("context_bootstrap")) == (b"", "invalid_response")


# --- no scope, bad settings, wrong event -----------------------------------------------------


def test_no_scope_is_skipped_and_clears(
    stub: StubRuntime, enabled: dict[str, str], data_dir: Path
) -> None:
    env = {k: v for k, v in enabled.items() if k != "POWERCONTEXT_SCOPE_ID"}
    seed(data_dir)
    payload = session_event()
    del payload["cwd"]
    run = run_session_start(payload, env)
    assert (run.stdout, run.outcome("context_bootstrap")) == (b"", "skipped")
    assert stub.requests == []
    assert stored_receipts(data_dir) == {}


def test_the_host_cwd_resolves_the_scope(
    stub: StubRuntime, enabled: dict[str, str], tmp_path: Path
) -> None:
    ready(stub)
    env = {k: v for k, v in enabled.items() if k != "POWERCONTEXT_SCOPE_ID"}
    project = tmp_path / "project"
    project.mkdir()
    run = run_session_start(session_event(cwd=str(project)), env)
    assert run.injected(SESSION_START) == PACK
    assert requests_to(stub, BOOTSTRAP)[0]["scope_id"].startswith("local:sha256:")
    assert requests_to(stub, RECEIPTS)[0]["scope_id"] == requests_to(stub, BOOTSTRAP)[0]["scope_id"]


@pytest.mark.parametrize(
    "bad", [{"POWERCONTEXT_BOOTSTRAP": "maybe"}, {"POWERCONTEXT_BOOTSTRAP_MAX_BYTES": "100"}]
)
def test_invalid_settings_skip_and_clear(
    stub: StubRuntime, enabled: dict[str, str], data_dir: Path, bad: dict[str, str]
) -> None:
    seed(data_dir)
    run = run_session_start(session_event(), {**enabled, **bad})
    assert (run.code, run.stdout, run.outcome("context_bootstrap")) == (0, b"", "skipped")
    assert stub.requests == []
    assert stored_receipts(data_dir) == {}


def test_another_event_is_not_answered(stub: StubRuntime, enabled: dict[str, str]) -> None:
    ready(stub)
    run = run_session_start(session_event(hook_event_name="UserPromptSubmit"), enabled)
    assert (run.stdout, run.outcome("context_bootstrap")) == (b"", "skipped")
    assert stub.requests == []
    run = run_in_process(event(hook_event_name="SessionStart"), enabled)
    assert (run.stdout, run.outcome()) == (b"", "skipped")


def test_an_unreadable_data_dir_does_not_cost_the_pack(
    stub: StubRuntime, enabled: dict[str, str], tmp_path: Path
) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("file")
    ready(stub)
    run = run_session_start(session_event(), {**enabled, "PLUGIN_DATA": str(blocker / "x")})
    assert run.injected(SESSION_START) == PACK


# --- the following prompts -------------------------------------------------------------------


def test_the_first_following_prompt_sends_the_receipt_once(
    stub: StubRuntime, enabled: dict[str, str], data_dir: Path
) -> None:
    ready(stub)
    assert run_session_start(session_event(), enabled).injected(SESSION_START) == PACK
    stub.replies[PREPARE] = Reply(200, prepared_body("recalled"))
    assert run_in_process(event(), enabled).injected() == "recalled"
    assert run_in_process(event(turn_id="turn-2"), enabled).injected() == "recalled"
    first, second = requests_to(stub, PREPARE)
    assert first["bootstrap_receipt_id"] == RECEIPT_ID
    assert "bootstrap_receipt_id" not in second
    assert stored_receipts(data_dir) == {}


def test_another_session_does_not_get_the_receipt(
    stub: StubRuntime, enabled: dict[str, str], data_dir: Path
) -> None:
    ready(stub)
    run_session_start(session_event(), enabled)
    run_in_process(event(session_id="sess-2"), enabled)
    assert "bootstrap_receipt_id" not in requests_to(stub, PREPARE)[0]
    assert ReceiptStore(str(data_dir)).get("sess-1") == RECEIPT_ID


@pytest.mark.parametrize(
    "reply", [Reply(500, b"{}"), Reply(200, b"{}"), Reply(200, prepared_body(None))]
)
def test_the_receipt_is_consumed_whatever_the_prepare_outcome(
    stub: StubRuntime, env: dict[str, str], data_dir: Path, reply: Reply
) -> None:
    seed(data_dir, RECEIPT_ID)
    stub.replies[PREPARE] = reply
    run = run_in_process(event(), env)
    assert run.stdout == b""
    assert requests_to(stub, PREPARE)[0]["bootstrap_receipt_id"] == RECEIPT_ID
    assert stored_receipts(data_dir) == {}


def test_a_prompt_without_scope_keeps_the_receipt_for_the_next_one(
    stub: StubRuntime, env: dict[str, str], data_dir: Path
) -> None:
    seed(data_dir, RECEIPT_ID)
    run_in_process(event(prompt="   "), env)
    assert stub.requests == []
    assert ReceiptStore(str(data_dir)).get("sess-1") == RECEIPT_ID


def test_a_prompt_after_an_undelivered_start_sends_nothing(
    stub: StubRuntime, enabled: dict[str, str], data_dir: Path
) -> None:
    seed(data_dir, RECEIPT_ID)  # left over from an earlier lifecycle of this session
    stub.replies[BOOTSTRAP] = Reply(503, b"{}")
    run_session_start(session_event("compact"), enabled)
    run_in_process(event(), enabled)
    assert "bootstrap_receipt_id" not in requests_to(stub, PREPARE)[0]


# --- privacy ---------------------------------------------------------------------------------


def test_lines_and_files_never_hold_content_ids_or_paths(
    stub: StubRuntime, enabled: dict[str, str], data_dir: Path
) -> None:
    secret_pack = "CONTENT-SENTINEL bootstrap"
    session = "SESSION-SENTINEL-42"
    debug = {**enabled, "POWERCONTEXT_DEBUG": "1"}
    replies = [
        (Reply(200, bootstrap_body(secret_pack, items=PACK_ITEMS)), Reply(200, receipt_body())),
        (Reply(200, bootstrap_body(secret_pack, items=PACK_ITEMS)), Reply(409, CONFLICT)),
        (Reply(200, bootstrap_body(secret_pack, content_bytes=1)), Reply(200, receipt_body())),
        (Reply(401, b'{"error":{"message":"CONTENT-SENTINEL"}}'), Reply(200, receipt_body())),
    ]
    for bootstrap, claim in replies:
        stub.replies[BOOTSTRAP], stub.replies[RECEIPTS] = bootstrap, claim
        run = run_session_start(session_event(session_id=session), debug)
        for sentinel in ("SENTINEL", TOKEN, RECEIPT_ID, SCOPE):
            assert sentinel not in run.stderr
    log = (data_dir / "diagnostics.log").read_text()
    assert log.count("\n") >= 6
    for sentinel in ("SENTINEL", TOKEN, RECEIPT_ID, SCOPE):
        assert sentinel not in log


def test_the_receipt_file_holds_no_raw_session_id(
    stub: StubRuntime, enabled: dict[str, str], data_dir: Path
) -> None:
    ready(stub)
    session = "SESSION-SENTINEL-42"
    run_session_start(session_event(session_id=session), enabled)
    text = (data_dir / "bootstrap-receipts.json").read_text()
    assert "SENTINEL" not in text
    assert session_key(session) in text and RECEIPT_ID in text


# --- the Handoff queued for the next session ---------------------------------------------------


def test_the_queued_handoff_is_named_in_the_bootstrap_request(
    stub: StubRuntime, enabled: dict[str, str]
) -> None:
    ready(stub)
    stub.replies[HANDOFF_NEXT] = Reply(200, next_handoff_body(SCOPE, 3))
    run = run_session_start(session_event(), enabled)
    assert run.stdout  # the pack went out
    assert requests_to(stub, HANDOFF_NEXT) == [{"scope_id": SCOPE}]
    [request] = requests_to(stub, BOOTSTRAP)
    assert request["handoff_ref"] == {"family": "handoff", "artifact_id": "handoff", "revision": 3}
    assert run.lines == []


def test_an_older_runtime_without_the_lookup_still_bootstraps(
    stub: StubRuntime, enabled: dict[str, str]
) -> None:
    ready(stub)
    stub.replies[HANDOFF_NEXT] = Reply(404, b'{"error":{"code":"not_found"}}')
    run = run_session_start(session_event(), enabled)
    assert run.stdout
    assert requests_to(stub, BOOTSTRAP)[0]["handoff_ref"] is None
    [line] = run.lines
    assert (line["event"], line["outcome"], line["http_status"]) == (
        "handoff_lookup",
        "version_mismatch",
        404,
    )


@pytest.mark.parametrize(
    "body",
    [
        next_handoff_body("git:github.com/other/repo", 3),
        next_handoff_body(SCOPE, 0),
        b'{"scope_id":"x"}',
        b"[]",
    ],
    ids=["another scope", "revision 0", "missing keys", "not an object"],
)
def test_an_invalid_lookup_answer_only_costs_the_handoff(
    stub: StubRuntime, enabled: dict[str, str], body: bytes
) -> None:
    ready(stub)
    stub.replies[HANDOFF_NEXT] = Reply(200, body)
    run = run_session_start(session_event(), enabled)
    assert run.stdout
    assert requests_to(stub, BOOTSTRAP)[0]["handoff_ref"] is None
    assert run.outcome("handoff_lookup") == "invalid_response"


@pytest.mark.parametrize(
    ("status", "outcome"),
    [(401, "authentication_failed"), (403, "forbidden"), (503, "server_unavailable")],
)
def test_a_runtime_refusing_the_lookup_ends_the_session_start_with_one_line(
    stub: StubRuntime, enabled: dict[str, str], status: int, outcome: str
) -> None:
    ready(stub)
    stub.replies[HANDOFF_NEXT] = Reply(status, b'{"error":{"code":"x","message":"SENTINEL"}}')
    run = run_session_start(session_event(), enabled)
    assert (run.code, run.stdout) == (0, b"")
    [line] = run.lines
    assert (line["event"], line["outcome"], line["http_status"]) == (
        "context_bootstrap",
        outcome,
        status,
    )
    assert stub.paths() == [HANDOFF_NEXT]
    assert "SENTINEL" not in run.stderr
