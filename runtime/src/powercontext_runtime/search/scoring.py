"""Application-side ranking and the relevance floor (pure, no I/O).

The full-text engines only retrieve candidates; every score is computed here from document
frequencies that both backends store identically, so SQLite and OceanBase admit the same hits
in the same order.

Retrieval never depends on an engine's own relevance score (OceanBase's lags its statistics and
varies with the query plan). Instead the plan picks the most useful query terms whose document
frequencies add up to at most ``CANDIDATE_BUDGET``: the engine then returns *every* document
containing any of them, an exact set that is the same on every backend.

**The relevance floor** (issue 17; derivation and measurements in
docs/decisions/recall-floor.md). The earlier floor, ``min(0.3 x the query's summed scope IDF,
2.3 rare terms)``, weighed every query term by its rarity *in the scope*: a word the scope
never uses got the highest weight, so in a two-entry scope the question words of "I am changing
the persistence layer, what should I know?" outweighed the one word it shares with the entry,
and one extra line (``remember: …``) diluted "What should I know before pushing?" to nothing.
Rarity in the scope says nothing in a young scope, where every word is rare. Two measures now:

* **content** ``c = k max(0, s_gen - CONTENT_TAU)``: how much a term says about a topic *in
  general*, from the general-language probability of the term (:mod:`.general_vocabulary`:
  common English words, Chinese characters and character pairs; ``g = 1 - exp(-L p)`` is the
  chance that a text of ``L`` tokens contains it and ``s_gen = -ln g``). ``know``, ``make``,
  ``two`` or ``什么`` carry none; ``persistence``, ``登录`` or an identifier carry a lot.
* **specificity** ``s = -ln max(g, (df - 1 + M g) / (N - 1 + M))``: the chance that an
  *unrelated entry of this scope* contains the term — the share of the other entries that do,
  smoothed toward the general rate with ``M`` pseudo-entries, and never below the general rate
  (a word the scope happens to use once is still an everyday word).

An entry is admitted by either path:

A. **a specific shared term**: ``sum k max(0, s - bar) >= FLOOR`` with
   ``bar = min(TAU + TAU_PER_LOG_TERMS ln K, BAR_CAP)``, where ``K`` counts the query's terms
   the scope has seen with ``s > TAU``. Each of them is one more chance that an unrelated entry
   shares something specific by accident, so the bar rises with ``ln K``; a long pasted log no
   longer recalls through ``overflow`` or ``calendar``. The cap keeps the promise that a term
   only one entry has and general language lacks (``s`` ≈ 11.4) recalls it in any prompt.
B. **what the query is about**: the entry's shared content reaches
   ``max(CONTENT_MIN, min(CONTENT_SHARE x the query's content, CONTENT_CAP))``. Unseen terms
   count in the query's content (a question mostly about things the scope never mentions must
   not be satisfied by one of its words), question words do not (they carry no content). The
   cap keeps long prompts answerable: an entry that shares 16 nats of topical content with a
   2,000-character prompt is about it, however much else the prompt says.

``k`` is ``CJK_UNIGRAM_WEIGHT`` for single CJK characters (a word's pair carries it; its
characters only corroborate) and 1 otherwise. Admitted entries are ranked BM25-like by ``s``.

This is the lexical channel only. A semantic channel can produce its own admitted, ranked list
later and be fused with this one by rank (e.g. reciprocal-rank fusion): nothing here assumes it
is the only channel, and scores are only compared within one channel.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence, Set
from dataclasses import dataclass
from functools import cache, lru_cache
from typing import NamedTuple

from . import general_vocabulary as _vocabulary

__all__ = [
    "Assessed",
    "Document",
    "QueryPlan",
    "Ranked",
    "content_weight",
    "document",
    "general_probability",
    "plan_query",
    "rank",
    "specificity",
    "split_repeats",
    "top",
]

MAX_QUERY_TERMS = 64  # most useful terms kept from a long prompt
MAX_RETRIEVAL_TERMS = 32  # terms sent to the engine
CANDIDATE_BUDGET = 256  # documents the engine may return (sum of the retrieval terms' df)

# Calibrated on bench/data/recall_dev.jsonl with bench/recall_floor_sweep.py; the plateau and
# its edges are in docs/decisions/recall-floor.md.
FLOOR = 3.5  # path A: nats of specificity above the query's bar an entry must share
TAU = 2.0  # path A: the bar for a query with one chance to match
TAU_PER_LOG_TERMS = 2.5  # path A: its rise per ln(chances)
BAR_CAP = 7.5  # path A: the bar never rises above this: a term only one entry has and
# general language lacks (s ~ 11.4) is evidence in any prompt
CONTENT_TAU = 3.0  # general specificity below which a term is no content
CONTENT_SHARE = 0.3  # path B: share of the query's content an entry must cover ...
CONTENT_MIN = 2.0  # ... at least this many nats of it ...
CONTENT_CAP = 16.0  # ... and never more than this many
CJK_UNIGRAM_WEIGHT = 0.25
# Insensitive within a factor of three either way (same admitted sets on the dev set).
PRIOR_ENTRIES = 10.0  # M: pseudo-entries of general language smoothing the scope's rate
WORDS_PER_ENTRY = 30.0  # L for word terms: a typical entry
CHARACTERS_PER_ENTRY = 40.0  # L for CJK terms
#: General probability of a term the vocabulary does not list (derived with the table).
UNLISTED_PROBABILITY = _vocabulary.UNLISTED_ENGLISH_PROBABILITY
#: Numbers: the English counts come from prose, where "05" is rare; in pasted logs, dates and
#: times short numbers are everywhere. By digit count; five or more digits count as unlisted.
NUMBER_PROBABILITY = {1: 1e-2, 2: 3e-3, 3: 1e-3, 4: 1e-4}

_K1 = 1.2
_B = 0.5
_TYPICAL_TERMS = 32.0  # a typical entry's term count; a fixed constant keeps scores stable


@dataclass(frozen=True, slots=True)
class QueryPlan:
    """What to retrieve and how much evidence admits a hit.

    An entry is admitted when the ``evidence`` of its shared terms reaches ``required`` (path
    A) or their ``content`` reaches ``content_required`` (path B). ``weights`` rank admitted
    entries; ``total_weight``, their sum, scales scores into 0..1. ``content`` has every key
    of ``weights``; ``evidence`` too, or is empty when no term is evidence.
    """

    weights: Mapping[str, float]
    evidence: Mapping[str, float]
    content: Mapping[str, float]
    retrieval_terms: tuple[str, ...]
    candidate_limit: int
    total_weight: float
    required: float
    content_required: float


class Ranked(NamedTuple):
    """An admitted candidate: its rank ``score`` (0..1) and its ``coverage``, the share of the
    query's term weight it contains (0..1). The score divides by the entry's length, as BM25
    does, so that of two entries sharing the same terms the shorter ranks first; coverage does
    not: it says how much of the question an entry answers to, which a pack's admission
    compares (issue 33, docs/decisions/pack-admission.md)."""

    rowid: int
    score: float
    coverage: float = 1.0


class Assessed(NamedTuple):
    """Why :func:`rank` admitted a candidate or not (``explain_context``): the content and the
    evidence (path A) it shares with the query, against ``QueryPlan.content_required`` and
    ``QueryPlan.required``. ``score`` is its rank score when admitted, else None."""

    rowid: int
    content: float
    evidence: float
    score: float | None


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


# -- general language ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _General:
    words: dict[str, float]  # encoded English term -> per-token probability
    characters: dict[str, float]  # Han character -> per-position probability
    pairs: dict[str, float]  # two Han characters -> per-position probability within words
    word_ends: dict[str, float]  # Han character -> P(a word ending with it ends here)
    word_starts: dict[str, float]  # Han character -> P(a word starts with it)


def _unpack(table: Mapping[int, str], width: int) -> dict[str, float]:
    """A quarter-nat table as ``{item: p}``; ``width`` 0: space-separated, 1: characters."""
    out: dict[str, float] = {}
    for quarter_nats, packed in table.items():
        items: Iterable[str] = packed.split() if width == 0 else packed
        out.update(dict.fromkeys(items, math.exp(-quarter_nats / 4)))
    return out


@cache
def _general() -> _General:
    """The vocabulary decoded once, on the first query (≈ 10 ms), not at import: the CLI
    imports this package too and never ranks."""
    return _General(
        words=_unpack(_vocabulary.ENGLISH, 0),
        characters=_unpack(_vocabulary.HAN_CHARACTERS, 1),
        pairs=_unpack(_vocabulary.HAN_PAIRS, 0),
        word_ends=_unpack(_vocabulary.HAN_WORD_ENDS, 1),
        word_starts=_unpack(_vocabulary.HAN_WORD_STARTS, 1),
    )


def _token_probability(term: str) -> float:
    general = _general()
    kind = term[0]
    if kind == "b":
        # A Han pair occurs within words (the table) and across a word boundary, where the
        # first character ends one word and the second starts the next (a unigram word model):
        # ``里只`` in ``数据库里只存`` is no word, but common.
        first, second = chr(int(term[1:6], 16)), chr(int(term[6:11], 16))
        within = general.pairs.get(first + second, 0.0)
        across = general.word_ends.get(first, 0.0) * general.word_starts.get(second, 0.0)
        return max(within + across, UNLISTED_PROBABILITY)
    if kind == "c":
        return general.characters.get(chr(int(term[1:], 16)), UNLISTED_PROBABILITY)
    p = general.words.get(term, UNLISTED_PROBABILITY) if kind == "q" else UNLISTED_PROBABILITY
    if kind == "q" and term[1:].isdigit():
        p = max(p, NUMBER_PROBABILITY.get(len(term) - 1, 0.0))
    return p


def general_probability(term: str) -> float:
    """Chance that an entry of typical length contains ``term`` in general language."""
    length = CHARACTERS_PER_ENTRY if term[0] in "cbk" else WORDS_PER_ENTRY
    return -math.expm1(-length * _token_probability(term))


def _is_cjk_unigram(term: str) -> bool:
    # Unigram terms are ``c``/``k`` + 4-5 hex digits; bigrams are 11 characters long.
    return term[0] in "ck" and len(term) <= 6


def _class_weight(term: str) -> float:
    return CJK_UNIGRAM_WEIGHT if _is_cjk_unigram(term) else 1.0


@lru_cache(maxsize=8192)
def _general_terms(term: str) -> tuple[float, float, float]:
    """``(g, content, class weight)`` of a term; prompts repeat their vocabulary, so this is
    cached (a 2,000-character prompt has a few hundred distinct terms). Bounded at 8,192: a
    full cache costs ≈ 2 MiB (65,536 entries measured 16 MiB of daemon RSS), and a miss is a
    few dictionary lookups."""
    g = general_probability(term)
    weight = _class_weight(term)
    return g, weight * max(0.0, -math.log(g) - CONTENT_TAU), weight


def content_weight(term: str) -> float:
    """How much ``term`` says about a topic in general (0 for ``know``, ``什么``, ``2``)."""
    return _general_terms(term)[1]


def _specificity(g: float, doc_count: int, df: int) -> float:
    others = max(df - 1, 0)  # ``df`` counts the entry being scored
    in_scope = (others + PRIOR_ENTRIES * g) / (max(doc_count - 1, 0) + PRIOR_ENTRIES)
    return -math.log(max(in_scope, g))


def specificity(term: str, doc_count: int, df: int) -> float:
    """``-ln`` of the chance that an unrelated entry of this scope contains ``term``."""
    return _specificity(general_probability(term), doc_count, df)


# -- planning and ranking ------------------------------------------------------------------


def plan_query(
    terms: Sequence[str], doc_count: int, frequencies: Mapping[str, int]
) -> QueryPlan | None:
    """Weigh the query's terms; ``None`` when nothing in the scope can admit an entry."""
    if doc_count <= 0:
        return None
    content_total = 0.0
    seen: list[tuple[str, int, float, float, float]] = []  # term, df, s, content, weight
    chances = 0.0
    get = frequencies.get
    for term in terms:
        g, content, weight = _general_terms(term)
        content_total += content  # unseen terms count: they are what the scope lacks
        df = get(term, 0)
        if df > 0:
            s = _specificity(g, doc_count, df)
            seen.append((term, df, s, content, weight))
            if s > TAU:
                chances += weight
    if not seen:
        return None
    bar = min(TAU + TAU_PER_LOG_TERMS * math.log(max(chances, 1.0)), BAR_CAP)
    useful: list[tuple[float, int, str, float, float, float]] = []
    for term, df, s, content, weight in seen:
        evidence = weight * (s - bar) if s > bar else 0.0
        if evidence > 0.0 or content > 0.0:
            useful.append((max(evidence, content), df, term, evidence, content, weight * s))
    content_required = max(min(CONTENT_SHARE * content_total, CONTENT_CAP), CONTENT_MIN)
    if (
        sum(item[3] for item in useful) < FLOOR - 1e-9
        and sum(item[4] for item in useful) < content_required - 1e-9
    ):
        return None  # not even an entry containing every seen term would be admitted
    # Most useful first, then rarest; ``sorted`` is stable, so ties keep query order (terms
    # are distinct) and the cap never favours one script over another.
    useful.sort(key=_by_use)
    useful = useful[:MAX_QUERY_TERMS]
    # Retrieval spends the candidate budget rarest term first. Taken in order of use, a term
    # in most of the scope with no general-language probability (a person's name in a
    # conversation: the most "content" of any word) came first, spent the whole budget alone
    # and left the candidates the newest entries naming it (LoCoMo dev split: 507 of 759
    # questions retrieved through one name, hit@10 0.613 -> 0.567; docs/decisions/search.md).
    retrieval: list[str] = []
    budget = CANDIDATE_BUDGET
    for _, df, term, *_ in sorted(useful, key=_by_df):
        if retrieval and (df > budget or len(retrieval) == MAX_RETRIEVAL_TERMS):
            continue  # a rarer term further down may still fit
        retrieval.append(term)
        budget -= df
    # Only when even the rarest useful term is in more than CANDIDATE_BUDGET documents is the
    # set truncated (newest first); such a common term rarely admits anything alone.
    weights = {term: rank_weight for _, _, term, _, _, rank_weight in useful}
    evidence = {term: e for _, _, term, e, _, _ in useful}
    return QueryPlan(
        weights=weights,
        # Dense (every weighted term, 0.0 for none), so ranking sums without membership tests;
        # no evidence at all (the usual case for a long prompt) skips that sum.
        evidence=evidence if any(evidence.values()) else {},
        content={term: c for _, _, term, _, c, _ in useful},
        retrieval_terms=tuple(retrieval),
        candidate_limit=CANDIDATE_BUDGET,
        total_weight=sum(weights.values()),
        required=FLOOR,
        content_required=content_required,
    )


def _by_df(item: tuple[float, int, str, float, float, float]) -> int:
    return item[1]


def _by_use(item: tuple[float, int, str, float, float, float]) -> tuple[float, int]:
    return (-item[0], item[1])


def rank(
    plan: QueryPlan, candidates: Iterable[Document], trace: list[Assessed] | None = None
) -> list[Ranked]:
    """Admitted candidates with scores in 0..1, best first (ties keep retrieval order).

    With ``trace``, every candidate's :class:`Assessed` is appended to it too (retrieval order);
    the ranking itself is the same either way."""
    weights = plan.weights
    keys = weights.keys()
    evidence = plan.evidence.__getitem__ if plan.evidence else None
    content = plan.content.__getitem__
    # The slack absorbs the summation order.
    required = plan.required - 1e-9
    content_required = plan.content_required - 1e-9
    total = plan.total_weight
    weight = weights.__getitem__
    fsum = math.fsum  # exactly rounded, so independent of the set's (hash) order
    admitted: list[Ranked] = []
    for rowid, terms, repeats in candidates:
        present = keys & terms  # the set intersection runs in C
        if fsum(map(content, present)) < content_required and (
            evidence is None or fsum(map(evidence, present)) < required
        ):
            if trace is not None:
                trace.append(_assessed(plan, rowid, present, None))
            continue
        length = len(terms) + len(repeats)
        length_factor = _K1 * (1.0 - _B + _B * (length / _TYPICAL_TERMS))
        repeated = present.intersection(repeats) if repeats else None
        shared = fsum(map(weight, present))
        if repeated:
            weighted = fsum(map(weight, present.difference(repeated))) / (
                1.0 + length_factor
            ) + fsum([
                weights[t] * (tf := 1 + repeats.count(t)) / (tf + length_factor)
                for t in repeated
            ])  # fmt: skip
        else:  # every matched tf is 1: the common case, one sum
            weighted = shared / (1.0 + length_factor)
        score = round(min(1.0, weighted / total), 6)
        admitted.append(Ranked(rowid, score, round(min(1.0, shared / total), 6)))
        if trace is not None:
            trace.append(_assessed(plan, rowid, present, score))
    admitted.sort(key=_by_score)
    return admitted


def _assessed(plan: QueryPlan, rowid: int, present: Set[str], score: float | None) -> Assessed:
    shared = sorted(present)  # a fixed order: the sums are the same whatever the set's order
    return Assessed(
        rowid,
        round(math.fsum(plan.content[t] for t in shared), 6),
        round(math.fsum(plan.evidence[t] for t in shared), 6) if plan.evidence else 0.0,
        score,
    )


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
