"""Benchmark P4: does the cost of ``remember`` stay flat as a scope's memory grows?

Spec 02 requires that write cost not grow with the number of entries, and spec 08 budgets it:
remember p50 at N = 100k over p50 at N = 1k ≤ 1.5, and p50 ≤ 10 ms. (A previous implementation
went from 27 ms to 460 ms between 0 and 1,000 entries, which is exactly what this guards against.)

Method, per size N (ascending, one scope, loaded incrementally):

1. load the scope up to N entries over HTTP with a bounded pool of keep-alive clients (with
   ``--bulk-load``: import N entries into a scope of that size's own with ``powercontext
   import``, which takes minutes at 100k on seekdb instead of an hour);
2. send a few untimed warm-up remembers, then ``--samples`` timed remembers sequentially
   (concurrency 1, one keep-alive connection), each a new distinct entry;
3. report p50/p95/p99/mean in ms;
4. with ``--embeddings local`` (the semantic channel on): the scope's vectors are backfilled
   before timing, the timed remembers are the same, and then ``--lag-samples`` more remembers
   each wait until the worker has stored that entry's vector (read from the database): a
   remember never waits for the model, so "remember including embedding" is two numbers, the
   call's latency and the time until the entry is also found by meaning.

The ratio is taken between sizes of the *same run* because the machines are noisy (spec 08).
All data comes from a seeded generator, and ``--url``/``--token`` point it at any runtime, so
another implementation can be measured with identical inputs. Budgets are reported, never
enforced through the exit code: the exit code says whether the measurement itself worked.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass
from typing import Any

from _common import (
    NOISY_CORES,
    BenchError,
    LoadStats,
    MemoryItem,
    MemoryTextGenerator,
    Target,
    bulk_load,
    command_line,
    compact_storage,
    cpu_snapshot,
    load_memories,
    log,
    machine_facts,
    markdown_table,
    open_target,
    other_cores,
    remember,
    run_and_publish,
    settle,
    summarize_ms,
    vector_probe,
    wait_embedded,
)

SECTION = "write-scaling"
BUDGET_RATIO = 1.5
BUDGET_P50_MS = 10.0
BUDGET_SIZES = (1_000, 100_000)
WARMUP = 5
DEFAULT_SIZES = "1000,100000"
DEFAULT_SAMPLES = 200
SMOKE_SIZES = "50,200"
SMOKE_SAMPLES = 20
SETTLE_SECONDS = 180.0  # longest wait for other processes to go quiet before a timed phase
SMOKE_SETTLE_SECONDS = 3.0
DEFAULT_LAG_SAMPLES = 30
EMBED_TIMEOUT_SECONDS = 1800.0  # the backfill of 100k entries takes minutes on one core
LAG_TIMEOUT_SECONDS = 60.0  # one entry's vector, after its remember answered


@dataclass(slots=True)
class Timing:
    """One timed phase: latencies plus where the CPU went meanwhile (None when unknowable)."""

    durations: list[float]
    revision: int
    daemon_cpu_ms_per_write: float | None
    background_cores: float | None
    settled_after: float | None = None  # seconds waited for quiet; None: it never came
    vector_lag: list[float] | None = None  # remember answered → its vector stored (--embeddings)


@dataclass(slots=True)
class SizeResult:
    n: int
    n_after: int
    latency_ms: dict[str, float]
    timing: Timing
    load: LoadStats
    compact_seconds: float | None = None  # `powercontext compact` after an OceanBase import

    def as_json(self) -> dict[str, Any]:
        return {
            "n": self.n,
            "n_after": self.n_after,
            "samples": len(self.timing.durations),
            "latency_ms": self.latency_ms,
            "daemon_cpu_ms_per_write": self.timing.daemon_cpu_ms_per_write,
            "background_cores": self.timing.background_cores,
            "settled_after_s": self.timing.settled_after,
            "vector_lag_ms": (
                None if self.timing.vector_lag is None else summarize_ms(self.timing.vector_lag)
            ),
            "load": {
                "entries": self.load.entries,
                "seconds": round(self.load.seconds, 3),
                "per_second": round(self.load.per_second, 1),
                "retries": self.load.retries,
                "compact_seconds": (
                    None if self.compact_seconds is None else round(self.compact_seconds, 1)
                ),
            },
        }


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--url", help="runtime base URL (default: start a local daemon and stop it)")
    p.add_argument(
        "--token", help="bearer token (default: the started daemon's, or $POWERCONTEXT_TOKEN)"
    )
    p.add_argument("--database-url", help="database for the self-started daemon (sqlite/OceanBase)")
    p.add_argument("--scope-id", help="scope to write into (default: a new unique bench scope)")
    p.add_argument("--sizes", help=f"comma-separated N values (default {DEFAULT_SIZES})")
    p.add_argument(
        "--samples", type=int, help=f"timed remembers per size (default {DEFAULT_SAMPLES})"
    )
    p.add_argument("--seed", type=int, default=42, help="workload seed (default 42)")
    p.add_argument("--loader-concurrency", type=int, default=4, help="loader threads (default 4)")
    p.add_argument(
        "--bulk-load",
        action="store_true",
        help="load with `powercontext import` of a generated export instead of HTTP "
        "remembers (≈ 30-70/s on seekdb): each size then gets its own scope <scope>-n<N>, "
        "imported with N entries before its timed remembers; self-started daemon only",
    )
    p.add_argument(
        "--smoke",
        action="store_true",
        help=f"tiny run: sizes {SMOKE_SIZES}, {SMOKE_SAMPLES} samples",
    )
    p.add_argument(
        "--settle-seconds",
        type=float,
        help="longest wait for other processes to go quiet before each timed phase (default "
        f"{SETTLE_SECONDS:g}, smoke {SMOKE_SETTLE_SECONDS:g}; 0: time at once)",
    )
    p.add_argument(
        "--embeddings",
        choices=("off", "local"),
        default="off",
        help="semantic channel of the self-started daemon (default off); with local the "
        "vectors are backfilled before timing and the embedding lag is measured too",
    )
    p.add_argument(
        "--lag-samples",
        type=int,
        default=DEFAULT_LAG_SAMPLES,
        help=f"with --embeddings: remembers timed until their vector is stored (default "
        f"{DEFAULT_LAG_SAMPLES})",
    )
    p.add_argument("--json", action="store_true", help="print the results as JSON on stdout")
    p.add_argument(
        "--write-results", action="store_true", help="rewrite this section of bench/RESULTS.md"
    )
    args = p.parse_args(argv)
    if args.settle_seconds is None:
        args.settle_seconds = SMOKE_SETTLE_SECONDS if args.smoke else SETTLE_SECONDS
    if args.settle_seconds < 0:
        p.error("--settle-seconds must be ≥ 0")

    sizes_text = args.sizes or (SMOKE_SIZES if args.smoke else DEFAULT_SIZES)
    try:
        args.sizes = sorted({int(s) for s in sizes_text.split(",") if s.strip()})
    except ValueError:
        p.error("--sizes must be comma-separated integers")
    if args.samples is None:
        args.samples = SMOKE_SAMPLES if args.smoke else DEFAULT_SAMPLES
    if len(args.sizes) < 2 or args.sizes[0] < 1:
        p.error("--sizes needs at least two positive sizes")
    if args.samples < 1 or args.loader_concurrency < 1:
        p.error("--samples and --loader-concurrency must be positive")
    # Each size's timed writes add entries, so the next size must lie beyond them.
    step = WARMUP + args.samples
    for smaller, larger in zip(args.sizes, args.sizes[1:], strict=False):
        if larger < smaller + step:
            p.error(f"sizes must be at least warm-up + samples ({step}) apart")
    if args.smoke and args.write_results:
        p.error("--write-results with --smoke would overwrite real numbers with smoke numbers")
    if args.bulk_load and args.url:
        p.error("--bulk-load writes into a self-started daemon's database (no --url)")
    if args.embeddings != "off" and args.url:
        p.error("--embeddings reads the self-started daemon's database (no --url)")
    if args.lag_samples < 1:
        p.error("--lag-samples must be positive")
    # The lag phase writes too: the next size must lie beyond it as well.
    if args.embeddings != "off":
        for smaller, larger in zip(args.sizes, args.sizes[1:], strict=False):
            if larger < smaller + step + args.lag_samples:
                p.error("sizes must be at least warm-up + samples + lag samples apart")
    return args


def time_remembers(
    target: Target, scope_id: str, warmup: list[MemoryItem], timed: list[MemoryItem]
) -> Timing:
    """Sequential remembers on one keep-alive connection.

    Only the request/response round trip is inside the timer; decoding the JSON is not.
    For a local daemon it also records the daemon's CPU per write (server cost without the
    client) and the cores other processes used meanwhile: on a shared machine, that is the
    difference between "the runtime got slower at large N" and "someone else was busy".
    """
    durations: list[float] = []
    last = None
    with target.client() as client:
        for item in warmup:
            remember(client, scope_id, item)
        before, wall = cpu_snapshot(target.pid), time.perf_counter()
        for item in timed:
            started = time.perf_counter()
            last = remember(client, scope_id, item)
            durations.append(time.perf_counter() - started)
        after, wall = cpu_snapshot(target.pid), time.perf_counter() - wall
    revision = int(last.json()["memory"]["revision"]) if last is not None else 0
    daemon_ms = background = None
    if before is not None and after is not None:
        daemon_ms = round((after[2] - before[2]) * 1000 / len(timed), 3)
        background = round(other_cores(before, after, wall), 3)
    return Timing(durations, revision, daemon_ms, background)


def time_vector_lag(
    target: Target, scope_id: str, items: list[MemoryItem], database_url: str | None
) -> list[float]:
    """Per remember: seconds from its answer until the worker has stored its vector (polled
    in the database, so the figure includes up to one poll interval)."""
    lags: list[float] = []
    with target.client() as client, vector_probe(target, database_url) as has_vector:
        for item in items:
            version = remember(client, scope_id, item).json()["entry"]["citation"][
                "entry_version_id"
            ]
            answered = time.perf_counter()
            while not has_vector(version):
                if time.perf_counter() - answered > LAG_TIMEOUT_SECONDS:
                    raise BenchError(f"no vector {LAG_TIMEOUT_SECONDS:g} s after a remember")
                time.sleep(0.001)  # polling the worker's progress, not synchronising on time
            lags.append(time.perf_counter() - answered)
    return lags


def run(args: argparse.Namespace) -> dict[str, Any]:
    facts = machine_facts()
    command = command_line()
    scope_id = args.scope_id or f"bench-write-scaling-s{args.seed}-{time.strftime('%Y%m%dT%H%M%S')}"
    generator = MemoryTextGenerator(args.seed)
    results: list[SizeResult] = []
    embedding = args.embeddings != "off"
    with open_target(args.url, args.token, args.database_url, embeddings=args.embeddings) as target:
        log(f"write_scaling: {target.description}, scope {scope_id}, sizes {args.sizes}")
        loaded = 0
        sized_scope = scope_id
        for n in args.sizes:
            compacted: float | None = None
            if args.bulk_load:
                # Each size its own scope of N entries: an import creates a scope whole.
                sized_scope, loaded = f"{scope_id}-n{n}", 0
                items = generator.take(n)
                if target.home is None:
                    raise BenchError("--bulk-load needs a self-started daemon")
                done = bulk_load(target.home, args.database_url, sized_scope, items, seed=args.seed)
                stats = LoadStats(entries=n, seconds=done.seconds)
                method = "imported"
                last = n == args.sizes[-1]
                if (
                    args.database_url
                    and not args.database_url.startswith("sqlite")
                    and (last or not args.smoke)
                ):
                    # What `import` tells an OceanBase user to do next: otherwise the server
                    # merges the loaded rows in the background, under the timed writes. A
                    # smoke run compacts once, at its last size: a major compaction takes
                    # ~25 s on seekdb whatever the size, and smoke figures are no verdict.
                    compacted = compact_storage(target.home, args.database_url)
                    log(f"  powercontext compact: the major compaction took {compacted:.1f} s")
            else:
                items = generator.take(n - loaded)
                stats = load_memories(
                    target, sized_scope, items, concurrency=args.loader_concurrency
                )
                method = "loaded"
            loaded += len(items)
            log(f"  {method} {len(items)} entries in {stats.seconds:.1f} s "
                f"({stats.per_second:.0f}/s, {stats.retries} busy retries); N = {n}")  # fmt: skip
            if embedding:
                started = time.perf_counter()
                vectors = wait_embedded(target, EMBED_TIMEOUT_SECONDS, args.database_url)
                log(f"  embedded: {vectors:,} vectors, waited "
                    f"{time.perf_counter() - started:.1f} s for the worker")  # fmt: skip
            warmup, timed = generator.take(WARMUP), generator.take(args.samples)
            settled = settle(target.pid, args.settle_seconds)
            if settled is None:
                log(f"  other processes stayed busy for {args.settle_seconds:g} s; timing anyway")
            elif settled > 1.5:
                log(f"  waited {settled:g} s for other processes to go quiet")
            timing = time_remembers(target, sized_scope, warmup, timed)
            timing.settled_after = settled
            loaded += WARMUP + args.samples
            if timing.revision != loaded:
                # Revisions count writes to the scope: a mismatch means it was not empty.
                raise BenchError(
                    f"scope {sized_scope!r} is at revision {timing.revision}, expected {loaded}: "
                    "use a fresh --scope-id so N is what the report says"
                )
            if embedding:
                lagged = generator.take(args.lag_samples)
                timing.vector_lag = time_vector_lag(target, sized_scope, lagged, args.database_url)
                loaded += len(lagged)
                lag = summarize_ms(timing.vector_lag)
                log(f"  N={n}: remember answered → vector stored p50 {lag['p50']:.1f} ms, "
                    f"p95 {lag['p95']:.1f} ms")  # fmt: skip
            lat = summarize_ms(timing.durations)
            results.append(SizeResult(n, loaded, lat, timing, stats, compacted))
            log(f"  N={n}: p50 {lat['p50']:.2f} ms, p95 {lat['p95']:.2f} ms, "
                f"p99 {lat['p99']:.2f} ms, mean {lat['mean']:.2f} ms; daemon CPU "
                f"{timing.daemon_cpu_ms_per_write} ms/write; "
                f"other load {timing.background_cores} cores")  # fmt: skip
        description = target.description

    smallest, largest = results[0], results[-1]
    ratio = largest.latency_ms["p50"] / smallest.latency_ms["p50"]
    worst_p50 = max(r.latency_ms["p50"] for r in results)
    cpu_small = smallest.timing.daemon_cpu_ms_per_write
    cpu_large = largest.timing.daemon_cpu_ms_per_write
    # Daemon CPU per write moves far less than wall-clock latency when other processes compete
    # for the cores: a second, noise-resistant view of the same scaling question.
    cpu_ratio = round(cpu_large / cpu_small, 3) if cpu_small and cpu_large else None
    return {
        "benchmark": "write_scaling",
        "machine": facts,
        "command": command,
        "target": description,
        "config": {
            "scope_id": scope_id,
            "seed": args.seed,
            "sizes": args.sizes,
            "samples": args.samples,
            "warmup": WARMUP,
            "loader_concurrency": args.loader_concurrency,
            "load": "import" if args.bulk_load else "http",
            "settle_seconds": args.settle_seconds,
            "smoke": args.smoke,
            "embeddings": args.embeddings,
            "lag_samples": args.lag_samples if embedding else 0,
        },
        "sizes": [r.as_json() for r in results],
        "ratio_p50": round(ratio, 3),
        "ratio_daemon_cpu": cpu_ratio,
        "budgets": {
            "applicable": tuple(args.sizes) == BUDGET_SIZES,
            "ratio_max": BUDGET_RATIO,
            "p50_max_ms": BUDGET_P50_MS,
            "ratio_ok": ratio <= BUDGET_RATIO,
            "p50_ok": worst_p50 <= BUDGET_P50_MS,
        },
    }


def _loading_text(cfg: dict[str, Any]) -> str:
    if cfg.get("load") == "import":
        return (
            "each size its own scope of N entries, bulk-loaded with `powercontext import` of a "
            "generated export (`--bulk-load`: the rows N HTTP remembers would store); on "
            "OceanBase each import is followed by `powercontext compact`, as `import` advises, "
            "so the server's merge of the loaded rows is not under the timed writes"
        )
    return (
        f"one scope, loaded over HTTP by {cfg['loader_concurrency']} concurrent keep-alive clients"
    )


def _settled_cell(seconds: float | None, limit: float) -> str:
    return f"{seconds:g} s" if seconds is not None else f"not quiet in {limit:g} s"


def _verdict(ok: bool) -> str:
    return "met" if ok else "**missed**"


def _maybe(value: float | None, fmt: str) -> str:
    return "n/a" if value is None else fmt.format(value)


def render_markdown(report: dict[str, Any]) -> str:
    """The RESULTS.md section (also the human-readable stdout summary)."""
    m, cfg, budgets = report["machine"], report["config"], report["budgets"]
    sizes = report["sizes"]
    small, large = sizes[0], sizes[-1]
    budget_rows: list[list[object]] = [[
        f"remember p50 ratio, N={large['n']:,} / N={small['n']:,}",
        f"≤ {budgets['ratio_max']}",
        f"{report['ratio_p50']:.2f}",
        _verdict(budgets["ratio_ok"]),
    ]]  # fmt: skip
    for size in sizes:
        p50 = size["latency_ms"]["p50"]
        budget_rows.append([f"remember p50 at N={size['n']:,}", f"≤ {budgets['p50_max_ms']:g} ms",
                            f"{p50:.2f} ms", _verdict(p50 <= budgets["p50_max_ms"])])  # fmt: skip
    size_rows = [
        [
            f"{s['n']:,}",
            s["samples"],
            *(f"{s['latency_ms'][k]:.2f}" for k in ("min", "p50", "p95", "p99", "mean")),
            _maybe(s["daemon_cpu_ms_per_write"], "{:.2f}"),
            _maybe(s["background_cores"], "{:.2f}"),
            _settled_cell(s.get("settled_after_s"), cfg["settle_seconds"]),
            f"{s['load']['entries']:,} in {s['load']['seconds']:.1f} s "
            f"= {s['load']['per_second']:,.0f}/s"
            + (
                f", then `powercontext compact` {s['load']['compact_seconds']:.1f} s"
                if s["load"].get("compact_seconds") is not None
                else ""
            ),
        ]
        for s in sizes
    ]
    noisy = [s for s in sizes if (s["background_cores"] or 0) > NOISY_CORES]
    embeddings = cfg.get("embeddings", "off")
    title = "## Remember write scaling (P4)"
    if embeddings != "off":
        title += f", semantic channel `{embeddings}`"
    lines = [
        title,
        "",
        "Generated by `bench/write_scaling.py --write-results`; edit outside the markers only.",
        "",
        f"- Date: {m['date']}",
        f"- Machine: {m['cpu_count']} CPUs ({m['cpu_model']}), {m['platform']}, "
        f"Python {m['python']}, SQLite {m['sqlite']}",
        f"- Target: {report['target']}",
        f"- Command: `{report['command']}`",
        f"- Workload: seed {cfg['seed']}, {_loading_text(cfg)}; per size {cfg['warmup']} "
        f"warm-up + {cfg['samples']} timed sequential remembers (concurrency 1, keep-alive), "
        "each a new distinct entry",
        "- Daemon CPU ms/write: the daemon's user+system CPU during the timed writes divided by "
        "their number; other load: cores used by other processes meanwhile (`/proc`); before "
        f"each timed phase the script waits (≤ {cfg['settle_seconds']:g} s) until other processes "
        f"use under {NOISY_CORES} cores for a second, e.g. a database server still merging after "
        "the load",
        "",
    ]
    if not budgets["applicable"]:
        lines += ["Budgets are defined for N = 1,000 vs 100,000; these sizes differ.", ""]
    if noisy:
        which = ", ".join(f"N={s['n']:,}: {s['background_cores']:.2f}" for s in noisy)
        lines += [f"**Noisy run**: other processes used CPU cores while timing ({which}); "
                  "compare the daemon CPU per write, or rerun on a quiet machine.", ""]  # fmt: skip
    lines += [
        markdown_table(["budget (spec 08 P4)", "target", "measured", "verdict"], budget_rows),
        "",
        f"Daemon CPU per write, N={large['n']:,} / N={small['n']:,} (informational, less "
        f"sensitive to other load than latency): {_maybe(report['ratio_daemon_cpu'], '{:.2f}')}",
        "",
        markdown_table(
            [
                "N before timing",
                "samples",
                "min ms",
                "p50 ms",
                "p95 ms",
                "p99 ms",
                "mean ms",
                "daemon CPU ms/write",
                "other load (cores)",
                "waited for quiet",
                "load up to N (import)" if cfg.get("load") == "import" else "load up to N (HTTP)",
            ],
            size_rows,
        ),
    ]
    if embeddings != "off":
        lag_rows = [
            [f"{s['n']:,}", cfg["lag_samples"],
             *(f"{s['vector_lag_ms'][k]:.1f}" for k in ("p50", "p95", "max"))]
            for s in sizes
        ]  # fmt: skip
        lines += [
            "",
            "A remember never waits for the model: it commits the entry and its full-text row "
            "and wakes the embedding worker. After the timed remembers, each of "
            f"{cfg['lag_samples']} more remembers waited until its vector was stored (polled "
            "in the database every millisecond): the time from the answer until the entry is "
            "found by meaning as well as by its words. The vectors of the loaded entries were "
            "backfilled before timing.",
            "",
            markdown_table(
                ["N before timing", "samples", "answer → vector stored p50 ms", "p95 ms", "max ms"],
                lag_rows,
            ),
        ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    # One block per backend: an OceanBase run (P6) must not overwrite the SQLite one (P4).
    on_oceanbase = (args.database_url or "").startswith("mysql")
    section = SECTION + ("-oceanbase" if on_oceanbase else "")
    if args.embeddings != "off":
        section += f"-embeddings-{args.embeddings}"
    return run_and_publish("write_scaling", args, run, render_markdown, section)


if __name__ == "__main__":
    sys.exit(main())
