"""Serving-process upkeep: background jobs (repeated on a timer, alive after a failing round,
wired per backend) and the garbage collector's tuning."""

from __future__ import annotations

import gc
import logging
import threading
from pathlib import Path

import pytest

from powercontext_runtime.cli.serve import _background_jobs
from powercontext_runtime.composition import Runtime
from powercontext_runtime.services.periodic import Periodic
from powercontext_runtime.settings import Settings


def test_a_failing_round_is_logged_by_type_and_the_job_keeps_running(
    caplog: pytest.LogCaptureFixture,
) -> None:
    rounds: list[int] = []
    done = threading.Event()

    def work() -> int:
        rounds.append(len(rounds))
        if len(rounds) == 1:
            raise RuntimeError("secret detail that must not be logged")
        if len(rounds) == 3:
            done.set()
        return len(rounds) - 1  # 1, then 2

    job = Periodic("demo_job", 0.01, work)
    with caplog.at_level(logging.INFO, logger="powercontext.periodic"):
        job.start()
        assert done.wait(timeout=10)
        job.stop()
    failures = [r for r in caplog.records if r.getMessage() == "demo_job_failed"]
    assert [getattr(r, "error_type", None) for r in failures] == ["RuntimeError"]
    assert "secret detail" not in caplog.text
    counts = [getattr(r, "count", None) for r in caplog.records if r.getMessage() == "demo_job"]
    assert counts[:2] == [1, 2]


def test_stop_ends_the_thread_before_the_next_round() -> None:
    calls: list[None] = []
    job = Periodic("idle_job", 3600, lambda: calls.append(None) or 0)
    job.start()
    job.stop()
    assert calls == []
    assert not job._thread.is_alive()


def test_sqlite_runtimes_compact_their_search_index_in_the_background(tmp_path: Path) -> None:
    runtime = Runtime.open(Settings.load(env={}, home=tmp_path / "home"))
    try:
        jobs = _background_jobs(runtime, runtime.settings)
        # The distill worker is on by default (it only proposes); the periodic jobs by event.
        assert [type(job).__name__ for job in jobs] == ["Periodic", "DistillWorker"]
        assert [job.event for job in jobs if isinstance(job, Periodic)] == [
            "search_index_compacted"
        ]
        flushing = Settings.load(env={"POWERCONTEXT_FLUSH_INTERVAL": "30"}, home=tmp_path / "home")
        jobs = _background_jobs(runtime, flushing)
        assert [job.event for job in jobs if isinstance(job, Periodic)] == [
            "periodic_flush",
            "search_index_compacted",
        ]
    finally:
        runtime.close()


def test_the_serving_process_freezes_start_up_objects_and_collects_less_often() -> None:
    from powercontext_runtime.cli.serve import tune_garbage_collector

    before = gc.get_threshold()
    try:
        tune_garbage_collector()
        assert gc.get_threshold() == (10_000, *before[1:])
        assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()
        gc.set_threshold(*before)
