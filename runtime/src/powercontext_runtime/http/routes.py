"""Route table: one thin function per operation; each authorises its scope, then delegates.

Handlers are plain ``def`` functions so FastAPI runs them in its thread pool: the services
are synchronous SQLAlchemy code and must never block the event loop. The one exception is
``prepare_context`` on SQLite (see :func:`prepare_context`).
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from starlette.concurrency import run_in_threadpool

from ..composition import Runtime
from ..contract.activity import ActivityResponse, GetActivityRequest, PackCount, PackCounts
from ..contract.context import (
    ExplainContextResponse,
    PrepareContextRequest,
    PreparedContextResponse,
)
from ..contract.flush import FlushMemoryRequest, FlushMemoryResponse
from ..contract.memory import (
    CapturedSource,
    CaptureSourceRequest,
    CaptureSourceResponse,
    GetMemoryEntryRequest,
    GetSourceRequest,
    ListMemoryChangesRequest,
    ListMemoryEntriesRequest,
    ListMemoryEntryVersionsRequest,
    MemoryChanges,
    MemoryEntry,
    MemoryEntryHistory,
    MemoryEntryList,
    MemoryWriteResult,
    RememberMemoryRequest,
    RetireMemoryEntryRequest,
    ReviseMemoryEntryRequest,
    SearchMemoryRequest,
    SearchMemoryResponse,
)
from ..contract.system import Capabilities, ErrorEnvelope, Liveness, Readiness
from ..errors import UnavailableError
from ..metrics import CONTENT_TYPE, Metrics
from ..services.explain import explain
from ..store._records import iso_time
from .middleware import report

__all__ = ["error_responses", "router", "scoped_runtime"]

router = APIRouter()


def error_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    descriptions = {
        401: "Missing or invalid bearer token",
        403: "The token is not granted this scope or capability, or a foreign Origin",
        404: "Not found",
        409: "Conflict (typed code in the envelope)",
        413: "Body over the server limit",
        421: "The Host header does not name this runtime",
        422: "Invalid request",
        503: "Database unavailable",
    }
    # Every route refuses a Host that does not name the runtime (http/hosts.py).
    return {
        s: {"model": ErrorEnvelope, "description": descriptions[s]}
        for s in sorted({*statuses, 421})
    }


_SCOPED = error_responses(401, 403, 413, 422, 503)
_WRITE = error_responses(401, 403, 404, 409, 413, 422, 503)


def scoped_runtime(request: Request, scope_id: str) -> Runtime:
    """The runtime, after checking the caller may run this route's operation on ``scope_id``.

    The operation is the matched route's ``operation_id``, so what it requires comes from the
    one table MCP uses too (``services/auth.py``); a route without one needs ``admin``.
    """
    operation = getattr(request.scope.get("route"), "operation_id", None) or ""
    request.state.principal.authorize(operation, scope_id)
    return request.app.state.runtime


@router.get("/health/live", operation_id="get_liveness", tags=["health"])
def get_liveness() -> Liveness:
    return Liveness(status="ok")


READINESS_WRITE_CHECK_MAX_AGE = 1.0  # seconds; see get_readiness


@router.get(
    "/health/ready", operation_id="get_readiness", tags=["health"], responses=error_responses(503)
)
def get_readiness(request: Request) -> Readiness:
    # Ready when the database answers a read and can commit a write. The write check's outcome
    # (or the last real write's) stands for READINESS_WRITE_CHECK_MAX_AGE seconds, so a health
    # poll loop is no write load. (A comment, not a docstring: that would change the OpenAPI.)
    runtime: Runtime = request.app.state.runtime
    # `embeddings`: the semantic channel's progress (counted at most once a second).
    try:
        runtime.ping()
        runtime.db.check_writes(max_age=READINESS_WRITE_CHECK_MAX_AGE)
        embeddings = runtime.embedding_status()
    except UnavailableError as exc:
        raise UnavailableError(
            f"the runtime is not ready: {exc.message}", code="runtime_not_ready"
        ) from exc
    return Readiness(status="ready", database=runtime.backend, embeddings=embeddings)


@router.get(
    "/health",
    operation_id="get_health",
    tags=["health"],
    responses=error_responses(503),
    openapi_extra={"security": []},
)
def get_health(request: Request) -> Readiness:
    """The same answer as `/health/ready` (for monitors that probe `/health`): 200 when the
    runtime can serve, 503 `runtime_not_ready` when its database cannot be written. For a
    liveness probe that must not fail while the database is down, use `/health/live`."""
    return get_readiness(request)


@router.get(
    "/v1/capabilities",
    operation_id="get_capabilities",
    tags=["system"],
    responses=error_responses(401),
)
def get_capabilities(request: Request) -> Capabilities:
    # Truthful: exactly what this runtime serves; closed values, no tuning knobs. Search
    # modes: vector and hybrid only when the semantic channel is configured.
    runtime: Runtime = request.app.state.runtime
    return Capabilities(
        context_versions=["powercontext.prepared-context.v1"],
        bootstrap_versions=["powercontext.bootstrap-context.v1"],
        bootstrap_profiles=["powercontext.scope-bootstrap.v1"],
        artifact_families=["memory", "experience", "skill", "handoff"],
        source_types=["content", "task-result"],
        search_modes=runtime.search_modes,
        memory_extraction=True,
    )


@router.get(
    "/metrics",
    operation_id="get_metrics",
    tags=["system"],
    responses={
        200: {"content": {CONTENT_TYPE.split(";")[0]: {}}, "description": "Prometheus text"},
        **error_responses(401, 403),
    },
    response_class=Response,
)
def get_metrics(request: Request) -> Response:
    """Prometheus metrics (text exposition format): requests, latency, error codes, packs by
    status, search mode and empty reason, pack bytes, search fallbacks, embedding progress
    (pending versions, the worker's state). Labels are closed
    vocabularies; no scope, query, content or token is ever a label. Needs `read`."""
    metrics: Metrics = request.app.state.metrics
    runtime = request.app.state.runtime
    metrics.embeddings(runtime.embedding_status())
    metrics.distilled(runtime.distill_counts())
    return Response(metrics.render(), media_type=CONTENT_TYPE)


@router.post(
    "/v1/context/prepare",
    operation_id="prepare_context",
    tags=["context"],
    responses=_SCOPED,
    response_model=PreparedContextResponse,
    response_model_by_alias=True,
)
async def prepare_context(body: PrepareContextRequest, request: Request) -> JSONResponse:
    """A small, cited, byte-bounded, explicitly untrusted pack for one prompt (never stored)."""
    # Every prompt waits for this call. On SQLite it is a few milliseconds of CPU and WAL
    # readers never wait for a lock, so it runs on the event loop: the hop to the thread pool
    # and back cost more than the GIL time it could overlap. On OceanBase it waits on network
    # round trips and goes to the pool like every other operation.
    runtime = scoped_runtime(request, body.scope_id)
    principal = request.state.principal
    # With the semantic channel the query is embedded alongside (a model call with a
    # deadline): off the event loop when that is a network call.
    semantic = runtime.semantic
    if runtime.backend == "sqlite" and (semantic is None or not semantic.waits_on_network):
        outcome = runtime.context.prepare_reporting(body, principal)
    else:
        outcome = await run_in_threadpool(runtime.context.prepare_reporting, body, principal)
    pack = outcome.pack
    said = report(request.scope)
    said.update(pack_status=pack.status, pack_bytes=pack.content_bytes, search_mode=outcome.mode)
    if outcome.empty_reason:
        said["empty_reason"] = outcome.empty_reason
    # The scope's outcomes by day (Activity): a counter in memory, written in batches.
    runtime.recall.note(
        body.scope_id, "ready" if pack.status == "ready" else outcome.empty_reason or "no_match"
    )
    headers = None
    if semantic is not None:
        # The pack's schema has no mode, so which search ran is reported in headers
        # (docs/configuration.md § Semantic recall).
        headers = {"X-PowerContext-Search-Mode": outcome.mode}
        if outcome.fallback:
            said["search_fallback"] = outcome.fallback
            headers["X-PowerContext-Search-Fallback"] = outcome.fallback
    # Returned as a response, FastAPI skips re-validating and re-serialising the pack against
    # ``response_model`` (≈ 50 µs a prompt); the builder's output is the contract already
    # (property-tested), and ``response_model`` still documents it in the OpenAPI.
    return JSONResponse(pack.to_wire(), headers=headers)


@router.post(
    "/v1/context/explain",
    operation_id="explain_context",
    tags=["context"],
    responses=_SCOPED,
)
def explain_context(body: PrepareContextRequest, request: Request) -> ExplainContextResponse:
    """The pack `prepare_context` returns for the same request (`pack`, byte for byte: the
    same searches and builder run) and why each candidate was taken, truncated or left out:
    the channel that found it, its rank and score, whether it cleared the relevance floor,
    the budget left, the limit that cut it, a bootstrap receipt's de-duplication. Scores
    appear here, never in the pack. Nothing is stored or captured, and no pack is counted
    in the metrics. For the web console's Pack inspector; not an MCP tool."""
    runtime = scoped_runtime(request, body.scope_id)
    return explain(runtime.context, body, request.state.principal)


@router.post(
    "/v1/memory/remember", operation_id="remember_memory", tags=["memory"], responses=_WRITE
)
def remember_memory(body: RememberMemoryRequest, request: Request) -> MemoryWriteResult:
    return scoped_runtime(request, body.scope_id).memory.remember(body)


@router.post("/v1/memory/search", operation_id="search_memory", tags=["memory"], responses=_SCOPED)
def search_memory(body: SearchMemoryRequest, request: Request) -> SearchMemoryResponse:
    return scoped_runtime(request, body.scope_id).memory.search(body)


@router.post(
    "/v1/memory/entries/get",
    operation_id="get_memory_entry",
    tags=["memory"],
    responses=error_responses(401, 403, 404, 413, 422, 503),
)
def get_memory_entry(body: GetMemoryEntryRequest, request: Request) -> MemoryEntry:
    return scoped_runtime(request, body.scope_id).memory.get(body)


@router.post(
    "/v1/memory/entries/list",
    operation_id="list_memory_entries",
    tags=["memory"],
    responses=_SCOPED,
)
def list_memory_entries(body: ListMemoryEntriesRequest, request: Request) -> MemoryEntryList:
    """The head's entries in creation order, paged; optionally only those of one `state`,
    `kind` and/or `tag` (each answered from an index, never a scan of the scope)."""
    return scoped_runtime(request, body.scope_id).memory.list(body)


@router.post(
    "/v1/memory/entries/versions",
    operation_id="list_memory_entry_versions",
    tags=["memory"],
    responses=error_responses(401, 403, 404, 413, 422, 503),
)
def list_memory_entry_versions(
    body: ListMemoryEntryVersionsRequest, request: Request
) -> MemoryEntryHistory:
    """An entry's immutable versions, newest first, each with its exact citation (the
    revision it was written in: `get_memory_entry` re-reads it byte for byte), what made it,
    and the revisions it was current in. 404 `memory_not_found` for an unknown entry."""
    return scoped_runtime(request, body.scope_id).memory.versions(body)


@router.post(
    "/v1/memory/entries/revise",
    operation_id="revise_memory_entry",
    tags=["memory"],
    responses=_WRITE,
)
def revise_memory_entry(body: ReviseMemoryEntryRequest, request: Request) -> MemoryWriteResult:
    return scoped_runtime(request, body.scope_id).memory.revise(body)


@router.post(
    "/v1/memory/entries/retire",
    operation_id="retire_memory_entry",
    tags=["memory"],
    responses=_WRITE,
)
def retire_memory_entry(body: RetireMemoryEntryRequest, request: Request) -> MemoryWriteResult:
    return scoped_runtime(request, body.scope_id).memory.retire(body)


@router.post(
    "/v1/memory/changes", operation_id="list_memory_changes", tags=["memory"], responses=_SCOPED
)
def list_memory_changes(body: ListMemoryChangesRequest, request: Request) -> MemoryChanges:
    return scoped_runtime(request, body.scope_id).memory.changes(body)


@router.post(
    "/v1/memory/flush",
    operation_id="flush_memory",
    tags=["memory"],
    responses=error_responses(401, 403, 409, 413, 422, 503),
)
def flush_memory(body: FlushMemoryRequest, request: Request) -> FlushMemoryResponse:
    """Turn the next window of captured sources into Memory (cursor and entries commit together)."""
    return scoped_runtime(request, body.scope_id).flush.flush(body)


@router.post(
    "/v1/sources/content",
    operation_id="capture_content_source",
    tags=["sources"],
    status_code=202,
    responses=_WRITE,
)
def capture_content_source(body: CaptureSourceRequest, request: Request) -> CaptureSourceResponse:
    return scoped_runtime(request, body.scope_id).sources.capture(body)


@router.post(
    "/v1/sources/get",
    operation_id="get_source",
    tags=["sources"],
    responses=error_responses(401, 403, 404, 413, 422, 503),
)
def get_source(body: GetSourceRequest, request: Request) -> CapturedSource:
    """The source captured under `source_id` in the scope, as captured: its content (untrusted
    text), metadata, position in the capture journal, when it was captured, and whether a
    flush has processed it. What a candidate's `source_refs` point at. 404 `source_not_found`.
    For the web console's Review Inbox; not an MCP tool."""
    return scoped_runtime(request, body.scope_id).sources.get(body)


@router.post("/v1/activity/get", operation_id="get_activity", tags=["system"], responses=_SCOPED)
def get_activity(body: GetActivityRequest, request: Request) -> ActivityResponse:
    """What happened in a scope, by day, counts only (never content): prompts captured,
    flush runs and the entries they added, Memory writes by operation, bootstrap receipts by
    state; the capture journal and Memory now; and the daemon's pack counters since it
    started (every scope: a prepared pack is never written down). For the web console."""
    runtime = scoped_runtime(request, body.scope_id)
    metrics: Metrics = request.app.state.metrics
    packs = PackCounts(
        scope="daemon",
        since=iso_time(int(metrics.started_at * 1000)),
        counts=[
            PackCount(operation=op, status=status, mode=mode, reason=reason, count=count)  # type: ignore[arg-type]
            for op, status, mode, reason, count in metrics.pack_counts()
            if op in ("prepare_context", "bootstrap_context")
        ],
    )
    return runtime.activity.activity(body, packs, runtime.embedding_status())
