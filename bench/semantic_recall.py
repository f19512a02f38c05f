"""Semantic recall channel (#17 item 2): recall fts vs hybrid, prepare latency, RSS.

Dataset: Debian's own package descriptions in English and their DDTP Chinese translations
(the apt indexes ``Translation-en`` and ``Translation-zh_CN`` of bookworm main, keyed by
``Description-md5``). A query is a package's *synopsis* (one line, English or Chinese); its one
relevant entry is that package's English long description. Synopses shared by several
descriptions are dropped (ambiguous labels). The scope holds the labelled descriptions plus
English distractors up to ``--entries``; ``--holdout`` labelled packages are *not* loaded, and
their queries measure false admissions (any hit is wrong).

Fetching the indexes: ``apt-get update`` with ``Acquire::Languages=en,zh_CN`` into a private
lists directory (the system's apt state is untouched), then ``lz4 -d``. ``--lists DIR`` reuses
a directory that already holds them.

Method (in-process ``Runtime`` on a temporary SQLite file, one core's worth of work, no HTTP):
remember every entry (p50/p99 timed), embed with the backfill (entries/s), then per query
``search_memory`` limit 10 in ``fts`` and in ``hybrid``: hit@1, hit@10, MRR@10 per query
language, and for the held-out queries the share that returned any hit. The floor sweep
re-fuses the same lexical hits and vector candidates at several floors (pure, no re-query).
Then ``prepare_context`` p50/p99 with the channel on (auto = hybrid) and off (fts), short
(synopsis) and 2,000-character prompts, and VmRSS/VmHWM of this process.

Usage: ``python bench/semantic_recall.py [--entries 3000] [--lists DIR] [--json out.json]``.
Numbers go to docs/decisions/semantic-channel.md by hand; bench/RESULTS.md is not edited.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "runtime" / "src"))

from _common import replace_section  # noqa: E402

from powercontext_runtime.composition import Runtime  # noqa: E402
from powercontext_runtime.contract.context import PrepareContextRequest  # noqa: E402
from powercontext_runtime.contract.memory import (  # noqa: E402
    RememberMemoryRequest,
    SearchMemoryRequest,
)
from powercontext_runtime.search import fusion  # noqa: E402
from powercontext_runtime.services.auth import Principal  # noqa: E402
from powercontext_runtime.services.semantic import QUERY_CHARS  # noqa: E402
from powercontext_runtime.settings import Settings  # noqa: E402

SCOPE = "bench:semantic"
TEXT_CHARS = 1500  # an entry: the description's opening (the model embeds ≤ 2,000 chars)


# -- dataset ---------------------------------------------------------------------------------


def fetch_lists(lists: Path) -> None:
    """apt-get update into a private directory, asking for the two translation indexes."""
    lists.mkdir(parents=True, exist_ok=True)
    (lists / "partial").mkdir(exist_ok=True)
    cache = lists.parent / "cache"
    cache.mkdir(exist_ok=True)
    subprocess.run(
        [
            "apt-get",
            "update",
            "-qq",
            "-o",
            "Acquire::Languages=en,zh_CN",
            "-o",
            f"Dir::State::Lists={lists}",
            "-o",
            f"Dir::Cache={cache}",
            "-o",
            "APT::Get::List-Cleanup=0",
        ],
        check=True,
    )


def _index(lists: Path, suffix: str) -> Path:
    plain = [p for p in glob.glob(f"{lists}/*bookworm_main_i18n_{suffix}") if "security" not in p]
    if plain:
        return Path(plain[0])
    packed = [
        p for p in glob.glob(f"{lists}/*bookworm_main_i18n_{suffix}.lz4") if "security" not in p
    ]
    if not packed:
        raise SystemExit(f"no {suffix} index under {lists} (run without --lists to fetch it)")
    out = Path(packed[0][: -len(".lz4")])
    with out.open("wb") as sink:
        subprocess.run(["lz4", "-dc", packed[0]], stdout=sink, check=True)
    return out


def parse(path: Path, lang: str) -> dict[str, tuple[str, str]]:
    """Description-md5 → (synopsis, long description as one line)."""
    found: dict[str, tuple[str, str]] = {}
    md5: str | None = None
    lines: list[str] = []

    def flush() -> None:
        if md5 and lines:
            body = [("" if ln.strip() == "." else ln.strip()) for ln in lines[1:]]
            found[md5] = (lines[0].strip(), " ".join(" ".join(body).split()))

    for raw in path.read_text(encoding="utf-8").splitlines():
        if raw.startswith("Package: "):
            flush()
            md5, lines = None, []
        elif raw.startswith("Description-md5: "):
            md5 = raw[len("Description-md5: ") :]
        elif raw.startswith(f"Description-{lang}: "):
            lines = [raw.split(": ", 1)[1]]
        elif raw.startswith(" ") and lines:
            lines.append(raw)
    flush()
    return found


def dataset(lists: Path) -> tuple[list[dict[str, str]], list[str]]:
    """Labelled pairs (id, en synopsis, zh synopsis, doc) and the ids of other English docs."""
    en = parse(_index(lists, "Translation-en"), "en")
    zh = parse(_index(lists, "Translation-zh%5fCN"), "zh_CN")
    both = [k for k in zh if k in en and len(en[k][1]) > 40 and len(zh[k][0]) > 1]
    synopsis_count: dict[str, int] = {}
    for k in both:
        synopsis_count[en[k][0]] = synopsis_count.get(en[k][0], 0) + 1
    labelled = [
        {"id": k, "en": en[k][0], "zh": zh[k][0], "doc": en[k][1][:TEXT_CHARS]}
        for k in sorted(both)
        if synopsis_count[en[k][0]] == 1
    ]
    taken = {row["id"] for row in labelled}
    others = sorted(k for k in en if k not in zh and k not in taken and len(en[k][1]) > 40)
    return labelled, [en[k][1][:TEXT_CHARS] for k in others]


# -- measurement -----------------------------------------------------------------------------


def percentiles(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)

    def at(p: float) -> float:
        return ordered[min(len(ordered) - 1, round(p * (len(ordered) - 1)))]

    return {"p50": round(at(0.5), 2), "p99": round(at(0.99), 2), "n": len(ordered)}


def rss() -> dict[str, float]:
    fields = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(("VmRSS:", "VmHWM:")):
            key, value = line.split(":")
            fields[key] = round(int(value.split()[0]) / 1024, 1)
    return fields


def rank_of(texts: list[str], relevant: str) -> int | None:
    for position, text in enumerate(texts, start=1):
        if text == relevant:
            return position
    return None


def summarise(ranks: list[int | None]) -> dict[str, float]:
    n = len(ranks)
    return {
        "hit@1": round(sum(1 for r in ranks if r == 1) / n, 3),
        "hit@10": round(sum(1 for r in ranks if r is not None and r <= 10) / n, 3),
        "mrr@10": round(sum(1.0 / r for r in ranks if r is not None and r <= 10) / n, 3),
        "n": n,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--entries", type=int, default=3000)
    parser.add_argument("--holdout", type=int, default=200)
    parser.add_argument("--lists", type=Path, default=None)
    parser.add_argument("--samples", type=int, default=300)
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--write-results", action="store_true", help="rewrite this section of bench/RESULTS.md"
    )
    args = parser.parse_args()

    lists = args.lists or Path(tempfile.gettempdir()) / "powercontext-ddtp" / "lists"
    if args.lists is None and not glob.glob(f"{lists}/*Translation-zh%5fCN*"):
        fetch_lists(lists)
    labelled, others = dataset(lists)
    rnd = random.Random(args.seed)
    rnd.shuffle(labelled)
    held, loaded = labelled[: args.holdout], labelled[args.holdout :]
    distractors = rnd.sample(others, max(0, min(len(others), args.entries - len(loaded))))
    report: dict[str, Any] = {
        "labelled_pairs": len(labelled),
        "loaded_labelled": len(loaded),
        "held_out": len(held),
        "entries": len(loaded) + len(distractors),
        "rss_start": rss(),
    }
    print(json.dumps(report), flush=True)

    home = Path(tempfile.mkdtemp(prefix="pc-semantic-bench-"))
    env = {"POWERCONTEXT_EMBEDDINGS": "local", "POWERCONTEXT_EMBEDDINGS_QUERY_TIMEOUT": "0.05"}
    on = Runtime.open(Settings.load(env=env, home=home, auth="none"))
    assert on.semantic is not None
    texts = [row["doc"] for row in loaded] + distractors
    rnd.shuffle(texts)
    durations = []
    for text in texts:
        started = time.perf_counter()
        on.memory.remember(RememberMemoryRequest(scope_id=SCOPE, kind="fact", text=text))
        durations.append((time.perf_counter() - started) * 1000)
    report["remember_ms"] = percentiles(durations)
    report["rss_loaded"] = rss()
    started = time.perf_counter()
    embedded = on.backfill_embeddings()
    seconds = time.perf_counter() - started
    report["embed"] = {
        "count": embedded,
        "seconds": round(seconds, 1),
        "per_second": round(embedded / seconds, 1),
    }
    report["rss_embedded"] = rss()
    print(json.dumps({k: report[k] for k in ("remember_ms", "embed", "rss_embedded")}), flush=True)

    # Recall: fts and hybrid per query language; raw channels kept for the floor sweep.
    channel = on.semantic
    recall: dict[str, Any] = {}
    sweep_data: dict[str, list[tuple[list[str], list[tuple[str, float]], str | None]]] = {}
    for lang in ("en", "zh"):
        fts_ranks, hybrid_ranks, vector_ranks = [], [], []
        raw = []
        fallbacks = 0
        loaded_ids = {row["id"] for row in loaded}
        for row in loaded + held:
            query = row[lang]
            relevant = row["doc"] if row["id"] in loaded_ids else None
            fts = on.memory.search(SearchMemoryRequest(scope_id=SCOPE, query=query, mode="fts"))
            # The raw channels for the floor sweep: embedded without the request deadline (a
            # late answer here would only lose a sweep point; hybrid searches keep theirs).
            vector = channel.embedder.embed([query[:QUERY_CHARS]])[0]
            candidates = channel.candidates(SCOPE, vector, 32)
            lexical = [h.text for h in fts.hits]
            raw.append((lexical, [(c.text, c.similarity) for c in candidates], relevant))
            if relevant is None:
                continue
            fts_ranks.append(rank_of(lexical, relevant))
            hybrid = on.memory.search(
                SearchMemoryRequest(scope_id=SCOPE, query=query, mode="hybrid")
            )
            fallbacks += hybrid.mode != "hybrid"
            hybrid_ranks.append(rank_of([h.text for h in hybrid.hits], relevant))
            vector_ranks.append(rank_of([c.text for c in candidates][:10], relevant))
        recall[lang] = {
            "fts": summarise(fts_ranks),
            "hybrid": summarise(hybrid_ranks),
            "vector_top10_raw": summarise(vector_ranks),
            "hybrid_fallbacks": fallbacks,
        }
        sweep_data[lang] = raw
        print(json.dumps({lang: recall[lang]}), flush=True)
    report["recall"] = recall

    # Floor sweep: the same lexical hits and vector candidates, fused at other floors.
    sweep = {}
    for floor in (0.15, 0.2, 0.25, 0.3, 0.35, 0.4):
        row_out = {}
        for lang, raw in sweep_data.items():
            ranks, admitted_held, held_n = [], 0, 0
            for lexical, vector, relevant in raw:
                fused = fusion.fuse(
                    lexical, vector, fusion.Admission(floor), 10, lambda k: str(k).encode()
                )
                keys = [str(f.key) for f in fused]
                if relevant is None:
                    held_n += 1
                    admitted_held += bool(keys)
                else:
                    ranks.append(rank_of(keys, relevant))
            lexical_held = sum(1 for lexical, _v, rel in raw if rel is None and lexical)
            row_out[lang] = {
                **summarise(ranks),
                "held_out_nonempty": round(admitted_held / max(held_n, 1), 3),
                "held_out_nonempty_fts": round(lexical_held / max(held_n, 1), 3),
            }
        sweep[str(floor)] = row_out
    report["floor_sweep"] = sweep
    print(json.dumps({"floor_sweep": sweep}), flush=True)

    # prepare_context latency: hybrid (channel on) vs fts (a second runtime, channel off).
    off = Runtime.open(Settings.load(env={}, home=home, auth="none"))
    principal = Principal.unrestricted()
    prompts_short = [row[rnd.choice(("en", "zh"))] for row in rnd.sample(loaded, args.samples)]
    filler = " ".join(distractors[:50])
    prompts_long = [
        (row["zh"] + "。" + filler)[:2000] for row in rnd.sample(loaded, args.samples // 3)
    ]
    latency: dict[str, Any] = {}
    for name, runtime in (("hybrid", on), ("fts", off)):
        for kind, prompts in (("short", prompts_short), ("long", prompts_long)):
            for prompt in prompts[:10]:  # warm-up
                runtime.context.prepare(
                    PrepareContextRequest(scope_id=SCOPE, query=prompt), principal
                )
            times, modes = [], []
            for prompt in prompts:
                started = time.perf_counter()
                outcome = runtime.context.prepare_reporting(
                    PrepareContextRequest(scope_id=SCOPE, query=prompt), principal
                )
                times.append((time.perf_counter() - started) * 1000)
                modes.append(outcome.mode)
            latency[f"{name}_{kind}"] = {
                **percentiles(times),
                "ran_hybrid": round(modes.count("hybrid") / len(modes), 3),
            }
    report["prepare_ms"] = latency
    report["rss_end"] = rss()
    report["load_average"] = os.getloadavg()
    print(
        json.dumps(
            {
                "prepare_ms": latency,
                "rss_end": report["rss_end"],
                "load_average": report["load_average"],
            }
        ),
        flush=True,
    )
    off.close()
    on.close()
    if args.json:
        args.json.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n")
    if args.write_results:
        replace_section("semantic-recall", render_markdown(report))
    return 0


def render_markdown(report: dict[str, Any]) -> str:
    """The RESULTS.md section: recall with and without the channel, the floor sweep, latency."""
    recall = report["recall"]
    lines = [
        "### Semantic recall on a public bilingual set (Debian DDTP, `bench/semantic_recall.py`)",
        "",
        f"{report['entries']} entries ({report['loaded_labelled']} labelled package descriptions"
        f" plus distractors), {report['held_out']} labelled packages held out; query = the"
        " package's synopsis in English or Chinese, relevant = its English description."
        f" `search_memory` limit 10, in process, load {report['load_average'][0]:.1f}.",
        "",
        "| queries | fts hit@1 / hit@10 / MRR@10 | hybrid hit@1 / hit@10 / MRR@10 |",
        "| --- | --- | --- |",
    ]
    for lang, label in (("en", "en → en"), ("zh", "zh → en")):
        row = recall[lang]
        cells = [
            " / ".join(f"{row[mode][k]:.3f}" for k in ("hit@1", "hit@10", "mrr@10"))
            for mode in ("fts", "hybrid")
        ]
        lines.append(f"| {label} ({row['fts']['n']}) | {cells[0]} | {cells[1]} |")
    lines += [
        "",
        "Search floor sweep (the same candidates re-fused; held-out = share of queries whose"
        " package was not loaded that still got a hit):",
        "",
        "| floor | en hit@10 | zh hit@10 | zh MRR@10 | held-out non-empty zh / en |",
        "| --- | --- | --- | --- | --- |",
    ]
    for floor, row in report["floor_sweep"].items():
        en, zh = row["en"], row["zh"]
        held = f"{zh['held_out_nonempty']:.3f} / {en['held_out_nonempty']:.3f}"
        lines.append(
            f"| {floor} | {en['hit@10']:.3f} | {zh['hit@10']:.3f} | {zh['mrr@10']:.3f} | {held} |"
        )
    lines += ["", "| prepare_context | p50 ms | p99 ms |", "| --- | --- | --- |"]
    for name, row in report["prepare_ms"].items():
        lines.append(f"| {name.replace('_', ', ')} | {row['p50']} | {row['p99']} |")
    embed = report["embed"]
    lines += [
        "",
        f"Backfill {embed['per_second']} entries/s; remember p50 {report['remember_ms']['p50']} ms;"
        f" RSS at the end {report['rss_end'].get('VmRSS', 0):.0f} MiB"
        f" (peak {report['rss_end'].get('VmHWM', 0):.0f} MiB).",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
