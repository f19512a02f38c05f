#!/usr/bin/env python3
"""Import speed on OceanBase by ``powercontext import --jobs N`` (issue 32, item 3).

A team fills its OceanBase database with ``powercontext import`` (or ``migrate``); on OceanBase
the import writes ``--jobs`` scopes at once, each in its own transaction on its own connection.
This bench imports one generated export of the multi-scope layout the other team benches use
(bench/_scopes.py: 200 scopes, three large, the rest skewed small; 105,941 entries) once per
``--jobs`` value and ``--memory-budget``, each into a fresh seekdb (``tools/seekdb.py``), after
waiting until that server is idle, and reports per run:

* the wall time of the whole command (both passes and the process start) and entries/s;
* the server's CPU seconds meanwhile (``/proc``) and the importing process's, so a rate can be
  read against what the machine had: on 2 cores, both busy is the ceiling;
* that every scope and entry arrived (the command's own summary).

With ``--database-url`` (the smoke test) the runs go to fresh databases next to the given one
on that server (created and dropped here), and the server's CPU is read when it is local.

    .venv/bin/python bench/import_jobs.py [--jobs 1,2,4] [--memory-budget 2G,4G] \
        [--repeat 2] [--write-results] [--json]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pymysql
from _common import (
    BenchError,
    command_line,
    log,
    machine_facts,
    process_cpu_seconds,
    run_and_publish,
    run_cli,
    write_scopes_export,
)
from _scopes import add_layout_arguments, interleaved, layout, resolve_layout, scope_items
from sqlalchemy.engine import make_url

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tools.seekdb import SeekdbServer  # noqa: E402

SECTION = "import-jobs"
SCOPE_PREFIX = "bench:import/"
DEFAULTS = {
    "scopes": 200,
    "large": "10000,15000,20000",
    "small": "50,5000",
    "skew": 5.0,
    "measure": "50",
}
SMOKE = {"scopes": 6, "large": "300", "small": "5,60", "skew": 2.0, "measure": "5"}
IDLE_CPU_PER_S = 0.15  # a server using less than this is idle (its compactions are done)
IDLE_TIMEOUT_S = 600.0


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_layout_arguments(p, DEFAULTS)
    p.add_argument("--jobs", default="1,2,4", help="--jobs values, comma-separated (1,2,4)")
    p.add_argument("--memory-budget", default="2G,4G", help="seekdb memory_budget values (2G,4G)")
    p.add_argument("--repeat", type=int, default=1, help="runs of each combination (1)")
    p.add_argument(
        "--database-url", help="an OceanBase database whose server takes the runs' databases"
    )
    p.add_argument("--seed", type=int, default=32, help="text seed (default 32)")
    p.add_argument("--smoke", action="store_true", help="tiny run (a CI check of the bench)")
    p.add_argument("--json", action="store_true", help="print the results as JSON on stdout")
    p.add_argument(
        "--write-results", action="store_true", help="rewrite this section of bench/RESULTS.md"
    )
    args = p.parse_args(argv)
    resolve_layout(p, args, SMOKE if args.smoke else DEFAULTS)
    try:
        args.jobs = [int(s) for s in args.jobs.split(",") if s]
    except ValueError:
        p.error("--jobs takes comma-separated integers")
    # A given server has the memory it has: one pass over the --jobs values.
    args.memory_budget = (
        ["given"] if args.database_url else [s for s in args.memory_budget.split(",") if s]
    )
    if not args.jobs or not all(1 <= j <= 8 for j in args.jobs) or args.repeat < 1:
        p.error("--jobs values must be 1 to 8, --repeat at least 1")
    if args.smoke and args.write_results:
        p.error("--write-results with --smoke would overwrite real numbers with smoke numbers")
    if args.database_url and not args.database_url.startswith("mysql"):
        p.error("--database-url must be an OceanBase (mysql+pymysql://…) URL")
    return args


@contextlib.contextmanager
def fresh_database(
    args: argparse.Namespace, budget: str, name: str
) -> Iterator[tuple[str, int | None]]:
    """(URL of an empty database, the server's pid when it runs here)."""
    if args.database_url is None:
        with SeekdbServer(database=name, memory_budget=budget) as server:
            yield server.url, server.pid
        return
    url = make_url(args.database_url)
    connect = {"host": url.host, "port": url.port or 2881, "user": url.username or "root",
               "password": url.password or ""}  # fmt: skip
    database = f"{url.database}_{name}"
    with pymysql.connect(**connect) as conn, conn.cursor() as cur:
        cur.execute(f"CREATE DATABASE `{database}`")
    try:
        yield url.set(database=database).render_as_string(hide_password=False), None
    finally:
        with pymysql.connect(**connect) as conn, conn.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS `{database}`")


def wait_idle(pid: int | None) -> None:
    """Until the server's own work (compactions of a previous load, start-up) is done."""
    if pid is None:
        return
    deadline = time.monotonic() + IDLE_TIMEOUT_S
    while time.monotonic() < deadline:
        before = process_cpu_seconds(pid)
        time.sleep(2.0)  # a sampling window, not synchronisation
        if process_cpu_seconds(pid) - before < 2.0 * IDLE_CPU_PER_S:
            return
    raise BenchError(f"the server was still busy after {IDLE_TIMEOUT_S:.0f} s")


def import_once(path: Path, url: str, jobs: int, home: Path, pid: int | None) -> dict[str, Any]:
    server_before = None if pid is None else process_cpu_seconds(pid)
    before = os.times()
    done, wall = run_cli(home, url, "import", str(path), "--jobs", str(jobs), what="import")
    after = os.times()
    importer = after.children_user + after.children_system
    importer -= before.children_user + before.children_system
    return {
        "wall_seconds": round(wall, 2),
        "server_cpu_seconds": None
        if pid is None or server_before is None
        else round(process_cpu_seconds(pid) - server_before, 1),
        "importer_cpu_seconds": round(importer, 1),
        "summary": json.loads(done.stdout),
    }


def run(args: argparse.Namespace) -> dict[str, Any]:
    scopes = layout(args.scopes, args.large, args.small, args.skew, SCOPE_PREFIX)
    entries = sum(s.size for s in scopes)
    report: dict[str, Any] = {
        "benchmark": "import_jobs",
        "machine": machine_facts(),
        "command": command_line(),
        "config": {
            "scopes": args.scopes,
            "entries": entries,
            "jobs": args.jobs,
            "memory_budget": args.memory_budget,
            "repeat": args.repeat,
            "smoke": args.smoke,
        },
        "runs": [],
    }
    with tempfile.TemporaryDirectory(prefix="bench-import-jobs-") as tmp:
        path = Path(tmp) / "team.jsonl"
        with open(path, "wb") as out:
            pairs = [(s.scope_id, scope_items(args.seed, s)) for s in interleaved(scopes)]
            write_scopes_export(out, pairs, seed=args.seed)
        log(
            f"import_jobs: {entries:,} entries in {len(scopes)} scopes, "
            f"{path.stat().st_size:,} bytes"
        )
        number = 0
        for budget in args.memory_budget:
            for _ in range(args.repeat):
                for jobs in args.jobs:
                    number += 1
                    with fresh_database(args, budget, f"imp{number}") as (url, pid):
                        wait_idle(pid)
                        load = os.getloadavg()[0]
                        result = import_once(path, url, jobs, Path(tmp) / f"home{number}", pid)
                    summary = result.pop("summary")
                    imported = summary["counts"]["memory_entries"]
                    if summary["imported"] != len(scopes) or imported != entries:
                        raise BenchError(
                            f"imported {summary['imported']} scopes, {imported} entries"
                        )
                    run_row = {"memory_budget": budget,
                               "jobs": jobs, "load_before": round(load, 2),
                               "entries_per_second": round(entries / result["wall_seconds"]),
                               **result}  # fmt: skip
                    report["runs"].append(run_row)
                    log(f"  {run_row}")
    return report


def render_markdown(report: dict[str, Any]) -> str:
    m, cfg = report["machine"], report["config"]
    lines = [
        "## Import on OceanBase by `--jobs` (issue 32, item 3: ≥ 5,000 entries/s)",
        "",
        f"`{report['command']}` — {m['date']}, {m['cpu_model']}, {m['cpu_count']} cores; "
        f"{cfg['entries']:,} entries over {cfg['scopes']} scopes, one generated export, "
        "each run into a fresh seekdb once it was idle; the whole `powercontext import` (both "
        "passes and the process start). CPU per entry: the server's and the importing "
        "process's together, which the machine's cores bound (2 cores: 5,000 entries/s "
        "leaves 0.4 ms).",
        "",
        "| memory_budget | --jobs | wall | entries/s | server CPU | importer CPU "
        "| CPU per entry | load before |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in report["runs"]:
        server = r["server_cpu_seconds"]
        per_entry = (
            "—"
            if server is None
            else f"{(server + r['importer_cpu_seconds']) * 1000 / cfg['entries']:.2f} ms"
        )
        lines.append(
            f"| {r['memory_budget']} | {r['jobs']} | {r['wall_seconds']:.1f} s | "
            f"{r['entries_per_second']:,} | {'—' if server is None else f'{server:.1f} s'} | "
            f"{r['importer_cpu_seconds']:.1f} s | {per_entry} | {r['load_before']:.1f} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    return run_and_publish("import_jobs", args, run, render_markdown, SECTION)


if __name__ == "__main__":
    raise SystemExit(main())
