"""Real processes: ``python -m powercontext_hook_kit hook <host> session-start``.

What a host sees from the SessionStart hook — stdout bytes, stderr lines, exit code — with a
ready pack, a dead runtime and unusable stdin, plus the hand-over of the receipt to the next
``user-prompt-submit`` process of the same session.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.hook_kit.bootstrap_support import (
    BOOTSTRAP,
    PACK,
    RECEIPT_ID,
    RECEIPTS,
    bootstrap_body,
    receipt_body,
    session_event,
    session_key,
    stored_receipts,
)
from tests.hook_kit.conftest import event, parse_lines
from tests.hook_kit.stub import HANDOFF_NEXT, PREPARE, Reply, StubRuntime, dead_port, prepared_body
from tests.hook_kit.test_process import process_env, project


def run_hook_process(
    stdin: bytes, env: dict[str, str], hook: str = "session-start", host: str = "codex"
) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "powercontext_hook_kit", "hook", host, hook],
        input=stdin,
        env=env,
        capture_output=True,
        timeout=30,
        check=False,
    )


@pytest.mark.parametrize("host", ["codex", "claude-code"])
def test_ready_prints_exactly_one_session_start_envelope(
    stub: StubRuntime, tmp_path: Path, host: str
) -> None:
    stub.replies[BOOTSTRAP] = Reply(200, bootstrap_body())
    stub.replies[RECEIPTS] = Reply(200, receipt_body())
    payload = json.dumps(session_event(cwd=project(tmp_path))).encode()
    env = process_env(stub.url, tmp_path, POWERCONTEXT_BOOTSTRAP="1")
    completed = run_hook_process(payload, env, host=host)
    assert completed.returncode == 0
    assert completed.stderr == b""
    assert completed.stdout.count(b"\n") == 1 and completed.stdout.endswith(b"\n")
    assert json.loads(completed.stdout) == {
        "hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": PACK}
    }
    assert stub.paths() == [HANDOFF_NEXT, BOOTSTRAP, RECEIPTS]
    assert stub.requests[1].json()["integration"] == host
    sessions = stored_receipts(tmp_path / "plugin-data")
    assert sessions[session_key("sess-1")]["receipt_id"] == RECEIPT_ID


def test_the_next_prompt_process_sends_the_receipt_once(stub: StubRuntime, tmp_path: Path) -> None:
    stub.replies[BOOTSTRAP] = Reply(200, bootstrap_body())
    stub.replies[RECEIPTS] = Reply(200, receipt_body())
    stub.replies[PREPARE] = Reply(200, prepared_body("recalled"))
    env = process_env(stub.url, tmp_path, POWERCONTEXT_BOOTSTRAP="1")
    cwd = project(tmp_path)
    start = run_hook_process(json.dumps(session_event(cwd=cwd)).encode(), env)
    assert json.loads(start.stdout)["hookSpecificOutput"]["additionalContext"] == PACK
    for turn in ("turn-1", "turn-2"):
        prompt = json.dumps(event(cwd=cwd, turn_id=turn)).encode()
        completed = run_hook_process(prompt, env, hook="user-prompt-submit")
        assert completed.returncode == 0 and completed.stdout.endswith(b"\n")
    prepares = [request.json() for request in stub.requests if request.path == PREPARE]
    assert [request.get("bootstrap_receipt_id") for request in prepares] == [RECEIPT_ID, None]


def test_a_rejected_claim_prints_nothing(stub: StubRuntime, tmp_path: Path) -> None:
    stub.replies[BOOTSTRAP] = Reply(200, bootstrap_body())
    stub.replies[RECEIPTS] = Reply(409, b'{"error":{"code":"receipt_conflict"}}')
    payload = json.dumps(session_event(cwd=project(tmp_path))).encode()
    completed = run_hook_process(
        payload, process_env(stub.url, tmp_path, POWERCONTEXT_BOOTSTRAP="1")
    )
    assert (completed.returncode, completed.stdout) == (0, b"")
    [line] = parse_lines(completed.stderr.decode())
    assert (line["event"], line["outcome"]) == ("bootstrap_receipt", "receipt_rejected")


def test_server_down_prints_nothing_and_one_line(tmp_path: Path) -> None:
    payload = json.dumps(session_event(cwd=project(tmp_path))).encode()
    env = process_env(f"http://127.0.0.1:{dead_port()}", tmp_path, POWERCONTEXT_BOOTSTRAP="1")
    completed = run_hook_process(payload, env)
    assert (completed.returncode, completed.stdout) == (0, b"")
    [line] = parse_lines(completed.stderr.decode())
    assert line["component"] == "powercontext.codex.session-start"
    assert (line["event"], line["outcome"]) == ("context_bootstrap", "server_unavailable")
    log = (tmp_path / "plugin-data" / "diagnostics.log").read_text()
    assert '"outcome":"server_unavailable"' in log


@pytest.mark.parametrize("stdin", [b"", b"garbage\x00\xff", b'{"source":', b"[]"])
def test_bad_stdin_prints_nothing_and_exits_zero(
    stub: StubRuntime, tmp_path: Path, stdin: bytes
) -> None:
    completed = run_hook_process(stdin, process_env(stub.url, tmp_path))
    assert (completed.returncode, completed.stdout) == (0, b"")
    [line] = parse_lines(completed.stderr.decode())
    assert (line["event"], line["outcome"]) == ("context_bootstrap", "skipped")
    assert stub.requests == []


def test_disabled_by_default_prints_nothing_silently(stub: StubRuntime, tmp_path: Path) -> None:
    stub.replies[BOOTSTRAP] = Reply(200, bootstrap_body(None, ephemeral=True))
    payload = json.dumps(session_event(cwd=project(tmp_path))).encode()
    completed = run_hook_process(payload, process_env(stub.url, tmp_path))
    assert (completed.returncode, completed.stdout, completed.stderr) == (0, b"", b"")
    assert stub.requests[0].json()["enabled"] is False
