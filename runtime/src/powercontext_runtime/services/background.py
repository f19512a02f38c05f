"""The thread loop the serving process's background workers share (embedding, distill).

Both workers run rounds in one daemon thread of the serving process (the supervisor with
``serve --workers``): a first round at start to catch up with what was written while the
runtime was down, then every ``interval`` seconds or when a local write calls :meth:`wake`,
again at once while a round says more is waiting, and with a doubling back-off (up to
:attr:`MAX_BACKOFF`) while a round raises. The last round's state is published to a state
file, because with several worker processes the ones answering ``/health/ready`` and
``/metrics`` are not the one running the thread. Kept in one place so a fix to the loop (its
back-off, its stop, how often it writes the file) reaches both workers.
"""

from __future__ import annotations

import json
import logging
import threading
from pathlib import Path
from typing import Any, ClassVar, NamedTuple, Protocol

from ..files import write_private_file


class WorkerSnapshot(Protocol):
    """What a worker publishes: a NamedTuple with at least these fields (never content)."""

    @property
    def state(self) -> str: ...
    @property
    def error(self) -> str | None: ...  # the failing round's exception type
    @property
    def last_round(self) -> float: ...  # epoch seconds

    def _asdict(self) -> dict[str, Any]: ...


class _Published(NamedTuple):
    key: tuple[str, str | None]  # state, error
    at: float
    detail: object


class BackgroundWorker:
    """A daemon thread running :meth:`_round` until :meth:`stop`.

    A subclass sets the class attributes and implements :meth:`_round` (the work, its log line
    and its :meth:`_publish`, returning how long to wait before the next one) and
    :meth:`_failed` (publish the failing state); :meth:`_woken` may defer a round after a wake.
    A failing round is logged by exception type only.
    """

    MAX_BACKOFF: ClassVar[float] = 60.0
    THREAD_NAME: ClassVar[str]
    LOG: ClassVar[logging.Logger]
    FAILED_EVENT: ClassVar[str]  # log event of a round that raised
    UNWRITTEN_EVENT: ClassVar[str]  # log event of a state file that could not be written
    PUBLISH_SECONDS: ClassVar[float]  # an unchanged state is rewritten at most this often

    def __init__(self, interval: float, state_file: Path | None) -> None:
        self._interval = interval
        self._state_file = state_file
        self._published: _Published | None = None
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread = threading.Thread(target=self._run, name=self.THREAD_NAME, daemon=True)

    def start(self) -> None:
        if self._state_file is not None:  # a previous run's: not this worker's state
            self._state_file.unlink(missing_ok=True)
        self._thread.start()

    def wake(self) -> None:
        self._wake.set()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        self._thread.join(timeout=self._interval + 30)

    def _round(self) -> float:
        """One round; returns the delay before the next (0: go again at once)."""
        raise NotImplementedError

    def _failed(self, error_type: str) -> None:
        """Record a round that raised ``error_type`` (the back-off is the loop's)."""
        raise NotImplementedError

    def _woken(self) -> None:
        """Called after a wake, before the round (the embedding worker waits for writes to
        pause there); nothing by default."""

    def _run(self) -> None:
        delay = 0.0  # a first round at start: catch up with what was written while down
        while not self._stop.is_set():
            if self._wake.wait(delay):
                self._wake.clear()
                self._woken()
            if self._stop.is_set():
                return
            try:
                delay = self._round()
            except Exception as exc:  # keep the loop alive; log the type only
                self.LOG.warning(self.FAILED_EVENT, extra={"error_type": type(exc).__name__})
                self._failed(type(exc).__name__)
                delay = min(max(delay * 2, self._interval), self.MAX_BACKOFF)

    def _publish(self, snapshot: WorkerSnapshot, detail: object = None) -> None:
        """Write ``snapshot`` to the state file: on a change of state or error kind at once,
        else at most every :attr:`PUBLISH_SECONDS`, and then, when ``detail`` (e.g. counts) is
        given, only if it changed. A write error is logged; the loop goes on (the surfaces then
        show an older state)."""
        if self._state_file is None:
            return
        key, now, last = (snapshot.state, snapshot.error), snapshot.last_round, self._published
        if last is not None and last.key == key:
            recent = now - last.at < self.PUBLISH_SECONDS
            if recent or (detail is not None and last.detail == detail):
                return
        try:
            write_private_file(self._state_file, json.dumps(snapshot._asdict()))
        except OSError as exc:
            self.LOG.warning(self.UNWRITTEN_EVENT, extra={"error_type": type(exc).__name__})
            return
        self._published = _Published(key, now, detail)
