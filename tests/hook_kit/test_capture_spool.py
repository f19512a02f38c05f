"""Prompts captured while the runtime is down are spooled and delivered once it is back (#16.4).

Through ``run_hook`` (and a few real processes) against the stub runtime: the turn always
completes, the pack goes out before any delivery, spooled prompts reach the journal oldest
first and exactly once (the stub's :class:`Journal` answers like the runtime: 202 with the
original position for a repeat, 409 for another payload under the same source id), refusals
are never spooled, and no line or log ever holds a prompt.
"""

from __future__ import annotations

import io
import json
import shutil
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from powercontext_hook_kit import StandardHostAdapter, prompt_source_id, run_hook
from powercontext_hook_kit import runner as runner_module
from powercontext_hook_kit.diagnostics import LOG_FILE_NAME
from powercontext_hook_kit.flows import SPOOL_DELIVERY_SECONDS
from powercontext_hook_kit.settings import plugin_data_dir
from powercontext_hook_kit.spool import SPOOL_DIR_NAME, CaptureSpool
from tests.hook_kit.conftest import TOKEN, event, hook_env, parse_lines, run_in_process
from tests.hook_kit.stub import CAPTURE, PREPARE, Reply, StubRuntime, dead_port, prepared_body
from tests.hook_kit.test_process import process_env, run_hook_process

PACK = "PowerContext prepared untrusted historical context.\nitem"
SCOPE = "git:example.com/acme/SENTINEL-scope"
SLACK = 1.5  # a loaded machine, on top of the deadline
METADATA = {"host": "codex", "hook": "UserPromptSubmit"}


class Journal:
    """The runtime's capture semantics (spec 02 § Sources), for the stub: gap-free positions,
    the same payload again → its original position, another payload → 409 source_conflict.
    A capture is journaled when it arrives; ``delay`` holds the answer back (a slow runtime)."""

    def __init__(self) -> None:
        self.rows: list[tuple[tuple[str, str], str]] = []  # ((scope, source id), payload)
        self.delay = 0.0
        self.lock = threading.Lock()

    def __call__(self, path: str, body: bytes) -> Reply | None:
        if path != CAPTURE:
            return None
        request = json.loads(body)
        key = (request["scope_id"], request["source_id"])
        payload = json.dumps([request["content"], request.get("metadata")], sort_keys=True)
        with self.lock:
            positions = [n for n, (k, _) in enumerate(self.rows, start=1) if k == key]
            if positions and self.rows[positions[0] - 1][1] != payload:
                return Reply(409, b'{"error":{"code":"source_conflict"}}', delay=self.delay)
            if not positions:
                self.rows.append((key, payload))
                positions = [len(self.rows)]
        return Reply(202, accepted(request["source_id"], positions[0]), delay=self.delay)

    def contents(self) -> list[str]:
        with self.lock:
            return [json.loads(payload)[0] for _, payload in self.rows]


def accepted(source_id: str, position: int) -> bytes:
    source = {"name": "content", "source_id": source_id}
    return json.dumps({"status": "accepted", "source": source, "position": position}).encode()


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "plugin-data"


@pytest.fixture
def env(stub: StubRuntime, data_dir: Path) -> dict[str, str]:
    stub.replies[PREPARE] = Reply(200, prepared_body(PACK))
    return hook_env(stub.url, data_dir)


@pytest.fixture
def down(data_dir: Path) -> dict[str, str]:
    """The same plugin data dir, but nobody listens on the runtime's port."""
    return hook_env(f"http://127.0.0.1:{dead_port()}", data_dir)


@pytest.fixture
def journal(stub: StubRuntime) -> Journal:
    stub.answer = Journal()
    return stub.answer


def spooled(data_dir: Path) -> list[dict[str, Any]]:
    folder = data_dir / SPOOL_DIR_NAME
    if not folder.exists():
        return []
    return [json.loads(p.read_bytes()) for p in sorted(folder.glob("*.json"))]


def captured(stub: StubRuntime) -> list[str]:
    return [r.json()["content"] for r in stub.requests if r.path == CAPTURE]


def turn(number: int, **fields: Any) -> dict[str, Any]:
    return event(prompt=f"prompt number {number}", turn_id=f"turn-{number}", **fields)


def spool_line(run: Any) -> dict[str, Any] | None:
    lines = [line for line in run.lines if line["event"] == "capture_spool"]
    assert len(lines) <= 1, run.lines
    return lines[0] if lines else None


# --- runtime down: the prompt is kept, the turn completes ------------------------------------


def test_while_down_the_prompt_is_spooled_and_the_turn_completes(
    down: dict[str, str], data_dir: Path
) -> None:
    started = time.monotonic()
    run = run_in_process(turn(1), down)
    assert (run.code, run.stdout) == (0, b"")
    assert time.monotonic() - started < 1.0
    # One line, as before the spool: the spooling itself is normal operation (debug only).
    assert [(line["event"], line["outcome"]) for line in run.lines] == [
        ("context_prepare", "server_unavailable")
    ]
    assert spooled(data_dir) == [
        {
            "scope_id": SCOPE,
            "source_id": prompt_source_id("codex", SCOPE, "sess-1", "turn-1", "prompt number 1"),
            "content": "prompt number 1",
            "metadata": METADATA,
        }
    ]
    debug = run_in_process(turn(2), {**down, "POWERCONTEXT_DEBUG": "1"})
    line = spool_line(debug)
    assert line is not None
    assert (line["outcome"], line["spooled"], line["dropped"], line["pending"]) == (
        "spooled",
        1,
        0,
        2,
    )
    assert line["delivered"] == 0


def test_the_spooled_request_is_byte_for_byte_the_live_one(
    stub: StubRuntime, env: dict[str, str], down: dict[str, str], data_dir: Path
) -> None:
    """Same source id *and* payload, so the runtime de-duplicates a prompt captured both ways."""
    run_in_process(turn(1), down)
    [entry] = sorted((data_dir / SPOOL_DIR_NAME).glob("*.json"))
    spooled_bytes = entry.read_bytes()
    other = data_dir.parent / "other-data"
    run_in_process(turn(1), hook_env(stub.url, other))  # a live capture of the same turn
    [live] = [r.body for r in stub.requests if r.path == CAPTURE]
    assert spooled_bytes == live


# --- runtime back: delivered once, oldest first, before the new prompt ------------------------


def test_back_up_the_spool_is_delivered_once_before_the_new_prompt(
    stub: StubRuntime, env: dict[str, str], down: dict[str, str], data_dir: Path
) -> None:
    run_in_process(turn(1), down)
    run_in_process(turn(2), down)
    run = run_in_process(turn(3), env)
    assert run.code == 0 and run.injected() == PACK
    assert stub.paths() == [PREPARE, CAPTURE, CAPTURE, CAPTURE]
    assert captured(stub) == ["prompt number 1", "prompt number 2", "prompt number 3"]
    assert run.lines == []  # delivery is normal operation: silent without debug
    assert spooled(data_dir) == []
    again = run_in_process(turn(4), {**env, "POWERCONTEXT_DEBUG": "1"})
    assert stub.paths()[4:] == [PREPARE, CAPTURE]  # nothing is sent twice
    assert spool_line(again) is None  # nothing spooled, nothing delivered: no spool line


def test_the_delivery_line_in_debug(
    stub: StubRuntime, env: dict[str, str], down: dict[str, str]
) -> None:
    run_in_process(turn(1), down)
    run_in_process(turn(2), down)
    run = run_in_process(turn(3), {**env, "POWERCONTEXT_DEBUG": "1"})
    line = spool_line(run)
    assert line is not None
    assert line["outcome"] == "delivered"
    assert (line["spooled"], line["delivered"], line["dropped"], line["pending"]) == (0, 2, 0, 0)
    assert run.outcome("source_capture") == "captured"


class TimedStdout(io.BytesIO):
    def __init__(self) -> None:
        super().__init__()
        self.written_at: float | None = None

    def write(self, data: Any) -> int:
        if self.written_at is None:
            self.written_at = time.monotonic()
        return super().write(data)


def test_the_pack_is_printed_before_anything_is_delivered(
    stub: StubRuntime, env: dict[str, str], down: dict[str, str]
) -> None:
    run_in_process(turn(1), down)
    stub.replies[CAPTURE] = Reply(202, accepted("x", 1), delay=0.3)
    stdout, stderr = TimedStdout(), io.StringIO()
    stdin = io.BytesIO(json.dumps(turn(2)).encode())
    assert (
        run_hook(StandardHostAdapter("codex"), "user-prompt-submit", stdin, stdout, stderr, env)
        == 0
    )
    first_capture = min(r.at for r in stub.requests if r.path == CAPTURE)
    assert stdout.written_at is not None and stdout.written_at < first_capture
    assert json.loads(stdout.getvalue())["hookSpecificOutput"]["additionalContext"] == PACK
    assert captured(stub) == ["prompt number 1", "prompt number 2"]


def test_a_backlog_drains_within_the_deadline_in_order(
    stub: StubRuntime,
    env: dict[str, str],
    down: dict[str, str],
    data_dir: Path,
    journal: Journal,
) -> None:
    """A slow runtime (0.15 s per capture): one run delivers only what fits in
    SPOOL_DELIVERY_SECONDS, queues its own prompt behind the rest and stays in its deadline;
    later runs deliver the rest. Every prompt reaches the journal once, in prompt order — also
    one whose answer the first run stopped waiting for (it is resent, a harmless duplicate)."""
    for number in range(8):
        run_in_process(turn(number), down)
    journal.delay = 0.15
    started = time.monotonic()
    run = run_in_process(turn(8), {**env, "POWERCONTEXT_DEADLINE_SECONDS": "1.0"})
    elapsed = time.monotonic() - started
    assert run.injected() == PACK
    assert elapsed < SPOOL_DELIVERY_SECONDS + SLACK
    assert 1 <= len(journal.contents()) < 8  # a part of the backlog
    assert spooled(data_dir)[-1]["content"] == "prompt number 8"  # behind the rest
    journal.delay = 0.0
    last = 8
    while spooled(data_dir) and last < 14:
        last += 1
        run_in_process(turn(last), env)
    assert spooled(data_dir) == []
    assert journal.contents() == [f"prompt number {n}" for n in range(last + 1)]


def test_a_capture_that_fails_after_recall_is_spooled(
    stub: StubRuntime, env: dict[str, str], data_dir: Path
) -> None:
    stub.replies[CAPTURE] = Reply(503, b'{"error":{"code":"database_unavailable"}}')
    run = run_in_process(turn(1), env)
    assert run.injected() == PACK
    assert run.outcome("source_capture") == "server_unavailable"  # still said, as before
    assert spool_line(run) is None  # the spooling itself is quiet
    assert [e["content"] for e in spooled(data_dir)] == ["prompt number 1"]
    stub.replies[CAPTURE] = Reply(202, accepted("x", 1))
    run_in_process(turn(2), env)
    assert captured(stub)[1:] == ["prompt number 1", "prompt number 2"]
    assert spooled(data_dir) == []


def test_a_runtime_failing_during_delivery_keeps_the_rest(
    stub: StubRuntime, env: dict[str, str], down: dict[str, str], data_dir: Path
) -> None:
    run_in_process(turn(1), down)
    run_in_process(turn(2), down)
    stub.replies[CAPTURE] = Reply(503, b"{}")
    run = run_in_process(turn(3), env)
    assert run.injected() == PACK
    assert captured(stub) == ["prompt number 1"]  # stopped at the first 503, nothing lost
    line = spool_line(run)
    assert line is not None
    assert (line["outcome"], line["http_status"], line["pending"], line["spooled"]) == (
        "server_unavailable",
        503,
        3,
        1,
    )
    assert run.outcome("source_capture") is None  # the spool line says it all
    assert [e["content"] for e in spooled(data_dir)] == [
        "prompt number 1",
        "prompt number 2",
        "prompt number 3",
    ]


# --- what is never spooled ---------------------------------------------------------------------


@pytest.mark.parametrize("status", [401, 403, 404])
def test_a_refused_recall_spools_nothing(
    stub: StubRuntime, env: dict[str, str], data_dir: Path, status: int
) -> None:
    stub.replies[PREPARE] = Reply(status, b"{}")
    run_in_process(turn(1), env)
    assert stub.paths() == [PREPARE]
    assert spooled(data_dir) == []


@pytest.mark.parametrize("status", [401, 403, 409, 413, 422])
def test_a_refused_capture_spools_nothing(
    stub: StubRuntime, env: dict[str, str], data_dir: Path, status: int
) -> None:
    stub.replies[CAPTURE] = Reply(status, b"{}")
    run = run_in_process(turn(1), env)
    assert run.injected() == PACK
    assert run.outcome("source_capture") is not None
    assert spooled(data_dir) == []


def test_capture_off_neither_spools_nor_delivers(
    stub: StubRuntime, env: dict[str, str], down: dict[str, str], data_dir: Path
) -> None:
    run_in_process(turn(1), down)
    off = {"POWERCONTEXT_CAPTURE_PROMPTS": "off"}
    run_in_process(turn(2), {**down, **off})
    assert [e["content"] for e in spooled(data_dir)] == ["prompt number 1"]
    run = run_in_process(turn(3), {**env, **off})
    assert run.injected() == PACK
    assert stub.paths() == [PREPARE]  # the earlier prompt waits for a run that may capture
    run_in_process(turn(4), env)
    assert captured(stub) == ["prompt number 1", "prompt number 4"]


def test_the_spool_can_be_switched_off(
    stub: StubRuntime, env: dict[str, str], down: dict[str, str], data_dir: Path
) -> None:
    run_in_process(turn(1), down)
    off = {"POWERCONTEXT_CAPTURE_SPOOL": "off"}
    run_in_process(turn(2), {**down, **off})
    assert [e["content"] for e in spooled(data_dir)] == ["prompt number 1"]
    run_in_process(turn(3), {**env, **off})  # what was spooled before is still delivered
    assert captured(stub) == ["prompt number 1", "prompt number 3"]
    assert spooled(data_dir) == []


# --- exactly once, and what can never be delivered ---------------------------------------------


def test_a_crash_after_the_acknowledgement_delivers_a_harmless_duplicate(
    stub: StubRuntime,
    env: dict[str, str],
    down: dict[str, str],
    data_dir: Path,
    journal: Journal,
    tmp_path: Path,
) -> None:
    """The hook died after the runtime's 202 but before removing the entries: they are sent
    again, answered 202 with their original positions, and journaled once."""
    run_in_process(turn(1), down)
    run_in_process(turn(2), down)
    saved = tmp_path / "saved"
    shutil.copytree(data_dir / SPOOL_DIR_NAME, saved)
    run_in_process(turn(3), env)
    assert journal.contents() == ["prompt number 1", "prompt number 2", "prompt number 3"]
    for entry in saved.glob("*.json"):  # as if the removals had never happened
        shutil.copy2(entry, data_dir / SPOOL_DIR_NAME / entry.name)
    run = run_in_process(turn(4), {**env, "POWERCONTEXT_DEBUG": "1"})
    assert captured(stub) == [f"prompt number {n}" for n in (1, 2, 3, 1, 2, 4)]
    assert journal.contents() == [f"prompt number {n}" for n in (1, 2, 3, 4)]
    line = spool_line(run)
    assert line is not None and (line["outcome"], line["delivered"]) == ("delivered", 2)
    assert spooled(data_dir) == []


def test_a_conflicting_entry_is_dropped_and_said(
    stub: StubRuntime,
    env: dict[str, str],
    down: dict[str, str],
    data_dir: Path,
    journal: Journal,
) -> None:
    """Another payload already holds the entry's source id (409 source_conflict): it can never
    be delivered, so it is dropped — with a line, because a prompt was lost — and the rest go on."""
    run_in_process(turn(1), down)
    run_in_process(turn(2), down)
    first = spooled(data_dir)[0]
    journal(CAPTURE, json.dumps({**first, "content": "another"}).encode())
    run = run_in_process(turn(3), env)
    assert run.injected() == PACK
    line = spool_line(run)
    assert line is not None
    assert (line["outcome"], line["dropped"], line["delivered"], line["pending"]) == (
        "dropped",
        1,
        1,
        0,
    )
    assert "http_status" not in line
    assert journal.contents() == ["another", "prompt number 2", "prompt number 3"]
    assert spooled(data_dir) == []
    log = (data_dir / LOG_FILE_NAME).read_text()
    assert '"event":"capture_spool","outcome":"dropped"' in log


def test_a_full_spool_drops_the_oldest_and_says_so(
    down: dict[str, str], data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(
        runner_module,
        "_capture_spool",
        lambda host, env: CaptureSpool(lambda: plugin_data_dir(host, env), max_entries=2),
    )
    for number in (1, 2):
        assert spool_line(run_in_process(turn(number), down)) is None
    run = run_in_process(turn(3), down)
    line = spool_line(run)
    assert line is not None
    assert (line["outcome"], line["spooled"], line["dropped"], line["pending"]) == (
        "dropped",
        1,
        1,
        2,
    )
    assert [e["content"] for e in spooled(data_dir)] == ["prompt number 2", "prompt number 3"]


# --- two hooks at once ---------------------------------------------------------------------------

_HOLD_LOCK = """
import sys
from powercontext_hook_kit.spool import _delivery_lock
with _delivery_lock(sys.argv[1]) as locked:
    print("locked" if locked else "busy", flush=True)
    sys.stdin.read()
"""


def test_a_hook_never_delivers_what_another_is_delivering(
    stub: StubRuntime, env: dict[str, str], down: dict[str, str], data_dir: Path
) -> None:
    """Another hook process holds the delivery lock: this one sends no spooled entry, never
    waits, and queues its own prompt behind them, so the order still holds afterwards."""
    run_in_process(turn(1), down)
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLD_LOCK, str(data_dir / SPOOL_DIR_NAME)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdin is not None and holder.stdout is not None
    try:
        assert holder.stdout.readline().strip() == "locked"
        run = run_in_process(turn(2), {**env, "POWERCONTEXT_DEBUG": "1"})
        assert run.injected() == PACK
        assert stub.paths() == [PREPARE]
        line = spool_line(run)
        assert line is not None and (line["outcome"], line["spooled"]) == ("spooled", 1)
    finally:
        holder.stdin.close()
        holder.wait(30)
        holder.stdout.close()
    run_in_process(turn(3), env)
    assert captured(stub) == ["prompt number 1", "prompt number 2", "prompt number 3"]


def test_two_hook_processes_at_once_deliver_each_entry_once(
    stub: StubRuntime, tmp_path: Path, data_dir: Path, journal: Journal
) -> None:
    """Two real hook processes start together on a spool of 20 prompts: whatever the
    interleaving, every spooled prompt is sent exactly once (the lock), and nothing is lost."""
    stub.replies[PREPARE] = Reply(200, prepared_body(PACK))
    spool = CaptureSpool(str(data_dir))
    for number in range(20):
        source_id = prompt_source_id(
            "codex", SCOPE, "sess-1", f"turn-{number}", f"spooled-{number}"
        )
        request = {
            "scope_id": SCOPE,
            "source_id": source_id,
            "content": f"spooled-{number}",
            "metadata": METADATA,
        }
        spool.append(json.dumps(request).encode())
    env = process_env(stub.url, tmp_path, POWERCONTEXT_SCOPE_ID=SCOPE)
    processes = [
        subprocess.Popen(
            [sys.executable, "-m", "powercontext_hook_kit", "hook", "codex", "user-prompt-submit"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
        )
        for _ in range(2)
    ]
    for index, process in enumerate(processes):  # both get their event before either ends
        assert process.stdin is not None
        process.stdin.write(json.dumps(turn(100 + index)).encode())
        process.stdin.close()
    outputs = []
    for process in processes:  # a few hundred bytes each: reading one pipe after the other is safe
        assert process.stdout is not None and process.stderr is not None
        outputs.append((process.stdout.read(), process.stderr.read()))
        process.wait(60)
        process.stdout.close()
        process.stderr.close()
    assert [process.returncode for process in processes] == [0, 0]
    for stdout, stderr in outputs:
        assert json.loads(stdout)["hookSpecificOutput"]["additionalContext"] == PACK
        assert stderr == b""
    sent = captured(stub)
    assert len(sent) == len(set(sent))  # no entry was sent twice
    for _ in range(3):  # whatever was left behind a busy lock or a budget goes next time
        if not spooled(data_dir):
            break
        run_hook_process(json.dumps(turn(200)).encode(), env)
    assert spooled(data_dir) == []
    contents = journal.contents()
    assert sorted(c for c in contents if c.startswith("spooled-")) == sorted(
        f"spooled-{n}" for n in range(20)
    )
    assert len(contents) == len(set(contents))


# --- real processes, privacy -------------------------------------------------------------------


def test_real_processes_down_then_up(stub: StubRuntime, tmp_path: Path) -> None:
    stub.replies[PREPARE] = Reply(200, prepared_body(PACK))
    down_env = process_env(f"http://127.0.0.1:{dead_port()}", tmp_path, POWERCONTEXT_SCOPE_ID=SCOPE)
    completed = run_hook_process(json.dumps(turn(1)).encode(), down_env)
    assert (completed.returncode, completed.stdout) == (0, b"")
    [line] = parse_lines(completed.stderr.decode())
    assert (line["event"], line["outcome"]) == ("context_prepare", "server_unavailable")
    up_env = process_env(stub.url, tmp_path, POWERCONTEXT_SCOPE_ID=SCOPE)
    completed = run_hook_process(json.dumps(turn(2)).encode(), up_env)
    assert (completed.returncode, completed.stderr) == (0, b"")
    assert json.loads(completed.stdout)["hookSpecificOutput"]["additionalContext"] == PACK
    assert captured(stub) == ["prompt number 1", "prompt number 2"]
    assert spooled(tmp_path / "plugin-data") == []


def test_prompts_never_reach_a_line_or_the_log(
    stub: StubRuntime,
    env: dict[str, str],
    down: dict[str, str],
    data_dir: Path,
    journal: Journal,
) -> None:
    secret = "PROMPT-SENTINEL-7c1e do not log me"
    debug = {"POWERCONTEXT_DEBUG": "1"}
    runs = [
        run_in_process(event(prompt=f"{secret} {n}", turn_id=f"t{n}"), {**down, **debug})
        for n in range(3)
    ]
    folder = data_dir / SPOOL_DIR_NAME
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    for entry in folder.glob("*.json"):
        assert stat.S_IMODE(entry.stat().st_mode) == 0o600
        assert secret in entry.read_text()  # the spool is the one place the prompt is kept
    first = spooled(data_dir)[0]
    journal(CAPTURE, json.dumps({**first, "content": "another"}).encode())  # → a 409 drop
    runs.append(run_in_process(event(prompt=f"{secret} up", turn_id="t9"), {**env, **debug}))
    assert {
        line["outcome"] for run in runs for line in run.lines if line["event"] == "capture_spool"
    } == {"spooled", "dropped"}
    log = (data_dir / LOG_FILE_NAME).read_text()
    for text in [run.stderr for run in runs] + [log]:
        assert "SENTINEL" not in text and TOKEN not in text  # neither prompt nor scope nor token
        assert str(data_dir) not in text
    assert spooled(data_dir) == []
