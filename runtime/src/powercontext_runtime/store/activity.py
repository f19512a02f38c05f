"""Counts by day for the console's Activity page (``get_activity``): never content.

Every count reads one scope's covering index over ``(scope_id, created_at, …)``
(``ix_sources_named``, ``ix_memory_revisions_created``, ``ix_flush_runs_created``,
``ix_bootstrap_receipts_scope``) or, for the packs prepared, the quarter-hour counters' primary
key (``recall_counts``, store/recall_counts.py), in one snapshot, and no row is sorted:

* On SQLite each day is its own range (``created_at`` between the day's bounds), summed in one
  pass, through the driver cursor with fixed SQL: a grouped query would sort every row of the
  window (≈ 140 ms for 100k writes in a day, against ≈ 20 ms for the ranges).
* On OceanBase one grouped query per table (``(created_at + offset) DIV 86400000``): a round
  trip per day would cost more than the server's aggregation.

Each proposer's candidates (proposed, approved, rejected in the window) are one query of
conditional sums (the proposers are a closed set, so nothing is grouped or sorted) on both
backends over the scope's ``candidates`` rows updated since the window began: a
candidate's ``updated_at`` is never before its ``created_at`` and is its decision time once
decided (approved and rejected candidates never change again), so that range holds every
candidate proposed or decided in the window. Candidates are what people review, a few per
task, so the scope's rows are few.

The Memory totals need no scan either: active entries are the scope's indexed documents (the
``#docs`` row of ``search_terms``), retired ones a range of ``memory_facets``.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from sqlalchemy import Connection, bindparam, case, func, select

from ..contract.review import PROPOSERS
from ._sqlite import sqlite_driver
from .database import Database
from .fulltext import DOCS_TERM
from .recall_counts import BUCKET_MS, OUTCOMES
from .schema import (
    bootstrap_receipts,
    candidates,
    flush_runs,
    memory_facets,
    memory_heads,
    memory_revisions,
    recall_counts,
    search_terms,
    source_heads,
    sources,
)

__all__ = ["DAY_MS", "ActivityStore", "ScopeActivity"]

DAY_MS = 86_400_000
_OPERATIONS = (("remember", "remembered"), ("revise", "revised"), ("retire", "retired"))
_STATES = ("injected", "failed", "skipped", "pending")


@dataclass
class ScopeActivity:
    """Per day number (days since the epoch in the offset), the counts by name."""

    days: dict[int, dict[str, int]] = field(default_factory=lambda: defaultdict(dict))
    captured: int = 0
    flushed: int = 0
    revision: int = 0
    active: int = 0
    retired: int = 0
    #: Per proposer (``proposed_by``, NULL read as ``agent``): proposed, approved, rejected.
    proposers: dict[str, dict[str, int]] = field(default_factory=dict)


def _counted(column: object, value: str) -> object:
    return func.coalesce(func.sum(case((column == value, 1), else_=0)), 0)


def _queries() -> list[tuple[object, object, list[str], list[object]]]:
    """(table, its aggregate columns, the names they count, extra conditions) for every table
    counted. Prompts are the ``content`` sources: recorded task results are not prompts."""
    r, f, b = memory_revisions, flush_runs, bootstrap_receipts
    return [
        (sources, [func.count()], ["prompts_captured"], [sources.c.name == "content"]),
        (
            r,
            [_counted(r.c.operation, op) for op, _ in _OPERATIONS],
            [n for _, n in _OPERATIONS],
            [],
        ),
        (
            f,
            [
                func.count(),
                func.coalesce(func.sum(f.c.sources), 0),
                func.coalesce(func.sum(f.c.entries), 0),
            ],
            ["flush_runs", "sources_flushed", "entries_from_flush"],
            [],
        ),
        (b, [_counted(b.c.state, s) for s in _STATES], [f"bootstrap_{s}" for s in _STATES], []),
    ]


_QUERIES = _queries()


def _sqlite_sum(column: str, value: str) -> str:
    return f"coalesce(sum({column} = '{value}'), 0)"


_CREATED = " WHERE scope_id = ? AND created_at >= ? AND created_at < ?"

#: The same aggregates as fixed SQL for the SQLite driver cursor, one day's range each:
#: (statement, the names its columns count, the unit of its range column in milliseconds).
_RANGED = [
    (
        "SELECT count(*) FROM sources WHERE scope_id = ? AND name = 'content' "
        "AND created_at >= ? AND created_at < ?",
        ["prompts_captured"],
        1,
    ),
    (
        "SELECT "
        + ", ".join(_sqlite_sum("operation", op) for op, _ in _OPERATIONS)
        + " FROM memory_revisions"
        + _CREATED,
        [name for _, name in _OPERATIONS],
        1,
    ),
    (
        "SELECT count(*), coalesce(sum(sources), 0), coalesce(sum(entries), 0) FROM flush_runs"
        + _CREATED,
        ["flush_runs", "sources_flushed", "entries_from_flush"],
        1,
    ),
    (
        "SELECT "
        + ", ".join(_sqlite_sum("state", state) for state in _STATES)
        + " FROM bootstrap_receipts"
        + _CREATED,
        [f"bootstrap_{state}" for state in _STATES],
        1,
    ),
    (
        "SELECT "
        + ", ".join(f"coalesce(sum(count * (outcome = '{o}')), 0)" for o in OUTCOMES)
        + " FROM recall_counts WHERE scope_id = ? AND bucket >= ? AND bucket < ?",
        [f"packs_{outcome}" for outcome in OUTCOMES],
        BUCKET_MS,
    ),
]


class ActivityStore:
    def __init__(self, db: Database) -> None:
        self._db = db
        self._sqlite = db.backend == "sqlite"

    def activity(self, scope_id: str, first_day: int, days: int, offset_ms: int) -> ScopeActivity:
        """The ``days`` days from day number ``first_day`` (days since the epoch, shifted by
        ``offset_ms``), and the scope's state now."""
        found = ScopeActivity()
        since = first_day * DAY_MS - offset_ms
        with self._db.read() as conn:
            if self._sqlite:
                self._by_ranges(conn, found, scope_id, first_day, days, offset_ms)
            else:
                self._by_groups(conn, found, scope_id, since, offset_ms)
                self._recall_by_groups(conn, found, scope_id, since, offset_ms)
            self._state(conn, found, scope_id)
            self._proposers(conn, found, scope_id, since)
        return found

    @staticmethod
    def _proposers(conn: Connection, found: ScopeActivity, scope_id: str, since: int) -> None:
        # One row of conditional sums, one per (proposer, count): the proposers are a closed
        # set, and this way nothing is grouped or sorted (SQLite would sort for a GROUP BY).
        c = candidates
        decided = c.c.updated_at >= since
        proposer = func.coalesce(c.c.proposed_by, "agent")
        wanted = {
            "proposed": c.c.created_at >= since,
            "approved": (c.c.status == "approved") & decided,
            "rejected": (c.c.status == "rejected") & decided,
        }
        columns = [
            func.coalesce(func.sum(case(((proposer == who) & test, 1), else_=0)), 0)
            for who in PROPOSERS
            for test in wanted.values()
        ]
        row = conn.execute(select(*columns).where(c.c.scope_id == scope_id, decided)).one()
        counts = iter(row)
        for who in PROPOSERS:
            found.proposers[who] = {name: int(next(counts)) for name in wanted}

    @staticmethod
    def _recall_by_groups(
        conn: Connection, found: ScopeActivity, scope_id: str, since: int, offset_ms: int
    ) -> None:
        c = recall_counts
        day = ((c.c.bucket * BUCKET_MS + bindparam("offset", offset_ms)) // DAY_MS).label("day")
        rows = conn.execute(
            select(day, c.c.outcome, func.sum(c.c.count))
            .where(c.c.scope_id == scope_id, c.c.bucket >= since // BUCKET_MS)
            .group_by(day, c.c.outcome)
        )
        for number, outcome, count in rows:
            found.days[int(number)][f"packs_{outcome}"] = int(count)

    def _by_ranges(
        self,
        conn: Connection,
        found: ScopeActivity,
        scope_id: str,
        first_day: int,
        days: int,
        offset_ms: int,
    ) -> None:
        driver = sqlite_driver(conn)
        for sql, names, unit in _RANGED:
            for number in range(first_day, first_day + days):
                start = (number * DAY_MS - offset_ms) // unit
                row = driver.execute(sql, (scope_id, start, start + DAY_MS // unit)).fetchone()
                if row and any(row):
                    found.days[number].update(zip(names, map(int, row), strict=True))

    @staticmethod
    def _by_groups(
        conn: Connection, found: ScopeActivity, scope_id: str, since: int, offset_ms: int
    ) -> None:
        for table, columns, names, conditions in _QUERIES:
            created = table.c.created_at  # type: ignore[attr-defined]
            day = ((created + bindparam("offset", offset_ms)) // DAY_MS).label("day")
            rows = conn.execute(
                select(day, *columns)
                .where(table.c.scope_id == scope_id, created >= since, *conditions)  # type: ignore[attr-defined]
                .group_by(day)
            )
            for number, *counts in rows:
                found.days[int(number)].update(zip(names, map(int, counts), strict=True))

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
        t = search_terms  # the scope's indexed documents: exactly its active entries
        found.active = int(
            conn.execute(
                select(t.c.df).where(
                    t.c.scope_id == scope_id, t.c.family == "memory", t.c.term == DOCS_TERM
                )
            ).scalar()
            or 0
        )
        f = memory_facets
        found.retired = int(
            conn.execute(
                select(func.count()).where(
                    f.c.scope_id == scope_id,
                    f.c.facet == "all",
                    f.c.value == "",
                    f.c.state == "inactive",
                )
            ).scalar_one()
        )
