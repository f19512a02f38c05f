"""Calibrate the relevance floor offline: recall and unrelated-``empty`` over a parameter grid.

``recall_quality.py`` measures the real runtime over HTTP, one configuration per run. This
script re-implements only what decides admission — the analyzer, the per-scope document
frequencies, ``plan_query``'s retrieval (every document containing a retrieval term, newest
first, at most ``candidate_limit``) and ``rank`` — in process, so that a grid of the scoring
constants can be evaluated in seconds. It imports the runtime's own analyzer and scoring, and
overrides the constants by assignment for each grid point.

A query counts as recalled when an expected entry is among the first eight admitted
(``PreparedContextBuilder`` takes at most eight memory items; entries here are short enough for
the default 8000-byte budget, which this script ignores). Ties are broken by dataset order
instead of the runtime's random entry ids. The chosen point is then confirmed with
``recall_quality.py``; docs/decisions/recall-floor.md records both.

    python bench/recall_floor_sweep.py                      # the current constants
    python bench/recall_floor_sweep.py --grid               # the calibration grid
    python bench/recall_floor_sweep.py --explain q119 u022  # shared terms and their weights
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import zlib
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _common import BENCH_DIR
from recall_quality import LONG_CATEGORY, SEMANTIC_CATEGORIES, Dataset, load_dataset

from powercontext_runtime.extraction.directives import without_directives
from powercontext_runtime.search import scoring
from powercontext_runtime.search.analyzer import document_terms, query_terms

PACK_ITEMS = 8
MEMORY_CANDIDATES = 16
#: The calibration grid (docs/decisions/recall-floor.md): every combination is evaluated.
GRID: dict[str, tuple[float, ...]] = {
    "TAU": (1.5, 2.0, 2.5),
    "TAU_PER_LOG_TERMS": (2.0, 2.5, 3.0),
    "FLOOR": (2.5, 3.0, 3.5, 4.0),
    "CONTENT_TAU": (2.5, 3.0, 3.5),
    "CONTENT_SHARE": (0.25, 0.3, 0.4),
    "CONTENT_MIN": (2.0, 2.5),
    "CONTENT_CAP": (12.0, 16.0, 20.0),
}


@dataclass
class ScopeIndex:
    docs: list[tuple[int, list[str], list[str]]]  # rowid (load order), distinct, repeats
    ids: list[str]  # dataset id per rowid - 1
    df: dict[str, int]
    postings: dict[str, list[int]]


def build_indexes(data: Dataset) -> dict[str, ScopeIndex]:
    by_scope: dict[str, ScopeIndex] = {}
    for entry in data.entries:
        index = by_scope.setdefault(entry.scope, ScopeIndex([], [], defaultdict(int), {}))
        text = entry.text + ("\n" + " ".join(sorted(entry.tags)) if entry.tags else "")
        distinct, repeats = scoring.split_repeats(document_terms(text))
        rowid = len(index.docs) + 1
        index.docs.append((rowid, distinct, repeats))
        index.ids.append(entry.id)
        for term in distinct:
            index.df[term] += 1
            index.postings.setdefault(term, []).append(rowid)
    return by_scope


_QUERY_TERMS: dict[str, list[str]] = {}


def admitted(index: ScopeIndex, query: str) -> list[str]:
    terms = _QUERY_TERMS.get(query)
    if terms is None:
        # As prepare_context does: directive lines are memory writes, not the question.
        terms = _QUERY_TERMS[query] = query_terms(without_directives(query))
    frequencies = {t: index.df[t] for t in terms if t in index.df}
    plan = scoring.plan_query(terms, len(index.docs), frequencies)
    if plan is None:
        return []
    rowids = sorted(
        {r for t in plan.retrieval_terms for r in index.postings.get(t, ())}, reverse=True
    )[: plan.candidate_limit]
    ranked = scoring.top(scoring.rank(plan, [index.docs[r - 1] for r in rowids]), MEMORY_CANDIDATES)
    ordered = sorted(ranked, key=lambda r: (-r.score, r.rowid))[:PACK_ITEMS]
    return [index.ids[r.rowid - 1] for r in ordered]


def evaluate(data: Dataset, indexes: dict[str, ScopeIndex]) -> dict[str, Any]:
    hits: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    misses, leaks = [], []
    for q in data.queries:
        got = admitted(indexes[q.scope], q.query)
        ok = any(e in got for e in q.expected)
        # The lexical floor is calibrated on what words can find; paraphrases and
        # cross-language questions are the semantic channel's (reported, not optimised).
        group = q.category if q.category in (LONG_CATEGORY, *SEMANTIC_CATEGORIES) else "lexical"
        hits[group][0] += ok
        hits[group][1] += 1
        if not ok:
            misses.append(q.id)
    for u in data.unrelated:
        got = admitted(indexes[u.scope], u.query)
        hits["unrelated_empty"][0] += not got
        hits["unrelated_empty"][1] += 1
        if got:
            leaks.append(u.id)
    return {"counts": dict(hits), "misses": misses, "leaks": leaks}


@contextmanager
def constants(**values: float) -> Iterator[None]:
    saved = {name: getattr(scoring, name) for name in values}
    try:
        for name, value in values.items():
            setattr(scoring, name, value)
        scoring._general_terms.cache_clear()  # caches values derived from the constants
        yield
    finally:
        for name, value in saved.items():
            setattr(scoring, name, value)
        scoring._general_terms.cache_clear()


def _fraction(pair: list[int]) -> float:
    return pair[0] / pair[1] if pair[1] else 0.0


def explain(data: Dataset, indexes: dict[str, ScopeIndex], ids: list[str]) -> None:
    texts = {e.id: e for e in data.entries}
    items = {q.id: (q.scope, q.query, q.expected) for q in data.queries}
    items |= {u.id: (u.scope, u.query, ()) for u in data.unrelated}
    for item_id in ids:
        scope, query, expected = items[item_id]
        index = indexes[scope]
        terms = query_terms(without_directives(query))
        n = len(index.docs)
        print(f"== {item_id} [{scope}, N={n}] {query[:100]!r}")
        print(f"   admitted: {admitted(index, query)}  expected: {list(expected)}")
        shown = list(expected) + [e for e in admitted(index, query) if e not in expected]
        frequencies = {t: index.df[t] for t in terms if t in index.df}
        plan = scoring.plan_query(terms, n, frequencies)
        if plan is None:
            print("   no plan: nothing the scope has can admit an entry")
            continue
        print(
            f"   floor {plan.required:.2f} evidence or {plan.content_required:.2f} content "
            f"(query content total {plan.content_required / scoring.CONTENT_SHARE:.2f})"
        )
        for entry_id in shown:
            rowid = index.ids.index(entry_id) + 1
            present = [t for t in terms if t in set(index.docs[rowid - 1][1])]
            rows = [
                (plan.evidence.get(t, 0.0), plan.content.get(t, 0.0), t, index.df[t])
                for t in present
                if t in plan.weights
            ]
            rows.sort(reverse=True)
            print(
                f"   {entry_id} evidence {sum(r[0] for r in rows):.2f} content "
                f"{sum(r[1] for r in rows):.2f}: {texts[entry_id].text[:70]!r}"
            )
            for e, c, t, df in rows[:10]:
                s = scoring.specificity(t, n, df)
                print(f"      {t:<24} df={df:<3} s={s:5.2f} evidence={e:5.2f} content={c:5.2f}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", type=Path, default=BENCH_DIR / "data" / "recall_dev.jsonl")
    p.add_argument("--grid", action="store_true", help="evaluate the whole calibration grid")
    p.add_argument(
        "--cross-validate",
        action="store_true",
        help="2-fold: pick the best grid point on half the queries, measure it on the rest",
    )
    p.add_argument("--top", type=int, default=25, help="grid rows to print (best first)")
    p.add_argument("--explain", nargs="*", default=None, help="query ids to explain")
    p.add_argument("--set", nargs="*", default=[], help="NAME=VALUE constant overrides")
    args = p.parse_args(argv)
    data = load_dataset(args.data)
    indexes = build_indexes(data)
    overrides = {k: float(v) for k, v in (item.split("=", 1) for item in args.set)}
    with constants(**overrides):
        if args.explain is not None:
            explain(data, indexes, args.explain)
            return 0
        if not args.grid and not args.cross_validate:
            print(json.dumps(evaluate(data, indexes), indent=1))
            return 0
    if args.cross_validate:
        for fold in (0, 1):
            train, test = _half(data, fold), _half(data, 1 - fold)
            best = _grid(train, indexes, overrides)[0]
            with constants(**best[2]):
                measured = evaluate(test, indexes)["counts"]
            print(f"fold {fold}: chosen on this half: {_shown(best[2])}")
            print(f"   train {_counts(best[3])}")
            print(f"   other half  {_counts(measured)}")
        return 0
    for worst, _, point, c in _grid(data, indexes, overrides)[: args.top]:
        print(f"min {worst:.3f}  {_shown(point)}  |  {_counts(c)}")
    return 0


def _grid(
    data: Dataset, indexes: dict[str, ScopeIndex], overrides: dict[str, float]
) -> list[tuple[float, float, dict[str, float], dict[str, list[int]]]]:
    """Every grid point, best first: by the worst of lexical / long / unrelated-empty, then
    by the sum of the three, then by paraphrase recall."""
    rows = []
    names = list(GRID)
    for values in itertools.product(*GRID.values()):
        point = dict(zip(names, values, strict=True)) | overrides
        with constants(**point):
            c = evaluate(data, indexes)["counts"]
        parts = [_fraction(c["lexical"]), _fraction(c["long"]), _fraction(c["unrelated_empty"])]
        rows.append((min(parts), sum(parts), _fraction(c["paraphrase"]), point, c))
    rows.sort(key=lambda r: (-r[0], -r[1], -r[2]))
    return [(worst, para, point, c) for worst, _, para, point, c in rows]


def _half(data: Dataset, fold: int) -> Dataset:
    """Queries and unrelated lines whose id hashes to ``fold`` (all entries stay)."""

    def keep(item_id: str) -> bool:
        return zlib.crc32(item_id.encode()) % 2 == fold

    return Dataset(
        data.entries,
        [q for q in data.queries if keep(q.id)],
        [u for u in data.unrelated if keep(u.id)],
    )


def _shown(point: dict[str, float]) -> str:
    return " ".join(f"{k}={v:g}" for k, v in point.items())


def _counts(counts: dict[str, list[int]]) -> str:
    return " ".join(f"{k} {v[0]}/{v[1]}" for k, v in counts.items())


if __name__ == "__main__":
    sys.exit(main())
