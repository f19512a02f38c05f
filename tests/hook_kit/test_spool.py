"""The capture spool on its own: bounds, order, expiry, modes, atomic entries, one deliverer."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from powercontext_hook_kit import spool as spool_module
from powercontext_hook_kit.spool import (
    MAX_ATTEMPTS,
    RETENTION_SECONDS,
    SPOOL_DIR_NAME,
    CaptureSpool,
    SpoolStatus,
    Verdict,
    spool_status,
)

NOW = 1_800_000_000.0


def body(index: int, size: int = 0) -> bytes:
    """A capture request like the hook's (``size`` pads the content)."""
    return json.dumps(
        {
            "scope_id": "git:example.com/acme/shop",
            "source_id": f"codex-user-prompt:{index:064x}",
            "content": f"prompt {index} " + "x" * size,
            "metadata": {"host": "codex", "hook": "UserPromptSubmit"},
        }
    ).encode()


def index_of(raw: bytes) -> int:
    return int(json.loads(raw)["source_id"].split(":")[1], 16)


class Clock:
    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "plugin-data"


def make(data_dir: Path, clock: Clock, **bounds: int) -> CaptureSpool:
    return CaptureSpool(str(data_dir), clock=clock, **bounds)


def entry_files(data_dir: Path) -> list[Path]:
    folder = data_dir / SPOOL_DIR_NAME
    return sorted(p for p in folder.iterdir() if p.suffix == ".json") if folder.exists() else []


def drain(spool: CaptureSpool, verdict: Verdict = "delivered") -> list[int]:
    sent: list[int] = []

    def send(raw: bytes) -> Verdict:
        sent.append(index_of(raw))
        return verdict

    spool.deliver(send, lambda: True)
    return sent


def test_entries_are_the_exact_request_and_come_back_oldest_first(
    data_dir: Path, clock: Clock
) -> None:
    spool = make(data_dir, clock)
    for index in range(5):
        report = spool.append(body(index))
        assert (report.spooled, report.dropped, report.pending) == (True, 0, index + 1)
        clock.now += 1
    assert [p.read_bytes() for p in entry_files(data_dir)] == [body(i) for i in range(5)]
    sent: list[bytes] = []

    def send(raw: bytes) -> Verdict:
        sent.append(raw)
        return "delivered"

    report = spool.deliver(send, lambda: True)
    assert sent == [body(i) for i in range(5)]
    assert (report.delivered, report.dropped, report.pending, report.busy) == (5, 0, 0, False)
    assert entry_files(data_dir) == []
    assert spool.deliver(send, lambda: True) == spool_module.DeliveryReport()  # nothing left


def test_order_survives_a_clock_that_jumps_back(data_dir: Path, clock: Clock) -> None:
    spool = make(data_dir, clock)
    spool.append(body(1))
    clock.now -= 3600
    spool.append(body(2))
    assert drain(spool) == [1, 2]


def test_the_entry_bound_drops_the_oldest(data_dir: Path, clock: Clock) -> None:
    spool = make(data_dir, clock, max_entries=3)
    reports = [spool.append(body(i)) for i in range(5)]
    assert [r.dropped for r in reports] == [0, 0, 0, 1, 1]
    assert all(r.spooled for r in reports) and reports[-1].pending == 3
    assert drain(spool) == [2, 3, 4]


def test_the_byte_bound_drops_the_oldest(data_dir: Path, clock: Clock) -> None:
    size = len(body(0, 1000))
    spool = make(data_dir, clock, max_bytes=3 * size + 10)
    for index in range(3):
        assert spool.append(body(index, 1000)).dropped == 0
    big = body(3, 2 * 1000 + 100)  # needs the room of two old ones
    report = spool.append(big)
    assert (report.spooled, report.dropped, report.pending) == (True, 2, 2)
    assert sum(p.stat().st_size for p in entry_files(data_dir)) <= 3 * size + 10
    assert drain(spool) == [2, 3]


def test_an_entry_larger_than_the_spool_is_counted_not_kept(data_dir: Path, clock: Clock) -> None:
    spool = make(data_dir, clock, max_bytes=500)
    spool.append(body(1))
    report = spool.append(body(2, 600))
    assert (report.spooled, report.dropped, report.pending) == (False, 1, 1)
    assert drain(spool) == [1]  # nothing was evicted for an entry that cannot fit anyway


def test_old_entries_expire(data_dir: Path, clock: Clock) -> None:
    spool = make(data_dir, clock)
    spool.append(body(1))
    clock.now += 1000
    spool.append(body(2))
    clock.now += RETENTION_SECONDS - 500  # entry 1 is past the retention, entry 2 is not
    entries, size, age = spool.status()  # read-only: the expired entry still shows
    assert (entries, size) == (2, len(body(1)) + len(body(2)))
    assert age == pytest.approx(RETENTION_SECONDS + 500)
    report = spool.append(body(3))
    assert (report.dropped, report.pending) == (1, 2)
    clock.now += 600  # now entry 2 expires too
    sent: list[int] = []
    report = spool.deliver(lambda raw: sent.append(index_of(raw)) or "delivered", lambda: True)
    assert sent == [3]
    assert (report.delivered, report.dropped) == (1, 1)


def test_files_are_0600_in_a_0700_folder_whatever_the_umask(data_dir: Path, clock: Clock) -> None:
    previous = os.umask(0)
    try:
        make(data_dir, clock).append(body(1))
    finally:
        os.umask(previous)
    folder = data_dir / SPOOL_DIR_NAME
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    [entry] = entry_files(data_dir)
    assert stat.S_IMODE(entry.stat().st_mode) == 0o600


def test_a_loose_folder_is_tightened(data_dir: Path, clock: Clock) -> None:
    folder = data_dir / SPOOL_DIR_NAME
    folder.mkdir(parents=True)
    folder.chmod(0o755)
    make(data_dir, clock).append(body(1))
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700


def test_a_symlink_in_place_of_the_folder_is_never_followed(
    data_dir: Path, clock: Clock, tmp_path: Path
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    data_dir.mkdir()
    (data_dir / SPOOL_DIR_NAME).symlink_to(elsewhere)
    report = make(data_dir, clock).append(body(1))
    assert (report.spooled, report.dropped) == (False, 1)
    assert list(elsewhere.iterdir()) == []


def test_a_write_that_fails_halfway_leaves_no_entry(
    data_dir: Path, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    spool = make(data_dir, clock)
    spool.append(body(1))
    real_write = os.write

    def half_then_fail(fd: int, data: bytes | memoryview) -> int:
        real_write(fd, bytes(data[: len(data) // 2]))
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(spool_module.os, "write", half_then_fail)
    report = spool.append(body(2))
    monkeypatch.undo()
    assert (report.spooled, report.dropped) == (False, 1)
    assert sorted(p.name for p in (data_dir / SPOOL_DIR_NAME).iterdir()) == [
        p.name for p in entry_files(data_dir)
    ]  # no temporary file left behind
    assert drain(spool) == [1]


def test_torn_foreign_and_unfinished_files(data_dir: Path, clock: Clock) -> None:
    spool = make(data_dir, clock)
    spool.append(body(1))
    clock.now += 1
    spool.append(body(2))
    folder = data_dir / SPOOL_DIR_NAME
    first, second = entry_files(data_dir)
    first.write_bytes(first.read_bytes()[:20])  # torn by a power cut
    (folder / "notes.txt").write_text("not ours")
    unfinished = folder / f".{second.name}.tmp"  # a writer that is still writing (or died)
    unfinished.write_bytes(body(9))
    sent: list[int] = []
    report = spool.deliver(lambda raw: sent.append(index_of(raw)) or "delivered", lambda: True)
    assert sent == [2]  # neither the torn entry nor the unfinished one is ever sent
    assert (report.delivered, report.dropped) == (1, 1)
    assert (folder / "notes.txt").exists() and unfinished.exists()
    os.utime(unfinished, (NOW - 7200, os.path.getmtime(unfinished) - 7200))
    spool.append(body(3))
    assert not unfinished.exists()  # a writer dead for an hour: its leftover is removed


def test_verdicts(data_dir: Path, clock: Clock) -> None:
    spool = make(data_dir, clock)
    for index in range(4):
        spool.append(body(index))
        clock.now += 1
    answers: dict[int, Verdict] = {0: "rejected", 1: "delivered", 2: "deferred"}
    sent: list[int] = []

    def send(raw: bytes) -> Verdict:
        sent.append(index_of(raw))
        return answers[index_of(raw)]

    report = spool.deliver(send, lambda: True)
    # rejected: dropped, go on; delivered: removed; deferred: kept, stop.
    assert sent == [0, 1, 2]
    assert (report.delivered, report.dropped, report.pending, report.stopped) == (
        1,
        1,
        2,
        "deferred",
    )
    answers[2] = "failed"
    for attempt in range(1, MAX_ATTEMPTS):
        report = spool.deliver(send, lambda: True)
        assert (report.stopped, report.dropped, report.pending) == ("failed", 0, 2), attempt
    report = spool.deliver(send, lambda: True)  # the last allowed attempt: given up
    assert (report.stopped, report.dropped, report.pending) == ("failed", 1, 1)
    answers[3] = "delivered"
    assert drain(spool) == [3]
    assert entry_files(data_dir) == []


def test_keep_going_bounds_the_delivery(data_dir: Path, clock: Clock) -> None:
    spool = make(data_dir, clock)
    for index in range(5):
        spool.append(body(index))
    sent: list[int] = []
    report = spool.deliver(
        lambda raw: sent.append(index_of(raw)) or "delivered", lambda: len(sent) < 2
    )
    assert sent == [0, 1]
    assert (report.delivered, report.pending, report.stopped) == (2, 3, None)
    assert drain(spool) == [2, 3, 4]


def test_one_deliverer_at_a_time_within_a_process(data_dir: Path, clock: Clock) -> None:
    """While one delivery waits for the runtime, a second one sends nothing (and never waits)."""
    spool = make(data_dir, clock)
    for index in range(3):
        spool.append(body(index))
    inside, release = threading.Event(), threading.Event()
    first: list[int] = []

    def slow_send(raw: bytes) -> Verdict:
        first.append(index_of(raw))
        inside.set()
        assert release.wait(30)
        return "delivered"

    thread = threading.Thread(target=spool.deliver, args=(slow_send, lambda: True))
    thread.start()
    try:
        assert inside.wait(30)
        second: list[int] = []
        report = spool.deliver(
            lambda raw: second.append(index_of(raw)) or "delivered", lambda: True
        )
        assert report.busy and second == [] and report.pending == 3
    finally:
        release.set()
        thread.join(30)
    assert first == [0, 1, 2]
    assert entry_files(data_dir) == []


_HOLD_LOCK = """
import sys
from powercontext_hook_kit.spool import _delivery_lock
with _delivery_lock(sys.argv[1]) as locked:
    print("locked" if locked else "busy", flush=True)
    sys.stdin.read()
"""


def test_one_deliverer_at_a_time_across_processes(data_dir: Path, clock: Clock) -> None:
    spool = make(data_dir, clock)
    spool.append(body(1))
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLD_LOCK, str(data_dir / SPOOL_DIR_NAME)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdin is not None and holder.stdout is not None
    try:
        assert holder.stdout.readline().strip() == "locked"
        sent: list[int] = []
        report = spool.deliver(lambda raw: sent.append(index_of(raw)) or "delivered", lambda: True)
        assert report.busy and sent == []
    finally:
        holder.stdin.close()
        holder.wait(30)
        holder.stdout.close()
    assert drain(spool) == [1]  # released when the holder is gone


def test_status_for_doctor(data_dir: Path, clock: Clock) -> None:
    assert spool_status("codex", {"PLUGIN_DATA": str(data_dir)}) == SpoolStatus(0, 0, None)
    CaptureSpool(str(data_dir)).append(body(1))
    entries, size, age = spool_status("codex", {"PLUGIN_DATA": str(data_dir)})
    assert (entries, size) == (1, len(body(1)))
    assert age is not None and 0 <= age < 600
    # Claude Code's plugin reads its own variable; the codex one is only a fallback.
    other = data_dir.parent / "claude"
    assert spool_status("claude-code", {"CLAUDE_PLUGIN_DATA": str(other)}).entries == 0


def test_io_errors_never_raise(tmp_path: Path, clock: Clock) -> None:
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    spool = make(blocked / "sub", clock)  # the data dir cannot be created
    assert spool.append(body(1)).spooled is False
    assert spool.deliver(lambda raw: "delivered", lambda: True) == spool_module.DeliveryReport()
    assert spool.status() == SpoolStatus(0, 0, None)

    def explode() -> str:
        raise RuntimeError("no data dir")

    broken = CaptureSpool(explode)
    assert broken.append(body(1)) == spool_module.AppendReport(False, 1, 0)
    assert broken.deliver(lambda raw: "delivered", lambda: True).delivered == 0
