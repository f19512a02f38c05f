"""``explain_context``: a pack and why it holds what it holds (pure composition, no I/O).

Nothing here selects anything. :meth:`ContextService.prepare_reporting` prepares the pack with
a :class:`~.context.ContextTrace` — the very searches and the very builder loop of
``prepare_context`` — and this module only lays the records they kept side by side: for each
candidate, which channel found it, its rank and score, whether it cleared the relevance floor,
and what the builder did with it (taken, truncated, over the budget, beyond a limit, a
duplicate) — or why it never reached the builder (below the floor, past the candidate limit,
delivered whole by a bootstrap receipt). Scores appear here and never in the pack.
"""

from __future__ import annotations

import json
from typing import Any

from ..context.builder import (
    FRAME_BYTES,
    ITEM_CONTENT_MAX_BYTES,
    MIN_TRUNCATED_BYTES,
    ExperienceHit,
    ItemDecision,
    experience_text,
)
from ..contract.context import (
    ExplainBudget,
    ExplainContextResponse,
    ExplainedCandidate,
    LexicalFacts,
    PrepareContextRequest,
    PreparedContextResponse,
    SearchFacts,
    VectorFacts,
)
from ..store.tracing import LexicalTrace, TracedEntry
from .auth import Principal
from .context import (
    EXPERIENCE_CANDIDATES,
    MEMORY_CANDIDATES,
    ContextService,
    ContextTrace,
    Prepared,
)

__all__ = ["PREVIEW_CHARS", "explain", "explanation"]

PREVIEW_CHARS = 240

_BUILDER_OUTCOMES = {"beyond_limit": "beyond_item_limit"}


def explain(
    context: ContextService, req: PrepareContextRequest, principal: Principal
) -> ExplainContextResponse:
    """Prepare ``req`` exactly as ``prepare_context`` does, keeping the records of why."""
    trace = ContextTrace()
    prepared = context.prepare_reporting(req, principal, trace)
    return explanation(prepared, trace, req.max_bytes)


def explanation(prepared: Prepared, trace: ContextTrace, max_bytes: int) -> ExplainContextResponse:
    pack = prepared.pack
    memory = _memory_candidates(trace)
    experience = _experience_candidates(trace)
    return ExplainContextResponse(
        pack=PreparedContextResponse.model_validate(pack.to_wire()),
        mode=prepared.mode,  # type: ignore[arg-type]
        fallback=prepared.fallback,
        empty_reason=prepared.empty_reason or None,
        memory_revision=trace.head or None,
        bootstrap_excluded=len(trace.delivered),
        budget=ExplainBudget(
            max_bytes=max_bytes,
            frame_bytes=FRAME_BYTES,
            content_bytes=pack.content_bytes,
            item_content_cap=ITEM_CONTENT_MAX_BYTES,
            min_truncated_bytes=MIN_TRUNCATED_BYTES,
        ),
        memory_search=_facts(trace.memory.lexical, len(trace.memory_hits), MEMORY_CANDIDATES),
        experience_search=_facts(
            trace.experience, len(trace.experience_hits), EXPERIENCE_CANDIDATES
        ),
        candidates=[*memory[0], *experience[0], *memory[1], *experience[1]],
    )


def _facts(trace: LexicalTrace, returned: int, limit: int) -> SearchFacts:
    return SearchFacts(
        planned=trace.planned, retrieved=trace.retrieved, returned=returned, candidate_limit=limit
    )


def _lexical(trace: LexicalTrace, entry: TracedEntry | None) -> LexicalFacts | None:
    if entry is None:
        return None
    return LexicalFacts(
        rank=entry.rank,
        score=entry.score,
        content=entry.content,
        content_required=trace.content_required,
        evidence=entry.evidence,
        evidence_required=trace.evidence_required,
        cleared_floor=entry.score is not None,
    )


def _decided(decision: ItemDecision) -> dict[str, Any]:
    """The builder's part of a candidate that reached it."""
    return {
        "outcome": _BUILDER_OUTCOMES.get(decision.outcome, decision.outcome),
        "floor": "cleared",
        "pack_position": None if decision.position is None else decision.position + 1,
        "content_bytes": decision.content_bytes,
        "item_bytes": decision.item_bytes,
        "truncation": decision.truncation,
        "remaining_bytes": decision.remaining_bytes,
        "limit": decision.limit,
    }


def _left_out(outcome: str, *, cleared: bool, limit: str | None = None) -> dict[str, Any]:
    """A candidate the search found but did not hand to the builder."""
    return {
        "outcome": outcome,
        "floor": "cleared" if cleared else "below",
        "pack_position": None,
        "content_bytes": 0,
        "item_bytes": 0,
        "truncation": None,
        "remaining_bytes": None,
        "limit": limit,
    }


def _memory_citation(head: int, entry_id: str, version_id: str) -> dict[str, Any]:
    return {
        "memory_ref": {"family": "memory", "artifact_id": "memory", "revision": head},
        "entry_id": entry_id,
        "entry_version_id": version_id,
    }


def _preview(text: str) -> str:
    return text[:PREVIEW_CHARS]


def _memory_candidates(
    trace: ContextTrace,
) -> tuple[list[ExplainedCandidate], list[ExplainedCandidate]]:
    """(the hits the builder was given, in its order; the candidates left out before it)."""
    lexical = trace.memory.lexical
    by_version = {e.version: e for e in lexical.entries}
    fusion = trace.memory.fusion
    vector = {} if fusion is None else fusion.vector
    decisions = {d.index: d for d in trace.decisions if d.family == "memory"}

    def vector_facts(version_id: str) -> VectorFacts | None:
        found = vector.get(version_id)
        if found is None:
            return None
        rank, similarity, decision = found
        return VectorFacts(rank=rank, similarity=round(similarity, 6), decision=decision)

    given = []
    for index, hit in enumerate(trace.memory_hits):
        given.append(
            ExplainedCandidate(
                family="memory",
                citation=_memory_citation(trace.head, hit.entry_id, hit.entry_version_id),
                preview=_preview(hit.text),
                stored_bytes=len(hit.text.encode("utf-8")),
                matched_by=hit.matched_by,  # type: ignore[arg-type]
                search_rank=index + 1,
                score=hit.score,
                lexical=_lexical(lexical, by_version.get(hit.entry_version_id)),
                vector=vector_facts(hit.entry_version_id),
                **_decided(decisions[index]),
            )
        )
    returned = {hit.entry_version_id for hit in trace.memory_hits}
    left: dict[str, ExplainedCandidate] = {}
    for rank, hit in enumerate(trace.memory_cut, start=len(trace.memory_hits) + 1):
        left[hit.entry_version_id] = ExplainedCandidate(
            family="memory",
            citation=_memory_citation(trace.head, hit.entry_id, hit.entry_version_id),
            preview=_preview(hit.text),
            stored_bytes=len(hit.text.encode("utf-8")),
            matched_by=hit.matched_by,  # type: ignore[arg-type]
            search_rank=rank,
            score=hit.score,
            lexical=_lexical(lexical, by_version.get(hit.entry_version_id)),
            vector=vector_facts(hit.entry_version_id),
            **_left_out("below_relative_cutoff", cleared=True),
        )

    def leave(version_id: str, entry_id: str, text: str, details: dict[str, Any]) -> None:
        if version_id in returned or version_id in left:
            return
        left[version_id] = ExplainedCandidate(
            family="memory",
            citation=_memory_citation(trace.head, entry_id, version_id),
            preview=_preview(text),
            stored_bytes=len(text.encode("utf-8")),
            matched_by=None,
            search_rank=None,
            score=None,
            lexical=_lexical(lexical, by_version.get(version_id)),
            vector=vector_facts(version_id),
            **details,
        )

    if fusion is not None:  # admitted by the fusion, cut at the candidate limit
        for fused in fusion.admitted:
            key = str(fused.key)
            if key in returned:
                continue
            entry = by_version.get(key)
            if entry is not None:
                entry_id, text = entry.ident, entry.text
            else:
                entry_id, text = trace.memory.vector[key]
            cut = _left_out("beyond_candidate_limit", cleared=True, limit="memory_candidates")
            leave(key, entry_id, text, cut)
    for entry in lexical.entries:
        if entry.outcome == "delivered":
            details = _left_out("delivered_by_bootstrap", cleared=entry.score is not None)
        elif entry.outcome == "beyond_limit":
            if fusion is not None:  # a lexical cut; the fusion decided again (above)
                continue
            details = _left_out("beyond_candidate_limit", cleared=True, limit="memory_candidates")
        elif entry.outcome == "below_floor":
            found = vector.get(entry.version)
            outcome = "vector_only_cap" if found and found[2] == "over_cap" else "below_floor"
            details = _left_out(outcome, cleared=False)
        else:
            continue
        leave(entry.version, entry.ident, entry.text, details)
    for version_id, (_, _, decision) in vector.items():
        if decision in ("below_floor", "over_cap") and version_id in trace.memory.vector:
            entry_id, text = trace.memory.vector[version_id]
            outcome = "vector_only_cap" if decision == "over_cap" else "below_floor"
            leave(version_id, entry_id, text, _left_out(outcome, cleared=False))
    return given, list(left.values())


def _experience_candidates(
    trace: ContextTrace,
) -> tuple[list[ExplainedCandidate], list[ExplainedCandidate]]:
    lexical = trace.experience
    by_key = {(e.ident, e.version): e for e in lexical.entries}
    decisions = {d.index: d for d in trace.decisions if d.family == "experience"}
    given = []
    for index, hit in enumerate(trace.experience_hits):
        text = experience_text(
            ExperienceHit(hit.artifact_id, hit.revision, **hit.content)  # type: ignore[arg-type]
        )
        given.append(
            ExplainedCandidate(
                family="experience",
                citation=_experience_citation(hit.artifact_id, hit.revision),
                preview=_preview(text),
                stored_bytes=len(text.encode("utf-8")),
                matched_by="fts",
                search_rank=index + 1,
                score=hit.score,
                lexical=_lexical(lexical, by_key.get((hit.artifact_id, str(hit.revision)))),
                vector=None,
                **_decided(decisions[index]),
            )
        )
    left = []
    for entry in lexical.entries:
        if entry.outcome not in ("beyond_limit", "below_floor"):
            continue
        content = json.loads(entry.text)
        text = experience_text(
            ExperienceHit(entry.ident, int(entry.version), **content)  # type: ignore[arg-type]
        )
        beyond = entry.outcome == "beyond_limit"
        left.append(
            ExplainedCandidate(
                family="experience",
                citation=_experience_citation(entry.ident, int(entry.version)),
                preview=_preview(text),
                stored_bytes=len(text.encode("utf-8")),
                matched_by=None,
                search_rank=None,
                score=None,
                lexical=_lexical(lexical, entry),
                vector=None,
                **_left_out(
                    "beyond_candidate_limit" if beyond else "below_floor",
                    cleared=beyond,
                    limit="experience_candidates" if beyond else None,
                ),
            )
        )
    return given, left


def _experience_citation(artifact_id: str, revision: int) -> dict[str, Any]:
    return {
        "artifact_ref": {"family": "experience", "artifact_id": artifact_id, "revision": revision}
    }
