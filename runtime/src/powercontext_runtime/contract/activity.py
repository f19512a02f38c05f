"""``get_activity``: what happened in a scope, by day, counts only (docs/ui.md § Activity).

Never content, never a prompt: how many prompts were captured, flushes run, entries written,
bootstrap packs delivered and context packs prepared (by outcome), per day; plus the daemon's
own pack counters (its metrics).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from .common import ScopeId, StrictModel
from .review import ProposedBy
from .system import EmbeddingStatus

__all__ = [
    "ACTIVITY_DAYS_MAX",
    "ActivityCounts",
    "ActivityDay",
    "ActivityResponse",
    "CaptureState",
    "DistillerCounts",
    "GetActivityRequest",
    "MemoryState",
    "PackCount",
    "PackCounts",
]

ACTIVITY_DAYS_MAX = 90


class GetActivityRequest(StrictModel):
    scope_id: ScopeId
    #: Days ending today (in ``utc_offset_minutes``), today included.
    days: Annotated[int, Field(ge=1, le=ACTIVITY_DAYS_MAX)] = 14
    #: Where days begin: minutes east of UTC (the browser's offset; 0 is UTC).
    utc_offset_minutes: Annotated[int, Field(ge=-720, le=840)] = 0


class ActivityCounts(StrictModel):
    prompts_captured: int  # content sources captured (the hooks' prompt capture)
    flush_runs: int  # flushes that processed captured sources
    sources_flushed: int
    entries_from_flush: int  # Memory entries those flushes added
    remembered: int  # Memory writes by operation (flush's entries included)
    revised: int
    retired: int
    #: Bootstrap receipts by state (kept 30 days): ``pending`` packs were never claimed.
    bootstrap_injected: int
    bootstrap_failed: int
    bootstrap_skipped: int
    bootstrap_pending: int
    #: Packs prepare_context answered for the scope, by outcome (counted in quarter hours, so
    #: a day in an offset that is not a multiple of 15 minutes is rounded to one).
    packs_ready: int  # at least one item
    packs_no_match: int  # empty: nothing relevant
    packs_no_memory: int  # empty: the scope had nothing to recall
    packs_budget: int  # empty: candidates, none of which fitted max_bytes


class ActivityDay(ActivityCounts):
    day: str  # YYYY-MM-DD, in the requested offset


class CaptureState(StrictModel):
    captured: int  # every source the scope's journal holds
    flushed: int  # the flush cursor
    waiting: int


class MemoryState(StrictModel):
    revision: int | None  # the Memory head
    active: int
    retired: int


class DistillerCounts(StrictModel):
    """A proposer's candidates in the window: how many it proposed (created in the window) and
    how many of its candidates were approved or rejected then (decided in the window, whenever
    proposed), so a reviewer sees which distiller's proposals hold up."""

    proposed_by: ProposedBy
    proposed: int
    approved: int
    rejected: int


class PackCount(StrictModel):
    operation: Literal["prepare_context", "bootstrap_context"]
    status: str
    mode: str
    reason: str
    count: int


class PackCounts(StrictModel):
    """The daemon's pack counters (``powercontext_context_packs_total`` in /metrics): every
    scope, since the daemon started, by search mode too (a scope's own outcomes by day are
    the ``packs_*`` counts)."""

    scope: Literal["daemon"]
    since: str
    counts: list[PackCount]


class ActivityResponse(StrictModel):
    scope_id: str
    utc_offset_minutes: int
    days: list[ActivityDay]  # oldest first, every day of the window
    totals: ActivityCounts  # the window's
    capture: CaptureState
    memory: MemoryState
    #: Every proposer (``agent`` and each distiller), zeros included, in a fixed order.
    distillers: list[DistillerCounts]
    packs: PackCounts
    embeddings: EmbeddingStatus  # the daemon's (every scope), like ``packs``
