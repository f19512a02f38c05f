"""The flush cursor: which captured sources have already been turned into Memory.

Reading the window and committing its result are two transactions with the extractor in
between; the commit re-checks the cursor (compare-and-swap), so two concurrent flushes of one
window write once and the loser gets a typed conflict.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import Connection, insert, select, update

from ..contract.common import MemoryRef
from ..contract.memory import RememberMemoryRequest
from ..errors import ConflictError
from ..extraction import CapturedSource
from .database import Database, now_ms
from .memory import MemoryStore
from .schema import flush_runs, memory_heads, source_heads, sources

__all__ = ["FlushStore", "Window"]


@dataclass(frozen=True, slots=True)
class Window:
    """The next sources after the flush cursor: ``sources`` are its prompts (the ``content``
    sources, all an extractor ever sees), ``end`` the last position read, which the cursor
    moves to (task results in the window are passed over, never extracted), ``read`` how many
    positions that is."""

    cursor: int
    high_watermark: int
    sources: list[CapturedSource]
    end: int = 0
    read: int = 0


class FlushStore:
    def __init__(self, db: Database, memory: MemoryStore) -> None:
        self._db = db
        self._memory = memory

    def window(self, scope_id: str, limit: int) -> Window:
        with self._db.read() as conn:
            head = conn.execute(
                select(source_heads.c.last_position, source_heads.c.flush_cursor).where(
                    source_heads.c.scope_id == scope_id
                )
            ).first()
            if head is None:
                return Window(0, 0, [])
            rows = conn.execute(
                select(sources.c.position, sources.c.source_id, sources.c.name, sources.c.content)
                .where(sources.c.scope_id == scope_id, sources.c.position > head.flush_cursor)
                .order_by(sources.c.position)
                .limit(limit)
            ).all()
        return Window(
            head.flush_cursor,
            head.last_position,
            [
                CapturedSource(r.position, r.source_id, r.content)
                for r in rows
                if r.name == "content"
            ],
            rows[-1].position if rows else head.flush_cursor,
            len(rows),
        )

    def commit(
        self,
        scope_id: str,
        expected_cursor: int,
        new_cursor: int,
        entries: Sequence[RememberMemoryRequest],
        sources_processed: int = 0,
    ) -> MemoryRef | None:
        """Write the entries and advance the cursor in one transaction; the new Memory head.
        The run is recorded (counts only) in the same transaction."""

        def work(conn: Connection) -> MemoryRef | None:
            query = select(source_heads.c.flush_cursor).where(source_heads.c.scope_id == scope_id)
            if self._db.backend != "sqlite":
                query = query.with_for_update()
            current = conn.execute(query).scalar()
            if current != expected_cursor:
                raise ConflictError(
                    "another flush processed these sources first",
                    code="flush_conflict",
                    details={"expected_cursor": expected_cursor, "current_cursor": current},
                )
            before = _head(conn, scope_id)
            for entry in entries:
                self._memory.remember_in(conn, entry)
            conn.execute(
                update(source_heads)
                .where(source_heads.c.scope_id == scope_id)
                .values(flush_cursor=new_cursor)
            )
            after = _head(conn, scope_id)
            conn.execute(
                insert(flush_runs).values(
                    scope_id=scope_id,
                    to_cursor=new_cursor,
                    from_cursor=expected_cursor,
                    sources=sources_processed,
                    # Each new entry is one revision; a duplicate of an active entry is none.
                    entries=(after.revision if after else 0) - (before.revision if before else 0),
                    created_at=now_ms(),
                )
            )
            return after

        return self._db.write(work)

    def memory_head(self, scope_id: str) -> MemoryRef | None:
        with self._db.read() as conn:
            return _head(conn, scope_id)

    def pending_scopes(self, limit: int) -> list[str]:
        """Scopes with captured sources not flushed yet (for the optional periodic flush)."""
        with self._db.read() as conn:
            rows = conn.execute(
                select(source_heads.c.scope_id)
                .where(source_heads.c.last_position > source_heads.c.flush_cursor)
                .limit(limit)
            ).all()
        return [row.scope_id for row in rows]


def _head(conn: Connection, scope_id: str) -> MemoryRef | None:
    revision = conn.execute(
        select(memory_heads.c.revision).where(memory_heads.c.scope_id == scope_id)
    ).scalar()
    return MemoryRef.at(revision) if revision else None
