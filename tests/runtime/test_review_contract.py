"""Review Inbox contract on every backend (spec 06, issue 6)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import ValidationError

from powercontext_runtime.composition import Runtime
from powercontext_runtime.contract.common import ArtifactRef
from powercontext_runtime.contract.context import PrepareContextRequest
from powercontext_runtime.contract.memory import (
    RememberMemoryRequest,
    SearchMemoryRequest,
)
from powercontext_runtime.contract.review import (
    ApproveCandidateRequest,
    Candidate,
    GetArtifactRequest,
    GetCandidateRequest,
    ListCandidatesRequest,
    ProposeExperienceRequest,
    ProposeSkillRequest,
    RejectCandidateRequest,
    ReviseCandidateRequest,
)
from powercontext_runtime.contract.task_results import RecordTaskResultRequest
from powercontext_runtime.errors import ConflictError, InvalidRequestError, NotFoundError
from powercontext_runtime.services.auth import Principal

SCOPE = "git:example.com/acme/review"
#: A recorded task result: what an Experience proposal cites (spec 06 § Task results).
EVIDENCE = [{"name": "task-result", "source_id": "task-result/run-42"}]

EVERYTHING = Principal.unrestricted()


@pytest.fixture
def runtime(runtime: Runtime) -> Runtime:
    """The backend's runtime with the cited task result recorded (evidence must exist)."""
    runtime.task_results.record(
        RecordTaskResultRequest.model_validate(
            {"scope_id": SCOPE, "task_id": "run-42", "task": {"goal": "g", "outcome": "failed"}}
        )
    )
    return runtime


def experience(**overrides: str) -> dict[str, str]:
    return {
        "situation": "Changing the OpenAPI document",
        "action": "Regenerated the client and ran the contract tests",
        "outcome": "Caught a breaking rename before release",
        "lesson": "After editing openapi, regenerate the client and run contract tests",
        **overrides,
    }


def propose(rt: Runtime, proposal: dict[str, str] | None = None, **extra: Any) -> Candidate:
    body = {
        "scope_id": SCOPE,
        "proposal": proposal or experience(),
        "source_refs": EVIDENCE,
        **extra,
    }
    return rt.review.propose_experience(ProposeExperienceRequest.model_validate(body))


def approve(rt: Runtime, candidate: Candidate, version: int | None = None) -> Candidate:
    return rt.review.approve(
        ApproveCandidateRequest(
            scope_id=SCOPE,
            candidate_id=candidate.candidate_id,
            expected_version=version or candidate.version,
        )
    )


def revise(rt: Runtime, candidate: Candidate, proposal: dict[str, Any], **extra: Any) -> Candidate:
    return rt.review.revise(
        ReviseCandidateRequest.model_validate(
            {
                "scope_id": SCOPE,
                "candidate_id": candidate.candidate_id,
                "expected_version": candidate.version,
                "proposal": proposal,
                **extra,
            }
        )
    )


def get_experience(rt: Runtime, ref: ArtifactRef) -> dict[str, str]:
    artifact = rt.review.get_experience(GetArtifactRequest(scope_id=SCOPE, artifact=ref))
    return artifact.content.model_dump()


def test_lifecycle_propose_revise_approve_terminal(runtime: Runtime) -> None:
    v1 = propose(runtime, experience(lesson="After editing any YAML run contract tests"))
    assert (v1.status, v1.version, v1.family, v1.result_artifact) == (
        "pending",
        1,
        "experience",
        None,
    )
    v2 = revise(runtime, v1, experience())
    assert (v2.status, v2.version) == ("pending", 2)
    assert v2.source_refs == v1.source_refs  # omitted evidence is carried over
    # v1 stays immutable and readable.
    old = runtime.review.get(
        GetCandidateRequest(scope_id=SCOPE, candidate_id=v1.candidate_id, version=1)
    )
    assert old.proposal["lesson"] == "After editing any YAML run contract tests"
    # Approving the stale v1 is a candidate conflict naming both versions.
    with pytest.raises(ConflictError) as caught:
        approve(runtime, v1, version=1)
    assert caught.value.code == "candidate_conflict"
    assert caught.value.details == {"expected_version": 1, "current_version": 2}
    approved = approve(runtime, v2)
    assert approved.status == "approved"
    ref = approved.result_artifact
    assert ref is not None and ref.family == "experience" and ref.revision == 1
    assert get_experience(runtime, ref) == experience()
    # Terminal: approve, revise and reject again are typed conflicts with the status.
    for attempt in (
        lambda: approve(runtime, v2),
        lambda: revise(runtime, approved, experience()),
        lambda: runtime.review.reject(
            RejectCandidateRequest(
                scope_id=SCOPE,
                candidate_id=v1.candidate_id,
                expected_version=2,
                decision_reason="late",
            )
        ),
    ):
        with pytest.raises(ConflictError) as caught:
            attempt()
        assert caught.value.code == "candidate_terminal"
        assert caught.value.details == {"status": "approved"}


def test_reject_records_the_reason_and_creates_nothing(runtime: Runtime) -> None:
    candidate = propose(runtime)
    rejected = runtime.review.reject(
        RejectCandidateRequest(
            scope_id=SCOPE,
            candidate_id=candidate.candidate_id,
            expected_version=1,
            decision_reason="too general",
        )
    )
    assert (rejected.status, rejected.decision_reason) == ("rejected", "too general")
    assert rejected.result_artifact is None
    inbox = runtime.review.list(ListCandidatesRequest(scope_id=SCOPE))
    assert inbox.candidates == []
    done = runtime.review.list(ListCandidatesRequest(scope_id=SCOPE, status="rejected"))
    assert [c.candidate_id for c in done.candidates] == [candidate.candidate_id]


def test_modifying_an_experience_through_a_target(runtime: Runtime) -> None:
    first = approve(runtime, propose(runtime)).result_artifact
    assert first is not None
    change = propose(
        runtime,
        experience(lesson="Regenerate the client, then contract tests"),
        artifact_refs=[first.model_dump()],
        target=first.model_dump(),
    )
    competing = propose(
        runtime,
        experience(lesson="A competing edit"),
        artifact_refs=[first.model_dump()],
        target=first.model_dump(),
    )
    second = approve(runtime, change).result_artifact
    assert second == ArtifactRef(family="experience", artifact_id=first.artifact_id, revision=2)
    assert get_experience(runtime, first) == experience()  # exact old revision
    # The competing candidate targets a head that moved: no merge, a typed conflict.
    with pytest.raises(ConflictError) as caught:
        approve(runtime, competing)
    assert caught.value.code == "artifact_conflict"
    assert caught.value.details == {"current": second.model_dump()}
    still = runtime.review.get(
        GetCandidateRequest(scope_id=SCOPE, candidate_id=competing.candidate_id)
    )
    assert still.status == "pending"
    # Proposing against a stale head is refused up front too.
    with pytest.raises(ConflictError):
        propose(runtime, artifact_refs=[first.model_dump()], target=first.model_dump())


def test_evidence_and_target_rules() -> None:
    base = {"scope_id": SCOPE, "proposal": experience()}
    with pytest.raises(ValidationError):
        ProposeExperienceRequest.model_validate({**base})
    refs = [{"name": "content", "source_id": f"s{i}"} for i in range(33)]
    with pytest.raises(ValidationError):
        ProposeExperienceRequest.model_validate({**base, "source_refs": refs})
    target = {"family": "experience", "artifact_id": "exp_x", "revision": 1}
    with pytest.raises(ValidationError):  # a target must also be evidence
        ProposeExperienceRequest.model_validate({**base, "source_refs": EVIDENCE, "target": target})
    with pytest.raises(ValidationError):  # a skill target for an experience
        ProposeExperienceRequest.model_validate(
            {
                **base,
                "artifact_refs": [{**target, "family": "skill"}],
                "target": {**target, "family": "skill"},
            }
        )
    with pytest.raises(ValidationError):
        ProposeExperienceRequest.model_validate(
            {**base, "source_refs": EVIDENCE, "proposal": experience(lesson="  ")}
        )


def test_revise_validates_the_full_proposal_and_evidence(runtime: Runtime) -> None:
    candidate = propose(runtime)
    with pytest.raises(InvalidRequestError):
        revise(runtime, candidate, {"situation": "only one field"})
    with pytest.raises(InvalidRequestError):
        revise(runtime, candidate, experience(), source_refs=[])
    unchanged = runtime.review.get(
        GetCandidateRequest(scope_id=SCOPE, candidate_id=candidate.candidate_id)
    )
    assert unchanged.version == 1


def test_unknown_candidates_and_artifacts_are_not_found(runtime: Runtime) -> None:
    with pytest.raises(NotFoundError) as caught:
        runtime.review.get(GetCandidateRequest(scope_id=SCOPE, candidate_id="cand_nope"))
    assert caught.value.code == "candidate_not_found"
    with pytest.raises(NotFoundError) as caught:
        get_experience(runtime, ArtifactRef(family="experience", artifact_id="exp_no", revision=1))
    assert caught.value.code == "artifact_not_found"


def test_skills_are_reviewed_but_never_recalled(runtime: Runtime) -> None:
    skill = runtime.review.propose_skill(
        ProposeSkillRequest.model_validate(
            {
                "scope_id": SCOPE,
                "source_refs": EVIDENCE,
                "proposal": {
                    "name": "contract-check",
                    "description": "Run contract tests",
                    "instructions": "Regenerate the client, then run the contract tests",
                    "validation": ["contract tests pass"],
                },
            }
        )
    )
    ref = approve(runtime, skill).result_artifact
    assert ref is not None and ref.family == "skill"
    content = runtime.review.get_skill(GetArtifactRequest(scope_id=SCOPE, artifact=ref)).content
    assert content.name == "contract-check"
    pack = runtime.context.prepare(
        PrepareContextRequest(
            scope_id=SCOPE, query="regenerate the client and run the contract tests"
        ),
        EVERYTHING,
    )
    assert pack.status == "empty"


def test_pending_and_rejected_text_is_never_searchable(runtime: Runtime) -> None:
    marker = "zanzibarquokka"
    pending = propose(runtime, experience(lesson=f"{marker} pending lesson"))
    rejected = propose(runtime, experience(lesson=f"{marker} rejected lesson"))
    runtime.review.reject(
        RejectCandidateRequest(
            scope_id=SCOPE,
            candidate_id=rejected.candidate_id,
            expected_version=1,
            decision_reason="no",
        )
    )
    runtime.memory.remember(
        RememberMemoryRequest(scope_id=SCOPE, kind="fact", text="unrelated memory entry")
    )
    assert runtime.memory.search(SearchMemoryRequest(scope_id=SCOPE, query=marker)).hits == []
    pack = runtime.context.prepare(PrepareContextRequest(scope_id=SCOPE, query=marker), EVERYTHING)
    assert pack.status == "empty"
    # Approve one revision, then a newer one: only the current head is recalled.
    ref1 = approve(runtime, pending).result_artifact
    assert ref1 is not None
    newer = propose(
        runtime,
        experience(lesson=f"{marker} revised lesson"),
        artifact_refs=[ref1.model_dump()],
        target=ref1.model_dump(),
    )
    approve(runtime, newer)
    pack = runtime.context.prepare(PrepareContextRequest(scope_id=SCOPE, query=marker), EVERYTHING)
    assert pack.content is not None
    assert "revised lesson" in pack.content
    assert "pending lesson" not in pack.content and "rejected lesson" not in pack.content


def test_an_approval_failure_leaves_nothing_behind(runtime: Runtime) -> None:
    candidate = propose(runtime, experience(lesson="atomicity probe lesson"))
    store = runtime.review._store

    def explode() -> None:
        raise RuntimeError("injected failure between artifact write and status update")

    store.before_approval_status = explode
    with pytest.raises(RuntimeError):
        approve(runtime, candidate)
    store.before_approval_status = lambda: None
    still = runtime.review.get(
        GetCandidateRequest(scope_id=SCOPE, candidate_id=candidate.candidate_id)
    )
    assert (still.status, still.result_artifact) == ("pending", None)
    assert runtime.review.find_experience(SCOPE, "atomicity probe lesson", 8) == []
    assert runtime.review.index_is_consistent()
    ref = approve(runtime, candidate).result_artifact
    assert ref is not None and ref.revision == 1


def test_prepare_interleaves_at_most_two_experiences(runtime: Runtime) -> None:
    for i in range(3):
        ref = approve(
            runtime,
            propose(
                runtime,
                experience(lesson=f"Flaky checkout tests: variant {i} retries the payment sandbox"),
            ),
        ).result_artifact
        assert ref is not None
    for i in range(3):
        runtime.memory.remember(
            RememberMemoryRequest(
                scope_id=SCOPE,
                kind="fact",
                text=f"Flaky checkout tests note {i}: the payment sandbox rate-limits",
            )
        )
    pack = runtime.context.prepare(
        PrepareContextRequest(scope_id=SCOPE, query="flaky checkout tests payment sandbox"),
        EVERYTHING,
    )
    assert pack.content is not None
    items = json.loads(pack.content.split("\n")[4])["items"]
    kinds = ["e" if item.get("kind") == "experience" else "m" for item in items]
    assert kinds == ["m", "e", "m", "e", "m"]
    for item in items:
        if item.get("kind") == "experience":
            ref = ArtifactRef.model_validate(item["citation"]["artifact_ref"])
            full = get_experience(runtime, ref)
            assert item["content"] == (
                f"Situation: {full['situation']}\nAction: "
                f"{full['action']}\nOutcome: {full['outcome']}\n"
                f"Lesson: {full['lesson']}"
            )
