"""Task results: record (redacted, idempotent), list and read back (spec 06 § Task results).

The service owns the two rules that are not storage: every free-text field is redacted
(:mod:`..redaction`) before anything is stored, and a request without ``task_id`` gets a new
one. Nothing here logs: a task result is content (docs/security.md).
"""

from __future__ import annotations

import secrets
from collections.abc import Callable

from ..contract import limits
from ..contract.task_results import (
    GetTaskResultRequest,
    ListTaskResultsRequest,
    RecordedTaskResult,
    RecordTaskResultRequest,
    RecordTaskResultResponse,
    TaskCheck,
    TaskResult,
    TaskResultList,
    task_result_ref,
)
from ..redaction import redact
from ..store.task_results import TaskResultStore

__all__ = ["RecordOutcome", "TaskResultService", "redacted"]


class RecordOutcome:
    """What :meth:`TaskResultService.record` did: the response and whether it was new (201)
    or the same task result again (200)."""

    __slots__ = ("created", "response")

    def __init__(self, response: RecordTaskResultResponse, created: bool) -> None:
        self.response = response
        self.created = created


def _fit(text: str, cap: int, *, keep_end: bool = False) -> str:
    """``text`` within ``cap`` characters again: a replacement can be longer than the secret
    it hides (``--password x``), and the stored form must pass the model it was read with.
    An output tail keeps its end, anything else its beginning."""
    if len(text) <= cap:
        return text
    return text[-cap:] if keep_end else text[:cap]


def redacted(task: TaskResult) -> tuple[TaskResult, int]:
    """``task`` with every free-text field redacted (goal, paths, commands, output tails,
    session_ref), and how many secrets were replaced. ``host`` is a closed-pattern name and
    the task id an identifier: neither can hold the shapes the rules look for usefully, and
    the id must stay what the caller sent (it is the idempotency key)."""
    count = 0

    def clean(text: str, cap: int, *, keep_end: bool = False) -> str:
        nonlocal count
        text, found = redact(text)
        count += found
        return _fit(text, cap, keep_end=keep_end)

    result = TaskResult(
        goal=clean(task.goal, limits.TASK_GOAL_MAX_CHARS),
        outcome=task.outcome,
        changes=[
            change.model_copy(update={"path": clean(change.path, limits.TASK_PATH_MAX_CHARS)})
            for change in task.changes
        ],
        checks=[
            TaskCheck(
                command=clean(check.command, limits.TASK_COMMAND_MAX_CHARS),
                exit_status=check.exit_status,
                output_tail=clean(
                    check.output_tail, limits.TASK_OUTPUT_TAIL_MAX_CHARS, keep_end=True
                ),
            )
            for check in task.checks
        ],
        host=task.host,
        session_ref=(
            None
            if task.session_ref is None
            else clean(task.session_ref, limits.TASK_SESSION_REF_MAX_CHARS)
        ),
    )
    return result, count


class TaskResultService:
    def __init__(self, store: TaskResultStore) -> None:
        self._store = store
        #: Called after a new task result committed: the serving process's distill worker
        #: wakes (``Runtime.distill_worker``), instead of waiting for its next poll.
        self.on_record: Callable[[], None] = lambda: None

    def record(self, req: RecordTaskResultRequest) -> RecordOutcome:
        task_id = req.task_id or "tr_" + secrets.token_hex(8)
        task, count = redacted(req.task)
        position, created = self._store.record(req.scope_id, task_id, task)
        if created:
            self.on_record()
        response = RecordTaskResultResponse(
            status="recorded", source=task_result_ref(task_id), position=position, redactions=count
        )
        return RecordOutcome(response, created)

    def list(self, req: ListTaskResultsRequest) -> TaskResultList:
        return self._store.list(req.scope_id, req.limit, req.cursor)

    def get(self, req: GetTaskResultRequest) -> RecordedTaskResult:
        return self._store.get(req.scope_id, req.task_id)
