"""How fast does data move in and out: export, import and migrate (issue 19, item 3).

Budgets (issue 19): ``powercontext export`` and ``powercontext import`` at ≥ 5,000 entries/s on
SQLite (N = 20k-100k); ``powercontext migrate --to <seekdb>`` of 100k entries in ≤ 10 min on
this machine; the round trip byte-identical.

Method, per N (``--sizes``, default 20,000 and 100,000), each step the real command as a user
runs it (a fresh process, its start-up included):

1. a seeded scope of N entries (the benchmarks' shared generator) written as an export file
   (``_common.write_memory_export``, not timed), then ``powercontext import`` into a fresh
   SQLite data dir A: the *bulk load*;
2. ``powercontext export`` of A to a file X: **export entries/s**;
3. ``powercontext import X`` into a fresh data dir B: **import entries/s** (an export the
   runtime wrote, checked and loaded in two passes with the search index built);
4. ``powercontext export`` of B, compared with X byte for byte, and prepared packs for
   ``--queries`` prompts made of the scope's own entries compared between A and B (in process);
5. at the largest N, a seekdb started here (``tools/seekdb.py``; or ``--database-url``):
   ``powercontext migrate --data-dir A --to <seekdb>``: **migrate seconds** (export, check,
   import, verify with its own pack sample), then ``powercontext export`` from seekdb compared
   with X (all but the header's ``backend``).

The exit code says whether the measurement worked; budgets are reported, never enforced.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import (
    BENCH_DIR,
    BenchError,
    MemoryTextGenerator,
    command_line,
    log,
    machine_facts,
    markdown_table,
    publish,
    write_memory_export,
)

SECTION = "portability"
DEFAULT_SIZES = "20000,100000"
SMOKE_SIZES = "500"
BUDGET_RATE = 5000.0  # entries/s, export and import on SQLite
BUDGET_MIGRATE_S = 600.0  # 100k entries to seekdb
BUDGET_N = 100_000
DEFAULT_QUERIES = 20
SEEKDB_DATABASE = "bench_portability"
REPO = BENCH_DIR.parent
CLI = [sys.executable, "-m", "powercontext_runtime.cli.main"]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", help=f"comma-separated N values (default {DEFAULT_SIZES})")
    p.add_argument("--seed", type=int, default=42, help="workload seed (default 42)")
    p.add_argument(
        "--queries",
        type=int,
        default=DEFAULT_QUERIES,
        help=f"prompts whose packs are compared after the round trip (default {DEFAULT_QUERIES})",
    )
    p.add_argument(
        "--database-url",
        help="migrate into this OceanBase/seekdb database (default: start a seekdb here)",
    )
    p.add_argument("--no-seekdb", action="store_true", help="skip the migrate step")
    p.add_argument("--smoke", action="store_true", help=f"tiny run: sizes {SMOKE_SIZES}")
    p.add_argument("--json", action="store_true", help="print the results as JSON on stdout")
    p.add_argument(
        "--write-results", action="store_true", help="rewrite this section of bench/RESULTS.md"
    )
    args = p.parse_args(argv)
    text = args.sizes or (SMOKE_SIZES if args.smoke else DEFAULT_SIZES)
    try:
        args.sizes = sorted({int(s) for s in text.split(",") if s.strip()})
    except ValueError:
        p.error("--sizes must be comma-separated integers")
    if not args.sizes or args.sizes[0] < 1:
        p.error("--sizes needs at least one positive size")
    if args.smoke and args.write_results:
        p.error("--write-results with --smoke would overwrite real numbers with smoke numbers")
    if args.no_seekdb and args.database_url:
        p.error("--no-seekdb and --database-url contradict each other")
    return args


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("POWERCONTEXT_")}


def cli(*args: str) -> tuple[float, dict[str, Any]]:
    """Run ``powercontext ARGS --json``: (seconds, its JSON report)."""
    command = [*CLI, *args, "--json"]
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, env=_env(), check=False)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        shown = shlex.join(["powercontext", *args])
        raise BenchError(f"`{shown}` failed (exit {done.returncode}): {done.stderr[-1500:]}")
    return seconds, json.loads(done.stdout)


def _header_free(data: bytes) -> bytes:
    """The export without its header's ``backend`` (the one field a backend changes)."""
    first, rest = data.split(b"\n", 1)
    header = json.loads(first)
    header.pop("backend")
    return json.dumps(header).encode() + b"\n" + rest


def compare_packs(home_a: Path, home_b: Path, scope_id: str, count: int) -> tuple[int, int]:
    """(prompts compared, packs that differ) between two SQLite data dirs, in process."""
    from powercontext_runtime.composition import Runtime
    from powercontext_runtime.contract.context import PrepareContextRequest
    from powercontext_runtime.contract.memory import ListMemoryEntriesRequest
    from powercontext_runtime.services.auth import Principal
    from powercontext_runtime.settings import Settings

    runtimes = [Runtime.open(Settings.load(env={}, home=home)) for home in (home_a, home_b)]
    try:
        listed = runtimes[0].memory.list(ListMemoryEntriesRequest(scope_id=scope_id, limit=100))
        texts = [entry.text for entry in listed.entries]
        prompts = [" ".join(text.split()[:10]) for text in texts[:: max(1, len(texts) // count)]]
        prompts = [*prompts[:count], "weather garden bicycle holiday"]
        differ = 0
        for prompt in prompts:
            request = PrepareContextRequest(scope_id=scope_id, query=prompt)
            a, b = (rt.context.prepare(request, Principal.unrestricted()) for rt in runtimes)
            differ += a.to_wire() != b.to_wire()
        return len(prompts), differ
    finally:
        for rt in runtimes:
            rt.close()


def measure_size(n: int, seed: int, queries: int, work: Path) -> dict[str, Any]:
    scope_id = f"bench-portability-s{seed}-n{n}"
    generated = work / f"generated-{n}.jsonl"
    started = time.perf_counter()
    items = MemoryTextGenerator(seed).take(n)
    with open(generated, "wb") as out:
        write_memory_export(out, scope_id, items, seed=seed)
    generate_s = time.perf_counter() - started
    home_a, home_b = work / f"a-{n}", work / f"b-{n}"
    exported, again = work / f"export-{n}.jsonl", work / f"export-{n}-again.jsonl"

    load_s, _ = cli("import", str(generated), "--data-dir", str(home_a))
    export_s, export_report = cli("export", "--data-dir", str(home_a), "-o", str(exported))
    import_s, import_report = cli("import", str(exported), "--data-dir", str(home_b))
    cli("export", "--data-dir", str(home_b), "-o", str(again))
    identical = exported.read_bytes() == again.read_bytes()
    compared, differ = compare_packs(home_a, home_b, scope_id, queries)
    if import_report["imported"] != 1 or export_report["counts"]["memory_entries"] != n:
        raise BenchError(f"N={n}: the export or import did not hold {n} entries")
    result = {
        "n": n,
        "scope_id": scope_id,
        "generate_seconds": round(generate_s, 3),
        "bulk_load_seconds": round(load_s, 3),
        "export_seconds": round(export_s, 3),
        "export_per_second": round(n / export_s, 1),
        "export_bytes": export_report["bytes"],
        "import_seconds": round(import_s, 3),
        "import_per_second": round(n / import_s, 1),
        "bulk_load_per_second": round(n / load_s, 1),
        "round_trip_identical": identical,
        "packs_compared": compared,
        "packs_differ": differ,
        "home": str(home_a),
        "export_path": str(exported),
    }
    log(f"  N={n:,}: export {export_s:.1f} s ({n / export_s:,.0f}/s), import {import_s:.1f} s "
        f"({n / import_s:,.0f}/s), bulk load {load_s:.1f} s; re-export identical: {identical}; "
        f"packs {compared - differ}/{compared} identical")  # fmt: skip
    return result


def start_seekdb() -> Any:
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    from tools.seekdb import SeekdbServer

    return SeekdbServer(SEEKDB_DATABASE).start()


def measure_migrate(largest: dict[str, Any], url: str, work: Path) -> dict[str, Any]:
    n = largest["n"]
    seconds, report = cli("migrate", "--data-dir", largest["home"], "--to", url)
    back = work / "from-seekdb.jsonl"
    cli("export", "--database-url", url, "--data-dir", largest["home"], "-o", str(back))
    source = Path(largest["export_path"]).read_bytes()
    identical = _header_free(back.read_bytes()) == _header_free(source)
    verified = report["verified"]
    log(
        f"  migrate N={n:,} to seekdb: {seconds:.1f} s ({n / seconds:,.0f} entries/s; phases "
        f"{report['seconds']}); verified {verified}; seekdb re-export identical: {identical}"
    )
    return {
        "n": n,
        "seconds": round(seconds, 2),
        "per_second": round(n / seconds, 1),
        "phases": report["seconds"],
        "verified": verified,
        "round_trip_identical": identical,
    }


def evaluate_budgets(report: dict[str, Any]) -> list[dict[str, Any]]:
    sizes = report["sizes"]
    at = sizes[-1]["n"] == BUDGET_N and not report["config"]["smoke"]
    rows: list[dict[str, Any]] = []

    def add(key: str, what: str, target: str, measured: float, unit: str, ok: bool, app: bool):  # type: ignore[no-untyped-def]
        rows.append({"key": key, "what": what, "target": target, "measured": measured,
                     "unit": unit, "ok": ok, "applicable": app})  # fmt: skip

    worst_export = min(s["export_per_second"] for s in sizes)
    worst_import = min(s["import_per_second"] for s in sizes)
    span = ", ".join(f"{s['n']:,}" for s in sizes)
    add("export.rate", f"export, SQLite, slowest of N = {span}", f"≥ {BUDGET_RATE:,.0f} entries/s",
        worst_export, "entries/s", worst_export >= BUDGET_RATE, at)  # fmt: skip
    add("import.rate", f"import of an export, SQLite, slowest of N = {span}",
        f"≥ {BUDGET_RATE:,.0f} entries/s", worst_import, "entries/s",
        worst_import >= BUDGET_RATE, at)  # fmt: skip
    identical = all(s["round_trip_identical"] and not s["packs_differ"] for s in sizes)
    migrate = report.get("migrate")
    if migrate is not None:
        identical = identical and migrate["round_trip_identical"]
        identical = identical and not migrate["verified"]["pack_mismatches"]
        add("migrate.seconds", f"migrate N = {migrate['n']:,} to seekdb (export, import, verify)",
            f"≤ {BUDGET_MIGRATE_S / 60:g} min", migrate["seconds"], "s",
            migrate["seconds"] <= BUDGET_MIGRATE_S, migrate["n"] == BUDGET_N and at)  # fmt: skip
    add("round_trip", "round trip byte-identical (re-export and prepared packs"
        + (", SQLite and seekdb)" if migrate is not None else ", SQLite)"), "identical",
        1.0 if identical else 0.0, "", identical, at)  # fmt: skip
    return rows


def run(args: argparse.Namespace) -> dict[str, Any]:
    facts = machine_facts()
    load_before = os.getloadavg()
    report: dict[str, Any] = {
        "benchmark": "portability",
        "machine": facts,
        "command": command_line(),
        "config": {
            "sizes": args.sizes,
            "seed": args.seed,
            "queries": args.queries,
            "smoke": args.smoke,
        },
    }
    with tempfile.TemporaryDirectory(prefix="powercontext-bench-portability-") as tmp:
        work = Path(tmp)
        log(f"portability: sizes {args.sizes}, seed {args.seed}, work dir {work}")
        report["sizes"] = [measure_size(n, args.seed, args.queries, work) for n in args.sizes]
        if not args.no_seekdb:
            server = None if args.database_url else start_seekdb()
            try:
                url = args.database_url or server.url
                if server is not None:
                    log(f"  seekdb ready in {server.startup_seconds:.1f} s")
                report["migrate"] = measure_migrate(report["sizes"][-1], url, work)
                report["seekdb"] = "--database-url" if args.database_url else "tools/seekdb.py"
            finally:
                if server is not None:
                    server.stop()
    for size in report["sizes"]:
        del size["home"], size["export_path"]
    report["load_average_1m"] = {"start": load_before[0], "end": os.getloadavg()[0]}
    report["budgets"] = evaluate_budgets(report)
    return report


def _verdict(row: dict[str, Any]) -> str:
    verdict = "met" if row["ok"] else "**missed**"
    return verdict if row["applicable"] else f"({verdict}; not the budget's N)"


def render_markdown(report: dict[str, Any]) -> str:
    m = report["machine"]
    rows = []
    for row in report["budgets"]:
        if row["key"] == "round_trip":
            shown = "identical" if row["ok"] else "**differs**"
        elif row["unit"] == "s":
            shown = f"**{row['measured']:,.1f} s** ({row['measured'] / 60:.1f} min)"
        else:
            shown = f"**{row['measured']:,.0f} {row['unit']}**"
        rows.append([row["what"], row["target"], shown, _verdict(row)])
    size_rows = [
        [f"{s['n']:,}", f"{s['export_seconds']:.2f}", f"{s['export_per_second']:,.0f}",
         f"{s['export_bytes'] / 1e6:.1f}", f"{s['import_seconds']:.2f}",
         f"{s['import_per_second']:,.0f}", f"{s['bulk_load_seconds']:.2f}",
         "yes" if s["round_trip_identical"] else "**no**",
         f"{s['packs_compared'] - s['packs_differ']}/{s['packs_compared']}"]
        for s in report["sizes"]
    ]  # fmt: skip
    lines = [
        "## Export, import and migrate (issue 19)",
        "",
        "Generated by `bench/portability.py --write-results`; edit outside the markers only.",
        "",
        f"- Date: {m['date']}",
        f"- Machine: {m['cpu_count']} CPUs ({m['cpu_model']}), {m['platform']}, "
        f"Python {m['python']}, SQLite {m['sqlite']}",
        f"- Command: `{report['command']}`",
        f"- 1-minute load average at start / end: {report['load_average_1m']['start']:.2f} / "
        f"{report['load_average_1m']['end']:.2f} (other processes share the 2 cores)",
        f"- Workload: seed {report['config']['seed']}, one scope of N entries (the shared "
        "generator: English, Chinese and identifiers, 0-2 tags). Every figure is the real "
        "command in a fresh process (start-up included): `export` of a data dir to a file, "
        "`import` of that file into an empty data dir (both passes, search index built), and "
        "`migrate --to` a seekdb started by `tools/seekdb.py` (export, check, import, verify).",
        "",
        markdown_table(["budget (issue 19)", "target", "measured", "verdict"], rows),
        "",
        markdown_table(
            [
                "N",
                "export s",
                "export entries/s",
                "export MB",
                "import s",
                "import entries/s",
                "bulk load s (generated file)",
                "re-export identical",
                "packs identical",
            ],
            size_rows,
        ),
    ]
    migrate = report.get("migrate")
    if migrate is not None:
        phases = ", ".join(f"{k} {v:.1f} s" for k, v in migrate["phases"].items())
        v = migrate["verified"]
        lines += [
            "",
            f"Migrate N = {migrate['n']:,} to seekdb: **{migrate['seconds']:.1f} s** "
            f"({migrate['per_second']:,.0f} entries/s; {phases}). Verified: counts "
            f"{'match' if v['counts'] else '**differ**'}, {v['records']} scope(s) with "
            f"identical records, {v['packs'] - v['pack_mismatches']}/{v['packs']} sampled packs "
            "identical; the export taken back from seekdb is "
            + (
                "byte-identical to the SQLite one (but the header's `backend`)."
                if migrate["round_trip_identical"]
                else "**not** identical."
            ),
        ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        report = run(args)
    except BenchError as exc:
        log(f"portability failed: {exc}")
        return 1
    report["markdown"] = render_markdown(report)
    section = SECTION if args.write_results else None
    publish(report, report["markdown"], section, as_json=args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
