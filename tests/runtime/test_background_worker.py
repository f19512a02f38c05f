"""The thread loop the embedding and distill workers share (services/background.py): a round
that raises is logged by type, backed off and followed by the next; what reaches the state
file, and when (the surfaces of ``serve --workers`` read only that file)."""

from __future__ import annotations

import builtins
import json
import logging
import threading
from pathlib import Path
from typing import NamedTuple

import pytest

from powercontext_runtime.services.background import BackgroundWorker

_log = logging.getLogger("powercontext.test-worker")


class _State(NamedTuple):
    state: str
    error: str | None
    last_round: float


class _Worker(BackgroundWorker):
    """Rounds from a script: an exception class raises, a number is the delay it returns."""

    THREAD_NAME = "powercontext-test-worker"
    LOG = _log
    FAILED_EVENT = "test_round_failed"
    UNWRITTEN_EVENT = "test_state_unwritten"
    PUBLISH_SECONDS = 10.0

    def __init__(self, script: list[object], state_file: Path | None = None) -> None:
        super().__init__(interval=0.01, state_file=state_file)
        self.script = script
        self.failures: list[str] = []
        self.rounds = 0
        self.done = threading.Event()

    def _round(self) -> float:
        self.rounds += 1
        step = self.script.pop(0) if self.script else 3600.0
        if not self.script:
            self.done.set()
        if isinstance(step, type) and issubclass(step, BaseException):
            raise step("detail that must not be logged")
        assert isinstance(step, float)
        return step

    def _failed(self, error_type: str) -> None:
        self.failures.append(error_type)


def test_a_raising_round_is_logged_by_type_and_the_loop_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # A failure, a round asking to go again at once, then one that waits an hour.
    worker = _Worker([RuntimeError, 0.0, 3600.0])
    with caplog.at_level(logging.WARNING, logger=_log.name):
        worker.start()
        assert worker.done.wait(timeout=30)
        worker.stop()
    assert worker.rounds == 3  # the hour-long wait ended with stop(), not with a fourth round
    assert worker.failures == ["RuntimeError"]
    failed = [r for r in caplog.records if r.getMessage() == "test_round_failed"]
    assert [getattr(r, "error_type", None) for r in failed] == ["RuntimeError"]
    assert "detail that must not be logged" not in caplog.text
    assert not worker._thread.is_alive()


def test_start_removes_a_previous_runs_state_and_stop_prevents_the_next_round(
    tmp_path: Path,
) -> None:
    state_file = tmp_path / "worker-state.json"
    state_file.write_text('{"state": "failing"}', encoding="utf-8")
    worker = _Worker([3600.0], state_file=state_file)
    worker.start()
    assert worker.done.wait(timeout=30)
    assert not state_file.exists()  # nothing published yet: the old state is not this run's
    worker.stop()
    assert worker.rounds == 1


def _published(path: Path) -> dict[str, object]:
    return json.loads(path.read_text(encoding="utf-8"))


def test_a_new_state_is_published_at_once_the_same_one_at_most_every_publish_seconds(
    tmp_path: Path,
) -> None:
    state_file = tmp_path / "worker-state.json"
    worker = _Worker([], state_file=state_file)
    worker._publish(_State("idle", None, 100.0))
    assert _published(state_file)["last_round"] == 100.0
    worker._publish(_State("idle", None, 105.0))  # same state, 5 s later: not rewritten
    assert _published(state_file)["last_round"] == 100.0
    worker._publish(_State("failing", "OperationalError", 106.0))  # a change: at once
    assert _published(state_file) == {
        "state": "failing", "error": "OperationalError", "last_round": 106.0,
    }  # fmt: skip
    worker._publish(_State("failing", "OperationalError", 116.5))  # 10.5 s later: refreshed
    assert _published(state_file)["last_round"] == 116.5


def test_with_a_detail_an_unchanged_state_is_rewritten_only_when_the_detail_changed(
    tmp_path: Path,
) -> None:
    state_file = tmp_path / "worker-state.json"
    worker = _Worker([], state_file=state_file)
    worker._publish(_State("idle", None, 100.0), {"offline/proposed": 1})
    worker._publish(_State("idle", None, 200.0), {"offline/proposed": 1})  # same counts
    assert _published(state_file)["last_round"] == 100.0
    worker._publish(_State("idle", None, 205.0), {"offline/proposed": 2})  # counts moved
    assert _published(state_file)["last_round"] == 205.0
    worker._publish(_State("idle", None, 206.0), {"offline/proposed": 3})  # but within 10 s
    assert _published(state_file)["last_round"] == 205.0


def test_a_state_file_that_cannot_be_written_is_logged_and_tried_again(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    blocker = tmp_path / "state"
    blocker.write_text("a file where the state's folder should be", encoding="utf-8")
    state_file = blocker / "worker-state.json"
    worker = _Worker([], state_file=state_file)
    with caplog.at_level(logging.WARNING, logger=_log.name):
        worker._publish(_State("idle", None, 100.0))  # no exception reaches the loop
    (record,) = caplog.records
    assert record.getMessage() == "test_state_unwritten"
    assert issubclass(getattr(builtins, record.error_type), OSError)
    blocker.unlink()
    worker._publish(_State("idle", None, 101.0))  # the failed write did not count as published
    assert _published(state_file)["last_round"] == 101.0
