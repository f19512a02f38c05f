"""The Stop hook records the turn's task result through the kit (issue #31 item 2).

Through ``run_hook`` (and one real process) against the stub runtime, with the real hosts'
transcripts from ``tests/fixtures/task_results``: the body is the contract's and nothing more,
it is spooled when the runtime is down and delivered by a later Stop, the switch turns it off,
and whatever happens the hook prints nothing and exits 0.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from powercontext_hook_kit.flows import TASK_RESULT_PATH
from powercontext_hook_kit.task_result import TASK_RESULT_SPOOL_DIR, is_task_result_body
from tests.hook_kit.conftest import TOKEN, HookRun, hook_env, run_in_process
from tests.hook_kit.stub import Reply, StubRuntime, dead_port
from tests.hook_kit.test_process import process_env

FIXTURES = Path(__file__).parents[1] / "fixtures" / "task_results"
HOSTS = ["claude-code", "codex"]
RECORDED = json.dumps(
    {
        "status": "recorded",
        "source": {"name": "task-result", "source_id": "task-result/x"},
        "position": 1,
        "redactions": 0,
    }
).encode()


def stop_payload(host: str, tmp_path: Path) -> dict[str, Any]:
    """The host's real Stop stdin, pointed at a copy of its real transcript."""
    payload = json.loads((FIXTURES / f"{host}.stop-event.json").read_text("utf-8"))
    transcript = tmp_path / f"{host}-transcript.jsonl"
    shutil.copy(FIXTURES / f"{host}.transcript.jsonl", transcript)
    payload["transcript_path"] = str(transcript)
    return payload


def stop(payload: dict[str, Any] | bytes, env: dict[str, str], host: str) -> HookRun:
    return run_in_process(payload, env, host=host, hook="stop")


def spool_entries(data_dir: Path) -> list[Path]:
    folder = data_dir / TASK_RESULT_SPOOL_DIR
    return sorted(p for p in folder.glob("*.json")) if folder.exists() else []


@pytest.mark.parametrize("host", HOSTS)
def test_records_the_task_result(stub: StubRuntime, tmp_path: Path, host: str) -> None:
    stub.replies[TASK_RESULT_PATH] = Reply(201, RECORDED)
    run = stop(stop_payload(host, tmp_path), hook_env(stub.url, tmp_path / "data"), host)
    assert (run.code, run.stdout, run.lines) == (0, b"", [])
    [request] = [r for r in stub.requests if r.path == TASK_RESULT_PATH]
    assert request.headers["Authorization"] == f"Bearer {TOKEN}"
    assert is_task_result_body(request.body)
    document = json.loads(request.body)
    assert document["scope_id"] == "git:example.com/acme/SENTINEL-scope"
    assert document["task"]["outcome"] == "succeeded"
    assert document["task"]["host"] == host
    assert [c["exit_status"] for c in document["task"]["checks"]] == [1, 0]


@pytest.mark.parametrize("host", HOSTS)
def test_debug_line_says_recorded(stub: StubRuntime, tmp_path: Path, host: str) -> None:
    stub.replies[TASK_RESULT_PATH] = Reply(200, RECORDED)  # the same id and payload again
    env = hook_env(stub.url, tmp_path / "data", POWERCONTEXT_DEBUG="1")
    run = stop(stop_payload(host, tmp_path), env, host)
    assert run.outcome("task_result") == "recorded"
    assert run.lines[0]["component"] == f"powercontext.{host}.stop"


def test_retried_stop_sends_the_same_body(stub: StubRuntime, tmp_path: Path) -> None:
    stub.replies[TASK_RESULT_PATH] = Reply(201, RECORDED)
    payload = stop_payload("codex", tmp_path)
    env = hook_env(stub.url, tmp_path / "data")
    stop(payload, env, "codex")
    stop(payload, env, "codex")
    bodies = [r.body for r in stub.requests if r.path == TASK_RESULT_PATH]
    assert len(bodies) == 2 and bodies[0] == bodies[1]


@pytest.mark.parametrize("host", HOSTS)
def test_spooled_when_down_and_delivered_by_a_later_stop(
    stub: StubRuntime, tmp_path: Path, host: str
) -> None:
    data_dir = tmp_path / "data"
    payload = stop_payload(host, tmp_path)
    down = stop(payload, hook_env(f"http://127.0.0.1:{dead_port()}", data_dir), host)
    assert (down.code, down.stdout) == (0, b"")
    assert down.outcome("task_result") == "server_unavailable"
    [entry] = spool_entries(data_dir)
    assert is_task_result_body(entry.read_bytes())
    spooled = entry.read_bytes()

    stub.replies[TASK_RESULT_PATH] = Reply(201, RECORDED)
    back = stop(payload, hook_env(stub.url, data_dir, POWERCONTEXT_DEBUG="1"), host)
    assert back.code == 0 and back.stdout == b""
    bodies = [r.body for r in stub.requests if r.path == TASK_RESULT_PATH]
    assert bodies[0] == spooled  # the spooled one first, then this turn's (the same: idempotent)
    assert spool_entries(data_dir) == []
    assert back.outcome("task_result_spool") == "delivered"


def test_refused_result_is_not_spooled(stub: StubRuntime, tmp_path: Path) -> None:
    stub.replies[TASK_RESULT_PATH] = Reply(422, b'{"error":{"code":"invalid_request"}}')
    data_dir = tmp_path / "data"
    run = stop(stop_payload("codex", tmp_path), hook_env(stub.url, data_dir), "codex")
    assert run.outcome("task_result") == "invalid_response"
    assert spool_entries(data_dir) == []


def test_spool_switch_off_keeps_nothing(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    env = hook_env(f"http://127.0.0.1:{dead_port()}", data_dir, POWERCONTEXT_CAPTURE_SPOOL="off")
    run = stop(stop_payload("codex", tmp_path), env, "codex")
    assert run.outcome("task_result") == "server_unavailable"
    assert spool_entries(data_dir) == []


@pytest.mark.parametrize("host", HOSTS)
def test_off_switch_sends_nothing(stub: StubRuntime, tmp_path: Path, host: str) -> None:
    env = hook_env(stub.url, tmp_path / "data", POWERCONTEXT_RECORD_TASK_RESULTS="off")
    run = stop(stop_payload(host, tmp_path), {**env, "POWERCONTEXT_DEBUG": "1"}, host)
    assert (run.code, run.stdout) == (0, b"")
    assert run.outcome("task_result") == "disabled"
    assert stub.requests == []


def test_off_switch_in_plugins_toml(stub: StubRuntime, tmp_path: Path, isolated_user: Path) -> None:
    config = isolated_user / "config" / "powercontext" / "plugins.toml"
    config.parent.mkdir(parents=True)
    config.write_text("[claude-code]\nrecord_task_results = false\n", encoding="utf-8")
    run = stop(
        stop_payload("claude-code", tmp_path), hook_env(stub.url, tmp_path / "d"), "claude-code"
    )
    assert run.code == 0 and stub.requests == []


@pytest.mark.parametrize(
    "change",
    [
        {"transcript_path": None},
        {"transcript_path": "relative/path.jsonl"},
        {"cwd": None},
        {"hook_event_name": "UserPromptSubmit"},
    ],
    ids=["no-transcript", "relative-transcript", "no-cwd", "wrong-event"],
)
def test_unusable_events_are_skipped(
    stub: StubRuntime, tmp_path: Path, change: dict[str, Any]
) -> None:
    payload = {**stop_payload("codex", tmp_path), **change}
    run = stop(payload, hook_env(stub.url, tmp_path / "data"), "codex")
    assert (run.code, run.stdout) == (0, b"")
    assert run.outcome("task_result") == "skipped"
    assert stub.requests == []


@pytest.mark.parametrize(
    "content", [b"", b"not json at all\n", b"\x00" * 4096, b'{"type":"user"}\n' * 1000]
)
def test_malformed_transcript_fails_open_with_one_line(
    stub: StubRuntime, tmp_path: Path, content: bytes
) -> None:
    payload = stop_payload("claude-code", tmp_path)
    Path(payload["transcript_path"]).write_bytes(content)
    run = stop(payload, hook_env(stub.url, tmp_path / "data"), "claude-code")
    assert (run.code, run.stdout) == (0, b"")
    assert [line["outcome"] for line in run.lines] == ["no_task_result"]
    assert stub.requests == []


def test_lines_and_log_hold_no_content(stub: StubRuntime, tmp_path: Path) -> None:
    stub.replies[TASK_RESULT_PATH] = Reply(503, b"{}")
    data_dir = tmp_path / "data"
    run = stop(stop_payload("codex", tmp_path), hook_env(stub.url, data_dir), "codex")
    written = run.stderr + (data_dir / "diagnostics.log").read_text("utf-8")
    for secret in ("Fix the add", "sh check.sh", "calc.py", "SENTINEL-scope", TOKEN, "FAILED"):
        assert secret not in written


def test_real_process_prints_nothing_and_exits_zero(stub: StubRuntime, tmp_path: Path) -> None:
    stub.replies[TASK_RESULT_PATH] = Reply(201, RECORDED)
    payload = stop_payload("codex", tmp_path)
    env = process_env(stub.url, tmp_path, POWERCONTEXT_SCOPE_ID="git:example.com/acme/app")
    completed = subprocess.run(
        [sys.executable, "-m", "powercontext_codex", "hook", "stop"],
        input=json.dumps(payload).encode(),
        env=env,
        capture_output=True,
        timeout=30,
        check=False,
    )
    assert (completed.returncode, completed.stdout, completed.stderr) == (0, b"", b"")
    assert TASK_RESULT_PATH in stub.paths()
