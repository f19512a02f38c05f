"""Review Inbox: Experience and Skill candidates, approval, exact artifact reads (spec 06)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field, model_validator

from . import limits
from .common import ArtifactRef, EntryId, ScopeId, SourceRef, StrictModel

__all__ = [
    "ApproveCandidateRequest",
    "Candidate",
    "CandidateList",
    "ExperienceArtifact",
    "ExperienceList",
    "ExperienceProposal",
    "GetArtifactRequest",
    "GetCandidateRequest",
    "ListArtifactsRequest",
    "ListCandidatesRequest",
    "ProposeExperienceRequest",
    "ProposeSkillRequest",
    "ProposedBy",
    "RejectCandidateRequest",
    "ReviseCandidateRequest",
    "SkillArtifact",
    "SkillList",
    "SkillProposal",
]


def _not_blank(value: str) -> str:
    if not value.strip():
        raise ValueError("must not be blank")
    return value


Field8000 = Annotated[str, Field(min_length=1, max_length=8000), AfterValidator(_not_blank)]
Note = Annotated[str, Field(max_length=2000)]


class ExperienceProposal(StrictModel):
    situation: Field8000
    action: Field8000
    outcome: Field8000
    lesson: Field8000


class SkillProposal(StrictModel):
    name: Annotated[str, Field(min_length=1, max_length=128), AfterValidator(_not_blank)]
    description: Annotated[str, Field(max_length=2000)]
    instructions: Annotated[str, Field(min_length=1, max_length=32000), AfterValidator(_not_blank)]
    validation: Annotated[
        list[Annotated[str, Field(min_length=1, max_length=2000), AfterValidator(_not_blank)]],
        Field(min_length=1, max_length=32),
    ]


SourceRefs = Annotated[list[SourceRef], Field(max_length=limits.MAX_EVIDENCE_REFS)]
ArtifactRefs = Annotated[list[ArtifactRef], Field(max_length=limits.MAX_EVIDENCE_REFS)]


def _check_evidence(source_refs: list[SourceRef], artifact_refs: list[ArtifactRef]) -> None:
    total = len(source_refs) + len(artifact_refs)
    if not 1 <= total <= limits.MAX_EVIDENCE_REFS:
        raise ValueError(
            f"a candidate needs 1..{limits.MAX_EVIDENCE_REFS} evidence references in total"
        )


class _Proposal(StrictModel):
    scope_id: ScopeId
    source_refs: SourceRefs = []
    artifact_refs: ArtifactRefs = []
    target: ArtifactRef | None = None
    reason: Note | None = None

    @model_validator(mode="after")
    def _evidence_and_target(self) -> _Proposal:
        _check_evidence(self.source_refs, self.artifact_refs)
        if self.target is not None and self.target not in self.artifact_refs:
            raise ValueError("a target must also appear in artifact_refs")
        return self


class ProposeExperienceRequest(_Proposal):
    proposal: ExperienceProposal

    @model_validator(mode="after")
    def _target_family(self) -> ProposeExperienceRequest:
        if self.target is not None and self.target.family != "experience":
            raise ValueError("an experience candidate can only target an experience")
        return self


class ProposeSkillRequest(_Proposal):
    proposal: SkillProposal

    @model_validator(mode="after")
    def _target_family(self) -> ProposeSkillRequest:
        if self.target is not None and self.target.family != "skill":
            raise ValueError("a skill candidate can only target a skill")
        return self


CandidateId = EntryId
Version = Annotated[int, Field(ge=1, lt=limits.INT64_END)]


ListLimit = Annotated[int, Field(ge=1, le=limits.LIST_LIMIT_MAX)]
Cursor = Annotated[str, Field(min_length=1, max_length=512)]


class ListCandidatesRequest(StrictModel):
    scope_id: ScopeId
    status: Literal["pending", "approved", "rejected"] = "pending"
    family: Literal["experience", "skill"] | None = None
    limit: ListLimit = limits.LIST_LIMIT_DEFAULT
    cursor: Cursor | None = None


class GetCandidateRequest(StrictModel):
    scope_id: ScopeId
    candidate_id: CandidateId
    version: Version | None = None


class ApproveCandidateRequest(StrictModel):
    scope_id: ScopeId
    candidate_id: CandidateId
    expected_version: Version


class RejectCandidateRequest(StrictModel):
    scope_id: ScopeId
    candidate_id: CandidateId
    expected_version: Version
    decision_reason: Annotated[
        str, Field(min_length=1, max_length=2000), AfterValidator(_not_blank)
    ]


class ReviseCandidateRequest(StrictModel):
    """A full new proposal; evidence omitted here is carried over from the current version."""

    scope_id: ScopeId
    candidate_id: CandidateId
    expected_version: Version
    proposal: dict[str, Any]
    source_refs: SourceRefs | None = None
    artifact_refs: ArtifactRefs | None = None
    reason: Note | None = None


#: Who proposed a candidate: ``agent`` (propose_experience / propose_skill over HTTP, MCP or
#: the CLI: an agent, a host's model, a person) or a distiller of the runtime's own
#: (``offline`` rules, the ``openai-compatible`` model), from recorded task results.
ProposedBy = Literal["agent", "offline", "openai-compatible"]
PROPOSERS: tuple[ProposedBy, ...] = ("agent", "offline", "openai-compatible")


class Candidate(StrictModel):
    candidate_id: str
    version: int
    family: Literal["experience", "skill"]
    status: Literal["pending", "approved", "rejected"]
    proposal: dict[str, Any]
    source_refs: list[SourceRef]
    artifact_refs: list[ArtifactRef]
    target: ArtifactRef | None
    reason: str | None
    result_artifact: ArtifactRef | None
    decision_reason: str | None
    #: Read-only provenance (a request cannot set it): see :data:`ProposedBy`.
    proposed_by: ProposedBy = Field(
        description="Who proposed it: agent (propose_experience/propose_skill) or a distiller "
        "of the runtime (offline, openai-compatible) from recorded task results"
    )
    created_at: str
    updated_at: str


class CandidateList(StrictModel):
    candidates: list[Candidate]
    next_cursor: str | None


class GetArtifactRequest(StrictModel):
    scope_id: ScopeId
    artifact: ArtifactRef


class ExperienceArtifact(StrictModel):
    reference: ArtifactRef
    content: ExperienceProposal
    source_refs: list[SourceRef]
    artifact_refs: list[ArtifactRef]


class SkillArtifact(StrictModel):
    reference: ArtifactRef
    content: SkillProposal
    source_refs: list[SourceRef]
    artifact_refs: list[ArtifactRef]


class ListArtifactsRequest(StrictModel):
    """A page of a family's approved artifacts: the current head of each, in the order they
    were first approved (``list_experiences`` / ``list_skills``)."""

    scope_id: ScopeId
    limit: ListLimit = limits.LIST_LIMIT_DEFAULT
    cursor: Cursor | None = None


class ExperienceList(StrictModel):
    experiences: list[ExperienceArtifact]
    next_cursor: str | None


class SkillList(StrictModel):
    skills: list[SkillArtifact]
    next_cursor: str | None
