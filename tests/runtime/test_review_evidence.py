"""A candidate's evidence must exist in its own scope (issue 15 #8), on every backend.

Proposing (and revising with new evidence) checks, inside the write transaction, that every
``source_refs`` item is a source captured in the candidate's scope and every ``artifact_refs``
item is a revision that scope has: Memory up to its head, an Experience/Skill/Handoff revision
row. Anything else is ``404 evidence_not_found`` naming positions only, and a reference that
exists only in another scope is answered exactly like one that exists nowhere.
"""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient
from mcp import Client
from sqlalchemy import func, select

from powercontext_runtime.composition import Runtime
from powercontext_runtime.contract.bootstrap import CommitHandoffRequest
from powercontext_runtime.contract.common import ArtifactRef
from powercontext_runtime.contract.memory import CaptureSourceRequest, RememberMemoryRequest
from powercontext_runtime.contract.review import (
    ApproveCandidateRequest,
    Candidate,
    GetCandidateRequest,
    ProposeExperienceRequest,
    ProposeSkillRequest,
    ReviseCandidateRequest,
)
from powercontext_runtime.errors import NotFoundError
from powercontext_runtime.store.schema import candidate_versions, candidates
from tests.runtime.test_mcp import _error, _ok, _run

SCOPE = "git:example.com/acme/evidence"
OTHER = "git:example.com/other-team/secret"
CAPTURED = "prompt/run-1"
ELSEWHERE = "only-in-the-other-scope"  # captured in OTHER, never in SCOPE


def source(source_id: str) -> dict[str, str]:
    return {"name": "content", "source_id": source_id}


def memory_ref(revision: int, artifact_id: str = "memory") -> dict[str, Any]:
    return {"family": "memory", "artifact_id": artifact_id, "revision": revision}


def experience(marker: str = "x") -> dict[str, str]:
    return {
        "situation": f"situation {marker}",
        "action": f"action {marker}",
        "outcome": f"outcome {marker}",
        "lesson": f"lesson {marker}",
    }


def skill() -> dict[str, Any]:
    return {"name": "n", "description": "d", "instructions": "i", "validation": ["v"]}


def capture(rt: Runtime, scope: str, source_id: str) -> None:
    rt.sources.capture(
        CaptureSourceRequest(scope_id=scope, source_id=source_id, content=f"content {source_id}")
    )


def propose(rt: Runtime, scope: str = SCOPE, **body: Any) -> Candidate:
    request = ProposeExperienceRequest.model_validate(
        {"scope_id": scope, "proposal": experience(), **body}
    )
    return rt.review.propose_experience(request)


def approved_experience(rt: Runtime, scope: str) -> ArtifactRef:
    candidate = propose(rt, scope, source_refs=[source(CAPTURED)])
    approved = rt.review.approve(
        ApproveCandidateRequest(
            scope_id=scope, candidate_id=candidate.candidate_id, expected_version=1
        )
    )
    assert approved.result_artifact is not None
    return approved.result_artifact


def stored_candidates(rt: Runtime) -> tuple[int, int]:
    with rt.db.read() as conn:
        heads = conn.execute(select(func.count()).select_from(candidates)).scalar()
        versions = conn.execute(select(func.count()).select_from(candidate_versions)).scalar()
    return int(heads or 0), int(versions or 0)


def refused(attempt: Any) -> NotFoundError:
    with pytest.raises(NotFoundError) as caught:
        attempt()
    assert caught.value.code == "evidence_not_found"
    return caught.value


@pytest.fixture
def rt(runtime: Runtime) -> Runtime:
    """SCOPE has one captured source and Memory at revision 1; OTHER has its own source."""
    capture(runtime, SCOPE, CAPTURED)
    capture(runtime, OTHER, CAPTURED)
    capture(runtime, OTHER, ELSEWHERE)
    runtime.memory.remember(RememberMemoryRequest(scope_id=SCOPE, kind="fact", text="a fact"))
    return runtime


# -- propose ----------------------------------------------------------------------------------


def test_a_missing_source_is_refused_by_position_and_nothing_is_stored(rt: Runtime) -> None:
    error = refused(
        lambda: propose(
            rt,
            source_refs=[source(CAPTURED), source("never-captured"), source("nor-this")],
            artifact_refs=[memory_ref(1)],
        )
    )
    assert error.details == {"source_refs": [1, 2], "artifact_refs": []}
    assert error.status == 404
    assert "never-captured" not in error.message and SCOPE not in error.message
    assert stored_candidates(rt) == (0, 0)


def test_a_source_of_another_scope_is_missing_here_and_nothing_tells_them_apart(
    rt: Runtime,
) -> None:
    foreign = refused(lambda: propose(rt, source_refs=[source(ELSEWHERE)]))
    nowhere = refused(lambda: propose(rt, source_refs=[source("exists-nowhere")]))
    assert foreign.envelope() == nowhere.envelope()
    assert foreign.details == {"source_refs": [0], "artifact_refs": []}
    envelope = str(foreign.envelope())
    assert ELSEWHERE not in envelope and OTHER not in envelope
    assert stored_candidates(rt) == (0, 0)
    # The same reference is good evidence in the scope that captured it.
    assert propose(rt, OTHER, source_refs=[source(ELSEWHERE)]).status == "pending"


def test_memory_evidence_must_be_a_revision_the_scope_has_reached(rt: Runtime) -> None:
    assert propose(rt, artifact_refs=[memory_ref(1)]).status == "pending"
    beyond = refused(lambda: propose(rt, artifact_refs=[memory_ref(1), memory_ref(2)]))
    assert beyond.details == {"source_refs": [], "artifact_refs": [1]}
    # Memory is one artifact per scope, always called "memory".
    misnamed = refused(lambda: propose(rt, artifact_refs=[memory_ref(1, "mem_other")]))
    assert misnamed.details == {"source_refs": [], "artifact_refs": [0]}
    # OTHER has captured sources but no Memory at all: SCOPE's revision 1 is not evidence there.
    elsewhere = refused(
        lambda: propose(rt, OTHER, source_refs=[source(ELSEWHERE)], artifact_refs=[memory_ref(1)])
    )
    assert elsewhere.details == {"source_refs": [], "artifact_refs": [0]}
    assert stored_candidates(rt) == (1, 1)


def test_an_experience_revision_that_exists_is_accepted_and_others_are_not(rt: Runtime) -> None:
    ref = approved_experience(rt, SCOPE)
    theirs = approved_experience(rt, OTHER)
    before = stored_candidates(rt)
    cited = propose(rt, source_refs=[source(CAPTURED)], artifact_refs=[ref.model_dump()])
    assert cited.artifact_refs == [ref]
    later = {**ref.model_dump(), "revision": 2}
    as_skill = {**ref.model_dump(), "family": "skill"}
    error = refused(
        lambda: propose(rt, artifact_refs=[ref.model_dump(), later, theirs.model_dump(), as_skill])
    )
    assert error.details == {"source_refs": [], "artifact_refs": [1, 2, 3]}
    assert stored_candidates(rt) == (before[0] + 1, before[1] + 1)


def test_skill_and_handoff_revisions_count_and_skill_proposals_are_checked_too(
    rt: Runtime,
) -> None:
    handoff = rt.bootstrap.commit_handoff(
        CommitHandoffRequest.model_validate(
            {
                "scope_id": SCOPE,
                "base": None,
                "content": {
                    "schema": "powercontext.handoff.v1",
                    "objective": "o",
                    "state": ["s"],
                    "disposition": "continuable",
                },
            }
        )
    ).reference

    def propose_skill(**body: Any) -> Candidate:
        request = ProposeSkillRequest.model_validate(
            {"scope_id": SCOPE, "proposal": skill(), **body}
        )
        return rt.review.propose_skill(request)

    first = propose_skill(artifact_refs=[handoff.model_dump()])
    ref = rt.review.approve(
        ApproveCandidateRequest(scope_id=SCOPE, candidate_id=first.candidate_id, expected_version=1)
    ).result_artifact
    assert ref is not None and ref.family == "skill"
    # Modifying the skill: the target is evidence that exists (it is the checked head).
    change = propose_skill(artifact_refs=[ref.model_dump()], target=ref.model_dump())
    assert change.target == ref
    error = refused(
        lambda: propose_skill(
            source_refs=[source(ELSEWHERE)],
            artifact_refs=[{**handoff.model_dump(), "revision": 2}],
        )
    )
    assert error.details == {"source_refs": [0], "artifact_refs": [0]}


# -- revise -----------------------------------------------------------------------------------


def revise(rt: Runtime, candidate: Candidate, **body: Any) -> Candidate:
    request = ReviseCandidateRequest.model_validate(
        {
            "scope_id": SCOPE,
            "candidate_id": candidate.candidate_id,
            "expected_version": candidate.version,
            "proposal": experience("revised"),
            **body,
        }
    )
    return rt.review.revise(request)


def test_revising_with_missing_evidence_is_refused_and_leaves_the_candidate(
    rt: Runtime,
) -> None:
    candidate = propose(rt, source_refs=[source(CAPTURED)])
    error = refused(
        lambda: revise(rt, candidate, source_refs=[source(CAPTURED), source(ELSEWHERE)])
    )
    assert error.details == {"source_refs": [1], "artifact_refs": []}
    error = refused(lambda: revise(rt, candidate, artifact_refs=[memory_ref(9)]))
    assert error.details == {"source_refs": [], "artifact_refs": [0]}  # sources carried over
    current = rt.review.get(
        GetCandidateRequest(scope_id=SCOPE, candidate_id=candidate.candidate_id)
    )
    assert current == candidate
    assert stored_candidates(rt) == (1, 1)
    # New evidence that exists is taken; omitted evidence is carried over unchecked.
    revised = revise(rt, candidate, artifact_refs=[memory_ref(1)])
    assert (revised.version, revised.source_refs) == (2, candidate.source_refs)
    assert [r.model_dump() for r in revised.artifact_refs] == [memory_ref(1)]


# -- HTTP and MCP -----------------------------------------------------------------------------


def test_http_answers_404_evidence_not_found_with_positions_only(api: TestClient) -> None:
    def post(path: str, body: dict[str, Any]) -> Any:
        return api.post(path, json=body)

    captured = post(
        "/v1/sources/content", {"scope_id": OTHER, "source_id": ELSEWHERE, "content": "theirs"}
    )
    assert captured.status_code == 202
    body = {"scope_id": SCOPE, "proposal": experience(), "source_refs": [source(ELSEWHERE)]}
    response = post("/v1/experience/propose", body)
    assert response.status_code == 404
    assert response.json() == {
        "error": {
            "code": "evidence_not_found",
            "message": "some evidence references do not exist in this scope",
            "details": {"source_refs": [0], "artifact_refs": []},
        }
    }
    assert ELSEWHERE not in response.text and OTHER not in response.text
    listed = post("/v1/artifact-candidates/list", {"scope_id": SCOPE})
    assert listed.json()["candidates"] == []
    # Captured here, it is accepted; revising with a Memory revision nobody wrote is not.
    mine = {"scope_id": SCOPE, "source_id": ELSEWHERE, "content": "ours"}
    assert post("/v1/sources/content", mine).status_code == 202
    proposed = post("/v1/experience/propose", body)
    assert proposed.status_code == 201, proposed.text
    revised = post(
        "/v1/artifact-candidates/revise",
        {
            "scope_id": SCOPE,
            "candidate_id": proposed.json()["candidate_id"],
            "expected_version": 1,
            "proposal": experience("revised"),
            "artifact_refs": [memory_ref(1)],
        },
    )
    assert revised.status_code == 404
    assert revised.json()["error"]["code"] == "evidence_not_found"
    assert revised.json()["error"]["details"] == {"source_refs": [], "artifact_refs": [0]}


def test_mcp_tools_answer_evidence_not_found_with_positions_only(
    sqlite_runtime: Runtime,
) -> None:
    capture(sqlite_runtime, OTHER, ELSEWHERE)
    capture(sqlite_runtime, SCOPE, CAPTURED)

    async def scenario(client: Client) -> None:
        error = _error(await client.call_tool("propose_skill", {
            "scope_id": SCOPE, "proposal": skill(),
            "source_refs": [source(CAPTURED), source(ELSEWHERE)],
        }), "evidence_not_found")  # fmt: skip
        assert error["details"] == {"source_refs": [1], "artifact_refs": []}
        assert ELSEWHERE not in str(error) and OTHER not in str(error)
        listed = _ok(await client.call_tool("list_artifact_candidates", {"scope_id": SCOPE}))
        assert listed["candidates"] == []
        proposed = _ok(await client.call_tool("propose_experience", {
            "scope_id": SCOPE, "proposal": experience(), "source_refs": [source(CAPTURED)],
        }))  # fmt: skip
        error = _error(await client.call_tool("revise_artifact_candidate", {
            "scope_id": SCOPE, "candidate_id": proposed["candidate_id"], "expected_version": 1,
            "proposal": experience("revised"), "source_refs": [source(ELSEWHERE)],
        }), "evidence_not_found")  # fmt: skip
        assert error["details"] == {"source_refs": [0], "artifact_refs": []}
        current = _ok(await client.call_tool("get_artifact_candidate", {
            "scope_id": SCOPE, "candidate_id": proposed["candidate_id"],
        }))  # fmt: skip
        assert current == proposed

    _run(sqlite_runtime, scenario)
