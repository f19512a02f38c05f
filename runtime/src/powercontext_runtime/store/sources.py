"""The per-scope journal of captured sources (spec 02 § Sources).

Positions are gap-free per scope because they come from a locked per-scope counter row, not
from an auto-increment. Capture is idempotent by ``source_id``: the same payload returns the
original position, a different payload under the same id is a typed conflict. A captured
source is read back by its ``source_id`` (:meth:`SourceStore.get`, the console's evidence).
"""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import Connection, insert, select, update

from ..contract.common import SourceRef
from ..contract.memory import (
    CapturedSource,
    CaptureSourceRequest,
    CaptureSourceResponse,
    GetSourceRequest,
)
from ..errors import ConflictError, NotFoundError
from ._records import canonical_json, iso_time, sha256_hex
from .database import Database, now_ms
from .schema import source_heads, sources

__all__ = ["SourceStore"]


class SourceStore:
    def __init__(self, db: Database) -> None:
        self._db = db

    def capture(self, req: CaptureSourceRequest) -> CaptureSourceResponse:
        position, _ = self.append(
            req.scope_id,
            SourceRef(name="content", source_id=req.source_id),
            req.content,
            req.metadata,
            conflict=(
                "source_conflict",
                "a different payload was already captured under this source_id",
            ),
        )
        return CaptureSourceResponse(
            status="accepted",
            source=SourceRef(name="content", source_id=req.source_id),
            position=position,
        )

    def append(
        self,
        scope_id: str,
        ref: SourceRef,
        content: str,
        metadata: dict[str, Any] | None,
        *,
        conflict: tuple[str, str],
    ) -> tuple[int, bool]:
        """Journal ``content`` under ``ref`` at the scope's next position; ``(position, new)``.

        Idempotent by ``source_id``: the same name, content and metadata again return the
        original position (``new`` false); anything else under that id is a 409: ``conflict`` is
        its (code, message).
        The one write path of every source kind, so positions stay gap-free whatever is
        captured (content sources, task results).
        """
        digest = sha256_hex("content-source-v1", content, metadata)

        def work(conn: Connection) -> tuple[int, bool]:
            position = self._lock_counter(conn, scope_id)
            existing = conn.execute(
                select(sources.c.position, sources.c.name, sources.c.payload_hash).where(
                    sources.c.scope_id == scope_id, sources.c.source_id == ref.source_id
                )
            ).first()
            if existing is not None:
                if existing.payload_hash != digest or existing.name != ref.name:
                    raise ConflictError(conflict[1], code=conflict[0])
                return existing.position, False
            position += 1
            conn.execute(
                insert(sources).values(
                    scope_id=scope_id,
                    position=position,
                    source_id=ref.source_id,
                    name=ref.name,
                    payload_hash=digest,
                    content=content,
                    metadata=None if metadata is None else canonical_json(metadata),
                    created_at=now_ms(),
                )
            )
            conn.execute(
                update(source_heads)
                .where(source_heads.c.scope_id == scope_id)
                .values(last_position=position)
            )
            return position, True

        return self._db.write(work)

    def get(self, req: GetSourceRequest) -> CapturedSource:
        """The source captured under ``source_id`` in the scope (the unique index's row), or
        ``404 source_not_found``."""
        with self._db.read() as conn:
            row = conn.execute(
                select(
                    sources.c.position,
                    sources.c.name,
                    sources.c.content,
                    sources.c.metadata,
                    sources.c.created_at,
                ).where(sources.c.scope_id == req.scope_id, sources.c.source_id == req.source_id)
            ).first()
            cursor = None
            if row is not None:
                cursor = conn.execute(
                    select(source_heads.c.flush_cursor).where(
                        source_heads.c.scope_id == req.scope_id
                    )
                ).scalar()
        if row is None:
            raise NotFoundError(
                "no source with this source_id in the scope", code="source_not_found"
            )
        return CapturedSource(
            source=SourceRef(name=row.name, source_id=req.source_id),
            position=row.position,
            content=row.content,
            metadata=None if row.metadata is None else json.loads(row.metadata),
            created_at=iso_time(row.created_at),
            flushed=row.position <= int(cursor or 0),
        )

    def _lock_counter(self, conn: Connection, scope_id: str) -> int:
        query = select(source_heads.c.last_position).where(source_heads.c.scope_id == scope_id)
        if self._db.backend != "sqlite":
            query = query.with_for_update()
        value = conn.execute(query).scalar()
        if value is None:
            conn.execute(
                insert(source_heads).values(scope_id=scope_id, last_position=0, flush_cursor=0)
            )
            return 0
        return int(value)
