"""Hybrid recall: fuse the lexical and the vector channel's candidates (pure, no I/O).

Score-level fusion: a candidate scores its lexical score (0 when only the vector channel
found it) plus ``weight × max(0, cosine − offset)`` (:class:`Admission`): the vector channel
*adds* confidence and never takes any away, and the result stays on the lexical scale (0..1),
so the pack's relative cutoff (:mod:`..services.context`) means the same with the channel on.

Why not reciprocal rank fusion (used until 2026-12-06): RRF scores by rank alone, so the
vector channel's 3rd candidate weighs as much as the lexical channel's 3rd hit whatever their
evidence. On LoCoMo the shipped model's cosines barely separate evidence from the rest (the
share of evidence among its candidates is 1–6 % from cosine 0.3 to 0.7, against 24–27 % for
lexical scores 0.3–0.5), so RRF pushed correct lexical hits down (MRR 0.479 → 0.381), and its
compressed scores (0.40–1.0) defeated the relative cutoff. Measured on the three dev sets in
docs/decisions/semantic-channel.md ("Fusion by score").

Admission is what keeps an unrelated prompt ``empty``:

* a lexical hit has already cleared the lexical relevance floor (:mod:`.scoring`) and is
  always admitted; its cosine only raises it;
* a candidate only the vector channel found is admitted when its cosine similarity reaches
  the :class:`Admission` floor, and at most ``vector_only`` of them are: a search the agent
  asks for admits generously (recall), a pack injected into every prompt strictly (precision).
  Both per model, calibrated on data (docs/decisions/semantic-channel.md).

Order is deterministic: fused score, then the entry id by byte order. A vector-only candidate
scores ``weight × (cosine − offset)``, far below most lexical hits: it leads only where the
lexical channel found little.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Literal, NamedTuple

__all__ = [
    "VECTOR_WEIGHT",
    "Admission",
    "Fused",
    "FusionTrace",
    "MatchedBy",
    "VectorDecision",
    "fuse",
    "vector_only",
]

#: Lexical score a candidate gains per unit of cosine above the offset. Calibrated for
#: USE-multilingual on the LoCoMo dev split, the coding dev set and Debian DDTP together: every
#: weight 0.15–0.3 with an offset 0.25–0.37 keeps hybrid's MRR and pack hit at least
#: lexical's on all three (docs/decisions/semantic-channel.md, "Fusion by score").
VECTOR_WEIGHT = 0.25
MatchedBy = Literal["fts", "vector", "fts+vector"]


class Admission(NamedTuple):
    """Which vector-only candidates may join: cosine ≥ ``floor``, the best ``vector_only`` of
    them (``None``: no cap). And what a cosine adds to a candidate's score: ``weight`` ×
    (cosine − ``offset``), never less than 0. The offset is the model's cosine that says
    nothing yet (``None``: the ``floor``); it is the search floor for both of a model's
    admissions, so a search and a pack rank the same candidates alike."""

    floor: float
    vector_only: int | None = None
    offset: float | None = None
    weight: float = VECTOR_WEIGHT

    def bonus(self, similarity: float) -> float:
        """What a cosine adds to a candidate's lexical score."""
        offset = self.floor if self.offset is None else self.offset
        return self.weight * max(0.0, similarity - offset)


class Fused(NamedTuple):
    key: Hashable
    score: float
    matched_by: MatchedBy


#: What became of one vector candidate: ``fused`` (a lexical hit the vector channel found too),
#: ``admitted`` (vector only, above the floor), ``below_floor`` (vector only, cosine under the
#: admission floor), ``over_cap`` (vector only, above the floor, but the admission's
#: ``vector_only`` places were taken).
VectorDecision = Literal["fused", "admitted", "below_floor", "over_cap"]


@dataclass
class FusionTrace:
    """Filled by :func:`fuse` / :func:`vector_only` when given (``explain_context``): each
    vector candidate's rank, cosine and decision, and every admitted hit best first *before*
    the limit cut (so what fell beyond it is known)."""

    vector: dict[Hashable, tuple[int, float, VectorDecision]] = field(default_factory=dict)
    admitted: list[Fused] = field(default_factory=list)


def fuse(
    lexical: Sequence[tuple[Hashable, float]],
    vector: Sequence[tuple[Hashable, float]],
    admission: Admission,
    limit: int,
    tiebreak: Callable[[Hashable], bytes],
    trace: FusionTrace | None = None,
) -> list[Fused]:
    """``lexical``: admitted lexical hits (key, score in 0..1), best first (keys: entry
    version ids); ``vector``: (key, cosine) best first. The best ``limit`` fused hits."""
    scores: dict[Hashable, float] = {}
    lexical_ids: set[Hashable] = set()
    for rowid, score in lexical:
        if rowid in scores:
            continue
        lexical_ids.add(rowid)
        scores[rowid] = score
    vector_ids: set[Hashable] = set()
    rank = 0
    room = admission.vector_only
    for rowid, similarity in vector:
        if rowid in vector_ids:
            continue
        rank += 1
        if rowid not in lexical_ids:
            if similarity < admission.floor or room == 0:
                if trace is not None:
                    below = similarity < admission.floor
                    trace.vector[rowid] = (rank, similarity, "below_floor" if below else "over_cap")
                continue
            if room is not None:
                room -= 1
        if trace is not None:
            decision: VectorDecision = "fused" if rowid in lexical_ids else "admitted"
            trace.vector[rowid] = (rank, similarity, decision)
        vector_ids.add(rowid)
        scores[rowid] = scores.get(rowid, 0.0) + admission.bonus(similarity)
    fused = [
        Fused(rowid, round(min(1.0, score), 6), _matched(rowid, lexical_ids, vector_ids))
        for rowid, score in scores.items()
    ]
    fused.sort(key=lambda f: (-f.score, tiebreak(f.key)))
    if trace is not None:
        trace.admitted = fused
    return fused[:limit]


def vector_only(
    vector: Sequence[tuple[Hashable, float]],
    admission: Admission,
    limit: int,
    tiebreak: Callable[[Hashable], bytes],
    trace: FusionTrace | None = None,
) -> list[Fused]:
    """The vector channel alone: admitted candidates, scored by their cosine (clipped to
    0..1)."""
    seen: dict[Hashable, float] = {}
    cap = limit if admission.vector_only is None else min(limit, admission.vector_only)
    for rank, (rowid, similarity) in enumerate(vector, start=1):
        if len(seen) == cap:
            if trace is not None:  # what the cap left out, for the explanation
                for later, (key, sim) in enumerate(vector[rank - 1 :], start=rank):
                    if key not in seen and key not in trace.vector:
                        decision: VectorDecision = (
                            "below_floor" if sim < admission.floor else "over_cap"
                        )
                        trace.vector[key] = (later, sim, decision)
            break
        if similarity >= admission.floor and rowid not in seen:
            seen[rowid] = similarity
            if trace is not None:
                trace.vector[rowid] = (rank, similarity, "admitted")
        elif trace is not None and rowid not in trace.vector:
            trace.vector[rowid] = (rank, similarity, "below_floor")
    hits = [
        Fused(rowid, round(min(1.0, max(0.0, sim)), 6), "vector") for rowid, sim in seen.items()
    ]
    hits.sort(key=lambda f: (-f.score, tiebreak(f.key)))
    if trace is not None:
        trace.admitted = hits
    return hits[:limit]


def _matched(rowid: Hashable, lexical: set[Hashable], vector: set[Hashable]) -> MatchedBy:
    if rowid in lexical:
        return "fts+vector" if rowid in vector else "fts"
    return "vector"
