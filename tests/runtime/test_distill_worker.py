"""The distill worker (issue #31 items 3-4; services/distill.py), on every backend.

Recorded task results become *pending* candidates citing them, merged by lesson signature:
a second task result with the same lesson adds its evidence as a new version (CAS, ≤ 32
references), one after approval becomes a revision candidate targeting the approved head, a
rejected lesson is not proposed again. The per-scope high-water mark is in the database, so
a new runtime on the same data neither proposes again nor skips; a failing distiller never
stops the others or the worker; nothing reaches ``prepare_context`` before approval. Rounds
run synchronously here (``run_round``); the thread is exercised once, polled, never slept on.
"""

from __future__ import annotations

import io
import json
import time
from pathlib import Path
from typing import Any

import pytest

from powercontext_runtime.composition import Runtime
from powercontext_runtime.contract.common import ArtifactRef, SourceRef
from powercontext_runtime.contract.context import PrepareContextRequest
from powercontext_runtime.contract.review import (
    ApproveCandidateRequest,
    Candidate,
    ListCandidatesRequest,
    ProposeExperienceRequest,
    RejectCandidateRequest,
)
from powercontext_runtime.contract.task_results import RecordTaskResultRequest
from powercontext_runtime.distill.errors import DistillerUnavailable
from powercontext_runtime.distill.offline import Lesson, TaskInput
from powercontext_runtime.distill.skills import ApprovedExperienceView
from powercontext_runtime.portability.exporter import export
from powercontext_runtime.portability.importer import import_file
from powercontext_runtime.search.analyzer import document_terms
from powercontext_runtime.services.auth import Principal
from powercontext_runtime.services.distill import (
    RETRY_ATTEMPTS,
    SKILLS,
    DistillService,
    OfflineDistiller,
)
from powercontext_runtime.settings import ConfigError, Settings
from powercontext_runtime.store.review import signature_digest
from tests.runtime.test_distill_skills import ALEMBIC
from tests.support.backends import database_url_for

SCOPE = "git:example.com/acme/distill"
EVERYTHING = Principal.unrestricted()
PYTEST_FAIL = (
    "E       sqlalchemy.exc.IntegrityError: UNIQUE constraint failed: users.email\n"
    "tests/test_users.py:{line}: IntegrityError\n"
    "FAILED tests/test_users.py::test_duplicate_email - sqlalchemy.exc.IntegrityError: "
    "UNIQUE constraint failed\n1 failed, 13 passed in 0.{ms}s"
)
#: What the offline rule writes for these task results (its signature, hashed on candidates).
SIGNATURE = "fail-then-pass|pytest|integrityerror|tests/test_users.py::test_duplicate_email|"


def fail_then_pass(i: int) -> dict[str, Any]:
    """A succeeded task whose check failed, the fix changed a file, the check passed; each
    ``i`` differs in wording, line numbers and timings (the same lesson)."""
    return {
        "goal": f"Fix the duplicate e-mail sign-up bug, attempt {i}",
        "outcome": "succeeded",
        "changes": [{"path": "app/services/accounts.py", "added": 12 + i, "removed": 3}],
        "checks": [
            {
                "command": "pytest tests/test_users.py",
                "exit_status": 1,
                "output_tail": PYTEST_FAIL.format(line=50 + i, ms=i),
            },
            {"command": "pytest", "exit_status": 0, "output_tail": "14 passed"},
        ],
    }


def record(rt: Runtime, task_id: str, task: dict[str, Any], scope: str = SCOPE) -> SourceRef:
    req = RecordTaskResultRequest.model_validate(
        {"scope_id": scope, "task_id": task_id, "task": task}
    )
    return rt.task_results.record(req).response.source


def distill(rt: Runtime) -> int:
    assert rt.distill is not None
    return rt.distill.run_round()


def inbox(rt: Runtime, status: str = "pending") -> list[Candidate]:
    return rt.review.list(ListCandidatesRequest(scope_id=SCOPE, status=status)).candidates  # type: ignore[arg-type]


def approve(rt: Runtime, candidate: Candidate) -> Candidate:
    return rt.review.approve(
        ApproveCandidateRequest(
            scope_id=SCOPE, candidate_id=candidate.candidate_id, expected_version=candidate.version
        )
    )


def pack_text(rt: Runtime) -> str:
    pack = rt.context.prepare(
        PrepareContextRequest(scope_id=SCOPE, query="pytest IntegrityError duplicate email users"),
        EVERYTHING,
    )
    return pack.content or ""


def refs(*ids: str) -> list[SourceRef]:
    return [SourceRef(name="task-result", source_id=f"task-result/{i}") for i in ids]


def test_one_task_result_one_pending_candidate_citing_it(runtime: Runtime) -> None:
    assert runtime.settings.distill == ("offline",)  # on by default
    record(runtime, "run-1", fail_then_pass(1))
    assert inbox(runtime) == []  # a candidate exists only once the worker wrote it
    assert distill(runtime) == 1
    [candidate] = inbox(runtime)
    assert candidate.family == "experience" and candidate.version == 1
    assert candidate.proposed_by == "offline"
    assert candidate.source_refs == refs("run-1") and candidate.artifact_refs == []
    assert "IntegrityError" in candidate.proposal["situation"]
    assert "accounts.py" in candidate.proposal["action"]
    assert distill(runtime) == 0  # read once: the high-water mark moved past it
    assert inbox(runtime) == [candidate]


def test_similar_task_results_merge_then_revise_after_approval(runtime: Runtime) -> None:
    record(runtime, "run-1", fail_then_pass(1))
    distill(runtime)
    assert "IntegrityError" not in pack_text(runtime)  # pending: never in a pack
    record(runtime, "run-2", fail_then_pass(2))
    distill(runtime)
    [merged] = inbox(runtime)  # not a second candidate: v2 with both task results
    assert merged.version == 2 and merged.source_refs == refs("run-1", "run-2")
    assert "IntegrityError" not in pack_text(runtime)
    approved = approve(runtime, merged)
    assert approved.result_artifact is not None
    assert "IntegrityError" in pack_text(runtime)  # approved: now it reaches the pack
    record(runtime, "run-3", fail_then_pass(3))
    distill(runtime)
    [revision] = inbox(runtime)
    head = approved.result_artifact
    assert revision.candidate_id != merged.candidate_id and revision.version == 1
    assert revision.target == head and head in revision.artifact_refs
    assert revision.source_refs == refs("run-1", "run-2", "run-3")
    assert revision.proposal == merged.proposal and revision.proposed_by == "offline"
    # The revision candidate is the lesson's newest: a fourth task result extends it.
    record(runtime, "run-4", fail_then_pass(4))
    distill(runtime)
    [extended] = inbox(runtime)
    assert extended.candidate_id == revision.candidate_id and extended.version == 2
    assert extended.source_refs[-1] == refs("run-4")[0] and extended.target == head
    after = approve(runtime, extended).result_artifact
    assert after == ArtifactRef(family="experience", artifact_id=head.artifact_id, revision=2)


def test_a_rejected_lesson_is_not_proposed_again(runtime: Runtime) -> None:
    record(runtime, "run-1", fail_then_pass(1))
    distill(runtime)
    [candidate] = inbox(runtime)
    runtime.review.reject(
        RejectCandidateRequest(
            scope_id=SCOPE, candidate_id=candidate.candidate_id, expected_version=1,
            decision_reason="not a lesson",
        )
    )  # fmt: skip
    record(runtime, "run-2", fail_then_pass(2))
    distill(runtime)
    assert inbox(runtime) == []


def test_evidence_stops_at_32_references(runtime: Runtime) -> None:
    for i in range(34):
        record(runtime, f"run-{i}", fail_then_pass(i))
    while distill(runtime):
        pass
    [candidate] = inbox(runtime)
    assert len(candidate.source_refs) == 32 and candidate.version == 32
    assert candidate.source_refs == refs(*(f"run-{i}" for i in range(32)))
    assert runtime.distill is not None
    assert runtime.distill.counts()[("offline", "unchanged")] == 2


def test_a_reviewer_deciding_between_read_and_write_makes_the_worker_decide_again(
    runtime: Runtime,
) -> None:
    record(runtime, "run-1", fail_then_pass(1))
    distill(runtime)
    [pending] = inbox(runtime)
    record(runtime, "run-2", fail_then_pass(2))
    service = runtime.distill
    assert service is not None
    calls: list[int] = []

    def reviewer_approves_first() -> None:
        calls.append(1)
        if len(calls) == 1:  # after the worker read v1 pending, before it revises
            approve(runtime, pending)

    service.before_merge_write = reviewer_approves_first
    distill(runtime)
    assert len(calls) == 2  # the revise lost its CAS; the worker read again
    [approved] = inbox(runtime, "approved")
    assert approved.version == 1 and approved.source_refs == refs("run-1")  # no lost write
    [revision] = inbox(runtime)  # no duplicate: a revision candidate of the approved head
    assert revision.target == approved.result_artifact
    assert revision.source_refs == refs("run-1", "run-2")


def test_a_proposal_racing_another_with_the_same_lesson_is_never_a_duplicate(
    runtime: Runtime,
) -> None:
    service = runtime.distill
    assert service is not None
    [lesson] = OfflineDistiller().propose("task-result/run-2", _task(fail_then_pass(2)))
    record(runtime, "run-1", fail_then_pass(1))
    record(runtime, "run-2", fail_then_pass(2))
    calls: list[int] = []

    def another_worker_proposes_first() -> None:
        calls.append(1)
        if len(calls) == 1:  # the worker read "no candidate"; another one wins the write
            service.before_merge_write = lambda: None
            assert service.merge(SCOPE, "offline", lesson, "task-result/run-1") == "proposed"

    service.before_merge_write = another_worker_proposes_first
    assert service.merge(SCOPE, "offline", lesson, "task-result/run-2") == "merged"
    [candidate] = inbox(runtime)
    assert candidate.source_refs == refs("run-1", "run-2")


def _task(task: dict[str, Any]) -> TaskInput:
    return TaskInput.from_mapping(task)


def test_restart_neither_proposes_again_nor_skips(
    backend: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    url = database_url_for(backend, request, tmp_path)
    settings = Settings.load(env={}, home=tmp_path / "home", database_url=url)
    first = Runtime.open(settings)
    try:
        record(first, "run-1", fail_then_pass(1))
        distill(first)
        record(first, "run-2", fail_then_pass(2))  # recorded while the worker is "down"
    finally:
        first.close()
    second = Runtime.open(settings)
    try:
        assert distill(second) == 1  # only run-2: run-1 was read before the restart
        [candidate] = inbox(second)
        assert candidate.version == 2 and candidate.source_refs == refs("run-1", "run-2")
        assert distill(second) == 0
        assert second.distill is not None
        assert second.distill.counts() == {("offline", "merged"): 1}
    finally:
        second.close()


def test_reading_a_task_result_again_changes_nothing(runtime: Runtime) -> None:
    """A crash between a merge and the high-water mark's advance reads it again."""
    record(runtime, "run-1", fail_then_pass(1))
    distill(runtime)
    [lesson] = OfflineDistiller().propose("task-result/run-1", _task(fail_then_pass(1)))
    assert runtime.distill is not None
    assert runtime.distill.merge(SCOPE, "offline", lesson, "task-result/run-1") == "unchanged"
    [candidate] = inbox(runtime)
    approve(runtime, candidate)
    assert runtime.distill.merge(SCOPE, "offline", lesson, "task-result/run-1") == "unchanged"
    assert inbox(runtime) == []


def test_off_switch(tmp_path: Path) -> None:
    settings = Settings.load(env={"POWERCONTEXT_DISTILL": "off"}, home=tmp_path / "home")
    assert settings.distill == ()
    runtime = Runtime.open(settings)
    try:
        assert runtime.distill is None and runtime.distill_worker() is None
        record(runtime, "run-1", fail_then_pass(1))
        assert inbox(runtime) == [] and runtime.distill_counts() == {}
    finally:
        runtime.close()
    for bad in ("model", "offline,magic", " , "):
        with pytest.raises(ConfigError, match="POWERCONTEXT_DISTILL"):
            Settings.load(env={"POWERCONTEXT_DISTILL": bad}, home=tmp_path / "home")
    assert Settings.load(
        env={"POWERCONTEXT_DISTILL": " Offline, offline"}, home=tmp_path / "home"
    ).distill == ("offline",)


class Exploding:
    name = "openai-compatible"

    def propose(self, task_ref: str, task: TaskInput) -> list[Lesson]:
        raise TimeoutError("the model did not answer")


def test_a_failing_distiller_does_not_stop_the_others_or_the_worker(runtime: Runtime) -> None:
    service = DistillService(
        runtime.db,
        runtime.review._store,
        [Exploding(), OfflineDistiller()],  # type: ignore[list-item]
    )
    record(runtime, "run-1", fail_then_pass(1))
    record(runtime, "run-2", {"goal": "g", "outcome": "succeeded"})
    assert service.run_round() == 2
    [candidate] = inbox(runtime)
    assert candidate.proposed_by == "offline"
    counts = service.counts()
    assert counts[("openai-compatible", "failed")] == 2 and counts[("offline", "proposed")] == 1
    record(runtime, "run-3", fail_then_pass(3))
    assert service.run_round() == 1  # the mark moved past the failures: nothing is stuck
    assert inbox(runtime)[0].version == 2


def test_an_agents_proposal_says_so_and_is_never_merged(runtime: Runtime) -> None:
    record(runtime, "run-1", fail_then_pass(1))
    agent = runtime.review.propose_experience(
        ProposeExperienceRequest.model_validate(
            {
                "scope_id": SCOPE,
                "proposal": {"situation": "s", "action": "a", "outcome": "o", "lesson": "l"},
                "source_refs": [{"name": "task-result", "source_id": "task-result/run-1"}],
            }
        )
    )
    assert agent.proposed_by == "agent"
    distill(runtime)
    assert {c.proposed_by for c in inbox(runtime)} == {"agent", "offline"}


def test_provenance_is_exported_and_imported(runtime: Runtime, tmp_path: Path) -> None:
    record(runtime, "run-1", fail_then_pass(1))
    distill(runtime)
    data = _export(runtime)
    lines = [json.loads(line) for line in data.splitlines()]
    [candidate] = [r for r in lines if r.get("type") == "candidate"]
    assert candidate["proposed_by"] == "offline"
    assert candidate["signature"] == signature_digest(SIGNATURE)
    [head] = [r for r in lines if r.get("type") == "source_head"]
    assert head["distill_cursor"] == head["last_position"] == 1
    target = Runtime.open(Settings.load(env={}, home=tmp_path / "target"))
    try:
        import_file(target.db, io.BytesIO(data), document_terms)
        [imported] = inbox(target)
        assert imported.proposed_by == "offline"
        assert distill(target) == 0  # the high-water mark came along: nothing read again
        record(target, "run-2", fail_then_pass(2))
        distill(target)  # and the signature too: the lesson merges into the imported one
        assert [c.version for c in inbox(target)] == [2]
        assert _export(target).count(b'"type":"candidate"') == 1
    finally:
        target.close()


def _export(rt: Runtime) -> bytes:
    out = io.BytesIO()
    export(rt.db, out, [SCOPE])
    return out.getvalue()


def test_the_worker_thread_proposes_when_woken(runtime: Runtime) -> None:
    worker = runtime.distill_worker()
    assert worker is not None
    worker.start()
    try:
        record(runtime, "run-1", fail_then_pass(1))  # wakes the worker
        deadline = time.monotonic() + 30
        while not inbox(runtime):
            assert time.monotonic() < deadline, "no candidate within 30 s"
            time.sleep(0.05)  # polling an outcome, not synchronising on a delay
        state = runtime.distill_state()
        deadline = time.monotonic() + 30
        while state is None or state.counts.get("offline/proposed") != 1:
            assert time.monotonic() < deadline
            time.sleep(0.05)
            state = runtime.distill_state()
        assert runtime.distill_counts()[("offline", "proposed")] == 1
    finally:
        worker.stop()


# -- Skills from approved Experience (services/distill.py merge_skill) --------------------------


def approve_experience(
    rt: Runtime, view: ApprovedExperienceView, evidence: SourceRef
) -> ArtifactRef:
    """An Experience a person proposed and approved (the Skill pass reads approved heads)."""
    candidate = rt.review.propose_experience(
        ProposeExperienceRequest.model_validate(
            {
                "scope_id": SCOPE,
                "proposal": dict(
                    zip(("situation", "action", "outcome", "lesson"), view.texts(), strict=True)
                ),
                "source_refs": [evidence.model_dump()],
            }
        )
    )
    result = approve(rt, candidate).result_artifact
    assert result is not None
    return result


def skills(rt: Runtime, status: str = "pending") -> list[Candidate]:
    return [c for c in inbox(rt, status) if c.family == "skill"]


def test_approved_experiences_sharing_a_topic_become_one_skill_that_grows(
    runtime: Runtime,
) -> None:
    evidence = record(runtime, "run-0", {"goal": "g", "outcome": "succeeded"})  # no lesson
    upgrade, revision, heads = ALEMBIC
    first = approve_experience(runtime, upgrade, evidence)
    distill(runtime)
    assert skills(runtime) == []  # one Experience is no procedure
    second = approve_experience(runtime, revision, evidence)
    pack_before = pack_text(runtime)
    distill(runtime)
    [skill] = skills(runtime)
    assert skill.proposed_by == "offline" and skill.version == 1 and skill.target is None
    assert set(skill.artifact_refs) == {first, second} and skill.source_refs == []
    assert skill.proposal["name"] == "alembic-workflow"
    assert runtime.distill is not None
    assert runtime.distill.counts()[(SKILLS, "proposed")] == 1
    distill(runtime)  # nothing approved since: not even read again
    assert skills(runtime) == [skill]
    third = approve_experience(runtime, heads, evidence)
    distill(runtime)
    [grown] = skills(runtime)  # the pending candidate gained the member: no second one
    assert grown.candidate_id == skill.candidate_id and grown.version == 2
    assert set(grown.artifact_refs) == {first, second, third}
    assert "alembic merge" in grown.proposal["instructions"]
    assert runtime.distill.counts()[(SKILLS, "merged")] == 1
    # A new process looks at every scope once: by signature, that changes nothing.
    assert runtime.distill.merge_skill(SCOPE, _skill_of(runtime)) == "unchanged"
    approved = approve(runtime, grown)
    assert approved.result_artifact is not None and approved.result_artifact.family == "skill"
    assert pack_text(runtime) == pack_before  # a Skill never reaches a pack (spec 06)
    assert skills(runtime) == []


def _skill_of(rt: Runtime) -> Any:
    from powercontext_runtime.distill.skills import propose_skills

    experiences, _ = rt.review._store.list_artifacts(SCOPE, "experience", 100, None)
    [skill] = propose_skills(
        [
            ApprovedExperienceView.from_artifact(
                {"reference": a.reference.model_dump(), "content": a.content}
            )
            for a in experiences
        ]
    )
    return skill


def test_a_rejected_skill_is_not_proposed_again_until_its_group_grows(runtime: Runtime) -> None:
    evidence = record(runtime, "run-0", {"goal": "g", "outcome": "succeeded"})
    upgrade, revision, heads = ALEMBIC
    approve_experience(runtime, upgrade, evidence)
    approve_experience(runtime, revision, evidence)
    distill(runtime)
    [skill] = skills(runtime)
    runtime.review.reject(
        RejectCandidateRequest(
            scope_id=SCOPE, candidate_id=skill.candidate_id, expected_version=1,
            decision_reason="not a procedure",
        )
    )  # fmt: skip
    assert runtime.distill is not None
    assert runtime.distill.merge_skill(SCOPE, _skill_of(runtime)) == "unchanged"
    approve_experience(runtime, heads, evidence)
    distill(runtime)
    [again] = skills(runtime)  # a member the reviewer never saw: judged anew
    assert again.candidate_id != skill.candidate_id and len(again.artifact_refs) == 3


# -- a model distiller's retryable failures -----------------------------------------------------


class Flaky:
    """A model distiller whose endpoint fails ``failures`` times with ``kind``, then answers a
    lesson of its own and the offline distiller's (to prove a retry never duplicates)."""

    name = "openai-compatible"

    def __init__(self, failures: int, kind: str = "timeout") -> None:
        self.failures = failures
        self.kind = kind
        self.calls = 0

    def propose(self, task_ref: str, task: TaskInput) -> list[Lesson]:
        self.calls += 1
        if self.calls <= self.failures:
            raise DistillerUnavailable(self.name, self.kind)  # type: ignore[arg-type]
        own = Lesson(
            rule="model",
            signature="model|run the users tests after changing accounts",
            situation="The duplicate e-mail test failed.",
            action="Changed `app/services/accounts.py`.",
            outcome="`pytest` passed.",
            lesson="Run the users tests after changing accounts.",
            evidence=(task_ref,),
        )
        return [own, *OfflineDistiller().propose(task_ref, task)]


def flaky_service(rt: Runtime, flaky: Flaky, now: list[float]) -> DistillService:
    service = DistillService(
        rt.db,
        rt.review._store,
        [flaky, OfflineDistiller()],  # type: ignore[list-item]
    )
    service.clock = lambda: now[0]
    return service


def test_a_retryable_failure_is_asked_again_after_a_back_off(
    runtime: Runtime, caplog: pytest.LogCaptureFixture
) -> None:
    flaky, now = Flaky(failures=1), [100.0]
    service = flaky_service(runtime, flaky, now)
    record(runtime, "run-1", fail_then_pass(1))
    with caplog.at_level("WARNING", logger="powercontext.distill"):
        assert service.run_round() == 1
    [offline] = inbox(runtime)  # the offline distiller was not held back
    assert offline.proposed_by == "offline" and service.pending_retries() == 1
    [logged] = [r for r in caplog.records if r.getMessage() == "distill_retry_later"]
    assert logged.kind == "timeout"  # type: ignore[attr-defined]
    assert SCOPE not in str(logged.__dict__) and "run-1" not in str(logged.__dict__)
    assert service.run_round() == 0 and flaky.calls == 1  # back-off not over yet
    now[0] += 2.0
    assert service.run_round() == 0 and flaky.calls == 2
    assert service.pending_retries() == 0
    by = {c.proposed_by: c for c in inbox(runtime)}
    assert set(by) == {"offline", "openai-compatible"}  # the model's lesson was not lost
    assert by["openai-compatible"].source_refs == refs("run-1")
    assert by["offline"] == offline  # the same lesson again: already cited, nothing written
    counts = service.counts()
    assert counts[("openai-compatible", "proposed")] == 1
    assert counts[("openai-compatible", "unchanged")] == 1
    assert ("openai-compatible", "failed") not in counts
    assert counts[("offline", "proposed")] == 1


def test_a_refused_answer_is_not_asked_again(runtime: Runtime) -> None:
    flaky, now = Flaky(failures=1, kind="invalid_output"), [0.0]
    service = flaky_service(runtime, flaky, now)
    record(runtime, "run-1", fail_then_pass(1))
    service.run_round()
    assert service.pending_retries() == 0
    assert service.counts()[("openai-compatible", "failed")] == 1
    now[0] += 3600
    service.run_round()
    assert flaky.calls == 1
    assert {c.proposed_by for c in inbox(runtime)} == {"offline"}


def test_retries_stop_at_the_cap_and_count_failed(runtime: Runtime) -> None:
    flaky, now = Flaky(failures=99, kind="unreachable"), [0.0]
    service = flaky_service(runtime, flaky, now)
    record(runtime, "run-1", fail_then_pass(1))
    service.run_round()
    now[0] = 2.0
    service.run_round()
    assert flaky.calls == 2 and service.pending_retries() == 1
    now[0] = 5.9
    service.run_round()
    assert flaky.calls == 2  # the back-off doubled: 4 s after the second call
    now[0] = 6.0
    service.run_round()
    assert flaky.calls == RETRY_ATTEMPTS == 3
    assert service.pending_retries() == 0
    assert service.counts()[("openai-compatible", "failed")] == 1
    now[0] = 3600.0
    service.run_round()
    assert flaky.calls == 3
    record(runtime, "run-2", fail_then_pass(2))
    service.run_round()  # the scope's mark moved on all along: the next task result is read
    assert flaky.calls == 4 and inbox(runtime)[0].version == 2
