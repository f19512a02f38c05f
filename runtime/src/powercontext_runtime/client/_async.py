"""The asynchronous client (see the package docstring).

Mirrors the sync client method for method; keep the two in step.
"""

from __future__ import annotations

from types import TracebackType
from typing import Any, TypeVar

import httpx
from pydantic import BaseModel

from ..contract.activity import ActivityResponse, GetActivityRequest
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
from ..contract.review import (
    ApproveCandidateRequest,
    Candidate,
    CandidateList,
    ExperienceArtifact,
    ExperienceList,
    GetArtifactRequest,
    GetCandidateRequest,
    ListArtifactsRequest,
    ListCandidatesRequest,
    ProposeExperienceRequest,
    ProposeSkillRequest,
    RejectCandidateRequest,
    ReviseCandidateRequest,
    SkillArtifact,
    SkillList,
)
from ..contract.system import Capabilities, Liveness, Readiness
from ..contract.task_results import (
    GetTaskResultRequest,
    ListTaskResultsRequest,
    RecordedTaskResult,
    RecordTaskResultRequest,
    RecordTaskResultResponse,
    TaskResultList,
)
from ._common import (
    DEFAULT_TIMEOUT,
    Endpoint,
    body_of,
    build,
    decode,
    default_token,
    headers_for,
    unreachable,
)

M = TypeVar("M", bound=BaseModel)

__all__ = ["AsyncPowerContextClient"]


class AsyncPowerContextClient:
    """Talks to one runtime; ``url`` and ``token`` default to POWERCONTEXT_URL/TOKEN, else
    the local data dir's unix socket and token file (see ``_common.default_url``)."""

    def __init__(
        self,
        url: str | None = None,
        *,
        token: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        transport: httpx.BaseTransport | httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self._endpoint = Endpoint(url)
        if transport is None and self._endpoint.uds is not None:
            transport = httpx.AsyncHTTPTransport(uds=self._endpoint.uds)
        self._http = httpx.AsyncClient(
            base_url=self._endpoint.base_url,
            headers=headers_for(token if token is not None else default_token()),
            timeout=timeout,
            follow_redirects=False,
            transport=transport,  # type: ignore[arg-type]
        )

    @property
    def url(self) -> str:
        """The runtime URL this client talks to (``http://…`` or ``unix:/…``)."""
        return self._endpoint.url

    async def close(self) -> None:
        await self._http.aclose()
        self._endpoint.close()

    async def __aenter__(self) -> AsyncPowerContextClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def _send(self, method: str, path: str, body: BaseModel | None, model: type[M]) -> M:
        try:
            response = await self._http.request(
                method, path, json=None if body is None else body_of(body)
            )
        except httpx.HTTPError as exc:
            raise unreachable(exc, self._endpoint.url) from None
        return decode(response, model)

    async def get_liveness(self) -> Liveness:
        """Is the process up? (no auth)"""
        return await self._send("GET", "/health/live", None, Liveness)

    async def get_readiness(self) -> Readiness:
        """Can it reach its database? (no auth)"""
        return await self._send("GET", "/health/ready", None, Readiness)

    async def get_health(self) -> Readiness:
        """``/health``: the same answer as :meth:`get_readiness` (no auth)."""
        return await self._send("GET", "/health", None, Readiness)

    async def get_capabilities(self) -> Capabilities:
        """Schemas, families and modes this runtime serves."""
        return await self._send("GET", "/v1/capabilities", None, Capabilities)

    async def prepare_context(
        self, request: PrepareContextRequest | None = None, /, **fields: Any
    ) -> PreparedContextResponse:
        """A small, cited, byte-bounded, untrusted pack for one prompt (never stored)."""
        body = build(PrepareContextRequest, request, fields)
        return await self._send("POST", "/v1/context/prepare", body, PreparedContextResponse)

    async def explain_context(
        self, request: PrepareContextRequest | None = None, /, **fields: Any
    ) -> ExplainContextResponse:
        """prepare_context's pack for the same request and why each candidate was taken,
        truncated or left out (scores included; never stored)."""
        body = build(PrepareContextRequest, request, fields)
        return await self._send("POST", "/v1/context/explain", body, ExplainContextResponse)

    async def get_activity(
        self, request: GetActivityRequest | None = None, /, **fields: Any
    ) -> ActivityResponse:
        """A scope's activity by day, counts only, and the daemon's pack counters."""
        body = build(GetActivityRequest, request, fields)
        return await self._send("POST", "/v1/activity/get", body, ActivityResponse)

    async def get_source(
        self, request: GetSourceRequest | None = None, /, **fields: Any
    ) -> CapturedSource:
        """A captured source read back by its ``source_id`` (content, position, time)."""
        body = build(GetSourceRequest, request, fields)
        return await self._send("POST", "/v1/sources/get", body, CapturedSource)

    async def get_bootstrap_overview(
        self, request: GetBootstrapOverviewRequest | None = None, /, **fields: Any
    ) -> BootstrapOverview:
        """What the scope's next SessionStart would consider, and the recent receipts."""
        body = build(GetBootstrapOverviewRequest, request, fields)
        return await self._send("POST", "/v1/context/bootstrap/overview", body, BootstrapOverview)

    async def propose_experience(
        self, request: ProposeExperienceRequest | None = None, /, **fields: Any
    ) -> Candidate:
        """Propose an Experience; it waits in the Review Inbox."""
        body = build(ProposeExperienceRequest, request, fields)
        return await self._send("POST", "/v1/experience/propose", body, Candidate)

    async def get_experience(
        self, request: GetArtifactRequest | None = None, /, **fields: Any
    ) -> ExperienceArtifact:
        """Exact re-read of an approved Experience revision."""
        body = build(GetArtifactRequest, request, fields)
        return await self._send("POST", "/v1/experience/get", body, ExperienceArtifact)

    async def list_experiences(
        self, request: ListArtifactsRequest | None = None, /, **fields: Any
    ) -> ExperienceList:
        """Approved Experience at their current heads, in first-approval order, paged."""
        body = build(ListArtifactsRequest, request, fields)
        return await self._send("POST", "/v1/experience/list", body, ExperienceList)

    async def propose_skill(
        self, request: ProposeSkillRequest | None = None, /, **fields: Any
    ) -> Candidate:
        """Propose a Skill; it waits in the Review Inbox."""
        body = build(ProposeSkillRequest, request, fields)
        return await self._send("POST", "/v1/skill/propose", body, Candidate)

    async def get_skill(
        self, request: GetArtifactRequest | None = None, /, **fields: Any
    ) -> SkillArtifact:
        """Exact re-read of an approved Skill revision."""
        body = build(GetArtifactRequest, request, fields)
        return await self._send("POST", "/v1/skill/get", body, SkillArtifact)

    async def list_skills(
        self, request: ListArtifactsRequest | None = None, /, **fields: Any
    ) -> SkillList:
        """Approved Skills at their current heads, in first-approval order, paged."""
        body = build(ListArtifactsRequest, request, fields)
        return await self._send("POST", "/v1/skill/list", body, SkillList)

    async def list_artifact_candidates(
        self, request: ListCandidatesRequest | None = None, /, **fields: Any
    ) -> CandidateList:
        """The Review Inbox (pending by default), in creation order."""
        body = build(ListCandidatesRequest, request, fields)
        return await self._send("POST", "/v1/artifact-candidates/list", body, CandidateList)

    async def get_artifact_candidate(
        self, request: GetCandidateRequest | None = None, /, **fields: Any
    ) -> Candidate:
        """A candidate's current or an exact older version."""
        body = build(GetCandidateRequest, request, fields)
        return await self._send("POST", "/v1/artifact-candidates/get", body, Candidate)

    async def approve_artifact_candidate(
        self, request: ApproveCandidateRequest | None = None, /, **fields: Any
    ) -> Candidate:
        """Approve exactly ``expected_version``."""
        body = build(ApproveCandidateRequest, request, fields)
        return await self._send("POST", "/v1/artifact-candidates/approve", body, Candidate)

    async def reject_artifact_candidate(
        self, request: RejectCandidateRequest | None = None, /, **fields: Any
    ) -> Candidate:
        """Reject ``expected_version`` with a decision reason."""
        body = build(RejectCandidateRequest, request, fields)
        return await self._send("POST", "/v1/artifact-candidates/reject", body, Candidate)

    async def revise_artifact_candidate(
        self, request: ReviseCandidateRequest | None = None, /, **fields: Any
    ) -> Candidate:
        """Replace the proposal with a full new pending version."""
        body = build(ReviseCandidateRequest, request, fields)
        return await self._send("POST", "/v1/artifact-candidates/revise", body, Candidate)

    async def flush_memory(
        self, request: FlushMemoryRequest | None = None, /, **fields: Any
    ) -> FlushMemoryResponse:
        """Turn the next window of captured sources into Memory."""
        body = build(FlushMemoryRequest, request, fields)
        return await self._send("POST", "/v1/memory/flush", body, FlushMemoryResponse)

    async def bootstrap_context(
        self, request: BootstrapContextRequest | None = None, /, **fields: Any
    ) -> BootstrapContextResponse:
        """The curated SessionStart pack with its delivery receipt."""
        body = build(BootstrapContextRequest, request, fields)
        return await self._send("POST", "/v1/context/bootstrap", body, BootstrapContextResponse)

    async def record_bootstrap_receipt(
        self, request: RecordReceiptRequest | None = None, /, **fields: Any
    ) -> RecordReceiptResponse:
        """Claim (``injected``) or fail a pending bootstrap receipt."""
        body = build(RecordReceiptRequest, request, fields)
        return await self._send(
            "POST", "/v1/context/bootstrap/receipts", body, RecordReceiptResponse
        )

    async def commit_handoff(
        self, request: CommitHandoffRequest | None = None, /, **fields: Any
    ) -> HandoffResult:
        """Commit the scope's next Handoff revision (CAS on ``base``)."""
        body = build(CommitHandoffRequest, request, fields)
        return await self._send("POST", "/v1/handoff/commit", body, HandoffResult)

    async def get_handoff(
        self, request: GetHandoffRequest | None = None, /, **fields: Any
    ) -> HandoffResult:
        """Exact re-read of a Handoff revision."""
        body = build(GetHandoffRequest, request, fields)
        return await self._send("POST", "/v1/handoff/get", body, HandoffResult)

    async def next_handoff(
        self, request: NextHandoffRequest | None = None, /, **fields: Any
    ) -> NextHandoff:
        """The Handoff revision queued for the scope's next session (``handoff_ref`` null: none)."""
        body = build(NextHandoffRequest, request, fields)
        return await self._send("POST", "/v1/handoff/next", body, NextHandoff)

    async def withdraw_handoff(
        self, request: NextHandoffRequest | None = None, /, **fields: Any
    ) -> NextHandoff:
        """Un-queue the scope's waiting Handoff; returns what was withdrawn."""
        body = build(NextHandoffRequest, request, fields)
        return await self._send("POST", "/v1/handoff/withdraw", body, NextHandoff)

    async def set_context_references(
        self, request: SetContextReferencesRequest | None = None, /, **fields: Any
    ) -> ContextReferences:
        """Replace the scope's ordered Context References."""
        body = build(SetContextReferencesRequest, request, fields)
        return await self._send("POST", "/v1/scopes/references/set", body, ContextReferences)

    async def get_context_references(
        self, request: GetContextReferencesRequest | None = None, /, **fields: Any
    ) -> ContextReferences:
        """The scope's Context References and their version."""
        body = build(GetContextReferencesRequest, request, fields)
        return await self._send("POST", "/v1/scopes/references/get", body, ContextReferences)

    async def remember_memory(
        self, request: RememberMemoryRequest | None = None, /, **fields: Any
    ) -> MemoryWriteResult:
        """Add an entry; identical active content is a no-op returning it."""
        body = build(RememberMemoryRequest, request, fields)
        return await self._send("POST", "/v1/memory/remember", body, MemoryWriteResult)

    async def search_memory(
        self, request: SearchMemoryRequest | None = None, /, **fields: Any
    ) -> SearchMemoryResponse:
        """Ranked hits over the head revision's active entries."""
        body = build(SearchMemoryRequest, request, fields)
        return await self._send("POST", "/v1/memory/search", body, SearchMemoryResponse)

    async def get_memory_entry(
        self, request: GetMemoryEntryRequest | None = None, /, **fields: Any
    ) -> MemoryEntry:
        """Exact re-read of a cited version, as it was in that revision."""
        body = build(GetMemoryEntryRequest, request, fields)
        return await self._send("POST", "/v1/memory/entries/get", body, MemoryEntry)

    async def list_memory_entries(
        self, request: ListMemoryEntriesRequest | None = None, /, **fields: Any
    ) -> MemoryEntryList:
        """Entries of the head revision, in creation order, paged; optionally of one state,
        kind and/or tag."""
        body = build(ListMemoryEntriesRequest, request, fields)
        return await self._send("POST", "/v1/memory/entries/list", body, MemoryEntryList)

    async def list_memory_entry_versions(
        self, request: ListMemoryEntryVersionsRequest | None = None, /, **fields: Any
    ) -> MemoryEntryHistory:
        """An entry's versions, newest first, each with its exact citation."""
        body = build(ListMemoryEntryVersionsRequest, request, fields)
        return await self._send("POST", "/v1/memory/entries/versions", body, MemoryEntryHistory)

    async def revise_memory_entry(
        self, request: ReviseMemoryEntryRequest | None = None, /, **fields: Any
    ) -> MemoryWriteResult:
        """New version of one entry; the citation is the CAS token."""
        body = build(ReviseMemoryEntryRequest, request, fields)
        return await self._send("POST", "/v1/memory/entries/revise", body, MemoryWriteResult)

    async def retire_memory_entry(
        self, request: RetireMemoryEntryRequest | None = None, /, **fields: Any
    ) -> MemoryWriteResult:
        """Make an entry inactive in a new revision; nothing is deleted."""
        body = build(RetireMemoryEntryRequest, request, fields)
        return await self._send("POST", "/v1/memory/entries/retire", body, MemoryWriteResult)

    async def list_memory_changes(
        self, request: ListMemoryChangesRequest | None = None, /, **fields: Any
    ) -> MemoryChanges:
        """Revision summaries after ``since_revision``."""
        body = build(ListMemoryChangesRequest, request, fields)
        return await self._send("POST", "/v1/memory/changes", body, MemoryChanges)

    async def capture_content_source(
        self, request: CaptureSourceRequest | None = None, /, **fields: Any
    ) -> CaptureSourceResponse:
        """Journal a captured source (idempotent by source_id)."""
        body = build(CaptureSourceRequest, request, fields)
        return await self._send("POST", "/v1/sources/content", body, CaptureSourceResponse)

    async def record_task_result(
        self, request: RecordTaskResultRequest | None = None, /, **fields: Any
    ) -> RecordTaskResultResponse:
        """Record a task result as the source ``task-result/<task_id>`` (redacted; idempotent
        by task_id)."""
        body = build(RecordTaskResultRequest, request, fields)
        return await self._send("POST", "/v1/task-results/record", body, RecordTaskResultResponse)

    async def list_task_results(
        self, request: ListTaskResultsRequest | None = None, /, **fields: Any
    ) -> TaskResultList:
        """The scope's task results, newest first, summarised, paged."""
        body = build(ListTaskResultsRequest, request, fields)
        return await self._send("POST", "/v1/task-results/list", body, TaskResultList)

    async def get_task_result(
        self, request: GetTaskResultRequest | None = None, /, **fields: Any
    ) -> RecordedTaskResult:
        """One task result exactly as stored."""
        body = build(GetTaskResultRequest, request, fields)
        return await self._send("POST", "/v1/task-results/get", body, RecordedTaskResult)
