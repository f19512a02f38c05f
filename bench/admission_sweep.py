"""The pack's admission of vector-only candidates, swept offline on the real runtime's channels.

``recall_quality.py --embeddings local`` measures one admission per run over HTTP. This script
takes, once per query, what the real runtime's two channels return for a prepared pack — the
lexical hits (``MemoryStore.search``, limit ``MEMORY_CANDIDATES``) and the vector candidates
(the local model's query pass, ``SemanticChannel.candidates``, top ``vector_candidates``) — in
process on a temporary SQLite home, and then re-applies admission rules offline: the runtime's
own :func:`~powercontext_runtime.search.fusion.fuse` and ``PreparedContextBuilder`` (8,000
bytes, like the bench), so a pack here is the pack the runtime would build under that rule.

A rule admits a vector-only candidate when its cosine reaches the ``floor``, or, with a
``low`` floor, when it reaches ``low`` *and* shares evidence with the prompt (``gate``):

* ``term``: a query term (``query_terms``: stop words, CJK question words and function
  characters already removed) among the candidate's ``document_terms``;
* ``word``: the same without Han/kana single-character terms (a shared character is not a
  shared word).

At most ``cap`` vector-only candidates are admitted (the best ones). Rows: paraphrase,
cross-language, unrelated ``empty``, short lexical, long (issue 17's rows).

Generalisation checks:

* ``--split``: the dev set in two halves by a hash of each line's id; for each half, the
  grid's best rule on the *other* half (most paraphrase + cross-language recalled with
  unrelated ``empty`` ≥ 95 % there) and the fixed rules, measured on this half.
* ``--ddtp``: Debian DDTP (``semantic_recall.py``'s data: package synopses, en and zh, against
  English descriptions, 200 held-out packages not loaded). Pack hit (relevant description in
  the pack) for loaded packages and pack non-empty for held-out ones, per rule.

``--cutoff`` (issue 33) sweeps the other half of a pack's admission instead: the relative cutoff
that keeps a short prompt's pack to the hits near the best one (``services/context.py``), on
the LoCoMo dev split (``locomo.py``'s protocol, conversations 1-5 only) and the coding dev set,
lexical and hybrid, replaying the runtime's own ``fuse`` and builder; and for hybrid search,
how many lexical hits the fusion is given, with the shipped model's ceiling on LoCoMo (the
vector channel alone, and an oracle over both channels' candidates). With ``--ddtp`` it
reports the same rules on DDTP.

    python bench/admission_sweep.py                 # dev set: the grid, best rules first
    python bench/admission_sweep.py --split         # and the held-out halves
    python bench/admission_sweep.py --ddtp          # DDTP (fetches apt's indexes once)
    python bench/admission_sweep.py --cutoff        # relative cutoff + lexical candidates
    python bench/admission_sweep.py --cutoff --ddtp # the same on DDTP
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import tempfile
import time
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "runtime" / "src"))

from _common import BENCH_DIR  # noqa: E402
from recall_quality import (  # noqa: E402
    CROSS_LANGUAGE,
    LEXICAL_SHORT_CATEGORIES,
    LONG_CATEGORY,
    load_dataset,
)

from powercontext_runtime import composition  # noqa: E402
from powercontext_runtime.composition import Runtime  # noqa: E402
from powercontext_runtime.context.builder import MemoryHit, PreparedContextBuilder  # noqa: E402
from powercontext_runtime.contract.memory import RememberMemoryRequest  # noqa: E402
from powercontext_runtime.extraction.directives import without_directives  # noqa: E402
from powercontext_runtime.search import fusion  # noqa: E402
from powercontext_runtime.search.analyzer import document_terms, query_terms  # noqa: E402
from powercontext_runtime.services.context import MEMORY_CANDIDATES  # noqa: E402
from powercontext_runtime.services.memory import vector_candidates  # noqa: E402
from powercontext_runtime.settings import Settings  # noqa: E402

MAX_BYTES = 8000
SEARCH_LIMIT = 10  # recall_quality.py's and locomo.py's search_memory limit
UNRELATED_BUDGET = 0.95
FLOORS = (0.38, 0.40, 0.42, 0.44, 0.46, 0.48, 0.50)
LOW_FLOORS = (None, 0.31, 0.33, 0.35, 0.37, 0.39, 0.41)
CAPS = (1, 2)
GATES = ("term", "word")


class Candidate(NamedTuple):
    key: str  # entry version id
    entry_id: str
    text: str
    similarity: float  # vector candidates: the cosine; lexical hits: the lexical score
    coverage: float = 0.0  # lexical hits: the share of the query's term weight they contain


@dataclass(frozen=True)
class Captured:
    """One query's channels, as the runtime returned them."""

    id: str
    kind: str  # a dev-set category, "unrelated", or for DDTP "en"/"zh"
    terms: frozenset[str]
    lexical: list[Candidate]  # the pack's lexical hits (limit MEMORY_CANDIDATES), best first
    vector: list[Candidate]  # best first
    expected: frozenset[str]  # entry ids; empty = any memory item is wrong
    held_out: bool = False
    term_count: int = 0  # len(query_terms): the pack's relative cutoff depends on it
    searched: tuple[Candidate, ...] = ()  # search_memory's lexical hits (limit SEARCH_LIMIT)
    # The same two lexical searches with limit WIDE (``--cutoff``: a prefix of each is the
    # search with a smaller limit; the order is total).
    lexical_wide: tuple[Candidate, ...] = ()
    searched_wide: tuple[Candidate, ...] = ()


class Rule(NamedTuple):
    floor: float
    low: float | None = None
    cap: int | None = 1
    gate: str = "term"

    def label(self) -> str:
        cap = "no cap" if self.cap is None else f"at most {self.cap}"
        if self.low is None:
            return f"cosine ≥ {self.floor:.2f}, {cap}"
        return f"≥ {self.floor:.2f}, or ≥ {self.low:.2f} and a shared {self.gate}, {cap}"


LOCOMO_DEV = ROOT.parent / "shared" / "data" / "locomo" / "locomo-dev.json"
WIDE = 2 * MEMORY_CANDIDATES  # lexical hits captured for ``--cutoff`` (the most any rule uses)
LEXICAL_ONLY = Rule(2.0)  # no cosine reaches it ("cosine ≥ 2.00" in the tables)
DEFAULT = Rule(0.46)
PROPOSED = Rule(0.46, 0.37, 1, "word")


def _is_unigram(term: str) -> bool:
    # Han ``c<4-5 hex>`` and kana/Hangul ``k<4-5 hex>`` unigrams (bigrams have 10 hex digits).
    return term[0] in "ck" and len(term) <= 6


def evidence(terms: frozenset[str], text: str, gate: str) -> bool:
    shared = terms.intersection(document_terms(text))
    if gate == "word":
        return any(not _is_unigram(t) for t in shared)
    return bool(shared)


_builder = PreparedContextBuilder()


def pack(query: Captured, rule: Rule, cache: dict[tuple[str, str, str], bool]) -> list[str]:
    """Entry ids of the pack's memory items under ``rule``."""
    lexical_keys = {c.key for c in query.lexical}
    by_key = {c.key: c for c in query.lexical} | {
        c.key: c for c in query.vector if c.key not in lexical_keys
    }
    # The rule as the runtime's single-floor fusion: a candidate the rule refuses gets a
    # cosine no floor admits (it keeps its vector rank); the rest face the lower floor.
    vector: list[tuple[str, float]] = []
    for c in query.vector:
        admissible = c.key in lexical_keys or c.similarity >= rule.floor
        if not admissible and rule.low is not None and c.similarity >= rule.low:
            memo = (query.id, c.key, rule.gate)
            if memo not in cache:
                cache[memo] = evidence(query.terms, c.text, rule.gate)
            admissible = cache[memo]
        vector.append((c.key, c.similarity if admissible else -2.0))
    fused = fusion.fuse(
        [(c.key, c.similarity) for c in query.lexical],
        vector,
        fusion.Admission(
            rule.floor if rule.low is None else rule.low, rule.cap, composition.LOCAL_FLOORS[0]
        ),
        MEMORY_CANDIDATES,
        lambda k: by_key[str(k)].entry_id.encode(),
    )
    hits = [
        MemoryHit(revision=1, entry_id=by_key[str(f.key)].entry_id, entry_version_id=str(f.key),
                  text=by_key[str(f.key)].text)
        for f in fused
    ]  # fmt: skip
    _, decisions = _builder.explain(hits, [], MAX_BYTES)
    return [
        hits[d.index].entry_id
        for d in decisions
        if d.family == "memory" and d.outcome in ("taken", "truncated")
    ]


# -- capture ---------------------------------------------------------------------------------


def open_runtime(home: Path) -> Runtime:
    # No deadline here: a late query embedding would only lose a data point, not fall back.
    env = {"POWERCONTEXT_EMBEDDINGS": "local", "POWERCONTEXT_EMBEDDINGS_QUERY_TIMEOUT": "30"}
    runtime = Runtime.open(Settings.load(env=env, home=home, auth="none"))
    assert runtime.semantic is not None
    return runtime


def capture(
    runtime: Runtime, scope_id: str, query_id: str, kind: str, text: str, expected: Iterable[str]
) -> Captured:
    semantic = runtime.semantic
    assert semantic is not None
    question = without_directives(text)
    terms = query_terms(question)
    store = runtime.memory._store  # the lexical search find() runs (bench-only access)
    lexical = store.search(scope_id, terms, MEMORY_CANDIDATES)
    searched = store.search(scope_id, query_terms(text), SEARCH_LIMIT)
    # vector_candidates(SEARCH_LIMIT) == vector_candidates(MEMORY_CANDIDATES): the pack's list
    # serves the search too (the search embeds the whole text, the pack the text without
    # ``remember:`` lines, so they differ only for a prompt that has such lines).
    assert vector_candidates(SEARCH_LIMIT) == vector_candidates(MEMORY_CANDIDATES)
    vector = semantic.candidates(
        scope_id, semantic.embed_query(question), vector_candidates(MEMORY_CANDIDATES)
    )
    lexical_wide = store.search(scope_id, terms, WIDE)
    searched_wide = store.search(scope_id, query_terms(text), WIDE)

    def found(hits: Iterable[Any]) -> tuple[Candidate, ...]:
        return tuple(
            Candidate(h.entry_version_id, h.entry_id, h.text, h.score, h.coverage) for h in hits
        )

    return Captured(
        query_id,
        kind,
        frozenset(terms),
        [Candidate(h.entry_version_id, h.entry_id, h.text, h.score) for h in lexical.hits],
        [Candidate(c.entry_version_id, c.entry_id, c.text, c.similarity) for c in vector],
        frozenset(expected),
        term_count=len(terms),
        searched=tuple(
            Candidate(h.entry_version_id, h.entry_id, h.text, h.score) for h in searched.hits
        ),
        lexical_wide=found(lexical_wide.hits),
        searched_wide=found(searched_wide.hits),
    )


def capture_dev(data_path: Path) -> list[Captured]:
    data = load_dataset(data_path)
    home = Path(tempfile.mkdtemp(prefix="pc-admission-sweep-"))
    runtime = open_runtime(home)
    try:
        runtime_id: dict[str, str] = {}
        for entry in data.entries:
            written = runtime.memory.remember(
                RememberMemoryRequest(
                    scope_id=entry.scope, kind=entry.kind, text=entry.text, tags=list(entry.tags)
                )
            )
            runtime_id[entry.id] = written.entry.citation.entry_id
        runtime.backfill_embeddings()
        out = [
            capture(runtime, q.scope, q.id, q.category, q.query,
                    (runtime_id[e] for e in q.expected))
            for q in data.queries
        ]  # fmt: skip
        out += [capture(runtime, u.scope, u.id, "unrelated", u.query, ()) for u in data.unrelated]
        return out
    finally:
        runtime.close()
        shutil.rmtree(home, ignore_errors=True)


def capture_ddtp(lists: Path | None, entries: int, holdout: int, queries: int) -> list[Captured]:
    import semantic_recall

    lists = lists or Path(tempfile.gettempdir()) / "powercontext-ddtp" / "lists"
    if not list(lists.glob("*Translation-zh%5fCN*")):
        semantic_recall.fetch_lists(lists)
    labelled, others = semantic_recall.dataset(lists)
    rnd = random.Random(0)  # semantic_recall.py's split
    rnd.shuffle(labelled)
    held, loaded = labelled[:holdout], labelled[holdout:]
    distractors = rnd.sample(others, max(0, min(len(others), entries - len(loaded))))
    texts = [row["doc"] for row in loaded] + distractors
    rnd.shuffle(texts)
    home = Path(tempfile.mkdtemp(prefix="pc-admission-ddtp-"))
    runtime = open_runtime(home)
    scope = "bench:admission"
    try:
        id_of: dict[str, str] = {}
        for text in texts:
            written = runtime.memory.remember(
                RememberMemoryRequest(scope_id=scope, kind="fact", text=text)
            )
            id_of.setdefault(text, written.entry.citation.entry_id)
        started = time.perf_counter()
        runtime.backfill_embeddings()
        print(f"embedded in {time.perf_counter() - started:.0f} s", file=sys.stderr)
        sample = random.Random(1).sample(loaded, min(queries, len(loaded)))
        out = []
        for lang in ("en", "zh"):
            for row in sample:
                out.append(capture(runtime, scope, row["id"], lang, row[lang], [id_of[row["doc"]]]))
            for row in held:
                captured = capture(runtime, scope, row["id"], lang, row[lang], ())
                out.append(Captured(**{**captured.__dict__, "held_out": True}))
        return out
    finally:
        runtime.close()
        shutil.rmtree(home, ignore_errors=True)


def capture_locomo(path: Path) -> list[Captured]:
    """LoCoMo dev split (``locomo.py``'s protocol: one scope per conversation, one entry per
    turn); ``expected`` holds the entry ids of each question's evidence turns, ``kind`` is
    ``locomo``."""
    import locomo

    home = Path(tempfile.mkdtemp(prefix="pc-admission-locomo-"))
    runtime = open_runtime(home)
    try:
        scoped = []
        for conv in locomo.load(path):
            scope = f"locomo-{conv.sample_id}"
            entry_of: dict[str, str] = {}
            for turn in conv.turns:
                written = runtime.memory.remember(
                    RememberMemoryRequest(scope_id=scope, kind="fact", text=turn.text)
                )
                entry_of.setdefault(turn.dia_id, written.entry.citation.entry_id)
            scoped.append((scope, conv, entry_of))
        runtime.backfill_embeddings()
        return [
            capture(runtime, scope, f"{q.conversation}:{q.index}", "locomo", q.text,
                    (entry_of[d] for d in q.evidence if d in entry_of))
            for scope, conv, entry_of in scoped
            for q in conv.questions
        ]  # fmt: skip
    finally:
        runtime.close()
        shutil.rmtree(home, ignore_errors=True)


# -- measurement -----------------------------------------------------------------------------


def gate_rate(rows: Iterable[Captured], rule: Rule = PROPOSED) -> list[int]:
    """[band candidates sharing a word with the prompt, band candidates]: the vector-only
    candidates between ``rule``'s two floors, how selective its gate is."""
    assert rule.low is not None
    passed = total = 0
    for q in rows:
        lexical = {c.key for c in q.lexical}
        for c in q.vector:
            if c.key not in lexical and rule.low <= c.similarity < rule.floor:
                total += 1
                passed += evidence(q.terms, c.text, rule.gate)
    return [passed, total]


def score_dev(rows: list[Captured], rule: Rule, cache: dict[Any, bool]) -> dict[str, list[int]]:
    keys = ("paraphrase", "cross", "unrelated_empty", "unrelated_vector_only", "short", "long")
    counts = {k: [0, 0] for k in keys}
    for q in rows:
        got = pack(q, rule, cache)
        if q.kind == "unrelated":
            lexical = {c.entry_id for c in q.lexical}
            counts["unrelated_vector_only"][0] += any(e not in lexical for e in got)
            counts["unrelated_vector_only"][1] += 1
            key, ok = "unrelated_empty", not got
        else:
            ok = bool(q.expected.intersection(got))
            key = {"paraphrase": "paraphrase", CROSS_LANGUAGE: "cross", LONG_CATEGORY: "long"}.get(
                q.kind, "short" if q.kind in LEXICAL_SHORT_CATEGORIES else ""
            )
        if key:
            counts[key][0] += ok
            counts[key][1] += 1
    return counts


def _pct(pair: list[int]) -> str:
    return f"{100 * pair[0] / pair[1]:.1f} % ({pair[0]}/{pair[1]})" if pair[1] else "—"


def grid() -> list[Rule]:
    rules = [LEXICAL_ONLY]
    for floor in FLOORS:
        for cap in CAPS:
            for low in LOW_FLOORS:
                if low is None:
                    rules.append(Rule(floor, None, cap))
                    continue
                rules += [Rule(floor, low, cap, gate) for gate in GATES]
    return rules


def best(results: list[tuple[Rule, dict[str, list[int]]]]) -> tuple[Rule, dict[str, list[int]]]:
    """Most paraphrase + cross-language recalled with unrelated ``empty`` within budget; ties
    to the stricter rule (fewer admissions: higher floors, smaller cap)."""
    within = [
        r for r in results
        if r[1]["unrelated_empty"][0] >= UNRELATED_BUDGET * r[1]["unrelated_empty"][1]
    ]  # fmt: skip
    return max(
        within,
        key=lambda r: (
            r[1]["paraphrase"][0] + r[1]["cross"][0],
            r[1]["short"][0] + r[1]["long"][0],
            r[0].floor,
            -(r[0].cap or 99),
            r[0].low or 2.0,
        ),
    )


def table(results: Iterable[tuple[str, dict[str, list[int]]]]) -> str:
    head = (
        "| rule | paraphrase | cross-language | unrelated `empty` | unrelated with a vector-only"
        " item | short lexical | long |"
    )
    lines = [head, "| --- | --- | --- | --- | --- | --- | --- |"]
    keys = ("paraphrase", "cross", "unrelated_empty", "unrelated_vector_only", "short", "long")
    for label, c in results:
        cells = [_pct(c[k]) for k in keys]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def half_of(query_id: str) -> int:
    return zlib.crc32(query_id.encode()) % 2


def run_dev(rows: list[Captured], split: bool, top: int) -> dict[str, Any]:
    cache: dict[Any, bool] = {}
    rules = grid()
    results = [(rule, score_dev(rows, rule, cache)) for rule in rules]
    fixed = [LEXICAL_ONLY, DEFAULT, Rule(0.46, 0.37, 1, "term"), PROPOSED, Rule(0.40), Rule(0.42)]
    by_rule = dict(results)
    print("## Dev set, fixed rules\n")
    print(table((rule.label(), by_rule[rule]) for rule in fixed))
    ranked = sorted(
        (
            r for r in results
            if r[1]["unrelated_empty"][0] >= UNRELATED_BUDGET * r[1]["unrelated_empty"][1]
        ),
        key=lambda r: -(r[1]["paraphrase"][0] + r[1]["cross"][0]),
    )  # fmt: skip
    print("\nBand candidates (vector only, 0.37 ≤ cosine < 0.46) sharing a word with the prompt:")
    for kind, label in (("paraphrase", "paraphrase"), (CROSS_LANGUAGE, "cross-language"),
                        ("unrelated", "unrelated")):  # fmt: skip
        print(f"- {label}: {_pct(gate_rate(q for q in rows if q.kind == kind))}")
    print(f"\n## Dev set, the {top} best rules with unrelated `empty` ≥ 95 %\n")
    print(table((rule.label(), c) for rule, c in ranked[:top]))
    report: dict[str, Any] = {
        "grid": [{"rule": rule._asdict(), **c} for rule, c in results],
    }
    if split:
        print("\n## Held-out halves (hash of the id): rule chosen on the other half\n")
        out = []
        for half in (0, 1):
            train = [q for q in rows if half_of(q.id) != half]
            test = [q for q in rows if half_of(q.id) == half]
            chosen, _ = best([(rule, score_dev(train, rule, cache)) for rule in rules])
            for label, rule in (
                (f"half {half}: chosen on the other half: {chosen.label()}", chosen),
                (f"half {half}: {DEFAULT.label()}", DEFAULT),
                (f"half {half}: {PROPOSED.label()}", PROPOSED),
                (f"half {half}: lexical only", LEXICAL_ONLY),
            ):
                out.append((label, score_dev(test, rule, cache)))
        print(table(out))
        report["split"] = [{"label": label, **c} for label, c in out]
    return report


def run_ddtp(rows: list[Captured]) -> dict[str, Any]:
    cache: dict[Any, bool] = {}
    rules = [LEXICAL_ONLY, DEFAULT, Rule(0.46, 0.37, 1, "term"), PROPOSED,
             Rule(0.46, 0.41, 1, "word"), Rule(0.46, 0.33, 1, "word"),
             Rule(0.44), Rule(0.42), Rule(0.40), Rule(0.37)]  # fmt: skip
    head = (
        "| rule | en pack hit | zh pack hit | held-out non-empty en | held-out non-empty zh |"
        " held-out with a vector-only item en / zh |"
    )
    lines = [head, "| --- | --- | --- | --- | --- | --- |"]
    report = []
    for rule in rules:
        cells: dict[str, list[int]] = {}
        for lang in ("en", "zh"):
            hit, n_loaded, nonempty, vector_only, n_held = 0, 0, 0, 0, 0
            for q in rows:
                if q.kind != lang:
                    continue
                got = pack(q, rule, cache)
                if q.held_out:
                    n_held += 1
                    nonempty += bool(got)
                    lexical = {c.entry_id for c in q.lexical}
                    vector_only += any(e not in lexical for e in got)
                else:
                    n_loaded += 1
                    hit += bool(q.expected.intersection(got))
            cells[f"{lang}_hit"] = [hit, n_loaded]
            cells[f"{lang}_nonempty"] = [nonempty, n_held]
            cells[f"{lang}_vector_only"] = [vector_only, n_held]
        lines.append(
            f"| {rule.label()} | {_pct(cells['en_hit'])} | {_pct(cells['zh_hit'])} | "
            f"{_pct(cells['en_nonempty'])} | {_pct(cells['zh_nonempty'])} | "
            f"{cells['en_vector_only'][0]} / {cells['zh_vector_only'][0]} |"
        )
        report.append({"rule": rule._asdict(), **cells})
    print("## Debian DDTP, pack admission\n")
    print("\n".join(lines))
    print("\nBand candidates (vector only, 0.37 ≤ cosine < 0.46) sharing a word with the prompt:")
    for lang in ("en", "zh"):
        for held in (False, True):
            which = [q for q in rows if q.kind == lang and q.held_out == held]
            label = f"{lang}, {'held out' if held else 'loaded'}"
            print(f"- {label}: {_pct(gate_rate(which))}")
    return {"ddtp": report}


# -- the pack's relative cutoff and hybrid's lexical candidates (--cutoff, issue 33) ---------


class Cutoff(NamedTuple):
    """Which of a short prompt's pack candidates the builder is given: those whose ``measure``
    (``score``: the search's rank score; ``coverage``: the share of the prompt's term weight
    they contain, plus the cosine's bonus) reaches ``ratio`` × the best; of those, with
    ``step``, none after the first that falls more than that share below the one before it,
    and at most ``cap``. A prompt of more than ``max_terms`` terms keeps every candidate."""

    measure: str
    ratio: float
    cap: int | None = None
    step: float | None = None
    max_terms: int = 20

    def label(self) -> str:
        if self.ratio == 0:
            return "none"
        out = f"{self.measure} ≥ {self.ratio:g} × best"
        if self.step is not None:
            out += f", stop at a drop > {self.step:.0%}"
        if self.cap is not None:
            out += f", at most {self.cap}"
        if self.max_terms != 20:
            out += ", every prompt" if self.max_terms > 10**5 else f", ≤ {self.max_terms} terms"
        return out


BEFORE_CUTOFF = Cutoff("score", 0.5)  # issue 33 item 3, until 2026-12-06
SHIPPED_CUTOFF = Cutoff("coverage", 0.5)
LEXICAL_K = (10, 16, 20, 32)  # lexical hits a hybrid search of 10 fuses (shipped: 2 × limit)
WEIGHTS = (0.15, 0.25, 0.35)
#: The local model's two admissions, as ``composition`` builds them.
SEARCH_ADMISSION = fusion.Admission(composition.LOCAL_FLOORS[0], None, composition.LOCAL_FLOORS[0])
PACK_ADMISSION = fusion.Admission(
    composition.LOCAL_FLOORS[1], composition.PREPARE_VECTOR_ONLY, composition.LOCAL_FLOORS[0]
)

Scored = tuple[Candidate, float, float]  # candidate, (fused) score, coverage (+ cosine bonus)


def cutoff_grid() -> list[Cutoff]:
    rules = [Cutoff("score", 0.0)]
    for measure in ("score", "coverage"):
        rules += [Cutoff(measure, r) for r in (0.3, 0.4, 0.45, 0.5, 0.55, 0.6, 0.7)]
    rules += [Cutoff("score", 0.5, cap=k) for k in (5, 6, 7)]
    rules += [Cutoff("score", 0.5, step=g) for g in (0.2, 0.3)]
    rules += [Cutoff("score", 0.5, max_terms=10**6), Cutoff("coverage", 0.5, max_terms=10)]
    rules += [Cutoff("coverage", 0.5, max_terms=10**6)]
    return rules


def fused(
    lexical: Sequence[Candidate], vector: Sequence[Candidate], admission: fusion.Admission,
    limit: int,
) -> list[Scored]:  # fmt: skip
    """The runtime's ``fuse``, and each hit's coverage as ``MemoryService.find`` sets it."""
    by_key = {c.key: c for c in vector} | {c.key: c for c in lexical}
    cosine = {c.key: c.similarity for c in vector}
    out = fusion.fuse(
        [(c.key, c.similarity) for c in lexical],
        [(c.key, c.similarity) for c in vector],
        admission,
        limit,
        lambda k: by_key[str(k)].entry_id.encode(),
    )
    scored = []
    for f in out:
        c = by_key[str(f.key)]
        lexical_cover = c.coverage if f.matched_by != "vector" else 0.0
        bonus = admission.bonus(cosine[c.key]) if f.matched_by != "fts" else 0.0
        scored.append((c, f.score, min(1.0, lexical_cover + bonus)))
    return scored


def cut(candidates: list[Scored], term_count: int, rule: Cutoff) -> list[Scored]:
    if not candidates or term_count > rule.max_terms:
        return candidates
    index = 1 if rule.measure == "score" else 2
    best = max(c[index] for c in candidates)
    kept = [c for c in candidates if c[index] >= rule.ratio * best]
    if rule.step is not None:
        stepped = kept[:1]
        for c in kept[1:]:
            if c[index] < (1 - rule.step) * stepped[-1][index]:
                break
            stepped.append(c)
        kept = stepped
    return kept if rule.cap is None else kept[: rule.cap]


def pack_under(q: Captured, rule: Cutoff, hybrid: bool, lexical_k: int) -> list[str]:
    """Entry ids of the pack's memory items."""
    if hybrid:
        candidates = fused(q.lexical_wide[:lexical_k], q.vector, PACK_ADMISSION, MEMORY_CANDIDATES)
    else:
        candidates = [(c, c.similarity, c.coverage) for c in q.lexical_wide[:MEMORY_CANDIDATES]]
    kept = cut(candidates, q.term_count, rule)
    hits = [
        MemoryHit(revision=1, entry_id=c.entry_id, entry_version_id=c.key, text=c.text)
        for c, _, _ in kept
    ]
    _, decisions = _builder.explain(hits, [], MAX_BYTES)
    return [
        hits[d.index].entry_id
        for d in decisions
        if d.family == "memory" and d.outcome in ("taken", "truncated")
    ]


def search_under(
    q: Captured, mode: str, lexical_k: int = SEARCH_LIMIT, weight: float | None = None
) -> list[str]:
    """Entry ids ``search_memory`` (limit 10) returns, best first: ``lexical``, ``hybrid``
    (``lexical_k`` lexical hits fused) or ``vector`` (the channel alone)."""
    admission = SEARCH_ADMISSION if weight is None else SEARCH_ADMISSION._replace(weight=weight)
    if mode == "lexical":
        return [c.entry_id for c in q.searched_wide[:SEARCH_LIMIT]]
    if mode == "vector":
        by_key = {c.key: c for c in q.vector}
        found = fusion.vector_only(
            [(c.key, c.similarity) for c in q.vector], admission, SEARCH_LIMIT,
            lambda k: by_key[str(k)].entry_id.encode(),
        )  # fmt: skip
        return [by_key[str(f.key)].entry_id for f in found]
    hits = fused(q.searched_wide[:lexical_k], q.vector, admission, SEARCH_LIMIT)
    return [c.entry_id for c, _, _ in hits]


def search_quality(rows: Sequence[Captured], ranked: Any) -> tuple[float, float]:
    """hit@10 and MRR over the rows that expect something."""
    labelled = [q for q in rows if q.expected]
    hit = mrr = 0.0
    for q in labelled:
        ids = ranked(q)
        rank = next((i for i, e in enumerate(ids, 1) if e in q.expected), None)
        hit += rank is not None
        mrr += 1 / rank if rank else 0.0
    return hit / len(labelled), mrr / len(labelled)


def pack_quality(rows: Sequence[Captured], packed: Any) -> dict[str, float]:
    """LoCoMo's pack figures (``locomo.py``): pack hit, precision (pooled), items, empty."""
    hit = items = evidence = empty = 0
    for q in rows:
        got = packed(q)
        shared = sum(e in q.expected for e in got)
        hit += shared > 0
        items += len(got)
        evidence += shared
        empty += not got
    n = len(rows)
    return {"pack_hit": hit / n, "precision": evidence / items if items else 0.0,
            "items": items / n, "empty": empty / n}  # fmt: skip


def dev_rows(rows: Sequence[Captured], packed: Any) -> dict[str, list[int]]:
    counts = {k: [0, 0] for k in ("short", "long", "unrelated_empty", "paraphrase", "cross")}
    for q in rows:
        got = packed(q)
        if q.kind == "unrelated":
            key, ok = "unrelated_empty", not got
        else:
            ok = bool(q.expected.intersection(got))
            key = {"paraphrase": "paraphrase", CROSS_LANGUAGE: "cross", LONG_CATEGORY: "long"}.get(
                q.kind, "short" if q.kind in LEXICAL_SHORT_CATEGORIES else ""
            )
        if key:
            counts[key][0] += ok
            counts[key][1] += 1
    return counts


def _frac(pair: list[int]) -> str:
    return f"{pair[0]}/{pair[1]}"


def run_cutoff(locomo_rows: list[Captured], dev: list[Captured]) -> dict[str, Any]:
    report: dict[str, Any] = {"cutoff": [], "hybrid_cutoff": [], "fusion": [], "ceiling": {}}
    lines = [
        "| rule | LoCoMo pack hit | precision | items / pack | coding set short / long /"
        " unrelated `empty` / paraphrase / cross-language |",
        "| --- | --- | --- | --- | --- |",
    ]
    for rule in cutoff_grid():
        m = pack_quality(locomo_rows, lambda q, r=rule: pack_under(q, r, False, MEMORY_CANDIDATES))
        d = dev_rows(dev, lambda q, r=rule: pack_under(q, r, False, MEMORY_CANDIDATES))
        cells = " / ".join(_frac(d[k]) for k in d)
        lines.append(
            f"| {rule.label()} | {m['pack_hit']:.3f} | {m['precision']:.3f} | {m['items']:.2f} |"
            f" {cells} |"
        )
        report["cutoff"].append({"rule": rule._asdict(), **m, **d})
    print("## Relative cutoff, lexical (LoCoMo dev split; coding dev set)\n")
    print("\n".join(lines))

    lines = [
        "| rule | lexical hits fused | LoCoMo pack hit | precision | items / pack | coding set"
        " short / long / unrelated `empty` / paraphrase / cross-language |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for rule in (BEFORE_CUTOFF, SHIPPED_CUTOFF):
        for k in (MEMORY_CANDIDATES, WIDE):
            m = pack_quality(locomo_rows, lambda q, r=rule, k=k: pack_under(q, r, True, k))
            d = dev_rows(dev, lambda q, r=rule, k=k: pack_under(q, r, True, k))
            cells = " / ".join(_frac(d[x]) for x in d)
            lines.append(
                f"| {rule.label()} | {k} | {m['pack_hit']:.3f} | {m['precision']:.3f} |"
                f" {m['items']:.2f} | {cells} |"
            )
            report["hybrid_cutoff"].append({"rule": rule._asdict(), "lexical_k": k, **m, **d})
    print("\n## Relative cutoff, hybrid (the local model)\n")
    print("\n".join(lines))

    lines = [
        "| search | LoCoMo hit@10 / MRR | coding set hit@10 / MRR |",
        "| --- | --- | --- |",
    ]
    for label, ranked in (
        ("lexical", lambda q: search_under(q, "lexical")),
        ("vector alone (search floor)", lambda q: search_under(q, "vector")),
    ):
        a, b = search_quality(locomo_rows, ranked), search_quality(dev, ranked)
        lines.append(f"| {label} | {a[0]:.3f} / {a[1]:.3f} | {b[0]:.3f} / {b[1]:.3f} |")
        report["fusion"].append({"label": label, "locomo": a, "dev": b})
    for k in LEXICAL_K:
        for w in WEIGHTS:
            ranked = lambda q, k=k, w=w: search_under(q, "hybrid", k, w)  # noqa: E731
            a, b = search_quality(locomo_rows, ranked), search_quality(dev, ranked)
            lines.append(
                f"| hybrid, {k} lexical hits fused, weight {w:g} |"
                f" {a[0]:.3f} / {a[1]:.3f} | {b[0]:.3f} / {b[1]:.3f} |"
            )
            report["fusion"].append({"lexical_k": k, "weight": w, "locomo": a, "dev": b})
    print("\n## Hybrid search: lexical hits given to the fusion (search limit 10)\n")
    print("\n".join(lines))

    def found_in(q: Captured, lexical_n: int, vector_n: int) -> bool:
        ids = {c.entry_id for c in q.searched_wide[:lexical_n]}
        ids |= {c.entry_id for c in q.vector[:vector_n]}
        return bool(q.expected.intersection(ids))

    labelled = [q for q in locomo_rows if q.expected]
    lines = ["| candidates (LoCoMo, search) | evidence among them |", "| --- | --- |"]
    for lexical_n, vector_n in ((10, 0), (16, 0), (WIDE, 0), (0, 3), (0, 10), (0, 32), (10, 3),
                                (10, 10), (10, 32), (20, 32), (WIDE, 32)):  # fmt: skip
        share = sum(found_in(q, lexical_n, vector_n) for q in labelled) / len(labelled)
        parts = [f"lexical top {lexical_n}" if lexical_n else "",
                 f"vector top {vector_n}" if vector_n else ""]  # fmt: skip
        label = " ∪ ".join(p for p in parts if p)
        lines.append(f"| {label} | {share:.3f} |")
        report["ceiling"][label] = share
    print("\n## The shipped model's ceiling on LoCoMo (an oracle that picks from these)\n")
    print("\n".join(lines))
    return report


def run_cutoff_ddtp(rows: list[Captured]) -> dict[str, Any]:
    lines = [
        "| rule | lang | search hit@10 / MRR | pack hit | precision | items / pack |"
        " held-out non-empty |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    report = []
    settings = (
        ("lexical", BEFORE_CUTOFF, MEMORY_CANDIDATES, SEARCH_LIMIT),
        ("lexical", SHIPPED_CUTOFF, MEMORY_CANDIDATES, SEARCH_LIMIT),
        ("hybrid", BEFORE_CUTOFF, MEMORY_CANDIDATES, SEARCH_LIMIT),
        ("hybrid", SHIPPED_CUTOFF, WIDE, 2 * SEARCH_LIMIT),
    )
    for mode, rule, pack_k, search_k in settings:
        hybrid = mode == "hybrid"
        for lang in ("en", "zh"):
            loaded = [q for q in rows if q.kind == lang and not q.held_out]
            held = [q for q in rows if q.kind == lang and q.held_out]
            a = search_quality(loaded, lambda q, m=mode, k=search_k: search_under(q, m, k))
            packed = lambda q, r=rule, h=hybrid, k=pack_k: pack_under(q, r, h, k)  # noqa: E731
            m = pack_quality(loaded, packed)
            nonempty = sum(bool(packed(q)) for q in held) / len(held)
            label = f"{mode}, {rule.label()}, {search_k}/{pack_k} lexical hits"
            lines.append(
                f"| {label} | {lang} | {a[0]:.3f} / {a[1]:.3f} | {m['pack_hit']:.3f} |"
                f" {m['precision']:.3f} | {m['items']:.2f} | {nonempty:.3f} |"
            )
            report.append(
                {"label": label, "lang": lang, "search": a, **m, "held_out_nonempty": nonempty}
            )
    print("## Debian DDTP: relative cutoff and lexical hits fused\n")
    print("\n".join(lines))
    return {"ddtp_cutoff": report}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", type=Path, default=BENCH_DIR / "data" / "recall_dev.jsonl")
    p.add_argument("--split", action="store_true", help="also the held-out halves of the dev set")
    p.add_argument("--top", type=int, default=12, help="best grid rules shown (default 12)")
    p.add_argument("--ddtp", action="store_true", help="the Debian DDTP set instead")
    p.add_argument("--lists", type=Path, default=None, help="DDTP: apt lists directory")
    p.add_argument("--entries", type=int, default=3000, help="DDTP: entries loaded")
    p.add_argument("--holdout", type=int, default=200, help="DDTP: packages not loaded")
    p.add_argument("--queries", type=int, default=400, help="DDTP: loaded packages queried")
    p.add_argument("--cutoff", action="store_true",
                   help="relative cutoff and hybrid's lexical candidates (issue 33)")  # fmt: skip
    p.add_argument("--locomo", type=Path, default=LOCOMO_DEV,
                   help="--cutoff: the LoCoMo dev split")  # fmt: skip
    p.add_argument("--json", type=Path, default=None, help="write the numbers as JSON")
    args = p.parse_args(argv)
    started = time.perf_counter()
    if args.cutoff and not args.ddtp:
        if not args.locomo.is_file():
            print(f"LoCoMo data not found at {args.locomo}", file=sys.stderr)
            return 1
        locomo_rows, dev = capture_locomo(args.locomo), capture_dev(args.data)
        print(f"captured {len(locomo_rows) + len(dev)} queries in "
              f"{time.perf_counter() - started:.0f} s\n", file=sys.stderr)  # fmt: skip
        report = run_cutoff(locomo_rows, dev)
    elif args.ddtp:
        rows = capture_ddtp(args.lists, args.entries, args.holdout, args.queries)
        print(f"captured {len(rows)} queries in {time.perf_counter() - started:.0f} s\n",
              file=sys.stderr)  # fmt: skip
        report = run_cutoff_ddtp(rows) if args.cutoff else run_ddtp(rows)
    else:
        rows = capture_dev(args.data)
        print(f"captured {len(rows)} queries in {time.perf_counter() - started:.0f} s\n",
              file=sys.stderr)  # fmt: skip
        report = run_dev(rows, args.split, args.top)
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
