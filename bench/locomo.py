"""LoCoMo dev split (spec 08 Q2): conversational retrieval, turn level, no LLM, in process.

What it measures: how well the runtime's own search and prepared packs find the dialogue turns
a LoCoMo question is about. The data is the public LoCoMo dataset's first five conversations
(``../shared/data/locomo/locomo-dev.json`` next to the repository; research data, never copied
into the repository). When the file is absent the bench says so and exits 0.

Protocol (``../shared/data/locomo/README.md``, the one the held-out check uses):

* one scope per conversation; every dialogue turn becomes one Memory entry, in session order,
  ``kind=fact``, text ``"{speaker}: {text}"`` plus ``" [shares a photo of {blip_caption}]"``
  when the turn has a caption;
* every question of category 1-4 with a non-empty ``evidence`` list is asked twice:
  ``search_memory`` with ``limit=10`` and ``prepare_context`` with ``max_bytes=8000``.

The entry each turn became is known from its ``remember`` (``citation.entry_id``), so the
bench keeps the map entry id -> ``dia_id`` and reads the citations of search hits and pack
items back through it. Evidence strings are normalised (``"D8:6; D9:17"`` is two turns,
``"D:11:26"`` is ``D11:26``); an evidence id no turn has simply never matches.

Metrics per mode, over the questions:

* search **hit@10**: some hit is an evidence turn; **MRR**: 1 / rank of the first such hit
  (0 without one); **search empty**: share of searches with no hit;
* **pack hit**: the pack cites an evidence turn; **pack precision**: of all memory items in
  all packs, the share citing an evidence turn (pooled over packs; empty packs add nothing);
  **items** and **bytes**: mean memory items and ``content_bytes`` per answer (an empty pack
  counts 0); **empty**: share of ``prepare_context`` answers that are ``empty``;
* **p50**: median in-process latency of ``search_memory`` and of ``prepare_context``.

Modes:

* ``lexical``: the runtime with the semantic channel off (what ships by default);
* ``hybrid``: the same data with the channel on: the shipped local model by default
  (``POWERCONTEXT_EMBEDDINGS=local``, the ``semantic`` extra), or the user's own
  OpenAI-compatible endpoint with ``--embeddings-url`` / ``--embeddings-model`` (key from
  ``POWERCONTEXT_EMBEDDINGS_API_KEY``; the vector size is asked of the endpoint unless
  ``--embeddings-dimension`` gives it; floors from ``POWERCONTEXT_EMBEDDINGS_*`` as in
  docs/configuration.md). Every entry is embedded before the questions
  (``Runtime.backfill_embeddings``) and the query deadline is raised to 30 s, so the hybrid
  figures are the channel's quality, never a fallback (fallbacks are counted anyway);
* ``bm25``: a baseline computed here, in process: plain Okapi BM25 (k1 = 1.2, b = 0.75,
  ``idf = ln(1 + (N - df + 0.5) / (df + 0.5))``) over lowercase ``\\w+`` tokens of the same
  entry texts, each distinct query token counted once, ties in turn order. It has no pack.

The runtime is the real one built from ``composition.Runtime`` on a temporary home (SQLite),
or on ``--database-url`` (e.g. a seekdb; scopes get a unique suffix there). It is imported
from ``PYTHONPATH`` first, so the same script measures another checkout of the runtime
(``PYTHONPATH=/tmp/other/runtime/src``); the report names the file it imported.

    python bench/locomo.py                       # lexical, hybrid (local model), BM25
    python bench/locomo.py --modes lexical,bm25  # without the model
    python bench/locomo.py --embeddings-url http://127.0.0.1:8080/v1 --embeddings-model m
    python bench/locomo.py --json --details /tmp/locomo-questions.json
    python bench/locomo.py --write-results       # rewrite the ``locomo`` block of RESULTS.md

Spec 08 Q2's targets are reported as verdicts; they never change the exit code.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
ROOT = BENCH_DIR.parent
# After PYTHONPATH (so another checkout's runtime can be measured), before site-packages.
_pythonpath = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
_after = [i + 1 for i, p in enumerate(sys.path) if p in _pythonpath]
sys.path.insert(max(_after, default=1), str(ROOT / "runtime" / "src"))

from _common import (  # noqa: E402
    Embeddings,
    command_line,
    log,
    machine_facts,
    markdown_table,
    percentile,
    publish,
)

DEFAULT_DATA = ROOT.parent / "shared" / "data" / "locomo" / "locomo-dev.json"
SECTION = "locomo"
CATEGORIES = (1, 2, 3, 4)
CATEGORY_NAMES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
SEARCH_LIMIT = 10
MAX_BYTES = 8000
MODES = ("lexical", "hybrid", "bm25")
BM25_K1 = 1.2
BM25_B = 0.75
QUERY_TIMEOUT = "30"  # seconds: the hybrid figures measure the channel, not its deadline
# Spec 08 Q2.
TARGETS = {
    "lexical_hit_at_10": 0.65,
    "lexical_pack_hit": 0.62,
    "lexical_pack_precision": 0.15,
    "hybrid_hit_at_10": 0.70,
}
_EVIDENCE = re.compile(r"D:?(\d+):(\d+)")
_WORD = re.compile(r"\w+")
_PACK = re.compile(
    r"BEGIN_POWERCONTEXT_PREPARED_CONTEXT_V1\n(.*)\nEND_POWERCONTEXT_PREPARED_CONTEXT_V1", re.S
)


# -- data ----------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Turn:
    dia_id: str
    text: str  # the entry's text, as the protocol builds it


@dataclass(frozen=True, slots=True)
class Question:
    conversation: str
    index: int  # position in the conversation's qa list
    text: str
    category: int
    evidence: frozenset[str]


@dataclass(slots=True)
class Conversation:
    sample_id: str
    turns: list[Turn]
    questions: list[Question]


def turn_text(turn: dict[str, Any]) -> str:
    text = f"{turn['speaker']}: {turn['text']}"
    if turn.get("blip_caption"):
        text += f" [shares a photo of {turn['blip_caption']}]"
    return text


def evidence_ids(raw: Sequence[str]) -> frozenset[str]:
    """``["D8:6; D9:17"]`` -> ``{"D8:6", "D9:17"}``; ``"D:11:26"`` -> ``"D11:26"``."""
    return frozenset(f"D{m[0]}:{m[1]}" for item in raw for m in _EVIDENCE.findall(str(item)))


def _session_number(key: str) -> int | None:
    m = re.fullmatch(r"session_(\d+)", key)
    return int(m.group(1)) if m else None


def load(path: Path, conversations: int | None = None) -> list[Conversation]:
    out = []
    for sample in json.loads(path.read_text(encoding="utf-8"))[:conversations]:
        conv = sample["conversation"]
        sessions = sorted(
            (n, value)
            for key, value in conv.items()
            if (n := _session_number(key)) is not None and isinstance(value, list)
        )
        turns = [Turn(t["dia_id"], turn_text(t)) for _, session in sessions for t in session]
        questions = [
            Question(sample["sample_id"], i, q["question"], q["category"], evidence_ids(ev))
            for i, q in enumerate(sample["qa"])
            if q.get("category") in CATEGORIES and (ev := q.get("evidence"))
        ]
        out.append(Conversation(sample["sample_id"], turns, questions))
    return out


# -- answers and metrics ---------------------------------------------------------------------------


@dataclass(slots=True)
class Answer:
    """One question in one mode: the evidence rank in the search, and the pack."""

    rank: int | None  # 1-based rank of the first evidence hit among the search's hits
    hits: int  # search hits returned
    search_ms: float
    pack_items: int | None = None  # None: the mode has no pack (bm25)
    pack_evidence_items: int = 0
    pack_bytes: int = 0
    prepare_ms: float | None = None
    fallback: bool = False  # a hybrid search or prepare that ran lexically

    def as_json(self) -> dict[str, Any]:
        return {
            "rank": self.rank,
            "hits": self.hits,
            "pack_items": self.pack_items,
            "pack_evidence_items": self.pack_evidence_items,
            "pack_bytes": self.pack_bytes,
            "fallback": self.fallback,
        }


def first_rank(dia_ids: Sequence[str | None], evidence: frozenset[str]) -> int | None:
    return next((i for i, d in enumerate(dia_ids, 1) if d in evidence), None)


def summarise(answers: Sequence[Answer]) -> dict[str, Any]:
    n = len(answers)
    if not n:
        return {"questions": 0}
    out: dict[str, Any] = {
        "questions": n,
        "hit_at_10": round(sum(a.rank is not None for a in answers) / n, 4),
        "mrr": round(sum(1 / a.rank for a in answers if a.rank) / n, 4),
        "search_empty": round(sum(a.hits == 0 for a in answers) / n, 4),
        "search_p50_ms": round(percentile([a.search_ms for a in answers], 50), 3),
    }
    packed = [a for a in answers if a.pack_items is not None]
    if packed:
        items = sum(a.pack_items or 0 for a in packed)
        out |= {
            "pack_hit": round(sum(a.pack_evidence_items > 0 for a in packed) / n, 4),
            "pack_precision": round(sum(a.pack_evidence_items for a in packed) / items, 4)
            if items
            else 0.0,
            "pack_items_mean": round(items / n, 3),
            "pack_bytes_mean": round(sum(a.pack_bytes for a in packed) / n, 1),
            "pack_empty": round(sum(a.pack_items == 0 for a in packed) / n, 4),
            "prepare_p50_ms": round(percentile([a.prepare_ms or 0.0 for a in packed], 50), 3),
            "fallbacks": sum(a.fallback for a in packed),
        }
    return out


# -- BM25 baseline ---------------------------------------------------------------------------------


def tokens(text: str) -> list[str]:
    return _WORD.findall(text.lower())


class BM25:
    """Okapi BM25 over one conversation's turns (k1 = 1.2, b = 0.75, Lucene's idf)."""

    def __init__(self, texts: Sequence[str], k1: float = BM25_K1, b: float = BM25_B) -> None:
        self.k1, self.b = k1, b
        self.tf = [Counter(tokens(t)) for t in texts]
        self.length = [sum(c.values()) for c in self.tf]
        self.avgdl = sum(self.length) / len(self.length) if self.length else 0.0
        df: Counter[str] = Counter()
        for c in self.tf:
            df.update(c.keys())
        n = len(texts)
        self.idf = {t: math.log(1 + (n - d + 0.5) / (d + 0.5)) for t, d in df.items()}
        self.postings: dict[str, list[int]] = {}
        for i, c in enumerate(self.tf):
            for t in c:
                self.postings.setdefault(t, []).append(i)

    def search(self, query: str, limit: int = SEARCH_LIMIT) -> list[tuple[int, float]]:
        """``(turn index, score)`` of the best ``limit`` turns, best first, ties in turn order."""
        scores: dict[int, float] = {}
        for term in dict.fromkeys(tokens(query)):  # each distinct query token once
            idf = self.idf.get(term)
            if idf is None:
                continue
            for i in self.postings[term]:
                f = self.tf[i][term]
                norm = self.k1 * (1 - self.b + self.b * self.length[i] / self.avgdl)
                scores[i] = scores.get(i, 0.0) + idf * f * (self.k1 + 1) / (f + norm)
        ranked = sorted(scores.items(), key=lambda item: (-item[1], item[0]))
        return ranked[:limit]


def run_bm25(conversations: Sequence[Conversation]) -> dict[tuple[str, int], Answer]:
    answers = {}
    for conv in conversations:
        index = BM25([t.text for t in conv.turns])
        ids = [t.dia_id for t in conv.turns]
        for q in conv.questions:
            started = time.perf_counter()
            found = index.search(q.text)
            ms = (time.perf_counter() - started) * 1000
            answers[q.conversation, q.index] = Answer(
                first_rank([ids[i] for i, _ in found], q.evidence), len(found), ms
            )
    return answers


# -- the runtime ---------------------------------------------------------------------------------


class Bench:
    """The runtime(s) on one home: ``runtimes`` maps a mode to the runtime that answers it."""

    def __init__(self, home: Path, database_url: str | None, embeddings: Embeddings | None):
        from powercontext_runtime.composition import Runtime
        from powercontext_runtime.settings import Settings

        self.runtimes: dict[str, Any] = {}
        self.skipped: dict[str, str] = {}
        base: dict[str, Any] = {"home": home, "auth": "none"}
        if database_url:
            base["database_url"] = database_url
        if embeddings is not None:
            try:
                hybrid = Runtime.open(Settings.load(env=embeddings.env(QUERY_TIMEOUT), **base))
            except Exception as exc:  # the lexical figures still come
                self.skipped["hybrid"] = f"the semantic channel did not open: {exc!r}"
            else:
                if getattr(hybrid, "semantic", None) is None:
                    hybrid.close()
                    self.skipped["hybrid"] = "this runtime has no semantic channel"
                else:
                    self.runtimes["hybrid"] = hybrid
        # The lexical runtime on the same home and database: the same entries, channel off.
        self.runtimes["lexical"] = Runtime.open(Settings.load(env={}, **base))

    @property
    def writer(self) -> Any:
        return self.runtimes.get("hybrid") or self.runtimes["lexical"]

    def close(self) -> None:
        for runtime in self.runtimes.values():
            runtime.close()


def load_scope(bench: Bench, scope: str, conv: Conversation) -> dict[str, str]:
    """Remember every turn in order; entry id -> dia_id."""
    from powercontext_runtime.contract.memory import RememberMemoryRequest

    dia_of = {}
    for turn in conv.turns:
        written = bench.writer.memory.remember(
            RememberMemoryRequest(scope_id=scope, kind="fact", text=turn.text)
        )
        dia_of[written.entry.citation.entry_id] = turn.dia_id
    return dia_of


def pack_entry_ids(content: str | None) -> list[str]:
    """Entry ids the pack's memory items cite, in pack order."""
    if not content:
        return []
    block = _PACK.search(content)
    if block is None:
        raise ValueError("a ready pack without its JSON block")
    items = json.loads(block.group(1))["items"]
    return [i["citation"]["entry_id"] for i in items if "entry_id" in i.get("citation", {})]


def ask(runtime: Any, scope: str, dia_of: dict[str, str], q: Question) -> Answer:
    from powercontext_runtime.contract.context import PrepareContextRequest
    from powercontext_runtime.contract.memory import SearchMemoryRequest
    from powercontext_runtime.services.auth import Principal

    started = time.perf_counter()
    found = runtime.memory.search(
        SearchMemoryRequest(scope_id=scope, query=q.text, limit=SEARCH_LIMIT)
    )
    search_ms = (time.perf_counter() - started) * 1000
    hybrid = getattr(runtime, "semantic", None) is not None
    dia_ids = [dia_of.get(h.citation.entry_id) for h in found.hits]
    request = PrepareContextRequest(scope_id=scope, query=q.text, max_bytes=MAX_BYTES)
    started = time.perf_counter()
    if hasattr(runtime.context, "prepare_reporting"):
        prepared = runtime.context.prepare_reporting(request, Principal.unrestricted())
        pack, fell_back = prepared.pack, hybrid and prepared.mode != "hybrid"
    else:
        pack, fell_back = runtime.context.prepare(request, Principal.unrestricted()), False
    prepare_ms = (time.perf_counter() - started) * 1000
    cited = [dia_of.get(e) for e in pack_entry_ids(pack.content)]
    return Answer(
        first_rank(dia_ids, q.evidence),
        len(dia_ids),
        search_ms,
        len(cited),
        sum(d in q.evidence for d in cited),
        pack.content_bytes if pack.status == "ready" else 0,
        prepare_ms,
        fell_back or (hybrid and getattr(found, "mode", "hybrid") != "hybrid"),
    )


def run_runtime(
    conversations: Sequence[Conversation],
    modes: Sequence[str],
    database_url: str | None,
    embeddings: Embeddings | None,
) -> tuple[dict[str, dict[tuple[str, int], Answer]], dict[str, str], dict[str, Any]]:
    import powercontext_runtime

    home = Path(tempfile.mkdtemp(prefix="pc-locomo-"))
    suffix = f"-{uuid.uuid4().hex[:8]}" if database_url else ""
    info: dict[str, Any] = {"runtime": runtime_source(powercontext_runtime.__file__)}
    log(f"  runtime imported from {powercontext_runtime.__file__}")
    bench = Bench(home, database_url, embeddings if "hybrid" in modes else None)
    answers: dict[str, dict[tuple[str, int], Answer]] = {}
    try:
        started = time.perf_counter()
        scopes = {}
        for conv in conversations:
            scope = f"locomo-{conv.sample_id}{suffix}"
            scopes[conv.sample_id] = (scope, load_scope(bench, scope, conv))
        info["load_seconds"] = round(time.perf_counter() - started, 1)
        log(f"  {sum(len(c.turns) for c in conversations)} turns remembered in "
            f"{info['load_seconds']} s")  # fmt: skip
        if "hybrid" in bench.runtimes:
            started = time.perf_counter()
            info["embedded"] = bench.runtimes["hybrid"].backfill_embeddings()
            info["embed_seconds"] = round(time.perf_counter() - started, 1)
            log(f"  {info['embedded']} entries embedded in {info['embed_seconds']} s")
        for mode in ("lexical", "hybrid"):
            if mode not in modes or mode not in bench.runtimes:
                continue
            runtime = bench.runtimes[mode]
            for conv in conversations:  # a warm-up question per scope, not measured
                scope, dia_of = scopes[conv.sample_id]
                if conv.questions:
                    ask(runtime, scope, dia_of, conv.questions[0])
            started = time.perf_counter()
            answers[mode] = {
                (q.conversation, q.index): ask(runtime, *scopes[conv.sample_id], q)
                for conv in conversations
                for q in conv.questions
            }
            log(f"  {mode}: {len(answers[mode])} questions in "
                f"{time.perf_counter() - started:.0f} s")  # fmt: skip
        return answers, bench.skipped, info
    finally:
        bench.close()
        shutil.rmtree(home, ignore_errors=True)


def runtime_source(path: str) -> dict[str, Any]:
    """Which code was measured: the imported file, and its checkout's commit when it has one."""
    where = Path(path).parent
    out: dict[str, Any] = {"file": path}
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        run = subprocess.run(
            ["git", "-C", str(where), "rev-parse", "--short", "HEAD"],
            capture_output=True, text=True, check=True, timeout=10,
        )  # fmt: skip
        out["commit"] = run.stdout.strip()
        status = subprocess.run(
            ["git", "-C", str(where), "status", "--porcelain", "--", "."],
            capture_output=True, text=True, check=True, timeout=10,
        )  # fmt: skip
        out["runtime_changes_uncommitted"] = bool(status.stdout.strip())
    return out


# -- report ----------------------------------------------------------------------------------------


def _f(value: Any, digits: int = 3) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def _pct(value: Any) -> str:
    return "—" if value is None else f"{100 * value:.1f} %"


def render(report: dict[str, Any]) -> str:
    results = report["results"]
    rows = []
    for mode in MODES:
        r = results.get(mode)
        if r is None:
            continue
        rows.append([
            mode, _f(r.get("hit_at_10")), _f(r.get("mrr")), _f(r.get("pack_hit")),
            _f(r.get("pack_precision")), _f(r.get("pack_items_mean"), 2),
            _f(r.get("pack_bytes_mean"), 0), _pct(r.get("pack_empty")),
            _pct(r.get("search_empty")), _f(r.get("search_p50_ms"), 2),
            _f(r.get("prepare_p50_ms"), 2),
        ])  # fmt: skip
    cfg = report["config"]
    by_category = []
    for mode in MODES:
        if mode in results:
            cells = [
                f"{_f(c.get('hit_at_10'))} / {_f(c.get('pack_hit'))}"
                if (c := report["by_category"][mode].get(str(k), {})).get("questions")
                else "—"
                for k in CATEGORIES
            ]
            by_category.append([mode, *cells])
    counts = report["questions_by_category"]
    lines = [
        "## LoCoMo dev split (Q2)",
        "",
        "Generated by `bench/locomo.py` (in process, no LLM); edit outside the markers only.",
        "",
        f"- Date: {report['machine']['date']}; machine: {report['machine']['cpu_count']} CPUs, "
        f"{report['machine']['platform']}, Python {report['machine']['python']}",
        f"- Command: `{report['command']}`",
        f"- Data: `{cfg['data_name']}`: {cfg['conversations']} conversations, {cfg['turns']} "
        f"turns, {cfg['questions']} questions (categories 1-4 with evidence); "
        f"`search_memory` limit {SEARCH_LIMIT}, `prepare_context` max_bytes {MAX_BYTES}",
        (f"- Runtime: `{report['runtime']['file']}`" if report["runtime"] else "- Runtime: not run")
        + (f" at {report['runtime']['commit']}" if report["runtime"].get("commit") else "")
        + (
            " (uncommitted runtime changes)"
            if report["runtime"].get("runtime_changes_uncommitted")
            else ""
        )
        + f"; database: {cfg['database']}; hybrid embeddings: {cfg['embeddings']}",
        *[f"- {mode}: not measured ({why})" for mode, why in report["skipped"].items()],
        "",
        markdown_table(
            [
                "mode",
                "search hit@10",
                "MRR",
                "pack hit",
                "pack precision",
                "items / pack",
                "bytes / pack",
                "pack empty",
                "search empty",
                "search p50 ms",
                "prepare p50 ms",
            ],
            rows,
        ),
        "",
        "hit@10 / pack hit by category ("
        + ", ".join(f"{CATEGORY_NAMES[k]}: {counts.get(str(k), 0)}" for k in CATEGORIES)
        + " questions):",
        "",
        markdown_table(["mode", *(CATEGORY_NAMES[k] for k in CATEGORIES)], by_category),
        "",
        "Spec 08 Q2: "
        + "; ".join(
            f"{v['what']} {v['target']}: {_f(v['measured'])} "
            + ("met" if v["ok"] else "**missed**" if v["ok"] is False else "not measured")
            for v in report["targets"]
        )
        + ".",
        "",
        "Pack precision: of all memory items in all packs, the share citing an evidence turn; "
        "items and bytes per pack: mean over all questions (an empty pack counts 0). BM25: "
        "plain Okapi BM25 (k1 1.2, b 0.75) over lowercase `\\w+` tokens, computed in the "
        "bench; it has no pack.",
    ]
    return "\n".join(lines)


def verdicts(results: dict[str, Any]) -> list[dict[str, Any]]:
    lexical, hybrid = results.get("lexical", {}), results.get("hybrid", {})
    rows = []
    for what, value, target in (
        ("lexical hit@10", lexical.get("hit_at_10"), TARGETS["lexical_hit_at_10"]),
        ("lexical pack hit", lexical.get("pack_hit"), TARGETS["lexical_pack_hit"]),
        ("lexical pack precision", lexical.get("pack_precision"),
         TARGETS["lexical_pack_precision"]),
        ("hybrid hit@10", hybrid.get("hit_at_10"), TARGETS["hybrid_hit_at_10"]),
    ):  # fmt: skip
        rows.append({"what": what, "target": f"≥ {target}", "measured": value,
                     "ok": None if value is None else value >= target})  # fmt: skip
    mrr_ok = None
    if hybrid.get("mrr") is not None and lexical.get("mrr") is not None:
        mrr_ok = hybrid["mrr"] >= lexical["mrr"]
    rows.append({"what": "hybrid MRR", "target": "≥ lexical MRR", "measured": hybrid.get("mrr"),
                 "ok": mrr_ok})  # fmt: skip
    return rows


def build_report(
    conversations: Sequence[Conversation],
    answers: dict[str, dict[tuple[str, int], Answer]],
    skipped: dict[str, str],
    info: dict[str, Any],
    config: dict[str, Any],
) -> dict[str, Any]:
    questions = [q for c in conversations for q in c.questions]
    results = {mode: summarise(list(answers[mode].values())) for mode in MODES if mode in answers}
    by_category = {
        mode: {
            str(k): summarise(
                [answers[mode][q.conversation, q.index] for q in questions if q.category == k]
            )
            for k in CATEGORIES
        }
        for mode in answers
    }
    return {
        "benchmark": "locomo",
        "skipped_reason": None,
        "machine": machine_facts(),
        "command": command_line(),
        "config": config
        | {
            "conversations": len(conversations),
            "turns": sum(len(c.turns) for c in conversations),
            "questions": len(questions),
            "search_limit": SEARCH_LIMIT,
            "max_bytes": MAX_BYTES,
            "bm25": {"k1": BM25_K1, "b": BM25_B},
        },
        "runtime": info.get("runtime", {}),
        "load": {k: v for k, v in info.items() if k != "runtime"},
        "skipped": skipped,
        "questions_by_category": {
            str(k): sum(q.category == k for q in questions) for k in CATEGORIES
        },
        "results": results,
        "by_category": by_category,
        "targets": verdicts(results),
    }


def details(
    conversations: Sequence[Conversation], answers: dict[str, dict[tuple[str, int], Answer]]
) -> list[dict[str, Any]]:
    """Per question, every mode's answer (for comparing two runs question by question)."""
    return [
        {
            "conversation": q.conversation,
            "index": q.index,
            "category": q.category,
            "question": q.text,
            "evidence": sorted(q.evidence),
            **{mode: answers[mode][q.conversation, q.index].as_json() for mode in answers},
        }
        for c in conversations
        for q in c.questions
    ]


# -- entry point -----------------------------------------------------------------------------------


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", type=Path, default=DEFAULT_DATA,
                   help="LoCoMo JSON (default ../shared/data/locomo/locomo-dev.json)")  # fmt: skip
    p.add_argument("--modes", default=",".join(MODES),
                   help="comma-separated subset of lexical,hybrid,bm25 (default all)")  # fmt: skip
    p.add_argument("--conversations", type=int, default=None, help="only the first N")
    p.add_argument("--database-url", default=None,
                   help="this database (e.g. seekdb) instead of SQLite")  # fmt: skip
    p.add_argument("--embeddings-url", default=None,
                   help="hybrid against this OpenAI-compatible base URL (…/v1) instead of the "
                   "local model")  # fmt: skip
    p.add_argument("--embeddings-model", default=None, help="the model name for that endpoint")
    p.add_argument("--embeddings-dimension", type=int, default=None,
                   help="its vector size (default: asked of the endpoint)")  # fmt: skip
    p.add_argument("--json", action="store_true", help="the report as JSON on stdout")
    p.add_argument("--details", type=Path, default=None,
                   help="write every question's answer per mode to this JSON file")  # fmt: skip
    p.add_argument("--write-results", action="store_true",
                   help=f"rewrite the `{SECTION}` block of bench/RESULTS.md")  # fmt: skip
    args = p.parse_args(argv)
    args.modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    if unknown := set(args.modes) - set(MODES):
        p.error(f"unknown modes: {', '.join(sorted(unknown))}")
    if bool(args.embeddings_url) != bool(args.embeddings_model):
        p.error("--embeddings-url and --embeddings-model go together")
    if args.embeddings_url and not args.embeddings_url.startswith(("http://", "https://")):
        p.error("--embeddings-url must be an http(s) URL")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if not args.data.is_file():
        reason = f"LoCoMo data not found at {args.data}: skipped (see bench/README.md)"
        log(f"locomo: {reason}")
        if args.json:
            print(json.dumps({"benchmark": "locomo", "skipped_reason": reason}, indent=2))
        else:
            print(f"locomo: {reason}")
        return 0
    conversations = load(args.data, args.conversations)
    log(f"locomo: {len(conversations)} conversations, "
        f"{sum(len(c.questions) for c in conversations)} questions from {args.data}")  # fmt: skip
    embeddings = Embeddings(args.embeddings_url, args.embeddings_model, args.embeddings_dimension)
    answers: dict[str, dict[tuple[str, int], Answer]] = {}
    skipped: dict[str, str] = {}
    info: dict[str, Any] = {}
    if {"lexical", "hybrid"} & set(args.modes):
        answers, skipped, info = run_runtime(
            conversations, args.modes, args.database_url, embeddings
        )
    if "bm25" in args.modes:
        answers["bm25"] = run_bm25(conversations)
    config = {
        "data": str(args.data),
        "data_name": args.data.name,
        "modes": args.modes,
        "database": "seekdb/OceanBase (--database-url)" if args.database_url else "SQLite",
        "embeddings": embeddings.label if "hybrid" in args.modes else "—",
    }
    report = build_report(conversations, answers, skipped, info, config)
    markdown = render(report)
    report["markdown"] = markdown
    if args.details:
        args.details.write_text(json.dumps(details(conversations, answers), indent=1) + "\n")
        log(f"  per-question answers in {args.details}")
    if not args.json:
        log("")
    publish(report, markdown, SECTION if args.write_results else None, as_json=args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
