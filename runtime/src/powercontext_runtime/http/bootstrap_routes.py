"""Scope bootstrap, receipts, Context References and Handoff routes (spec 05)."""

from __future__ import annotations

from fastapi import APIRouter, Request

from ..contract.bootstrap import (
    BootstrapContextRequest,
    BootstrapContextResponse,
    BootstrapOverview,
    CommitHandoffRequest,
    ContextReferences,
    GetBootstrapOverviewRequest,
    GetContextReferencesRequest,
    GetHandoffRequest,
    HandoffResult,
    NextHandoff,
    NextHandoffRequest,
    RecordReceiptRequest,
    RecordReceiptResponse,
    SetContextReferencesRequest,
)
from .middleware import report
from .routes import error_responses, scoped_runtime

__all__ = ["bootstrap_router"]

bootstrap_router = APIRouter()
_READ = error_responses(401, 403, 404, 413, 422, 503)
_WRITE = error_responses(401, 403, 404, 409, 413, 422, 503)


@bootstrap_router.post(
    "/v1/context/bootstrap",
    operation_id="bootstrap_context",
    tags=["context"],
    responses=_WRITE,
    response_model=BootstrapContextResponse,
    response_model_by_alias=True,
)
def bootstrap_context(body: BootstrapContextRequest, request: Request) -> BootstrapContextResponse:
    """The curated SessionStart pack (off unless ``enabled``), with a delivery receipt."""
    runtime = scoped_runtime(request, body.scope_id)
    answer = runtime.bootstrap.bootstrap(body, request.state.principal)
    # Counted like prepare's packs (status, bytes); ``skipped`` when bootstrap is off.
    report(request.scope).update(pack_status=answer.status, pack_bytes=answer.content_bytes)
    return answer


@bootstrap_router.post(
    "/v1/context/bootstrap/receipts",
    operation_id="record_bootstrap_receipt",
    tags=["context"],
    responses=_WRITE,
)
def record_bootstrap_receipt(body: RecordReceiptRequest, request: Request) -> RecordReceiptResponse:
    """Claim a pending receipt (``injected``) before printing the pack, or mark it ``failed``."""
    runtime = scoped_runtime(request, body.scope_id)
    return runtime.bootstrap.record_receipt(body, request.state.principal)


@bootstrap_router.post(
    "/v1/context/bootstrap/overview",
    operation_id="get_bootstrap_overview",
    tags=["context"],
    responses=_READ,
)
def get_bootstrap_overview(
    body: GetBootstrapOverviewRequest, request: Request
) -> BootstrapOverview:
    """What the scope's next SessionStart would consider, read the way bootstrap reads it:
    its Context References, each participating scope's tagged entries with their
    eligibility (forbidden scopes and secret kinds named), the Handoff head, the queued
    revision and the latest ones, and the live delivery receipts — states and the citations
    of the items this token may read (others only counted, as ``withheld``); never content
    or digests. Reads only. For the web console; not an MCP tool."""
    runtime = scoped_runtime(request, body.scope_id)
    return runtime.bootstrap.overview(body, request.state.principal)


@bootstrap_router.post(
    "/v1/handoff/commit", operation_id="commit_handoff", tags=["handoff"], responses=_WRITE
)
def commit_handoff(body: CommitHandoffRequest, request: Request) -> HandoffResult:
    """Commit the scope's next Handoff revision (CAS on ``base``; null for the first)."""
    return scoped_runtime(request, body.scope_id).bootstrap.commit_handoff(body)


@bootstrap_router.post(
    "/v1/handoff/get", operation_id="get_handoff", tags=["handoff"], responses=_READ
)
def get_handoff(body: GetHandoffRequest, request: Request) -> HandoffResult:
    return scoped_runtime(request, body.scope_id).bootstrap.get_handoff(body)


@bootstrap_router.post(
    "/v1/handoff/next", operation_id="next_handoff", tags=["handoff"], responses=_READ
)
def next_handoff(body: NextHandoffRequest, request: Request) -> NextHandoff:
    """The Handoff revision queued for the scope's next session, if any (hooks call this
    before bootstrap and name it in ``handoff_ref``)."""
    return scoped_runtime(request, body.scope_id).bootstrap.next_handoff(body)


@bootstrap_router.post(
    "/v1/handoff/withdraw", operation_id="withdraw_handoff", tags=["handoff"], responses=_WRITE
)
def withdraw_handoff(body: NextHandoffRequest, request: Request) -> NextHandoff:
    """Un-queue the waiting Handoff; answers with what was withdrawn (``null``: nothing)."""
    return scoped_runtime(request, body.scope_id).bootstrap.withdraw_handoff(body)


@bootstrap_router.post(
    "/v1/scopes/references/set",
    operation_id="set_context_references",
    tags=["scopes"],
    responses=_WRITE,
)
def set_context_references(
    body: SetContextReferencesRequest, request: Request
) -> ContextReferences:
    """Replace the scope's ordered Context References (≤ 32; CAS on ``expected_version``)."""
    return scoped_runtime(request, body.scope_id).bootstrap.set_references(body)


@bootstrap_router.post(
    "/v1/scopes/references/get",
    operation_id="get_context_references",
    tags=["scopes"],
    responses=_READ,
)
def get_context_references(
    body: GetContextReferencesRequest, request: Request
) -> ContextReferences:
    return scoped_runtime(request, body.scope_id).bootstrap.get_references(body.scope_id)
