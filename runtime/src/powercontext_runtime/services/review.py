"""Review operations as every front end sees them (HTTP, MCP, CLI): spec 06.

The review policy is fixed per family, not a setting: Memory writes directly (it never gets
here), Experience and Skill are created and modified only by approving a candidate.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

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
from ..store.review import ApprovedExperience, ReviewStore
from ..store.tracing import LexicalTrace

__all__ = ["ReviewService"]


class ReviewService:
    def __init__(self, store: ReviewStore) -> None:
        self._store = store
        # Told of every decision made, ``(proposed_by, status)``, by whichever door it came
        # through (HTTP, MCP): the daemon's metrics count them (http/app.py).
        self._decided: list[Callable[[str, str], None]] = []

    def on_decision(self, observer: Callable[[str, str], None]) -> None:
        """Call ``observer(proposed_by, status)`` after each committed approval or rejection."""
        self._decided.append(observer)

    def _told(self, candidate: Candidate) -> Candidate:
        for observer in self._decided:
            observer(candidate.proposed_by, candidate.status)
        return candidate

    def propose_experience(self, req: ProposeExperienceRequest) -> Candidate:
        return self._store.propose("experience", req)

    def propose_skill(self, req: ProposeSkillRequest) -> Candidate:
        return self._store.propose("skill", req)

    def list(self, req: ListCandidatesRequest) -> CandidateList:
        return self._store.list(req)

    def get(self, req: GetCandidateRequest) -> Candidate:
        return self._store.get(req)

    def approve(self, req: ApproveCandidateRequest) -> Candidate:
        return self._told(self._store.approve(req))

    def reject(self, req: RejectCandidateRequest) -> Candidate:
        return self._told(self._store.reject(req))

    def revise(self, req: ReviseCandidateRequest) -> Candidate:
        return self._store.revise(req)

    def get_experience(self, req: GetArtifactRequest) -> ExperienceArtifact:
        stored = self._store.get_artifact(req.scope_id, "experience", req.artifact)
        return ExperienceArtifact.model_validate(stored, from_attributes=True)

    def get_skill(self, req: GetArtifactRequest) -> SkillArtifact:
        stored = self._store.get_artifact(req.scope_id, "skill", req.artifact)
        return SkillArtifact.model_validate(stored, from_attributes=True)

    def list_experiences(self, req: ListArtifactsRequest) -> ExperienceList:
        stored, next_cursor = self._store.list_artifacts(
            req.scope_id, "experience", req.limit, req.cursor
        )
        experiences = [ExperienceArtifact.model_validate(s, from_attributes=True) for s in stored]
        return ExperienceList(experiences=experiences, next_cursor=next_cursor)

    def list_skills(self, req: ListArtifactsRequest) -> SkillList:
        stored, next_cursor = self._store.list_artifacts(
            req.scope_id, "skill", req.limit, req.cursor
        )
        return SkillList(
            skills=[SkillArtifact.model_validate(s, from_attributes=True) for s in stored],
            next_cursor=next_cursor,
        )

    def find_experience(
        self, scope_id: str, terms: Sequence[str], limit: int, trace: LexicalTrace | None = None
    ) -> list[ApprovedExperience]:
        """Approved Experience heads for a prompt's analysed terms (context preparation)."""
        return self._store.search_experience(scope_id, terms, limit, trace)

    def reindex(self) -> int:
        return self._store.reindex_experience()

    def index_is_consistent(self) -> bool:
        return self._store.experience_index_is_consistent()
