"""``explain_context`` on every backend: the very pack of ``prepare_context`` and why.

The explanation comes from the same searches and the same builder loop as the pack (records
they keep when asked), so these tests check two things: the pack is byte-identical to
``prepare_context``'s for the same request, and each candidate's stated outcome matches what
the pack actually holds.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from fastapi.testclient import TestClient

from powercontext_runtime.composition import Runtime
from powercontext_runtime.contract.bootstrap import (
    BootstrapContextRequest,
    RecordReceiptRequest,
)
from powercontext_runtime.contract.context import ExplainContextResponse, PrepareContextRequest
from powercontext_runtime.contract.memory import CaptureSourceRequest, RememberMemoryRequest
from powercontext_runtime.contract.review import (
    ApproveCandidateRequest,
    ProposeExperienceRequest,
)
from powercontext_runtime.search.analyzer import query_terms
from powercontext_runtime.services.auth import Principal
from powercontext_runtime.services.explain import explain

SCOPE = "git:example.com/acme/explain"
EVERYTHING = Principal.unrestricted()
PROMPTS = (
    "persistence contract tests",
    "what should I run before changing the persistence layer?",
    "staging database reset",
    "修改数据库持久化逻辑",
    "weather garden bicycle",
)


def remember(rt: Runtime, text: str, **fields: Any) -> Any:
    body = {"scope_id": SCOPE, "kind": "fact", "text": text, **fields}
    return rt.memory.remember(RememberMemoryRequest.model_validate(body)).entry


def prepare(rt: Runtime, **fields: Any) -> Any:
    return rt.context.prepare(PrepareContextRequest(scope_id=SCOPE, **fields), EVERYTHING)


def explained(rt: Runtime, **fields: Any) -> ExplainContextResponse:
    return explain(rt.context, PrepareContextRequest(scope_id=SCOPE, **fields), EVERYTHING)


def pack_items(content: str | None) -> list[dict[str, Any]]:
    assert content is not None
    return json.loads(content.split("\n")[4])["items"]


def seed(rt: Runtime) -> None:
    remember(rt, "Run the persistence contract tests on SQLite and OceanBase")
    for n in range(18):  # many admitted candidates, some long: limits and budget both bite
        remember(rt, f"Persistence contract tests, note {n}: " + "keep the schema stable. " * n)
    remember(rt, "修改数据库持久化逻辑前先跑契约测试", kind="decision")
    remember(rt, "The staging database is reset every night")


def test_the_pack_is_byte_identical_to_prepare_context(runtime: Runtime) -> None:
    seed(runtime)
    for prompt in PROMPTS:
        for max_bytes in (512, 1500, 8000, 32768):
            pack = prepare(runtime, query=prompt, max_bytes=max_bytes)
            answer = explained(runtime, query=prompt, max_bytes=max_bytes)
            assert answer.pack.model_dump(by_alias=True) == pack.to_wire(), (prompt, max_bytes)
            assert answer.budget.content_bytes == pack.content_bytes


def test_each_candidate_says_what_became_of_it(runtime: Runtime) -> None:
    seed(runtime)
    answer = explained(runtime, query="persistence contract tests", max_bytes=1500)
    items = pack_items(answer.pack.content)
    given = [c for c in answer.candidates if c.search_rank is not None]
    assert [c.search_rank for c in given] == list(range(1, len(given) + 1))
    assert len(given) == answer.memory_search.returned == 16  # the candidate limit
    assert answer.memory_search.retrieved >= 19
    taken = sorted(
        (c for c in answer.candidates if c.outcome in ("taken", "truncated")),
        key=lambda c: c.pack_position or 0,
    )
    # Exactly the pack's items, in the pack's order, with their bytes.
    assert [c.citation for c in taken] == [i["citation"] for i in items]
    assert [c.pack_position for c in taken] == list(range(1, len(items) + 1))
    for candidate, item in zip(taken, items, strict=True):
        assert candidate.content_bytes == len(item["content"].encode("utf-8"))
        assert (candidate.outcome == "truncated") == item["truncated"]
        assert candidate.floor == "cleared" and candidate.matched_by == "fts"
        assert candidate.lexical is not None and candidate.lexical.cleared_floor
    frame = answer.budget.frame_bytes + len(taken) - 1
    assert frame + sum(c.item_bytes for c in taken) == answer.pack.content_bytes
    outcomes = {c.outcome for c in answer.candidates}
    assert {"over_budget", "beyond_item_limit", "beyond_candidate_limit"} <= outcomes
    for candidate in answer.candidates:
        if candidate.outcome == "beyond_item_limit":
            assert candidate.limit == "memory_items" and candidate.search_rank > 8
        if candidate.outcome == "beyond_candidate_limit":
            assert candidate.limit == "memory_candidates" and candidate.search_rank is None
            assert candidate.lexical is not None and candidate.lexical.score is not None
        if candidate.outcome == "over_budget":  # not even 64 bytes and its citation fitted
            assert candidate.remaining_bytes is not None
            assert 0 <= candidate.remaining_bytes < 64 + len(json.dumps(candidate.citation))
    # The pack never carries a score; the explanation does.
    assert "score" not in (answer.pack.content or "")
    assert all(c.score is not None for c in given)


def test_an_entry_below_the_floor_is_named_with_its_evidence(runtime: Runtime) -> None:
    remember(runtime, "The staging database is reset every night at two")
    remember(runtime, "Billing exports run on the night shift worker")
    answer = explained(runtime, query="staging database reset")
    (taken,) = [c for c in answer.candidates if c.outcome == "taken"]
    assert "staging" in taken.preview
    below = [c for c in answer.candidates if c.outcome == "below_floor"]
    for candidate in below:
        assert candidate.floor == "below" and candidate.lexical is not None
        facts = candidate.lexical
        assert facts.content < facts.content_required and facts.evidence < facts.evidence_required
    empty = explained(runtime, query="weather garden bicycle")
    assert empty.pack.status == "empty" and empty.empty_reason == "no_match"
    assert all(c.outcome == "below_floor" for c in empty.candidates)


def test_a_long_entry_is_truncated_at_the_item_cap(runtime: Runtime) -> None:
    long = remember(runtime, "Deploy checklist: " + "verify the canary dashboards. " * 120)
    answer = explained(runtime, query="deploy checklist canary dashboards", max_bytes=8000)
    (candidate,) = answer.candidates
    assert candidate.citation["entry_id"] == long.citation.entry_id
    assert candidate.outcome == "truncated" and candidate.truncation == "item_cap"
    assert candidate.content_bytes == 2000 and candidate.stored_bytes > 2000
    tight = explained(runtime, query="deploy checklist canary dashboards", max_bytes=1000)
    assert tight.candidates[0].truncation == "budget"
    assert tight.candidates[0].content_bytes < 2000


def test_versions_a_bootstrap_receipt_delivered_are_named(runtime: Runtime) -> None:
    tags = ["bootstrap-context"]
    delivered = remember(runtime, "Deploy checklist: run the smoke tests", tags=tags)
    remember(runtime, "Deploy checklist: smoke tests first, then the canary (docs/deploy.md)")
    boot = runtime.bootstrap.bootstrap(
        BootstrapContextRequest.model_validate(
            {"scope_id": SCOPE, "enabled": True, "profile": "powercontext.scope-bootstrap.v1",
             "lifecycle": "startup", "integration": "codex", "event_id": "session-1"}
        ),
        EVERYTHING,
    )  # fmt: skip
    receipt = boot.receipt.receipt_id
    runtime.bootstrap.record_receipt(
        RecordReceiptRequest(scope_id=SCOPE, receipt_id=receipt, state="injected"), EVERYTHING
    )
    fields = {"query": "deploy checklist smoke tests", "bootstrap_receipt_id": receipt}
    answer = explained(runtime, **fields)
    assert answer.pack.model_dump(by_alias=True) == prepare(runtime, **fields).to_wire()
    assert answer.bootstrap_excluded == 1
    (kept_out,) = [c for c in answer.candidates if c.outcome == "delivered_by_bootstrap"]
    assert kept_out.citation["entry_version_id"] == delivered.citation.entry_version_id
    assert kept_out.floor == "cleared"  # it would have been recalled
    assert all(
        c.citation["entry_id"] != delivered.citation.entry_id
        for c in answer.candidates
        if c.outcome == "taken"
    )


def test_experience_candidates_are_explained_beside_memory(runtime: Runtime) -> None:
    runtime.sources.capture(CaptureSourceRequest(scope_id=SCOPE, source_id="s1", content="x"))
    for n in range(3):
        candidate = runtime.review.propose_experience(
            ProposeExperienceRequest.model_validate(
                {"scope_id": SCOPE, "source_refs": [{"name": "content", "source_id": "s1"}],
                 "proposal": {"situation": f"Changing the OpenAPI document ({n})",
                              "action": "Regenerated the client",
                              "outcome": "Caught a breaking rename",
                              "lesson": "After editing openapi, regenerate the client"}}
            )
        )  # fmt: skip
        runtime.review.approve(
            ApproveCandidateRequest(
                scope_id=SCOPE, candidate_id=candidate.candidate_id, expected_version=1
            )
        )
    remember(runtime, "The openapi document is generated by make openapi")
    answer = explained(runtime, query="regenerate the openapi client")
    assert (
        answer.pack.model_dump(by_alias=True)
        == prepare(runtime, query="regenerate the openapi client").to_wire()
    )
    experience = [c for c in answer.candidates if c.family == "experience"]
    assert answer.experience_search.returned == 3 == len(experience)
    assert [c.outcome for c in experience].count("taken") == 2
    (third,) = [c for c in experience if c.outcome != "taken"]
    assert third.outcome == "beyond_item_limit" and third.limit == "experience_items"
    assert all("artifact_ref" in c.citation and c.preview.startswith("Situation:")
               for c in experience)  # fmt: skip


def test_nothing_in_the_scope_is_no_memory(runtime: Runtime) -> None:
    answer = explained(runtime, query="anything at all")
    assert answer.pack.status == "empty" and answer.empty_reason == "no_memory"
    assert answer.candidates == [] and answer.memory_revision is None
    assert not answer.memory_search.planned


def test_http_explain_needs_read_and_counts_no_pack(api: TestClient) -> None:
    body = {"scope_id": SCOPE, "kind": "fact", "text": "Run make lint before pushing"}
    assert api.post("/v1/memory/remember", json=body).status_code == 200
    request = {"scope_id": SCOPE, "query": "what do I run before pushing?", "max_bytes": 2048}
    pack = api.post("/v1/context/prepare", json=request)
    answer = api.post("/v1/context/explain", json=request)
    assert answer.status_code == 200, answer.text
    assert answer.json()["pack"] == pack.json()
    assert answer.json()["candidates"][0]["score"] > 0
    metrics = api.get("/metrics").text
    assert 'powercontext_context_packs_total{mode="fts",operation="prepare_context"' in metrics
    assert 'operation="explain_context",reason' not in metrics  # not a recall outcome
    assert 'operation="explain_context",status="200"' in metrics
    refused = api.post("/v1/context/explain", json={**request, "surprise": 1})
    assert refused.status_code == 422


@pytest.mark.parametrize("max_bytes", [511, 32769])
def test_explain_takes_exactly_prepare_contexts_request(api: TestClient, max_bytes: int) -> None:
    request = {"scope_id": SCOPE, "query": "q", "max_bytes": max_bytes}
    assert api.post("/v1/context/explain", json=request).status_code == 422


CUTOFF_TEXTS = (
    "The staging database is reset every night by the reset-staging job; keep no test data there.",
    "The invoice service writes to its own Postgres database.",
    "Feature flags live in LaunchDarkly; staging has its own project.",
)


def test_a_short_prompt_s_pack_leaves_out_hits_far_below_the_best(runtime: Runtime) -> None:
    """Issue 33: a hit the search admitted but covering under half of what the best one covers
    is noise in a short prompt's pack; explain names it. A long prompt (several topics) keeps
    such hits."""
    strong, weak, _ = (remember(runtime, text) for text in CUTOFF_TEXTS)
    short = "when is the staging database reset?"
    found = runtime.memory.find(SCOPE, query_terms(short), 16).hits
    coverage = {hit.entry_id: hit.coverage for hit in found}
    assert coverage[weak.citation.entry_id] < 0.5 * coverage[strong.citation.entry_id]
    pack = prepare(runtime, query=short)
    cited = [item["citation"]["entry_id"] for item in pack_items(pack.content)]
    assert cited == [strong.citation.entry_id]
    why = explained(runtime, query=short)
    assert why.pack.content == pack.content
    outcomes = {c.citation.get("entry_id"): c.outcome for c in why.candidates}
    assert outcomes[weak.citation.entry_id] == "below_relative_cutoff"
    assert outcomes[strong.citation.entry_id] == "taken"

    long = (
        "Before the quarterly review I am writing the onboarding page on the staging database: "
        "when it is reset, which reset-staging job resets it every night, why nobody may keep "
        "test data there, and who to ask when the nightly reset fails; also mention the "
        "invoice service."
    )
    assert len(query_terms(long)) > 20
    long_found = runtime.memory.find(SCOPE, query_terms(long), 16).hits
    assert [h.entry_id for h in long_found][:2] == [
        strong.citation.entry_id,
        weak.citation.entry_id,
    ]
    assert long_found[1].coverage < 0.5 * long_found[0].coverage  # kept all the same
    long_cited = {
        i["citation"]["entry_id"] for i in pack_items(prepare(runtime, query=long).content)
    }
    assert long_cited == {h.entry_id for h in long_found}


def test_the_cutoff_compares_what_a_hit_covers_not_its_length_normalised_score(
    runtime: Runtime,
) -> None:
    """A long entry sharing every term of the prompt ranks low (the score divides by length)
    but covers as much of the prompt as the best hit: the pack keeps it. A short entry ranked
    above it that shares one term is left out, so the pack is not a prefix of the search."""
    strong, weak, _ = (remember(runtime, text) for text in CUTOFF_TEXTS)
    runbook = remember(
        runtime,
        "Staging database reset runbook: "
        + " ".join(
            f"step {n} check the replica lag, the backup age and the schema version before going on"
            for n in range(1, 17)
        ),
    )
    short = "when is the staging database reset?"
    found = runtime.memory.find(SCOPE, query_terms(short), 16).hits
    by_id = {hit.entry_id: hit for hit in found}
    best, long_one, one_term = (
        by_id[e.citation.entry_id] for e in (strong, runbook, weak)
    )  # fmt: skip
    assert [h.entry_id for h in found] == [best.entry_id, one_term.entry_id, long_one.entry_id]
    assert long_one.score < 0.5 * best.score  # a cutoff on the score would drop it
    assert long_one.coverage == best.coverage
    assert one_term.coverage < 0.5 * best.coverage
    pack = prepare(runtime, query=short)
    cited = [item["citation"]["entry_id"] for item in pack_items(pack.content)]
    assert cited == [best.entry_id, long_one.entry_id]
    why = explained(runtime, query=short)
    assert why.pack.content == pack.content
    outcomes = {c.citation.get("entry_id"): c.outcome for c in why.candidates}
    assert outcomes[one_term.entry_id] == "below_relative_cutoff"
    assert outcomes[long_one.entry_id] == "taken"
