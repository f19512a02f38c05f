"""Application-side ranking and the relevance floor (pure, no I/O).

The full-text engines only retrieve candidates; every score is computed here from document
frequencies that both backends store identically, so SQLite and OceanBase admit the same hits
in the same order.

Retrieval never depends on an engine's own relevance score (OceanBase's lags its statistics and
varies with the query plan). Instead the plan picks the rarest query terms whose document
frequencies add up to at most ``CANDIDATE_BUDGET``: the engine then returns *every* document
containing any of them, an exact set that is the same on every backend.

Why not "match at least a quarter of the query's terms"? Real agent prompts are long and touch
several topics; such a rule rejects everything for them. Evidence is instead weighed by term
selectivity (IDF) and the amount required is capped: an entry must carry at least
``RARE_TERMS_REQUIRED`` rare-term equivalents of the query's evidence, or ``QUERY_SHARE`` of the
whole query's weight for short queries, whichever is smaller.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple

__all__ = [
    "Document",
    "QueryPlan",
    "Ranked",
    "document",
    "plan_query",
    "rank",
    "split_repeats",
    "top",
]

MAX_QUERY_TERMS = 64  # most selective terms kept from a long prompt
MAX_RETRIEVAL_TERMS = 32  # terms sent to the engine
CANDIDATE_BUDGET = 256  # documents the engine may return (sum of the retrieval terms' df)
QUERY_SHARE = 0.3
# Tuned on bench/data/recall_dev.jsonl (spec 08 Q1; bench/RESULTS.md "Recall quality"). 2.0 let
# one shared two-character Chinese word (two unigrams + their bigram = three terms) or a few
# everyday words admit an entry for an unrelated prompt. Higher values cut more of those, but
# three terms with df 2..5 among 5,000 entries weigh only ~2.35 rare-term equivalents and must
# still admit (tests/runtime/test_scoring.py), so the floor stays below that.
RARE_TERMS_REQUIRED = 2.3
CJK_UNIGRAM_WEIGHT = 0.25
_K1 = 1.2
_B = 0.5
_TYPICAL_TERMS = 32.0  # a typical entry's term count; a fixed constant keeps scores stable


@dataclass(frozen=True, slots=True)
class QueryPlan:
    """What to retrieve and how much evidence admits a hit."""

    weights: Mapping[str, float]
    retrieval_terms: tuple[str, ...]
    candidate_limit: int
    total_weight: float
    required: float


class Ranked(NamedTuple):
    rowid: int
    score: float


#: A candidate as ranking reads it: row id, its distinct terms (first-occurrence order) and
#: every further occurrence of a repeated term. Most entries repeat no term, so the term
#: frequency of a matched term is almost always 1 + a count over an empty list, instead of a
#: scan of the whole document per matched term. See :func:`document`.
Document = tuple[int, Sequence[str], Sequence[str]]


def split_repeats(terms: Iterable[str]) -> tuple[list[str], list[str]]:
    """A document's term sequence as (distinct terms in order, extra occurrences)."""
    distinct: dict[str, None] = {}
    repeats: list[str] = []
    for term in terms:
        if term in distinct:
            repeats.append(term)
        else:
            distinct[term] = None
    return list(distinct), repeats


def document(rowid: int, terms: Iterable[str]) -> Document:
    """A candidate for :func:`rank` from a document's full term sequence."""
    return (rowid, *split_repeats(terms))


def _class_weight(term: str) -> float:
    """Single CJK characters count for a quarter of a word.

    A two-character Chinese word yields three terms (two unigrams and the bigram); counted in
    full, one shared everyday word would weigh like three rare English words and admit
    unrelated entries. The bigram carries the word; its characters only corroborate it.
    Unigram terms are ``c`` + 4–5 hex digits (Han) or ``k`` + 4–5 hex digits (kana/Hangul).
    """
    if term[0] in "ck" and len(term) <= 6:
        return CJK_UNIGRAM_WEIGHT
    return 1.0


def _idf(doc_count: int, df: int) -> float:
    # Unlike BM25's classic IDF this never approaches zero for a term in every document, which
    # matters in young scopes with a handful of entries.
    return math.log(1.0 + (doc_count + 1) / (df + 0.5))


def plan_query(
    terms: Sequence[str], doc_count: int, frequencies: Mapping[str, int]
) -> QueryPlan | None:
    """Weigh the query's terms; ``None`` when nothing in the scope can match."""
    seen = [t for t in terms if t in frequencies]
    present = sorted((frequencies[t], t) for t in seen if frequencies[t] > 0)
    if doc_count <= 0 or not present:
        return None
    # Unseen terms still weigh in the query total: a query mostly about something the scope
    # never mentions must not be satisfied by one incidental common word.
    # Keep the most selective terms the scope has seen first, then unseen ones.
    # ``sorted`` is stable: ties keep query order (``terms`` are distinct), so the cap never
    # favours one script over another.
    scored = sorted(seen, key=frequencies.__getitem__)[:MAX_QUERY_TERMS]
    if len(scored) < MAX_QUERY_TERMS:
        scored += [t for t in terms if t not in frequencies][: MAX_QUERY_TERMS - len(scored)]
    weights = {t: _idf(doc_count, frequencies.get(t, 0)) * _class_weight(t) for t in scored}
    total = sum(weights.values())
    retrieval: list[str] = []
    budget = CANDIDATE_BUDGET
    for df, term in present:
        if retrieval and (df > budget or len(retrieval) == MAX_RETRIEVAL_TERMS):
            break
        retrieval.append(term)
        budget -= df
    # Only when even the rarest term is in more than CANDIDATE_BUDGET documents is the set
    # truncated (newest first): such a query is all common words and rarely clears the floor.
    rare_weight = _idf(doc_count, 0)
    required = min(QUERY_SHARE * total, RARE_TERMS_REQUIRED * rare_weight)
    return QueryPlan(
        weights=weights,
        retrieval_terms=tuple(retrieval),
        candidate_limit=CANDIDATE_BUDGET,
        total_weight=total,
        required=required,
    )


def rank(plan: QueryPlan, candidates: Iterable[Document]) -> list[Ranked]:
    """Admitted candidates with scores in 0..1, best first (ties keep retrieval order)."""
    weights = plan.weights
    keys = weights.keys()
    required = plan.required - 1e-9  # the slack absorbs the summation order
    total = plan.total_weight
    admitted: list[Ranked] = []
    for rowid, terms, repeats in candidates:
        # The set intersection runs in C; most candidates are rejected by the floor before
        # any term is counted.
        present = keys & terms
        if sum([weights[t] for t in present]) < required:
            continue
        length = len(terms) + len(repeats)
        length_factor = _K1 * (1.0 - _B + _B * (length / _TYPICAL_TERMS))
        weighted = 0.0
        for t in sorted(present):  # the score's float sum must not depend on hash order
            tf = 1 + repeats.count(t) if repeats else 1
            weighted += weights[t] * tf / (tf + length_factor)
        admitted.append(Ranked(rowid, round(min(1.0, weighted / total), 6)))
    admitted.sort(key=_by_score)
    return admitted


def _by_score(ranked: Ranked) -> float:
    return -ranked.score


def top(ranked: Sequence[Ranked], limit: int) -> list[Ranked]:
    """The best ``limit`` hits plus every hit tied with the last one.

    Ties are broken later by entry id, which the ranking does not know; keeping the whole tie
    group lets the caller fetch only these rows and still order them exactly.
    """
    if len(ranked) <= limit:
        return list(ranked)
    cutoff = ranked[limit - 1].score
    return [r for r in ranked if r.score >= cutoff]
