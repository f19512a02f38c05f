"""The local bootstrap receipt store: private, atomic, bounded, expiring and crash-proof."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from powercontext_hook_kit import receipts
from powercontext_hook_kit.receipts import (
    MAX_SESSIONS,
    RECEIPTS_FILE_NAME,
    RETENTION_SECONDS,
    ReceiptStore,
    session_key,
)

NOW = 1_750_000_000.0


class Clock:
    def __init__(self, now: float = NOW) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def store(tmp_path: Path, clock: Clock) -> ReceiptStore:
    return ReceiptStore(str(tmp_path / "data"), clock=clock)


def file_of(tmp_path: Path) -> Path:
    return tmp_path / "data" / RECEIPTS_FILE_NAME


def test_put_get_consume_clear(store: ReceiptStore) -> None:
    assert store.get("s1") is None
    assert store.put("s1", "rcpt_1") and store.put("s2", "rcpt_2")
    assert (store.get("s1"), store.get("s2")) == ("rcpt_1", "rcpt_2")
    assert store.put("s1", "rcpt_1b")  # only the most recent per session
    assert store.get("s1") == "rcpt_1b"
    assert store.consume("s1", "rcpt_other") is None  # a newer receipt is not thrown away
    assert store.consume("s1") == "rcpt_1b"
    assert store.get("s1") is None and store.consume("s1") is None
    store.clear("s2")
    assert store.get("s2") is None


def test_no_session_changes_nothing(store: ReceiptStore, tmp_path: Path) -> None:
    assert store.put(None, "rcpt_1") is False
    assert store.get(None) is None and store.consume(None) is None
    store.clear(None)
    assert not (tmp_path / "data").exists()


def test_an_unusable_receipt_id_is_not_stored(store: ReceiptStore) -> None:
    for bad in ("", "a b", "x" * 129, "é"):
        assert store.put("s1", bad) is False
    assert store.get("s1") is None


def test_the_file_is_private_and_holds_no_raw_session_id(
    store: ReceiptStore, tmp_path: Path
) -> None:
    session = "SESSION-SENTINEL-0001"
    store.put(session, "rcpt_1")
    path = file_of(tmp_path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    text = path.read_text()
    assert "SENTINEL" not in text
    document = json.loads(text)
    assert document == {
        "schema": "powercontext.hook-receipts.v1",
        "sessions": {session_key(session): {"receipt_id": "rcpt_1", "stored_at": int(NOW)}},
    }
    leftovers = [name for name in os.listdir(path.parent) if name.endswith(".tmp")]
    assert leftovers == []


def test_the_mode_is_0600_whatever_the_umask(store: ReceiptStore, tmp_path: Path) -> None:
    previous = os.umask(0)
    try:
        store.put("s1", "rcpt_1")
    finally:
        os.umask(previous)
    assert stat.S_IMODE(file_of(tmp_path).stat().st_mode) == 0o600


def test_bounded_oldest_dropped(store: ReceiptStore, clock: Clock, tmp_path: Path) -> None:
    for index in range(MAX_SESSIONS + 20):
        clock.now = NOW + index
        assert store.put(f"s{index}", f"rcpt_{index}")
    sessions = json.loads(file_of(tmp_path).read_text())["sessions"]
    assert len(sessions) == MAX_SESSIONS
    assert store.get("s0") is None and store.get("s19") is None
    assert store.get("s20") == "rcpt_20"
    assert store.get(f"s{MAX_SESSIONS + 19}") == f"rcpt_{MAX_SESSIONS + 19}"
    assert file_of(tmp_path).stat().st_size < 64 * 1024


def test_entries_expire_with_the_server_retention(
    store: ReceiptStore, clock: Clock, tmp_path: Path
) -> None:
    store.put("old", "rcpt_old")
    clock.now = NOW + RETENTION_SECONDS
    assert store.get("old") == "rcpt_old"
    clock.now = NOW + RETENTION_SECONDS + 1
    assert store.get("old") is None
    store.put("new", "rcpt_new")
    assert session_key("old") not in file_of(tmp_path).read_text()  # dropped when rewritten


def test_a_clock_that_jumped_back_drops_future_entries(store: ReceiptStore, clock: Clock) -> None:
    store.put("s1", "rcpt_1")
    clock.now = NOW - 2 * 24 * 60 * 60
    assert store.get("s1") is None


@pytest.mark.parametrize(
    "content",
    [
        b"",
        b"{not json",
        b"\x00\xff" * 10,
        b"[]",
        b'{"schema":"powercontext.hook-receipts.v2","sessions":{}}',
        b'{"schema":"powercontext.hook-receipts.v1","sessions":[]}',
        b'{"schema":"powercontext.hook-receipts.v1","sessions":{"k":{"receipt_id":1}}}',
        b" " * (300 * 1024),
    ],
)
def test_a_corrupt_file_is_empty_and_rewritten(
    store: ReceiptStore, tmp_path: Path, content: bytes
) -> None:
    path = file_of(tmp_path)
    path.parent.mkdir(parents=True)
    path.write_bytes(content)
    assert store.get("s1") is None
    assert store.consume("s1") is None
    store.clear("s1")
    document = json.loads(path.read_text())
    assert document == {"schema": "powercontext.hook-receipts.v1", "sessions": {}}
    assert store.put("s1", "rcpt_1") and store.get("s1") == "rcpt_1"


def test_invalid_entries_are_dropped_and_valid_ones_kept(
    store: ReceiptStore, tmp_path: Path
) -> None:
    path = file_of(tmp_path)
    path.parent.mkdir(parents=True)
    good = session_key("good")
    sessions = {
        good: {"receipt_id": "rcpt_good", "stored_at": int(NOW)},
        "not-a-hash": {"receipt_id": "rcpt_x", "stored_at": int(NOW)},
        session_key("spaced"): {"receipt_id": "rcpt x", "stored_at": int(NOW)},
    }
    path.write_text(json.dumps({"schema": "powercontext.hook-receipts.v1", "sessions": sessions}))
    assert store.get("good") == "rcpt_good"
    assert store.get("spaced") is None
    store.clear("nobody")
    assert list(json.loads(path.read_text())["sessions"]) == [good]


def test_io_errors_make_an_empty_store_never_a_crash(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    store = ReceiptStore(str(blocker / "data"))
    assert store.put("s1", "rcpt_1") is False
    assert store.get("s1") is None and store.consume("s1") is None
    store.clear("s1")

    def broken() -> str:
        raise RuntimeError("no home directory")

    lazy = ReceiptStore(broken)
    assert lazy.put("s1", "rcpt_1") is False and lazy.get("s1") is None
    lazy.clear("s1")


def test_a_directory_in_place_of_the_file_is_left_alone(
    store: ReceiptStore, tmp_path: Path
) -> None:
    file_of(tmp_path).mkdir(parents=True)
    assert store.put("s1", "rcpt_1") is False
    assert store.get("s1") is None
    assert file_of(tmp_path).is_dir()
    assert [name for name in os.listdir(tmp_path / "data") if name.endswith(".tmp")] == []


def test_clear_without_a_file_writes_nothing(store: ReceiptStore, tmp_path: Path) -> None:
    store.clear("s1")
    assert not file_of(tmp_path).exists()


def test_concurrent_writers_lose_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The give-up path (a lost update, by design) is tested below; here the lock must hold
    # even when an overloaded machine deschedules a holder for longer than the usual wait.
    monkeypatch.setattr(receipts, "_LOCK_WAIT_SECONDS", 60.0)
    store = ReceiptStore(str(tmp_path / "data"))
    errors: list[BaseException] = []

    def work(worker: int) -> None:
        try:
            for index in range(20):
                assert store.put(f"w{worker}-{index}", f"rcpt_{worker}_{index}")
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(worker,)) for worker in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    sessions = json.loads(file_of(tmp_path).read_text())["sessions"]
    assert len(sessions) == 120


def test_concurrent_processes_lose_nothing(tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "from powercontext_hook_kit import receipts\n"
        "receipts._LOCK_WAIT_SECONDS = 60.0  # see test_concurrent_writers_lose_nothing\n"
        "store = receipts.ReceiptStore(sys.argv[1])\n"
        "for i in range(25):\n"
        "    assert store.put(f'p{sys.argv[2]}-{i}', f'rcpt_{sys.argv[2]}_{i}')\n"
    )
    directory = str(tmp_path / "data")
    processes = [
        subprocess.Popen([sys.executable, "-c", code, directory, str(worker)])
        for worker in range(4)
    ]
    assert [process.wait(timeout=60) for process in processes] == [0, 0, 0, 0]
    assert len(json.loads(file_of(tmp_path).read_text())["sessions"]) == 100


def test_a_held_lock_delays_but_never_blocks(tmp_path: Path) -> None:
    import fcntl
    import time

    store = ReceiptStore(str(tmp_path / "data"))
    assert store.put("s0", "rcpt_0")
    lock = os.open(str(tmp_path / "data" / (RECEIPTS_FILE_NAME + ".lock")), os.O_RDWR)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        started = time.monotonic()
        assert store.put("s1", "rcpt_1")
        assert time.monotonic() - started < 2.0
    finally:
        os.close(lock)
    assert store.get("s1") == "rcpt_1"
