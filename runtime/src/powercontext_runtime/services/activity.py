"""``get_activity``: a scope's activity by day, counts only (docs/ui.md § Activity)."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime

from ..contract.activity import (
    ActivityCounts,
    ActivityDay,
    ActivityResponse,
    CaptureState,
    DistillerCounts,
    GetActivityRequest,
    MemoryState,
    PackCounts,
)
from ..contract.review import PROPOSERS
from ..contract.system import EmbeddingStatus
from ..store.activity import DAY_MS, ActivityStore

__all__ = ["ActivityService"]

_COUNTS = tuple(ActivityCounts.model_fields)


class ActivityService:
    def __init__(self, store: ActivityStore, clock: Callable[[], float] = time.time) -> None:
        self._store = store
        self._clock = clock

    def activity(
        self, req: GetActivityRequest, packs: PackCounts, embeddings: EmbeddingStatus
    ) -> ActivityResponse:
        """Every day of the window, oldest first (zeros included), the window's totals, the
        capture journal's and Memory's state now, each proposer's candidates in the window, and
        the daemon's pack counters and embedding progress."""
        offset = req.utc_offset_minutes * 60_000
        today = (int(self._clock() * 1000) + offset) // DAY_MS
        first = today - req.days + 1
        found = self._store.activity(req.scope_id, first, req.days, offset)
        days = []
        totals = dict.fromkeys(_COUNTS, 0)
        for number in range(first, today + 1):
            counts = {name: found.days.get(number, {}).get(name, 0) for name in _COUNTS}
            for name, count in counts.items():
                totals[name] += count
            day = datetime.fromtimestamp(number * DAY_MS / 1000, tz=UTC).date().isoformat()
            days.append(ActivityDay(day=day, **counts))
        return ActivityResponse(
            scope_id=req.scope_id,
            utc_offset_minutes=req.utc_offset_minutes,
            days=days,
            totals=ActivityCounts(**totals),
            capture=CaptureState(
                captured=found.captured,
                flushed=found.flushed,
                waiting=max(found.captured - found.flushed, 0),
            ),
            memory=MemoryState(
                revision=found.revision or None, active=found.active, retired=found.retired
            ),
            distillers=[
                DistillerCounts(proposed_by=proposer, **found.proposers[proposer])
                for proposer in PROPOSERS
            ],
            packs=packs,
            embeddings=embeddings,
        )
