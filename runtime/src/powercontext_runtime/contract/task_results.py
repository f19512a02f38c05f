"""Task results: bounded, exact evidence of what an agent's task did (spec 06 § Task results).

A task result is recorded once (``record_task_result``) and stored immutably as a captured
source ``task-result/<task_id>`` in the scope's source journal, so a candidate's
``source_refs`` can cite it like any captured prompt. Every field is bounded here, before
anything is stored; secrets are redacted by the service (:mod:`..redaction`) after these
checks. The same :class:`TaskResult` model reads the stored form back and checks an imported
one, so what the runtime serves is always something it would have accepted.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field

from . import limits
from .common import ScopeId, SourceRef, StrictModel

__all__ = [
    "GetTaskResultRequest",
    "ListTaskResultsRequest",
    "RecordTaskResultRequest",
    "RecordTaskResultResponse",
    "RecordedTaskResult",
    "TaskChange",
    "TaskCheck",
    "TaskId",
    "TaskResult",
    "TaskResultList",
    "TaskResultSummary",
    "task_result_ref",
]


def _unicode(value: str) -> str:
    # JSON may carry lone surrogates that no database can store; the message never echoes.
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("must be valid Unicode (no lone surrogates)") from None
    return value


def _not_blank(value: str) -> str:
    if not value.strip():
        raise ValueError("must not be blank")
    return _unicode(value)


def _bounded(max_chars: int, *, min_chars: int = 1) -> Any:
    return Field(min_length=min_chars, max_length=max_chars)


Goal = Annotated[str, _bounded(limits.TASK_GOAL_MAX_CHARS), AfterValidator(_not_blank)]
Path = Annotated[str, _bounded(limits.TASK_PATH_MAX_CHARS), AfterValidator(_not_blank)]
Command = Annotated[str, _bounded(limits.TASK_COMMAND_MAX_CHARS), AfterValidator(_not_blank)]
OutputTail = Annotated[
    str, _bounded(limits.TASK_OUTPUT_TAIL_MAX_CHARS, min_chars=0), AfterValidator(_unicode)
]
Lines = Annotated[int, Field(ge=0, le=limits.TASK_LINES_MAX)]
Host = Annotated[str, _bounded(limits.TASK_HOST_MAX_CHARS), Field(pattern=limits.TASK_HOST_PATTERN)]
SessionRef = Annotated[str, _bounded(limits.TASK_SESSION_REF_MAX_CHARS), AfterValidator(_not_blank)]
#: The idempotency key: hooks derive it from the host's session id and turn.
TaskId = Annotated[str, _bounded(limits.TASK_ID_MAX_CHARS), Field(pattern=limits.TASK_ID_PATTERN)]
Outcome = Literal["succeeded", "failed", "abandoned"]


class TaskChange(StrictModel):
    """One file the task changed and how many lines it added and removed."""

    path: Path
    added: Lines
    removed: Lines


class TaskCheck(StrictModel):
    """One check the task ran (a test, a linter …), in the order run. ``exit_status`` -1 is
    unknown (killed, timed out, never reported)."""

    command: Command
    exit_status: Annotated[int, Field(ge=-1, le=255)]
    output_tail: OutputTail = ""


class TaskResult(StrictModel):
    """What a task set out to do, what it changed, what it checked and how it ended."""

    goal: Goal
    outcome: Outcome
    changes: Annotated[list[TaskChange], Field(max_length=limits.TASK_CHANGES_MAX)] = []
    checks: Annotated[list[TaskCheck], Field(max_length=limits.TASK_CHECKS_MAX)] = []
    host: Host | None = None
    session_ref: SessionRef | None = None


class RecordTaskResultRequest(StrictModel):
    scope_id: ScopeId
    #: Omitted: the runtime makes one (``tr_<16 hex>``), so a retry would record twice.
    task_id: TaskId | None = None
    task: TaskResult


def task_result_ref(task_id: str) -> SourceRef:
    """The evidence reference of the task result recorded under ``task_id``."""
    return SourceRef(name="task-result", source_id=limits.TASK_RESULT_PREFIX + task_id)


class RecordTaskResultResponse(StrictModel):
    status: Literal["recorded"]
    source: SourceRef
    position: int = Field(ge=1)  # its place in the scope's source journal
    redactions: int = Field(ge=0)  # secrets replaced by [REDACTED] before storage


class ListTaskResultsRequest(StrictModel):
    scope_id: ScopeId
    limit: Annotated[int, Field(ge=1, le=limits.LIST_LIMIT_MAX)] = limits.LIST_LIMIT_DEFAULT
    cursor: Annotated[str, Field(min_length=1, max_length=512)] | None = None


class TaskResultSummary(StrictModel):
    """One recorded task result in a listing: what it was and how it ended, with counts."""

    source: SourceRef
    position: int
    created_at: str
    outcome: Outcome
    goal: str  # as stored (redacted)
    host: str | None
    session_ref: str | None
    changes: int
    checks: int
    failed_checks: int  # checks whose exit status was not 0 (unknown, -1, included)


class TaskResultList(StrictModel):
    task_results: list[TaskResultSummary]  # newest first
    next_cursor: str | None


class GetTaskResultRequest(StrictModel):
    scope_id: ScopeId
    task_id: TaskId


class RecordedTaskResult(StrictModel):
    """A task result read back exactly as stored (secrets already redacted). Untrusted text
    written by an agent's host; never logged."""

    source: SourceRef
    position: int
    created_at: str
    task: TaskResult
