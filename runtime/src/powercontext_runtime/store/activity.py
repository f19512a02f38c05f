"""Counts by day for the console's Activity page (``get_activity``): never content.

Each count is one grouped query over a covering index range of one scope
(``ix_sources_created``, ``ix_memory_revisions_created``, ``ix_flush_runs_created``,
``ix_bootstrap_receipts_scope``), read in one snapshot. Days are computed in SQL as
``(created_at + offset) DIV 86400000``, so both backends bucket alike.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from sqlalchemy import Connection, bindparam, func, select

from .database import Database
from .schema import (
    bootstrap_receipts,
    flush_runs,
    memory_facets,
    memory_heads,
    memory_revisions,
    source_heads,
    sources,
)

__all__ = ["DAY_MS", "ActivityStore", "DayCounts", "ScopeActivity"]

DAY_MS = 86_400_000


@dataclass
class ScopeActivity:
    """Per day number (days since the epoch in the offset), the counts by name."""

    days: dict[int, dict[str, int]] = field(default_factory=lambda: defaultdict(dict))
    captured: int = 0
    flushed: int = 0
    revision: int = 0
    active: int = 0
    retired: int = 0


DayCounts = dict[str, int]


def _day(column: object, offset_ms: int) -> object:
    return ((column + bindparam("offset", offset_ms)) // DAY_MS).label("day")  # type: ignore[operator]


class ActivityStore:
    def __init__(self, db: Database) -> None:
        self._db = db

    def activity(self, scope_id: str, since_ms: int, offset_ms: int) -> ScopeActivity:
        """Everything since ``since_ms`` (epoch ms, the first day's start), by day."""
        found = ScopeActivity()
        with self._db.read() as conn:
            self._sources(conn, found, scope_id, since_ms, offset_ms)
            self._revisions(conn, found, scope_id, since_ms, offset_ms)
            self._flushes(conn, found, scope_id, since_ms, offset_ms)
            self._receipts(conn, found, scope_id, since_ms, offset_ms)
            self._state(conn, found, scope_id)
        return found

    @staticmethod
    def _sources(
        conn: Connection, found: ScopeActivity, scope_id: str, since: int, offset: int
    ) -> None:
        s = sources
        day = _day(s.c.created_at, offset)
        rows = conn.execute(
            select(day, func.count())
            .where(s.c.scope_id == scope_id, s.c.created_at >= since)
            .group_by(day)
        )
        for number, count in rows:
            found.days[int(number)]["prompts_captured"] = int(count)

    @staticmethod
    def _revisions(
        conn: Connection, found: ScopeActivity, scope_id: str, since: int, offset: int
    ) -> None:
        r = memory_revisions
        day = _day(r.c.created_at, offset)
        rows = conn.execute(
            select(day, r.c.operation, func.count())
            .where(r.c.scope_id == scope_id, r.c.created_at >= since)
            .group_by(day, r.c.operation)
        )
        names = {"remember": "remembered", "revise": "revised", "retire": "retired"}
        for number, operation, count in rows:
            found.days[int(number)][names.get(operation, operation)] = int(count)

    @staticmethod
    def _flushes(
        conn: Connection, found: ScopeActivity, scope_id: str, since: int, offset: int
    ) -> None:
        f = flush_runs
        day = _day(f.c.created_at, offset)
        rows = conn.execute(
            select(day, func.count(), func.sum(f.c.sources), func.sum(f.c.entries))
            .where(f.c.scope_id == scope_id, f.c.created_at >= since)
            .group_by(day)
        )
        for number, runs, processed, entries in rows:
            counts = found.days[int(number)]
            counts["flush_runs"] = int(runs)
            counts["sources_flushed"] = int(processed or 0)
            counts["entries_from_flush"] = int(entries or 0)

    @staticmethod
    def _receipts(
        conn: Connection, found: ScopeActivity, scope_id: str, since: int, offset: int
    ) -> None:
        b = bootstrap_receipts
        day = _day(b.c.created_at, offset)
        rows = conn.execute(
            select(day, b.c.state, func.count())
            .where(b.c.scope_id == scope_id, b.c.created_at >= since)
            .group_by(day, b.c.state)
        )
        for number, state, count in rows:
            found.days[int(number)][f"bootstrap_{state}"] = int(count)

    @staticmethod
    def _state(conn: Connection, found: ScopeActivity, scope_id: str) -> None:
        head = conn.execute(
            select(source_heads.c.last_position, source_heads.c.flush_cursor).where(
                source_heads.c.scope_id == scope_id
            )
        ).first()
        if head is not None:
            found.captured, found.flushed = int(head.last_position), int(head.flush_cursor)
        found.revision = int(
            conn.execute(
                select(memory_heads.c.revision).where(memory_heads.c.scope_id == scope_id)
            ).scalar()
            or 0
        )
        f = memory_facets  # one ``all`` row per entry, with its state: a covering range
        for state, count in conn.execute(
            select(f.c.state, func.count())
            .where(f.c.scope_id == scope_id, f.c.facet == "all", f.c.value == "")
            .group_by(f.c.state)
        ):
            if state == "active":
                found.active = int(count)
            else:
                found.retired += int(count)
