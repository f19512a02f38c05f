"""Run several callables at the same instant and keep every result and every exception.

Race tests need all contenders released together, otherwise the "race" is just a sequence of
calls that happens to run on threads. A ``threading.Barrier`` does that without sleeps. An
exception raised on a worker thread would otherwise be printed and lost (the test would pass),
so each outcome records it and the test decides which failures are acceptable.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

__all__ = ["Outcome", "run_at_once"]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Outcome(Generic[T]):
    """What one contender ended with: a value, or the exception it raised."""

    value: T | None = None
    error: BaseException | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


def run_at_once(calls: Sequence[Callable[[], T]], *, timeout: float = 120) -> list[Outcome[T]]:
    """Start every call behind one barrier; outcomes in the order of ``calls``.

    ``timeout`` bounds both the barrier and the join, so a deadlock fails the test instead of
    hanging the suite until pytest-timeout kills the whole run.
    """
    barrier = threading.Barrier(len(calls))
    outcomes: list[Outcome[T] | None] = [None] * len(calls)

    def contender(index: int, call: Callable[[], T]) -> None:
        try:
            barrier.wait(timeout)
            outcomes[index] = Outcome(value=call())
        except BaseException as exc:  # recorded and judged by the test, never swallowed
            outcomes[index] = Outcome(error=exc)

    threads = [
        threading.Thread(target=contender, args=(i, call), name=f"race-{i}", daemon=True)
        for i, call in enumerate(calls)
    ]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + timeout
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    stuck = [thread.name for thread in threads if thread.is_alive()]
    assert not stuck, f"contenders still running after {timeout}s: {stuck}"
    return [outcome for outcome in outcomes if outcome is not None]
