"""Review Inbox routes: propose, list/get/approve/reject/revise candidates, exact reads."""

from __future__ import annotations

from fastapi import APIRouter, Request

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
from .routes import error_responses, scoped_runtime

__all__ = ["review_router"]

review_router = APIRouter(tags=["review"])
_READ = error_responses(401, 403, 404, 413, 422, 503)
_WRITE = error_responses(401, 403, 404, 409, 413, 422, 503)


@review_router.post(
    "/v1/experience/propose", operation_id="propose_experience", status_code=201, responses=_WRITE
)
def propose_experience(body: ProposeExperienceRequest, request: Request) -> Candidate:
    """Propose an Experience (or a change to one); it waits in the Review Inbox."""
    return scoped_runtime(request, body.scope_id).review.propose_experience(body)


@review_router.post("/v1/experience/get", operation_id="get_experience", responses=_READ)
def get_experience(body: GetArtifactRequest, request: Request) -> ExperienceArtifact:
    return scoped_runtime(request, body.scope_id).review.get_experience(body)


@review_router.post("/v1/experience/list", operation_id="list_experiences", responses=_READ)
def list_experiences(body: ListArtifactsRequest, request: Request) -> ExperienceList:
    """The approved Experience of the scope: each at its current head, in the order they were
    first approved, paged with ``next_cursor``."""
    return scoped_runtime(request, body.scope_id).review.list_experiences(body)


@review_router.post(
    "/v1/skill/propose", operation_id="propose_skill", status_code=201, responses=_WRITE
)
def propose_skill(body: ProposeSkillRequest, request: Request) -> Candidate:
    """Propose a Skill (or a change to one); approval grants no execution right."""
    return scoped_runtime(request, body.scope_id).review.propose_skill(body)


@review_router.post("/v1/skill/get", operation_id="get_skill", responses=_READ)
def get_skill(body: GetArtifactRequest, request: Request) -> SkillArtifact:
    return scoped_runtime(request, body.scope_id).review.get_skill(body)


@review_router.post("/v1/skill/list", operation_id="list_skills", responses=_READ)
def list_skills(body: ListArtifactsRequest, request: Request) -> SkillList:
    """The approved Skills of the scope: each at its current head, in the order they were
    first approved, paged with ``next_cursor``."""
    return scoped_runtime(request, body.scope_id).review.list_skills(body)


@review_router.post(
    "/v1/artifact-candidates/list", operation_id="list_artifact_candidates", responses=_READ
)
def list_artifact_candidates(body: ListCandidatesRequest, request: Request) -> CandidateList:
    return scoped_runtime(request, body.scope_id).review.list(body)


@review_router.post(
    "/v1/artifact-candidates/get", operation_id="get_artifact_candidate", responses=_READ
)
def get_artifact_candidate(body: GetCandidateRequest, request: Request) -> Candidate:
    return scoped_runtime(request, body.scope_id).review.get(body)


@review_router.post(
    "/v1/artifact-candidates/approve", operation_id="approve_artifact_candidate", responses=_WRITE
)
def approve_artifact_candidate(body: ApproveCandidateRequest, request: Request) -> Candidate:
    """Approve exactly ``expected_version``: one transaction creates the artifact revision."""
    return scoped_runtime(request, body.scope_id).review.approve(body)


@review_router.post(
    "/v1/artifact-candidates/reject", operation_id="reject_artifact_candidate", responses=_WRITE
)
def reject_artifact_candidate(body: RejectCandidateRequest, request: Request) -> Candidate:
    return scoped_runtime(request, body.scope_id).review.reject(body)


@review_router.post(
    "/v1/artifact-candidates/revise", operation_id="revise_artifact_candidate", responses=_WRITE
)
def revise_artifact_candidate(body: ReviseCandidateRequest, request: Request) -> Candidate:
    """Replace the proposal with a full new version (earlier versions stay immutable)."""
    return scoped_runtime(request, body.scope_id).review.revise(body)
