"""Background work the daemon repeats on a timer: the optional flush, search-index compaction.

One small thread per job, owned by the serving process (the supervisor when there are several
workers, so the work runs once per database, not once per worker). A failing round is logged
by exception type only and the next round runs as usual.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

__all__ = ["Periodic"]

_log = logging.getLogger("powercontext.periodic")


class Periodic:
    """Run ``work`` every ``interval`` seconds until stopped; ``work`` returns how much it did,
    which is logged as ``event`` when non-zero."""

    def __init__(self, event: str, interval: float, work: Callable[[], int]) -> None:
        self.event = event
        self._interval = interval
        self._work = work
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"powercontext-{event}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=self._interval + 5)

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                count = self._work()
            except Exception as exc:  # keep the loop alive; log the type only
                _log.warning(f"{self.event}_failed", extra={"error_type": type(exc).__name__})
                continue
            if count:
                _log.info(self.event, extra={"count": count})
