"""Task result routes: record one (201 new, 200 the same again), list them, read one back."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from ..contract.task_results import (
    GetTaskResultRequest,
    ListTaskResultsRequest,
    RecordedTaskResult,
    RecordTaskResultRequest,
    RecordTaskResultResponse,
    TaskResultList,
)
from .routes import error_responses, scoped_runtime

__all__ = ["task_result_router"]

task_result_router = APIRouter(tags=["task-results"])
_READ = error_responses(401, 403, 404, 413, 422, 503)


@task_result_router.post(
    "/v1/task-results/record",
    operation_id="record_task_result",
    status_code=201,
    responses={
        200: {"model": RecordTaskResultResponse, "description": "The same task result again"},
        **error_responses(401, 403, 409, 413, 422, 503),
    },
)
def record_task_result(
    body: RecordTaskResultRequest, request: Request, response: Response
) -> RecordTaskResultResponse:
    """Record what a task did as exact, immutable evidence: the captured source
    `task-result/<task_id>`, citable in `source_refs` with `name` `task-result`. Every field is
    bounded; secrets are redacted before storage (`redactions` says how many). The same
    `task_id` with the same task again answers 200 and the original position; with another
    task, 409 `task_result_conflict`."""
    outcome = scoped_runtime(request, body.scope_id).task_results.record(body)
    if not outcome.created:
        response.status_code = 200
    return outcome.response


@task_result_router.post("/v1/task-results/list", operation_id="list_task_results", responses=_READ)
def list_task_results(body: ListTaskResultsRequest, request: Request) -> TaskResultList:
    """The scope's task results, newest first, each summarised (goal, outcome, counts),
    paged with `next_cursor`."""
    return scoped_runtime(request, body.scope_id).task_results.list(body)


@task_result_router.post("/v1/task-results/get", operation_id="get_task_result", responses=_READ)
def get_task_result(body: GetTaskResultRequest, request: Request) -> RecordedTaskResult:
    """One task result exactly as stored (redacted). 404 `task_result_not_found`."""
    return scoped_runtime(request, body.scope_id).task_results.get(body)
