"""Recorded task results: captured sources named ``task-result`` (spec 06 § Task results).

A task result is one row of the scope's source journal (``sources``), written through
:meth:`SourceStore.append` like every source, so it takes a gap-free position, is exported,
imported and cited like one, and is immutable. Its content is the canonical JSON of the
(already redacted) :class:`TaskResult`; this module only writes and reads that form.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import and_, or_, select

from ..contract.limits import TASK_RESULT_PREFIX
from ..contract.task_results import (
    RecordedTaskResult,
    TaskResult,
    TaskResultList,
    TaskResultSummary,
    task_result_ref,
)
from ..errors import InvalidRequestError, NotFoundError
from ._records import canonical_json, decode_cursor, encode_cursor, iso_time
from .database import Database
from .schema import sources
from .sources import SourceStore

__all__ = ["TASK_RESULT", "TaskResultStore", "stored_form"]

TASK_RESULT = "task-result"


def stored_form(task: TaskResult) -> str:
    """The content a task result is stored (and exported, and hashed) as: canonical JSON with
    every field present, so equal task results are equal bytes."""
    return canonical_json(task.model_dump(mode="json"))


class TaskResultStore:
    def __init__(self, db: Database, sources: SourceStore) -> None:
        self._db = db
        self._sources = sources

    def record(self, scope_id: str, task_id: str, task: TaskResult) -> tuple[int, bool]:
        """Journal ``task`` as ``task-result/<task_id>``: ``(position, new)``; the same task
        again is the original position, anything else under the id ``task_result_conflict``."""
        return self._sources.append(
            scope_id,
            task_result_ref(task_id),
            stored_form(task),
            None,
            conflict=(
                "task_result_conflict",
                "a different task result was already recorded under this task_id",
            ),
        )

    def list(self, scope_id: str, limit: int, cursor: str | None) -> TaskResultList:
        """Newest first (recording time, then position), paged; one range of
        ``ix_sources_named`` per page, never the scope's prompts."""
        s = sources
        query = (
            select(s.c.position, s.c.source_id, s.c.content, s.c.created_at)
            .where(s.c.scope_id == scope_id, s.c.name == TASK_RESULT)
            .order_by(s.c.created_at.desc(), s.c.position.desc())
            .limit(limit + 1)
        )
        if cursor:
            created_at, position = _decode(cursor)
            query = query.where(
                or_(
                    s.c.created_at < created_at,
                    and_(s.c.created_at == created_at, s.c.position < position),
                )
            )
        with self._db.read() as conn:
            rows = conn.execute(query).all()
        page = rows[:limit]
        next_cursor = (
            encode_cursor(page[-1].created_at, str(page[-1].position))
            if len(rows) > limit
            else None
        )
        return TaskResultList(task_results=[_summary(row) for row in page], next_cursor=next_cursor)

    def get(self, scope_id: str, task_id: str) -> RecordedTaskResult:
        """The task result recorded as ``task_id``, or 404 ``task_result_not_found`` (also for
        a content source captured under that id before the prefix was reserved)."""
        ref = task_result_ref(task_id)
        with self._db.read() as conn:
            row = conn.execute(
                select(sources.c.position, sources.c.content, sources.c.created_at).where(
                    sources.c.scope_id == scope_id,
                    sources.c.source_id == ref.source_id,
                    sources.c.name == TASK_RESULT,
                )
            ).first()
        if row is None:
            raise NotFoundError(
                "no task result with this task_id in the scope", code="task_result_not_found"
            )
        return RecordedTaskResult(
            source=ref,
            position=row.position,
            created_at=iso_time(row.created_at),
            task=_task(row.content),
        )


def _task(content: str) -> TaskResult:
    # Stored by this module (or imported after the same check): strict parsing of our own JSON.
    return TaskResult.model_validate_json(content, strict=False)


def _summary(row: Any) -> TaskResultSummary:
    task = _task(row.content)
    return TaskResultSummary(
        source=task_result_ref(row.source_id[len(TASK_RESULT_PREFIX) :]),
        position=row.position,
        created_at=iso_time(row.created_at),
        outcome=task.outcome,
        goal=task.goal,
        host=task.host,
        session_ref=task.session_ref,
        changes=len(task.changes),
        checks=len(task.checks),
        failed_checks=sum(check.exit_status != 0 for check in task.checks),
    )


def _decode(cursor: str) -> tuple[int, int]:
    created_at, position = decode_cursor(cursor)
    if not position.isdecimal() or len(position) > 18:  # binds as a 64-bit int
        raise InvalidRequestError("cursor is not one this server issued")
    return created_at, int(position)
