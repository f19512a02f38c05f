"""Per-scope recall outcomes over time, for the console's Activity page: counts only.

A prepared pack is never written down, so the prompt path only adds one to a counter in memory
(:meth:`RecallLedger.note`, a dictionary increment under a lock); a thread of the ledger's own
writes the sums every ``FLUSH_SECONDS`` as one upsert per (scope, quarter hour, outcome), and
:meth:`RecallLedger.close` writes the rest. A process that dies loses at most that interval's
counts. Each serving process (``--workers N``) keeps its own ledger; the upsert adds, so their
sums meet in the table.

Quarter hours, because every UTC offset in use is a multiple of 15 minutes: the Activity page's
days, in the browser's offset, are whole numbers of buckets.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable

from sqlalchemy import Connection, delete

from ._records import adding_upserts
from .database import Database
from .schema import recall_counts

__all__ = ["BUCKET_MS", "OUTCOMES", "RecallLedger"]

_log = logging.getLogger("powercontext.recall")

BUCKET_MS = 900_000
OUTCOMES = ("ready", "no_match", "no_memory", "budget")
FLUSH_SECONDS = 10.0
#: Counters kept in memory between writes; beyond it new (scope, bucket, outcome) keys are
#: dropped rather than grow without bound while the database is unwritable.
MAX_PENDING = 10_000
#: Rows older than this are deleted (the Activity page shows at most 90 days).
KEEP_MS = 92 * 86_400_000


_UPSERT = adding_upserts(recall_counts, ("scope_id", "bucket", "outcome"), "count")


class RecallLedger:
    def __init__(
        self,
        db: Database,
        flush_seconds: float = FLUSH_SECONDS,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._db = db
        self._flush_seconds = flush_seconds
        self._clock = clock
        self._lock = threading.Lock()
        self._pending: Counter[tuple[str, int, str]] = Counter()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._pruned_bucket = 0

    def note(self, scope_id: str, outcome: str) -> None:
        """Count one prepared pack's outcome (one of :data:`OUTCOMES`) now."""
        key = (scope_id, int(self._clock() * 1000) // BUCKET_MS, outcome)
        with self._lock:
            if key in self._pending or len(self._pending) < MAX_PENDING:
                self._pending[key] += 1
            if self._thread is None:  # started by the first pack, in whichever process
                self._thread = threading.Thread(
                    target=self._run, name="powercontext-recall-counts", daemon=True
                )
                self._thread.start()

    def flush(self) -> int:
        """Write what was counted since the last write; returns how many counters."""
        with self._lock:
            pending, self._pending = self._pending, Counter()
        if not pending:
            return 0
        try:
            self._db.write(lambda conn: self._add(conn, pending.items()))
        except Exception:
            with self._lock:  # kept for the next round (within the bound)
                for key, count in pending.items():
                    if key in self._pending or len(self._pending) < MAX_PENDING:
                        self._pending[key] += count
            raise
        return len(pending)

    def _add(self, conn: Connection, counted: Iterable[tuple[tuple[str, int, str], int]]) -> None:
        rows = [
            {"scope_id": scope, "bucket": bucket, "outcome": outcome, "count": count}
            for (scope, bucket, outcome), count in sorted(counted)
        ]
        conn.execute(_UPSERT[conn.dialect.name], rows)  # type: ignore[arg-type]
        oldest = (int(self._clock() * 1000) - KEEP_MS) // BUCKET_MS
        if oldest // 96 != self._pruned_bucket // 96:  # at most once a day per process
            conn.execute(delete(recall_counts).where(recall_counts.c.bucket < oldest))
            self._pruned_bucket = oldest

    def _run(self) -> None:
        while not self._stop.wait(self._flush_seconds):
            try:
                self.flush()
            except Exception as exc:  # keep counting; log the type only
                _log.warning("recall_counts_failed", extra={"error_type": type(exc).__name__})

    def close(self) -> None:
        """Stop the writer and write what is left (a failure is logged, not raised)."""
        self._stop.set()
        thread = self._thread
        if thread is not None:
            thread.join(timeout=self._flush_seconds + 5)
        try:
            self.flush()
        except Exception as exc:
            _log.warning("recall_counts_failed", extra={"error_type": type(exc).__name__})
