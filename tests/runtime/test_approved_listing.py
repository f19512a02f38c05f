"""Listing approved Experience and Skills (issue 16 #7) on every backend, and the ``/health``
alias in-process (the clients' methods: tests/e2e/test_daemon_cli_papercuts.py).

``list_experiences`` / ``list_skills`` page through the current head of each approved artifact
in the order the artifacts were first approved; revising one never moves it, so a listing that
is paged while reviewers approve neither skips nor repeats an artifact.
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from fastapi.testclient import TestClient

from powercontext_runtime.composition import Runtime
from powercontext_runtime.contract.review import (
    ExperienceArtifact,
    GetArtifactRequest,
    ListArtifactsRequest,
    ProposeSkillRequest,
)
from powercontext_runtime.contract.task_results import RecordTaskResultRequest
from powercontext_runtime.errors import InvalidRequestError, UnavailableError
from powercontext_runtime.http import create_app
from powercontext_runtime.store import review as review_store
from tests.runtime.test_review_contract import EVIDENCE, SCOPE, approve, experience, propose

SKILL = {
    "name": "ship-it",
    "description": "Cut a release",
    "instructions": "Run the release script",
    "validation": ["CI is green", "the changelog names the version"],
}


@pytest.fixture
def rt(runtime: Runtime) -> Runtime:
    """The backend's runtime with the cited task result recorded (evidence must exist)."""
    runtime.task_results.record(
        RecordTaskResultRequest.model_validate(
            {"scope_id": SCOPE, "task_id": "run-42", "task": {"goal": "g", "outcome": "failed"}}
        )
    )
    assert EVIDENCE[0]["source_id"] == "task-result/run-42"
    return runtime


def _experiences(rt: Runtime, scope: str = SCOPE, **fields: Any) -> tuple[list[Any], Any]:
    page = rt.review.list_experiences(ListArtifactsRequest(scope_id=scope, **fields))
    return page.experiences, page.next_cursor


def _all_experience_ids(rt: Runtime, limit: int) -> list[tuple[str, int]]:
    seen: list[tuple[str, int]] = []
    cursor = None
    for _ in range(100):
        items, cursor = _experiences(rt, limit=limit, **({"cursor": cursor} if cursor else {}))
        seen += [(i.reference.artifact_id, i.reference.revision) for i in items]
        if cursor is None:
            return seen
    raise AssertionError("the listing never ended")


def _approve_new(rt: Runtime, lesson: str) -> Any:
    ref = approve(rt, propose(rt, experience(lesson=lesson))).result_artifact
    assert ref is not None
    return ref


def test_an_empty_scope_lists_nothing(rt: Runtime) -> None:
    assert _experiences(rt) == ([], None)
    listed = rt.review.list_skills(ListArtifactsRequest(scope_id=SCOPE))
    assert (listed.skills, listed.next_cursor) == ([], None)
    # Pending and rejected candidates are not artifacts.
    propose(rt)
    assert _experiences(rt) == ([], None)


def test_heads_in_first_approval_order_paged_and_stable_under_revision(
    rt: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A clock that ticks once per reading, so no two approvals share a millisecond (artifact
    # ids are random: ordered by id, five artifacts would come back in approval order by
    # chance once in 120 runs).
    ticks = itertools.count(1_800_000_000_000)
    monkeypatch.setattr(review_store, "now_ms", lambda: next(ticks))
    refs = [_approve_new(rt, f"lesson number {i}") for i in range(5)]
    before = _all_experience_ids(rt, limit=2)
    assert before == [(r.artifact_id, 1) for r in refs]
    # Each item is exactly what get_experience returns for that head.
    items, cursor = _experiences(rt, limit=2)
    assert len(items) == 2 and cursor is not None
    for item in items:
        exact = rt.review.get_experience(
            GetArtifactRequest(scope_id=SCOPE, artifact=item.reference)
        )
        assert item == exact
    rest, cursor = _experiences(rt, limit=2, cursor=cursor)
    assert len(rest) == 2 and cursor is not None
    rest, cursor = _experiences(rt, limit=2, cursor=cursor)
    assert len(rest) == 1 and cursor is None

    # Revising the first-listed artifact gives it a new head, and it keeps its place.
    first = items[0].reference
    change = propose(
        rt,
        experience(lesson="the revised lesson"),
        artifact_refs=[first.model_dump()],
        target=first.model_dump(),
    )
    approve(rt, change)
    after = _all_experience_ids(rt, limit=1)
    assert after == [(first.artifact_id, 2), *before[1:]]
    head = next(i for i in _experiences(rt)[0] if i.reference.artifact_id == first.artifact_id)
    assert isinstance(head, ExperienceArtifact)
    assert head.content.lesson == "the revised lesson"
    assert head.artifact_refs == [first]


def test_skills_and_experience_are_listed_apart_and_per_scope(
    rt: Runtime,
) -> None:
    experience_ref = _approve_new(rt, "an experience")
    skill = rt.review.propose_skill(
        ProposeSkillRequest.model_validate(
            {"scope_id": SCOPE, "proposal": SKILL, "source_refs": EVIDENCE}
        )
    )
    skill_ref = approve(rt, skill).result_artifact
    skills = rt.review.list_skills(ListArtifactsRequest(scope_id=SCOPE)).skills
    assert [s.reference for s in skills] == [skill_ref]
    assert skills[0].content.validation == SKILL["validation"]
    assert [e.reference for e in _experiences(rt)[0]] == [experience_ref]
    assert _experiences(rt, scope=SCOPE + "-other") == ([], None)


def test_a_cursor_the_server_did_not_issue_is_invalid(rt: Runtime) -> None:
    with pytest.raises(InvalidRequestError):
        _experiences(rt, cursor="not-a-cursor")


# -- /health -----------------------------------------------------------------------------------


def test_health_is_the_readiness_answer_without_a_token(
    sqlite_runtime: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    with TestClient(create_app(sqlite_runtime), base_url="http://localhost") as anonymous:
        ready = anonymous.get("/health/ready")
        health = anonymous.get("/health")
        assert (health.status_code, health.json()) == (200, ready.json())
        assert health.json()["database"] == "sqlite"
        assert health.json()["embeddings"]["state"] == "off"

        def unwritable(**_: object) -> None:
            raise UnavailableError("the database is read-only")

        monkeypatch.setattr(sqlite_runtime.db, "check_writes", unwritable)
        ready, health = anonymous.get("/health/ready"), anonymous.get("/health")
        assert health.status_code == ready.status_code == 503
        assert health.json() == ready.json()
        assert health.json()["error"]["code"] == "runtime_not_ready"
