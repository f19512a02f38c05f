"""``prepare_context``: one Memory search, one Experience search, one build, nothing written.

The head revision is read once, inside the same snapshot as the search, and every memory item
cites it: the store returns that revision once for all its hits, so no item can cite another.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Literal, NamedTuple

from ..context.builder import (
    ExperienceHit,
    ItemDecision,
    MemoryHit,
    PreparedContext,
    PreparedContextBuilder,
)
from ..contract.context import PrepareContextRequest
from ..extraction.directives import without_directives
from ..search.analyzer import query_terms
from ..store.memory import FoundEntry
from ..store.review import ApprovedExperience
from ..store.tracing import LexicalTrace
from .auth import Principal
from .bootstrap import BootstrapService
from .memory import MemoryService, MemoryTrace, QueryVector
from .review import ReviewService

__all__ = ["ContextService", "ContextTrace", "Prepared"]

EmptyReason = Literal["", "no_memory", "no_match", "budget"]


class Prepared(NamedTuple):
    """A pack and what the server may say about it (never in the pack itself): the Memory
    search that ran, the fallback's error code, and why an empty pack is empty — ``no_memory``
    (the scope has no Memory and no Experience matched), ``no_match`` (nothing relevant) or
    ``budget`` (candidates, none of which fitted ``max_bytes``). For metrics and logs."""

    pack: PreparedContext
    mode: str
    fallback: str | None
    empty_reason: EmptyReason


MEMORY_CANDIDATES = 16
EXPERIENCE_CANDIDATES = 8
#: A short prompt's pack keeps only the memory hits covering at least this share of what the
#: best-covering hit covers (coverage: the share of the prompt's term weight an entry contains,
#: plus the cosine's bonus with the semantic channel on): items far below the best are noise
#: that fills the pack, not evidence (issue 33). Coverage, not the rank score: the score divides
#: by the entry's length, which orders entries sharing the same terms but says nothing about
#: whether a longer one is evidence. Calibrated on the LoCoMo dev split and the coding dev set
#: (docs/decisions/pack-admission.md): at 0.5 LoCoMo packs go from 7.0 to 4.7 items, precision
#: 0.106 -> 0.151, pack hit 0.668 -> 0.636; the coding dev set keeps its budget rows.
RELATIVE_CUTOFF = 0.5
#: Prompts with more analysed terms than this are about several things at once: each part's
#: entries cover a small share of the whole prompt, far below the best part's, and are kept.
RELATIVE_CUTOFF_MAX_TERMS = 20


def relative_cutoff(
    hits: list[FoundEntry], term_count: int
) -> tuple[list[FoundEntry], list[FoundEntry]]:
    """``hits`` (best first) split into those a pack may take and those it leaves out, each in
    search order: for a prompt of at most :data:`RELATIVE_CUTOFF_MAX_TERMS` terms, a hit is
    taken when its coverage reaches :data:`RELATIVE_CUTOFF` of the best coverage; for a longer
    one, every hit is."""
    if term_count > RELATIVE_CUTOFF_MAX_TERMS or not hits:
        return hits, []
    floor = RELATIVE_CUTOFF * max(hit.coverage for hit in hits)
    kept = [hit for hit in hits if hit.coverage >= floor]
    return kept, [hit for hit in hits if hit.coverage < floor]


@dataclass
class ContextTrace:
    """What one preparation did, recorded by the very code that prepared it
    (``explain_context``): both searches' traces, the hits the builder was given, the versions
    a bootstrap receipt kept out, and the builder's decision for each hit."""

    memory: MemoryTrace = field(default_factory=MemoryTrace)
    experience: LexicalTrace = field(default_factory=LexicalTrace)
    head: int = 0
    memory_hits: list[FoundEntry] = field(default_factory=list)
    #: Memory hits the search admitted but the relative cutoff kept out of the pack.
    memory_cut: list[FoundEntry] = field(default_factory=list)
    experience_hits: list[ApprovedExperience] = field(default_factory=list)
    delivered: frozenset[str] = frozenset()
    decisions: list[ItemDecision] = field(default_factory=list)


class ContextService:
    def __init__(
        self,
        memory: MemoryService,
        review: ReviewService,
        bootstrap: BootstrapService,
        builder: PreparedContextBuilder,
        snapshot: Callable[[], AbstractContextManager[object]],
    ) -> None:
        self._memory = memory
        self._review = review
        self._bootstrap = bootstrap
        self._builder = builder
        self._snapshot = snapshot

    def prepare(self, req: PrepareContextRequest, principal: Principal) -> PreparedContext:
        """``principal``: the caller, whose own bootstrap receipt alone may de-duplicate."""
        return self.prepare_reporting(req, principal).pack

    def prepare_reporting(
        self,
        req: PrepareContextRequest,
        principal: Principal,
        trace: ContextTrace | None = None,
    ) -> Prepared:
        """:meth:`prepare`, and what happened (``auto`` search: hybrid when the semantic
        channel is on and its query embedding answered in time, else fts). ``trace``
        (``explain_context``) is filled with why; the pack is the same with or without it."""
        # ``remember:`` lines are memory writes, not part of the question (issue 17). The
        # query embedding starts before the snapshot and runs alongside the lexical search.
        question = without_directives(req.query)
        query = self._memory.resolve(
            question, "auto", "prepare_context", req.scope_id, MEMORY_CANDIDATES
        )
        with self._snapshot():  # one read transaction for every lookup below
            pack, reason = self._prepare(req, principal, question, query, trace)
        return Prepared(pack, query.mode, query.fallback, reason)

    def _prepare(
        self,
        req: PrepareContextRequest,
        principal: Principal,
        question: str,
        query: QueryVector,
        trace: ContextTrace | None,
    ) -> tuple[PreparedContext, EmptyReason]:
        delivered = (
            frozenset(
                self._bootstrap.delivered_whole(req.scope_id, req.bootstrap_receipt_id, principal)
            )
            if req.bootstrap_receipt_id
            else frozenset()
        )
        terms = query_terms(question)
        result = self._memory.find(
            req.scope_id,
            terms,
            MEMORY_CANDIDATES,
            delivered,
            query,
            None if trace is None else trace.memory,
        )
        approved = self._review.find_experience(
            req.scope_id,
            terms,
            EXPERIENCE_CANDIDATES,
            None if trace is None else trace.experience,
        )
        experience = [
            ExperienceHit(
                artifact_id=found.artifact_id,
                revision=found.revision,
                situation=found.content["situation"],
                action=found.content["action"],
                outcome=found.content["outcome"],
                lesson=found.content["lesson"],
            )
            for found in approved
        ]
        kept, cut = relative_cutoff(result.hits, len(terms))
        hits = [
            MemoryHit(
                revision=result.head,
                entry_id=hit.entry_id,
                entry_version_id=hit.entry_version_id,
                text=hit.text,
            )
            for hit in kept
        ]
        if trace is None:
            pack = self._builder.build(hits, experience, req.max_bytes)
        else:  # the same loop, keeping its decision for each hit
            pack, trace.decisions = self._builder.explain(hits, experience, req.max_bytes)
            trace.head, trace.delivered = result.head, delivered
            trace.memory_hits, trace.experience_hits = kept, approved
            trace.memory_cut = cut
        if pack.status == "ready":
            return pack, ""
        if hits or experience:
            return pack, "budget"
        return pack, "no_memory" if not result.head else "no_match"
