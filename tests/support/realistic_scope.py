"""A realistic scope for the portability tests: every family and state a scope can hold.

Entries with revisions, a retirement and tags (one curated for bootstrap), evidence
references, captured sources (some flushed into Memory), Experience approved then revised, a
Skill, a pending and a rejected candidate, a Handoff with two revisions queued for the next
session, and Context References. :data:`QUERIES` are prompts whose packs must survive an
export and import byte for byte.
"""

from __future__ import annotations

from typing import Any

from powercontext_runtime.composition import Runtime
from powercontext_runtime.contract.bootstrap import (
    CommitHandoffRequest,
    HandoffRef,
    SetContextReferencesRequest,
)
from powercontext_runtime.contract.context import PrepareContextRequest
from powercontext_runtime.contract.flush import FlushMemoryRequest
from powercontext_runtime.contract.memory import (
    CaptureSourceRequest,
    MemoryEntry,
    RememberMemoryRequest,
    RetireMemoryEntryRequest,
    ReviseMemoryEntryRequest,
)
from powercontext_runtime.contract.review import (
    ApproveCandidateRequest,
    ProposeExperienceRequest,
    ProposeSkillRequest,
    RejectCandidateRequest,
)
from powercontext_runtime.contract.task_results import RecordTaskResultRequest
from powercontext_runtime.services.auth import Principal

EVERYONE = Principal.unrestricted()

QUERIES = (
    "What do I run before pushing?",
    "I am changing the persistence layer, what should I know?",
    "修改数据库持久化逻辑前要做什么？",
    "How is the OpenAPI client regenerated after a rename?",
    "Which port does the API listen on?",
    "the billing worker retries load_invoice, should I add retries?",
    "weather garden bicycle",  # unrelated: an empty pack must stay empty
)


def _remember(rt: Runtime, scope: str, kind: str, text: str, **extra: Any) -> MemoryEntry:
    request = RememberMemoryRequest.model_validate(
        {"scope_id": scope, "kind": kind, "text": text, **extra}
    )
    return rt.memory.remember(request).entry


def _handoff(rt: Runtime, scope: str, objective: str, base: HandoffRef | None) -> HandoffRef:
    return rt.bootstrap.commit_handoff(
        CommitHandoffRequest.model_validate(
            {
                "scope_id": scope,
                "base": None if base is None else base.model_dump(),
                "content": {
                    "schema": "powercontext.handoff.v1",
                    "objective": objective,
                    "state": ["store done", "search done", "检索已完成"],
                    "disposition": "continuable",
                    "next_action": "run the benchmarks",
                    "omissions": ["the console"],
                },
            }
        )
    ).reference


def populate(rt: Runtime, scope: str, *, referenced: tuple[str, ...] = ()) -> None:
    """Fill ``scope`` with one of everything (deterministic content; ids are random)."""
    evidence = {"name": "content", "source_id": "prompt/run-42"}
    rt.sources.capture(
        CaptureSourceRequest(
            scope_id=scope,
            source_id=evidence["source_id"],
            content="task result: all contract tests green",
            metadata={"host": "codex", "turn": 3, "nested": {"b": 1, "a": [1, 2]}},
        )
    )
    rt.sources.capture(
        CaptureSourceRequest(
            scope_id=scope,
            source_id="prompt/1",
            content="remember: Run make lint before pushing\nand some chatter around it",
        )
    )
    rt.flush.flush(FlushMemoryRequest(scope_id=scope))
    rt.sources.capture(
        CaptureSourceRequest(
            scope_id=scope, source_id="prompt/2", content="not flushed yet: 还没有处理的提示"
        )
    )
    # A recorded task result (a task-result source; its check's token is redacted on the way in).
    rt.task_results.record(
        RecordTaskResultRequest.model_validate(
            {
                "scope_id": scope,
                "task_id": "run-43",
                "task": {
                    "goal": "Make the nightly importer idempotent",
                    "outcome": "failed",
                    "changes": [{"path": "importer/run.py", "added": 12, "removed": 3}],
                    "checks": [
                        {
                            "command": "API_TOKEN=SENTINEL-realistic-token make test",
                            "exit_status": 1,
                            "output_tail": "1 failed, 211 passed\n失败：导入重复",
                        }
                    ],
                    "host": "codex",
                    "session_ref": "session-7",
                },
            }
        )
    )
    port = _remember(rt, scope, "fact", "The API listens on port 9090", tags=["api"])
    _remember(
        rt,
        scope,
        "decision",
        "修改数据库持久化逻辑前先跑契约测试",
        tags=["bootstrap-context", "persistence"],
        reason="we broke OceanBase twice",
        source_refs=[evidence],
    )
    persistence = _remember(
        rt,
        scope,
        "convention",
        "Before changing the persistence layer, run the contract suite on both backends",
        tags=["db", "testing"],
        artifact_refs=[{"family": "memory", "artifact_id": "memory", "revision": 1}],
    )
    retired = _remember(rt, scope, "working_note", "The billing worker is flaky this week")
    for number in range(12):
        _remember(
            rt,
            scope,
            "fact",
            f"The billing worker retries `load_invoice` {number + 2} times in queue q{number}",
        )
    revised = rt.memory.revise(
        ReviseMemoryEntryRequest(
            scope_id=scope, citation=port.citation, text="The API listens on port 9191"
        )
    ).entry
    rt.memory.revise(
        ReviseMemoryEntryRequest(
            scope_id=scope,
            citation=revised.citation,
            tags=["api", "bootstrap-context"],
            reason="curated",
        )
    )
    rt.memory.retire(
        RetireMemoryEntryRequest(scope_id=scope, citation=retired.citation, reason="fixed")
    )
    rt.memory.revise(
        ReviseMemoryEntryRequest(
            scope_id=scope,
            citation=persistence.citation,
            kind="constraint",
            source_refs=[evidence],
        )
    )

    lesson = {
        "situation": "Changing the OpenAPI document",
        "action": "Regenerated the client and ran the contract tests",
        "outcome": "Caught a breaking rename before release",
        "lesson": "After editing openapi, regenerate the client and run contract tests",
    }
    first = rt.review.propose_experience(
        ProposeExperienceRequest.model_validate(
            {"scope_id": scope, "proposal": lesson, "source_refs": [evidence]}
        )
    )
    approved = rt.review.approve(
        ApproveCandidateRequest(scope_id=scope, candidate_id=first.candidate_id, expected_version=1)
    )
    assert approved.result_artifact is not None
    better = rt.review.propose_experience(
        ProposeExperienceRequest.model_validate(
            {
                "scope_id": scope,
                "proposal": {**lesson, "lesson": lesson["lesson"] + " (and the docs)"},
                "artifact_refs": [approved.result_artifact.model_dump()],
                "target": approved.result_artifact.model_dump(),
                "reason": "the docs drift too",
            }
        )
    )
    rt.review.approve(
        ApproveCandidateRequest(
            scope_id=scope, candidate_id=better.candidate_id, expected_version=1
        )
    )
    skill = rt.review.propose_skill(
        ProposeSkillRequest.model_validate(
            {
                "scope_id": scope,
                "proposal": {
                    "name": "release",
                    "description": "Cut a release",
                    "instructions": "Tag, build, publish",
                    "validation": ["the tag exists", "发布成功"],
                },
                "source_refs": [evidence],
            }
        )
    )
    rt.review.approve(
        ApproveCandidateRequest(scope_id=scope, candidate_id=skill.candidate_id, expected_version=1)
    )
    rejected = rt.review.propose_experience(
        ProposeExperienceRequest.model_validate(
            {
                "scope_id": scope,
                "proposal": {**lesson, "situation": "Something else entirely"},
                "source_refs": [evidence],
            }
        )
    )
    rt.review.reject(
        RejectCandidateRequest(
            scope_id=scope,
            candidate_id=rejected.candidate_id,
            expected_version=1,
            decision_reason="not a lesson",
        )
    )
    rt.review.propose_experience(  # stays pending
        ProposeExperienceRequest.model_validate(
            {
                "scope_id": scope,
                "proposal": {**lesson, "situation": "Renaming a field in the API"},
                "source_refs": [evidence],
            }
        )
    )

    ref = _handoff(rt, scope, "Finish the OceanBase backend", None)
    _handoff(rt, scope, "Finish the OceanBase backend, then the console", ref)
    if referenced:
        rt.bootstrap.set_references(
            SetContextReferencesRequest(scope_id=scope, references=list(referenced))
        )


def packs(rt: Runtime, scope: str) -> list[bytes]:
    """The prepared pack of every query, as the bytes a hook would inject (``b''`` if empty)."""
    result = []
    for query in QUERIES:
        pack = rt.context.prepare(PrepareContextRequest(scope_id=scope, query=query), EVERYONE)
        result.append(b"" if pack.content is None else pack.content.encode("utf-8"))
    return result
