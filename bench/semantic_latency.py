"""Hybrid ``prepare_context`` in process, and its parts, on a data dir with the semantic channel.

Issue 17's budget for the semantic channel is prepare p50 ≤ 5 ms / p99 ≤ 20 ms at 100k entries
with the query embedding included, RSS ≤ 300 MiB with the model loaded. ``prepare_latency.py
--embeddings local`` measures that over HTTP; this script opens the same database in process
(no HTTP, no daemon: run it after that bench stopped its daemon) to say where the time goes:

* prepare with the channel on (hybrid) and off (the lexical search alone), the same prompts as
  ``prepare_latency.py`` (same seed, generated from the scope's first entries), counting the
  search that ran (a fallback to fts is not a fast hybrid);
* the query embedding alone, the package's stock pass on 256 characters (what the runtime
  used before) against the query pass (``embeddings/use_query.py``) on at most 96 tokens, and the
  vector search alone (Hamming prefilter + int8 rescoring over the scope's loaded index);
* recall@10 of that vector search against an exact scan of the same int8 vectors, for the
  prompts' real query vectors;
* VmRSS of this process after opening, after the model and the index loaded, and at the end,
  and the token cache's rows;
* with ``--second-process``, what moving the channel into a process of its own would give:
  this process runs the lexical prepare (channel off) while a second one embeds the same
  prompt and searches the scope's vectors, and the prompt is done when both are. That is
  the critical path a sidecar could reach on two cores (the fusion and pack of the hybrid
  prepare are not counted; the second process's vector step includes reading its
  candidates' rows, which a sidecar's caller would do), and the VmRSS both processes hold.

Build the data dir first: ``python bench/prepare_latency.py --embeddings local --bulk-load
--sizes 100000 --data-dir DIR --scope-id S`` (the scope is then ``S-n100000``).
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from _common import (
    BenchError,
    MemoryTextGenerator,
    command_line,
    log,
    machine_facts,
    markdown_table,
    process_memory_kib,
    run_and_publish,
    summarize_ms,
)
from prepare_latency import KINDS, VOCAB_ENTRIES, Prompt, make_prompts

SECTION = "semantic-latency"
P50_MS, P99_MS, MAX_MIB = 5.0, 20.0, 300.0


def _rss_mib() -> float:
    return round(process_memory_kib(os.getpid())["rss_kib"] / 1024, 1)


def _timed(
    work: Callable[[Any], object], items: Sequence[Any], warmup: Sequence[Any]
) -> dict[str, float]:
    """p50/p99… of ``work`` over ``items``, after ``warmup`` (untimed)."""
    for item in warmup:
        work(item)
    durations = []
    for item in items:
        started = time.perf_counter()
        work(item)
        durations.append(time.perf_counter() - started)
    return summarize_ms(durations)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data-dir", required=True, help="a data dir built as the docstring says")
    p.add_argument("--scope-id", required=True, help="the scope to prepare for")
    p.add_argument("--seed", type=int, default=42, help="workload seed (default 42)")
    p.add_argument("--samples", type=int, default=300, help="timed prompts per kind")
    p.add_argument("--warmup", type=int, default=20, help="untimed prompts per kind")
    p.add_argument(
        "--second-process",
        action="store_true",
        help="also time the lexical prepare here beside embedding and vector search in a second"
        " process (the critical path of a sidecar), and both processes' VmRSS",
    )
    p.add_argument("--json", action="store_true", help="print the results as JSON on stdout")
    p.add_argument(
        "--write-results", action="store_true", help="rewrite this section of bench/RESULTS.md"
    )
    args = p.parse_args(argv)
    if args.samples < 1 or args.warmup < 0:
        p.error("--samples must be positive and --warmup ≥ 0")
    return args


def run(args: argparse.Namespace) -> dict[str, Any]:
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # as the runtime sets it
    from powercontext_runtime.composition import Runtime
    from powercontext_runtime.contract.context import PrepareContextRequest
    from powercontext_runtime.services.auth import Principal
    from powercontext_runtime.settings import Settings

    home = Path(args.data_dir).resolve()
    if not (home / "powercontext.db").exists():
        raise BenchError(f"no database in {home}")
    facts, load_before, command = machine_facts(), os.getloadavg(), command_line()
    first = MemoryTextGenerator(args.seed).take(VOCAB_ENTRIES)
    prompts = make_prompts(args.seed, first, args.samples, args.warmup)
    rss: dict[str, float] = {"start": _rss_mib()}
    principal = Principal.unrestricted()

    def prepare(runtime: Runtime, modes: dict[str, int]) -> Callable[[Prompt], object]:
        def work(prompt: Prompt) -> object:
            request = PrepareContextRequest(scope_id=args.scope_id, query=prompt.text)
            done = runtime.context.prepare_reporting(request, principal)
            modes[done.mode] = modes.get(done.mode, 0) + 1
            return done

        return work

    second: dict[str, Any] | None = None
    if args.second_process:  # first, while this process has loaded neither model nor index
        lexical = Runtime.open(Settings.load(env={"POWERCONTEXT_EMBEDDINGS": "off"}, home=home))
        try:
            second = _second_process(args, prompts, prepare(lexical, {}))
        finally:
            lexical.close()
    env = {"POWERCONTEXT_EMBEDDINGS": "local"}
    hybrid = Runtime.open(Settings.load(env=env, home=home))
    try:
        semantic = hybrid.semantic
        assert semantic is not None
        rss["opened"] = _rss_mib()
        embedder: Any = semantic.embedder
        embedder.embed_query("warm up")  # loads the model and the query pass (≈ 1 s)
        rss["model_loaded"] = _rss_mib()
        vectors = semantic.vector_count()

        # The first prepare loads the scope's index (every vector of the scope, once).
        started = time.perf_counter()
        prepare(hybrid, {})(prompts.warm_short[0] if prompts.warm_short else prompts.short[0])
        index_load_s = round(time.perf_counter() - started, 2)
        rss["index_loaded"] = _rss_mib()
        log(f"semantic_latency: {vectors:,} vectors, index loaded in {index_load_s} s")

        kinds: dict[str, Any] = {}
        all_vectors: list[Any] = []
        for kind in KINDS:
            timed = getattr(prompts, kind)
            warm = getattr(prompts, f"warm_{kind}")
            for prompt in warm:
                prepare(hybrid, {})(prompt)
            modes: dict[str, int] = {}
            hybrid_ms = _timed(prepare(hybrid, modes), timed, ())
            texts = [p.text for p in timed]
            query_vectors = [embedder.embed_query(t) for t in texts]
            all_vectors += query_vectors
            few = texts[:5]

            def vector_search(vector: Any) -> object:
                with semantic.snapshot():
                    return semantic.candidates(args.scope_id, vector, 32)

            kinds[kind] = {
                "hybrid_ms": hybrid_ms,
                "hybrid_modes": modes,
                "embed_stock_256_chars_ms": _timed(lambda t: embedder.embed([t[:256]]), texts, few),
                "embed_query_pass_ms": _timed(embedder.embed_query, texts, few),
                "embed_via_query_thread_ms": _timed(semantic.embed_query, texts, few),
                "vector_search_ms": _timed(vector_search, query_vectors, query_vectors[:5]),
                "query_tokens": summarize_ms([len(embedder.query_ids(t)) / 1000 for t in texts]),
            }
            log(f"  {kind}: hybrid p50 {hybrid_ms['p50']:.2f} / p99 {hybrid_ms['p99']:.2f} ms")
        recall = _recall(semantic, args.scope_id, all_vectors)
        cache = embedder.token_cache
        token_cache = {
            "capacity": cache.capacity,
            "cached": cache.cached,
            "misses": cache.misses,
            "mib": round(cache.nbytes / 2**20, 1),
        }
        rss["after_hybrid"] = _rss_mib()
        fallbacks = dict(semantic.fallbacks)
    finally:
        hybrid.close()
    lexical = Runtime.open(Settings.load(env={"POWERCONTEXT_EMBEDDINGS": "off"}, home=home))
    try:
        for kind in KINDS:
            timed, warm = getattr(prompts, kind), getattr(prompts, f"warm_{kind}")
            kinds[kind]["fts_ms"] = _timed(prepare(lexical, {}), timed, warm)
    finally:
        lexical.close()
    report: dict[str, Any] = {
        "benchmark": "semantic_latency",
        "machine": facts,
        "command": command,
        "config": {
            "scope_id": args.scope_id,
            "seed": args.seed,
            "samples": args.samples,
            "warmup": args.warmup,
            "data_dir": str(home),
        },
        "vectors": vectors,
        "index_load_s": index_load_s,
        "kinds": kinds,
        "vector_recall_at_10": recall,
        "token_cache": token_cache,
        "rss_mib": rss,
        "fallbacks": fallbacks,
        "second_process": second,
        "load_average_1m": {"start": load_before[0], "end": os.getloadavg()[0]},
    }
    return report


def _channel_process(home: str, scope_id: str, requests: Any) -> None:
    """The second process of ``--second-process``: the channel alone, answering each prompt
    with its vector candidates (what a sidecar would hand back)."""
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    from powercontext_runtime.composition import Runtime
    from powercontext_runtime.settings import Settings

    runtime = Runtime.open(Settings.load(env={"POWERCONTEXT_EMBEDDINGS": "local"}, home=home))
    try:
        semantic = runtime.semantic
        assert semantic is not None

        def answer(text: str) -> list[tuple[str, float]]:
            vector = semantic.embedder.embed_query(text)
            with semantic.snapshot():
                found = semantic.candidates(scope_id, vector, 32)
            return [(c.entry_id, c.similarity) for c in found]

        answer("warm up")  # the model and the scope's index
        requests.send(os.getpid())
        while (text := requests.recv()) is not None:
            requests.send(answer(text))
    finally:
        runtime.close()


def _second_process(
    args: argparse.Namespace, prompts: Any, lexical: Callable[[Prompt], object]
) -> dict[str, Any]:
    """Each prompt: sent to the channel's process, prepared lexically here meanwhile, done
    when the candidates are back (see the module docstring)."""
    spawn = multiprocessing.get_context("spawn")
    ours, theirs = spawn.Pipe()
    child = spawn.Process(
        target=_channel_process, args=(str(Path(args.data_dir).resolve()), args.scope_id, theirs)
    )
    child.start()
    try:
        if not ours.poll(120):
            raise BenchError("the channel's process did not start within 120 s")
        child_pid = ours.recv()

        def both(prompt: Prompt) -> object:
            ours.send(prompt.text)
            lexical(prompt)
            return ours.recv()

        kinds = {
            kind: _timed(both, getattr(prompts, kind), getattr(prompts, f"warm_{kind}"))
            for kind in KINDS
        }
        rss = {"this_process": _rss_mib(), "channel_process": 0.0}
        rss["channel_process"] = round(process_memory_kib(child_pid)["rss_kib"] / 1024, 1)
        ours.send(None)
    finally:
        child.join(60)
        if child.is_alive():
            child.kill()
    return {"kinds": kinds, "rss_mib": rss}


def _recall(semantic: Any, scope_id: str, queries: Sequence[Any], k: int = 10) -> float:
    """The vector search's top ``k`` against an exact scan of the same int8 rows (the index
    is the store's own, read as loaded)."""
    import numpy as np

    index = semantic._vectors._indexes[(scope_id, semantic.model_id)]
    n = index.size
    found = 0
    dequantised = index.q[:n].astype(np.float32) * index.scale[:n, None]
    for query in queries:
        exact = np.argsort(-(dequantised @ query), kind="stable")[:k]
        truth = {int(index.rowids[i]) for i in exact}
        found += len(truth & {h.rowid for h in index.nearest(query, k)})
    return round(found / (k * len(queries)), 4)


def render_markdown(report: dict[str, Any]) -> str:
    m, cfg, rss = report["machine"], report["config"], report["rss_mib"]

    def cell(stats: dict[str, float]) -> str:
        return f"{stats['p50']:.2f} / {stats['p99']:.2f}"

    rows = []
    for kind in KINDS:
        k = report["kinds"][kind]
        modes = ", ".join(f"{name} {count}" for name, count in sorted(k["hybrid_modes"].items()))
        tokens = k["query_tokens"]
        rows.append([
            kind, f"**{cell(k['hybrid_ms'])}**", modes, cell(k["fts_ms"]),
            cell(k["embed_stock_256_chars_ms"]), cell(k["embed_query_pass_ms"]),
            cell(k["embed_via_query_thread_ms"]), cell(k["vector_search_ms"]),
            f"{tokens['p50']:.0f} / {tokens['max']:.0f}",  # counts (summarize_ms scales)
        ])  # fmt: skip
    budgets = []
    for kind in KINDS:
        lat = report["kinds"][kind]["hybrid_ms"]
        budgets.append([f"hybrid prepare p50, {kind}", f"≤ {P50_MS:g} ms", f"{lat['p50']:.2f} ms",
                        "met" if lat["p50"] <= P50_MS else "**missed**"])  # fmt: skip
        budgets.append([f"hybrid prepare p99, {kind}", f"≤ {P99_MS:g} ms", f"{lat['p99']:.2f} ms",
                        "met" if lat["p99"] <= P99_MS else "**missed**"])  # fmt: skip
    peak = rss["after_hybrid"]
    budgets.append(["process VmRSS, model and index loaded", f"≤ {MAX_MIB:g} MiB",
                    f"{peak:.1f} MiB", "met" if peak <= MAX_MIB else "**missed**"])  # fmt: skip
    tc = report["token_cache"]
    lines = [
        "## Hybrid prepare_context in process, and its parts (issue 17)",
        "",
        "Generated by `bench/semantic_latency.py --write-results`; edit outside the markers only.",
        "",
        f"- Date: {m['date']}",
        f"- Machine: {m['cpu_count']} CPUs ({m['cpu_model']}), {m['platform']}, "
        f"Python {m['python']}, SQLite {m['sqlite']}",
        f"- Command: `{report['command']}`",
        f"- 1-minute load average at start / end: {report['load_average_1m']['start']:.2f} / "
        f"{report['load_average_1m']['end']:.2f} (other processes share the 2 cores)",
        f"- Data: scope `{cfg['scope_id']}`, {report['vectors']:,} vectors (USE-multilingual, "
        f"int8); the scope's index loaded in {report['index_load_s']:g} s on the first prepare. "
        f"Prompts: those of `prepare_latency.py` (seed {cfg['seed']}), {cfg['warmup']} warm-up "
        f"+ {cfg['samples']} timed per kind, in process (`ContextService.prepare_reporting`, "
        "no HTTP), one BLAS thread.",
        "",
        markdown_table(["budget", "target", "measured", "verdict"], budgets),
        "",
        "p50 / p99 ms:",
        "",
        markdown_table(
            [
                "prompts",
                "hybrid prepare",
                "search that ran",
                "fts prepare (channel off)",
                "embed: stock pass, 256 chars",
                "embed: query pass, ≤ 96 tokens",
                "embed via the query thread",
                "vector search (given the vector)",
                "query tokens p50 / max",
            ],
            rows,
        ),
        "",
        f"Vector search recall@10 against an exact scan of the same int8 vectors, the "
        f"prompts' real query vectors: **{report['vector_recall_at_10']:.4f}**.",
        "",
        f"Token cache of the query pass: {tc['cached']:,} of {tc['capacity']:,} rows "
        f"({tc['mib']:.1f} MiB, float16), {tc['misses']:,} tokens computed on a miss.",
        "",
        "VmRSS of this process (MiB): "
        + ", ".join(f"{name.replace('_', ' ')} {value:.1f}" for name, value in rss.items())
        + f". Fallbacks to fts: {report['fallbacks'] or 'none'}.",
    ]
    second = report.get("second_process")
    if second:
        both = second["rss_mib"]
        lines += [
            "",
            "The channel in a second process (`--second-process`): the lexical prepare here, "
            "the embedding and vector search of the same prompt there, each prompt done when "
            "both are (fusion and pack not counted), p50 / p99 ms: "
            + ", ".join(f"{kind} **{cell(second['kinds'][kind])}**" for kind in KINDS)
            + f". VmRSS: this process {both['this_process']:.1f} MiB (channel off, before the "
            f"rest of this bench loaded the model) + the "
            f"channel's {both['channel_process']:.1f} MiB = "
            f"**{both['this_process'] + both['channel_process']:.1f} MiB**.",
        ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    return run_and_publish("semantic_latency", args, run, render_markdown, SECTION)


if __name__ == "__main__":
    sys.exit(main())
