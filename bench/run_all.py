"""Run every spec 08 benchmark and summarise all budgets in one table (``make bench``).

Why a driver: the budgets are measured by eleven scripts, some of them twice (P3 with one and two
worker processes, P6 on seekdb), and a reader wants one answer to "which budgets are met, on
which machine, when, under what load". Each script still measures and reports on its own; this
file only runs them as subprocesses with ``--json``, reads the figures and verdicts from their
reports and renders one table. No threshold is applied here (the target column only repeats
spec 08's wording), so a verdict can never differ from the one in the script's own block.

Steps, in order (SQLite first; seekdb is started only for its steps, so its background work
cannot disturb the SQLite figures):

1. ``write_scaling.py`` (P4);
2. ``prepare_latency.py`` with one worker (P2, P3, P7), its daemon home in a temp dir and a
   fixed ``--scope-id``; then again with ``--workers 2`` at the largest size, reusing that home
   and scope, so the two P3 figures come from the same data without loading it twice;
3. ``hook_latency.py`` (P1, the hook run as ``install`` registers it from a venv holding only
   the hook kit and the Codex plugin: see :func:`plugin_venv`), ``hook_task_result.py`` (T1,
   issue #31's Stop hook, from the same venv), ``bootstrap_latency.py`` (P5),
   ``recall_quality.py`` (Q1), ``distill_quality.py`` and ``distill_skills.py`` (D1, D2: issue
   #31's distillers on the hand-labelled sessions, in process, seconds; no smoke mode),
   ``locomo.py`` (Q2, LoCoMo dev split in process; not in ``--smoke``, and not a summary row
   yet: its block carries Q2's verdicts);
4. a fresh seekdb server (``tools/seekdb.py``) for each of ``prepare_latency.py --database-url
   … --sizes 100000 --bulk-load`` (P6 prepare) and ``write_scaling.py --database-url … --sizes
   1000,100000 --bulk-load`` (P6 remember ratio). Both fill seekdb with ``powercontext import``
   of a generated export (minutes for 100k; over HTTP, at ~30 entries/s, 100k took about an
   hour, which is why the ratio used to be taken at 20k: ``--seekdb-load http`` still does);
   then, on a third fresh seekdb (``memory_budget`` 2G), ``team_scale.py --database-url …``
   (O1-O4, issue 32: 200 scopes / 106k entries imported, three daemons, 12 clients over
   HTTP, the cross-daemon checks; ≈ 10 min). Not in ``--smoke``: its own smoke test
   (tests/bench/test_team_scale_smoke.py) runs it, and it would add minutes to this chain;
5. ``portability.py`` (issue 19: export and import entries/s on SQLite at 20k and 100k, and
   ``migrate`` of 100k to a seekdb of its own), last, so its seekdb disturbs nothing else.

``--write-results`` is passed through (each script rewrites its own block of RESULTS.md), then
the summary block at the top of RESULTS.md is rewritten. ``--smoke`` runs every script in its
smoke mode (``recall_quality.py`` and the two distill scripts have none: their full runs take
seconds) and the seekdb steps
too, at even smaller sizes (seekdb starts in ~2 s; its two steps then take ~10 s on a quiet
machine, far more under load), writes nothing and prints the table, so CI checks that the whole
chain still works, ``--database-url`` included. The exit code
says whether every step produced a report (0) or not (1); missed budgets are reported in the
table, never through the exit code.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _common import (
    BENCH_DIR,
    RESULTS_PATH,
    command_line,
    log,
    machine_facts,
    markdown_table,
    replace_section,
)

REPO = BENCH_DIR.parent
SUMMARY = "summary"
PREPARE_SCOPE = "bench-prepare-s42"  # fixed so the 2-worker run reuses the 1-worker scope
BUDGET_N = 100_000
SEEKDB_DATABASE = "bench"
SEEKDB_WRITE_SIZES = "1000,100000"  # the budget's sizes (bulk-loaded)
SEEKDB_HTTP_WRITE_SIZES = "1000,20000"  # --seekdb-load http: 100k over HTTP would take an hour
# Smoke sizes on seekdb, below the scripts' own smoke sizes: seekdb takes only ~30-70 writes/s
# over HTTP, and writing dominates a smoke run there.
SEEKDB_SMOKE_N = 30
SEEKDB_SMOKE_WRITE = ["--sizes", "20,50", "--samples", "5"]
TEAM = "team_scale"
TEAM_SEEKDB_MEMORY = "2G"  # three daemons and 200 scopes: what team_scale.py gives its own
WORKERS = 2
# Step names (the three prepare_latency.py runs), as in the JSON report and the summary.
PREPARE = "prepare_latency"
PREPARE_2 = "prepare_latency_2_workers"
PREPARE_OB = "prepare_latency_oceanbase"
PORTABILITY = "portability"


# -- steps --------------------------------------------------------------------------------------


@dataclass(slots=True)
class StepResult:
    """One script run: its report, or why there is none."""

    name: str
    command: str
    status: str  # "ok" | "failed" | "skipped"
    seconds: float = 0.0
    load_1m: float | None = None  # load average when the step started
    returncode: int | None = None
    error: str | None = None
    report: dict[str, Any] | None = None

    def as_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "command": self.command,
            "status": self.status,
            "seconds": round(self.seconds, 1),
            "load_average_1m_at_start": self.load_1m,
            "returncode": self.returncode,
            "error": self.error,
            "report": self.report,
        }


def display_command(script: str, args: list[str]) -> str:
    """The step's command as a developer would type it from the repository root."""
    return shlex.join([Path(sys.executable).name, f"bench/{script}", *args])


def run_step(name: str, script: str, args: list[str]) -> StepResult:
    """Run one benchmark script with ``--json``; its progress goes straight to our stderr.

    A step that exits non-zero or prints no JSON report is recorded as failed and the run goes
    on: one broken benchmark must not hide the numbers of the others.
    """
    args = [*args, "--json"]
    command = display_command(script, args)
    load_1m = round(os.getloadavg()[0], 2)
    log(f"== {name}: {command}")
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, str(BENCH_DIR / script), *args],
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO,
        check=False,
    )
    seconds = time.perf_counter() - started
    result = StepResult(name, command, "failed", seconds, load_1m, done.returncode)
    if done.returncode != 0:
        result.error = f"exit status {done.returncode} (its stderr is in the log above)"
    else:
        try:
            result.report, result.status = json.loads(done.stdout), "ok"
        except ValueError as exc:
            result.error = f"no JSON report on stdout: {exc}"
    log(
        f"== {name}: {result.status} in {seconds:.0f} s"
        + (f": {result.error}" if result.error else "")
    )
    return result


def not_run(name: str, script: str, args: list[str], reason: str, status: str) -> StepResult:
    """A step that did not run (``skipped`` on request, ``failed`` when what it needs failed):
    recorded all the same, so the summary says why its rows have no figure."""
    log(f"== {name}: {status}: {reason}")
    return StepResult(name, display_command(script, [*args, "--json"]), status, error=reason)


@dataclass(slots=True)
class Plan:
    """What to pass to every script for this mode."""

    smoke: bool
    write_results: bool
    work: Path
    seekdb_dir: Path | None
    no_seekdb: bool
    seekdb_entries: int = 0  # 0: the budget's N
    seekdb_load: str = "import"  # how the P6 steps fill seekdb: `powercontext import` or HTTP

    @property
    def common(self) -> list[str]:
        if self.smoke:
            return ["--smoke"]
        return ["--write-results"] if self.write_results else []


def run_sqlite_steps(plan: Plan) -> list[StepResult]:
    """Every SQLite benchmark; the 2-worker prepare reuses the 1-worker run's home and scope."""
    home = ["--data-dir", str(plan.work / "prepare-sqlite"), "--scope-id", PREPARE_SCOPE]
    results = [
        run_step("write_scaling", "write_scaling.py", plan.common),
        run_step(PREPARE, "prepare_latency.py", [*plan.common, *home]),
    ]
    two = ["--workers", str(WORKERS), *home]
    first = results[-1]
    if first.status == "ok" and first.report is not None:
        largest = str(first.report["config"]["sizes"][-1])
        results.append(
            run_step(
                PREPARE_2,
                "prepare_latency.py",
                [*plan.common, *two, "--sizes", largest],
            )
        )
    else:
        results.append(
            not_run(
                PREPARE_2,
                "prepare_latency.py",
                two,
                "needs the scope the 1-worker run loads",
                "failed",
            )
        )
    results += run_hook_steps(plan)
    # No --smoke in these three: their data is small and their full runs take seconds.
    full_only = [] if plan.smoke else plan.common
    results += [
        run_step("bootstrap_latency", "bootstrap_latency.py", plan.common),
        run_step("recall_quality", "recall_quality.py", full_only),
        run_step("distill_quality", "distill_quality.py", full_only),
        run_step("distill_skills", "distill_skills.py", full_only),
    ]
    if not plan.smoke:
        # Q2 (LoCoMo dev split, ≈ 1 min; skips itself when ../shared/data/locomo is absent).
        # Not in --smoke: the data is not in the repository; its smoke test builds a tiny
        # LoCoMo-shaped file instead (tests/bench/test_locomo_smoke.py).
        results.append(run_step("locomo", "locomo.py", plan.common))
    return results


def run_hook_steps(plan: Plan) -> list[StepResult]:
    """P1 (UserPromptSubmit) and T1 (Stop) hooks, both as processes of the plugin venv."""
    try:
        python = plugin_venv(plan.work / "plugin-venv")
    except (OSError, subprocess.CalledProcessError) as exc:
        why = f"could not build the plugin venv: {exc}"
        return [
            not_run("hook_latency", "hook_latency.py", plan.common, why, "failed"),
            not_run("hook_task_result", "hook_task_result.py", plan.common, why, "failed"),
        ]
    return [
        # Both transports in the same rounds: the socket (what hooks use) and TCP for comparison.
        run_step(
            "hook_latency",
            "hook_latency.py",
            [*plan.common, "--python", python, "--transport", "both"],
        ),
        run_step("hook_task_result", "hook_task_result.py", [*plan.common, "--python", python]),
    ]


def plugin_venv(venv: Path) -> str:
    """A venv holding only the hook kit and the Codex plugin, installed from this checkout the
    way the README tells a user to (``pip install ./shared_hook_kit ./codex_plugin``, not
    editable); returns its interpreter.

    P1 is what the hook costs the user on every prompt, so it is timed from such an install
    with the command ``install`` registers. This dev venv's editable installs add import-path
    finders that cost every Python process ≈ 16 ms in ``site``, which no user pays.
    """
    log(f"== plugin venv: {venv}")
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    packages = [str(REPO / "shared_hook_kit"), str(REPO / "codex_plugin")]
    subprocess.run([python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                    *packages], check=True, stdout=subprocess.DEVNULL)  # fmt: skip
    return python


def _seekdb_steps(plan: Plan, url: str) -> list[tuple[str, str, list[str]]]:
    """(name, script, args) of the seekdb steps (P6, then O1-O4 outside ``--smoke``); the
    prepare scope is kept with ``--seekdb-dir``."""
    prepare_n = str(SEEKDB_SMOKE_N if plan.smoke else plan.seekdb_entries or BUDGET_N)
    home = plan.seekdb_dir / "daemon-home" if plan.seekdb_dir else plan.work / "prepare-seekdb"
    bulk = ["--bulk-load"] if plan.seekdb_load == "import" else []
    sizes = SEEKDB_WRITE_SIZES if bulk else SEEKDB_HTTP_WRITE_SIZES
    write = [*(SEEKDB_SMOKE_WRITE if plan.smoke else ["--sizes", sizes]), *bulk]
    steps = [
        (
            PREPARE_OB,
            "prepare_latency.py",
            [
                *plan.common,
                "--database-url",
                url,
                "--sizes",
                prepare_n,
                "--data-dir",
                str(home),
                "--scope-id",
                PREPARE_SCOPE,
                *bulk,
            ],
        ),
        (
            "write_scaling_oceanbase",
            "write_scaling.py",
            [*plan.common, "--database-url", url, *write],
        ),
    ]
    if not plan.smoke:
        steps.append((TEAM, "team_scale.py", [*plan.common, "--database-url", url]))
    return steps


def start_seekdb(base_dir: Path | None, memory_budget: str = "1G") -> Any:
    """One throwaway seekdb for a seekdb step (``tools/seekdb.py``; a given ``base_dir`` is
    kept and, when it already holds an instance, restarted with its data)."""
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    from tools.seekdb import SeekdbServer

    return SeekdbServer(SEEKDB_DATABASE, base_dir=base_dir, memory_budget=memory_budget).start()


def run_seekdb_steps(plan: Plan) -> list[StepResult]:
    """Each seekdb step (P6, O) against its own fresh seekdb; a server that cannot start fails
    its step.

    One server per step: right after a step has loaded 20k+ entries, seekdb keeps merging in
    the background, which doubled the next step's remember p50 at N = 20k (ratio 2.04 shared,
    1.12 on a fresh server, same code).
    """
    planned = _seekdb_steps(plan, "<seekdb url>")
    if plan.no_seekdb:
        return [
            not_run(name, script, args, "--no-seekdb", "skipped") for name, script, args in planned
        ]
    results = []
    for index, (name, script, _) in enumerate(planned):
        # Only the prepare step's server is kept with --seekdb-dir (its loaded scope is reused).
        keep = plan.seekdb_dir / "server" if plan.seekdb_dir and name == PREPARE_OB else None
        log(f"== seekdb for {name}: starting" + (f" in {keep}" if keep else ""))
        try:
            server = start_seekdb(keep, TEAM_SEEKDB_MEMORY if name == TEAM else "1G")
        except (ImportError, OSError, RuntimeError) as exc:  # SeekdbError is a RuntimeError
            _, _, args = planned[index]
            results.append(not_run(name, script, args, f"seekdb did not start: {exc}", "failed"))
            continue
        try:
            log(f"== seekdb: {server.url} ready in {server.startup_seconds:.1f} s")
            results.append(run_step(*_seekdb_steps(plan, server.url)[index]))
        finally:
            server.stop()
    return results


def run_portability_step(plan: Plan) -> StepResult:
    """Export/import on SQLite, then migrate to a seekdb the script starts (not with
    ``--no-seekdb``, which leaves the migrate row unmeasured)."""
    return run_step(
        PORTABILITY, "portability.py", [*plan.common, *(["--no-seekdb"] if plan.no_seekdb else [])]
    )


# -- budgets ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Measure:
    """One figure read from a script's report, with the script's own verdict."""

    value: float
    unit: str
    ok: bool
    applicable: bool  # false when measured at another N than the budget's
    detail: str = ""


Picker = Callable[[dict[str, Any]], Measure]


@dataclass(frozen=True, slots=True)
class Budget:
    """A row of the summary: a spec 08 budget, the step measuring it and where it is explained."""

    key: str
    id: str
    what: str
    target: str
    step: str
    section: str
    pick: Picker
    notes: str | None = None  # block whose hand-written notes explain a miss (default: section)


def script_row(key: str, where: Callable[[dict[str, Any]], str] | None = None) -> Picker:
    """A row of a script's own ``budgets`` list (hook_latency, prepare_latency), by its key;
    ``where`` gives the detail (default: the N of a run not at the budget's)."""

    def pick(report: dict[str, Any]) -> Measure:
        row = next((r for r in report["budgets"] if r.get("key") == key), None)
        if row is None:
            raise KeyError(f"the report has no budget row {key!r}")
        applicable = bool(row["applicable"])
        sizes = report.get("config", {}).get("sizes") or [0]
        detail = "" if applicable else f"measured at **N = {sizes[-1]:,}**"
        if where is not None:
            detail = where(report)
        return Measure(float(row["measured"]), row["unit"], bool(row["ok"]), applicable, detail)

    return pick


def stop_hook_run(report: dict[str, Any]) -> str:
    """The Stop hook's workload and the load it ran under (the figures move with both)."""
    config, load = report["config"], report["load_average_1m"]
    return f"{config['mib']:g} MiB transcript, {config['samples']} runs, load ≤ {load['max']:.1f}"


def remember_ratio(report: dict[str, Any]) -> Measure:
    small, large = report["sizes"][0], report["sizes"][-1]
    detail = (
        f"p50 {small['latency_ms']['p50']:.2f} → {large['latency_ms']['p50']:.2f} ms, "
        f"N={small['n']:,} → {large['n']:,}"
    )
    budgets = report["budgets"]
    return Measure(report["ratio_p50"], "", budgets["ratio_ok"], budgets["applicable"], detail)


def remember_p50(report: dict[str, Any]) -> Measure:
    """The worst p50 of the sizes: the budget holds at every N (write_scaling's ``p50_ok``)."""
    p50s = [s["latency_ms"]["p50"] for s in report["sizes"]]
    detail = (
        "worst of "
        + " / ".join(f"{p:.2f}" for p in p50s)
        + " ms at N="
        + " / ".join(f"{s['n']:,}" for s in report["sizes"])
    )
    budgets = report["budgets"]
    return Measure(max(p50s), "ms", budgets["p50_ok"], budgets["applicable"], detail)


def bootstrap_p50(report: dict[str, Any]) -> Measure:
    return Measure(report["fresh_ms"]["p50"], "ms", report["met"], True, "new host event")


def recall(field_name: str, counts: str, ok: str) -> Picker:
    def pick(report: dict[str, Any]) -> Measure:
        hits, total = report["counts"][counts]
        return Measure(
            round(report[field_name] * 100, 1), "%", report["targets"][ok], True, f"{hits}/{total}"
        )

    return pick


def distill_share(goal: str, hits: str, total: str) -> Picker:
    """A goal of distill_quality.py (precision, recall) with the script's own verdict."""

    def pick(report: dict[str, Any]) -> Measure:
        ok = bool(report["goals"][goal]["ok"])
        detail = f"{report[hits]}/{report[total]}"
        return Measure(round(report[goal] * 100, 1), "%", ok, True, detail)

    return pick


def skills_precision(report: dict[str, Any]) -> Measure:
    """distill_skills.py's precision at the default minimum (its ``goals``)."""
    goal = report["goals"]["precision"]
    if goal["measured"] is None:
        raise ValueError("no Skill was proposed")
    detail = f"{goal['correct']}/{goal['proposed']}"
    return Measure(round(goal["measured"] * 100, 1), "%", bool(goal["ok"]), True, detail)


def team_row(key: str) -> Picker:
    """A row of team_scale.py's own ``budgets`` list (issue 32), with the row's own detail and
    the corpus it was measured on; ``applicable`` only at the issue's shape (200 scopes,
    ≥ 100k entries)."""

    def pick(report: dict[str, Any]) -> Measure:
        row = next((r for r in report["budgets"] if r.get("key") == key), None)
        if row is None:
            raise KeyError(f"the report has no budget row {key!r}")
        detail = (
            f"{row['detail']}; {report['config']['scopes']:,} scopes, {report['entries']:,} entries"
        )
        applicable = bool(row["applicable"])
        return Measure(float(row["measured"]), row["unit"], bool(row["ok"]), applicable, detail)

    return pick


def locomo_target(what: str) -> Picker:
    """A row of locomo.py's own ``targets`` list (spec 08 Q2), by what it measures."""

    def pick(report: dict[str, Any]) -> Measure:
        row = next(r for r in report["targets"] if r["what"] == what)
        if row["measured"] is None:
            raise ValueError(f"{what} was not measured")
        return Measure(float(row["measured"]), "", bool(row["ok"]), True)

    return pick


BUDGETS: tuple[Budget, ...] = (
    Budget("P1.p50", "P1", "UserPromptSubmit hook, whole process, p50 (N = 10k)", "≤ 80 ms",
           "hook_latency", "hook-latency", script_row("hook.wall_p50")),
    Budget("P1.overhead", "P1", "hook's own overhead: p50 − server prepare p50", "≤ 50 ms",
           "hook_latency", "hook-latency", script_row("hook.overhead")),
    Budget("P1.rss", "P1", "hook peak RSS", "≤ 40 MiB", "hook_latency", "hook-latency",
           script_row("hook.rss")),
    Budget("P2.p50.short", "P2", "prepare p50, short prompts, N = 100k", "≤ 5 ms", PREPARE,
           "prepare-latency", script_row("p50.short")),
    Budget("P2.p99.short", "P2", "prepare p99, short prompts, N = 100k", "≤ 20 ms", PREPARE,
           "prepare-latency", script_row("p99.short")),
    Budget("P2.p50.long", "P2", "prepare p50, 2,000-character prompts, N = 100k", "≤ 5 ms",
           PREPARE, "prepare-latency", script_row("p50.long")),
    Budget("P2.p99.long", "P2", "prepare p99, 2,000-character prompts, N = 100k", "≤ 20 ms",
           PREPARE, "prepare-latency", script_row("p99.long")),
    Budget("P3.1-worker", "P3", "prepare throughput, 8 clients, N = 100k, 1 worker process",
           "≥ 300 req/s", PREPARE, "prepare-latency", script_row("rps")),
    Budget("P3.2-workers", "P3",
           f"prepare throughput, 8 clients, N = 100k, {WORKERS} worker processes "
           "(`serve --workers`)", "≥ 300 req/s", PREPARE_2, f"prepare-latency-{WORKERS}-workers",
           script_row("rps"), notes="prepare-latency"),
    Budget("P4.ratio", "P4", "remember p50, N = 100k / N = 1k", "≤ 1.5", "write_scaling",
           "write-scaling", remember_ratio),
    Budget("P4.p50", "P4", "remember p50 (at N = 1k and 100k)", "≤ 10 ms", "write_scaling",
           "write-scaling", remember_p50),
    Budget("P5.p50", "P5", "bootstrap_context p50", "≤ 15 ms", "bootstrap_latency",
           "bootstrap-latency", bootstrap_p50),
    Budget("P6.prepare.short", "P6", "seekdb: prepare p50, short prompts (budget at N = 100k)",
           "≤ 30 ms", PREPARE_OB, "prepare-latency-oceanbase", script_row("p50.short")),
    Budget("P6.prepare.long", "P6",
           "seekdb: prepare p50, 2,000-character prompts (budget at N = 100k)", "≤ 30 ms",
           PREPARE_OB, "prepare-latency-oceanbase", script_row("p50.long")),
    Budget("P6.ratio", "P6", "seekdb: remember p50, N = 100k / N = 1k (each size bulk-loaded "
           "with `powercontext import`)", "≤ 1.5", "write_scaling_oceanbase",
           "write-scaling-oceanbase", remember_ratio),
    Budget("P7.rss", "P7", "runtime VmRSS after the prepare run, N = 100k", "≤ 200 MiB", PREPARE,
           "prepare-latency", script_row("rss")),
    Budget("Q1.short", "Q1", "expected entry in the pack, short queries", "≥ 90 %",
           "recall_quality", "recall-quality", recall("short_recall", "short", "short_ok")),
    Budget("Q1.long", "Q1", "expected entry in the pack, long prompts", "≥ 80 %",
           "recall_quality", "recall-quality", recall("long_recall", "long", "long_ok")),
    Budget("Q1.unrelated", "Q1", "unrelated queries answered `empty`", "≥ 90 %",
           "recall_quality", "recall-quality",
           recall("unrelated_empty", "unrelated_empty", "unrelated_ok")),
    Budget("Q2.lexical.hit", "Q2", "LoCoMo dev split, lexical search hit@10", "≥ 0.65",
           "locomo", "locomo", locomo_target("lexical hit@10")),
    Budget("Q2.lexical.pack", "Q2", "LoCoMo dev split, lexical pack hit", "≥ 0.62",
           "locomo", "locomo", locomo_target("lexical pack hit")),
    Budget("Q2.lexical.precision", "Q2", "LoCoMo dev split, lexical pack precision", "≥ 0.15",
           "locomo", "locomo", locomo_target("lexical pack precision")),
    Budget("Q2.hybrid.hit", "Q2", "LoCoMo dev split, hybrid search hit@10", "≥ 0.70",
           "locomo", "locomo", locomo_target("hybrid hit@10")),
    Budget("Q2.hybrid.mrr", "Q2", "LoCoMo dev split, hybrid MRR (at least lexical's)",
           "≥ lexical", "locomo", "locomo", locomo_target("hybrid MRR")),
    Budget("T1.p50", "T1", "Stop (task-result) hook, whole process, p50, worst host, stub "
           "runtime (issue #31)", "≤ 80 ms (P1's p50, the aim)", "hook_task_result",
           "hook-task-result", script_row("hook.wall_p50", stop_hook_run)),
    Budget("T1.p95", "T1", "Stop (task-result) hook, whole process, p95, worst host",
           "≤ 2,000 ms (the hook deadline)", "hook_task_result", "hook-task-result",
           script_row("hook.wall_p95", stop_hook_run)),
    Budget("D1.precision", "D1", "offline distiller: proposals a reviewer keeps (hand-labelled "
           "sessions, issue #31)", "≥ 70 %", "distill_quality", "distill-quality",
           distill_share("precision", "kept", "proposed")),
    Budget("D1.recall", "D1", "offline distiller: labelled lessons proposed", "≥ 50 %",
           "distill_quality", "distill-quality", distill_share("recall", "found", "labelled")),
    Budget("D2.precision", "D2", "Skills proposed from approved Experience: correct / proposed",
           "≥ 70 %", "distill_skills", "distill-skills", skills_precision),
    Budget("X1.export", "X1", "export, SQLite, slowest of N = 20k and 100k (issue 19)",
           "≥ 5,000 entries/s", PORTABILITY, "portability", script_row("export.rate")),
    Budget("X2.import", "X2", "import of an export, SQLite, slowest of N = 20k and 100k",
           "≥ 5,000 entries/s", PORTABILITY, "portability", script_row("import.rate")),
    Budget("X3.migrate", "X3", "migrate 100k entries SQLite → seekdb (export, import, verify)",
           "≤ 10 min", PORTABILITY, "portability", script_row("migrate.seconds")),
    Budget("O1.p50", "O1", "seekdb, 3 daemons, 200 scopes: single-client prepare p50, worst "
           "scope size (issue 32)", "≤ 30 ms", TEAM, "team-scale", team_row("single.p50")),
    Budget("O1.p95", "O1", "seekdb, 3 daemons, 200 scopes: single-client prepare p95, worst "
           "scope size", "≤ 100 ms", TEAM, "team-scale", team_row("single.p95")),
    Budget("O2.ok-per-s", "O2", "seekdb: 12 clients over 3 daemons, 70/20/10 % prepare/search/"
           "remember, answers ok per second", "≥ 100 ok/s", TEAM, "team-scale",
           team_row("mixed.ok_per_s")),
    Budget("O2.prepare-p95", "O2", "seekdb: 12 clients over 3 daemons, prepare p95", "≤ 250 ms",
           TEAM, "team-scale", team_row("mixed.prepare_p95")),
    Budget("O2.5xx", "O2", "seekdb: 12 clients over 3 daemons, 5xx answers", "0", TEAM,
           "team-scale", team_row("mixed.5xx")),
    Budget("O3.checks", "O3", "cross-daemon correctness: one approval of 30, 12 writers, "
           "next-request visibility, revoke, SIGKILL", "all pass", TEAM, "team-scale",
           team_row("checks")),
    Budget("O4.import", "O4", "seekdb: import of the 200-scope corpus (`powercontext "
           "import`, issue 32)", "≥ 5,000 entries/s", TEAM, "team-scale",
           team_row("load.entries_per_s")),
    Budget("X4.round-trip", "X4", "round trip byte-identical (re-export and packs, SQLite and "
           "seekdb)", "identical", PORTABILITY, "portability", script_row("round_trip")),
)  # fmt: skip


def _shown(measure: Measure) -> str:
    """The measured cell, with the context that makes it checkable (counts, sizes)."""
    digits = {"ms": 2, "MiB": 1, "req/s": 1, "ok/s": 1, "%": 1, "entries/s": 0, "s": 1,
              "answers": 0, "checks": 0}.get(measure.unit, 3)  # fmt: skip
    value = f"{measure.value:,.{digits}f}" + (f" {measure.unit}" if measure.unit else "")
    return f"{value} ({measure.detail})" if measure.detail else value


def evaluate(budget: Budget, step: StepResult | None, smoke: bool) -> dict[str, Any]:
    """One summary row; a failed or skipped step leaves the budget ``not measured``."""
    row: dict[str, Any] = {
        "key": budget.key,
        "id": budget.id,
        "what": budget.what,
        "target": budget.target,
        "step": budget.step,
        "section": budget.section,
        "measured": None,
        "unit": None,
        "ok": None,
        "applicable": None,
    }
    if step is None or step.report is None:
        reason = step.error if step is not None else "step not run"
        row["verdict"] = f"not measured ({budget.step}: {reason})"
        return row
    try:
        measure = budget.pick(step.report)
    except (KeyError, IndexError, TypeError, ValueError) as exc:
        row["verdict"] = f"not measured (report of {budget.step}: {exc!r})"
        return row
    applicable = measure.applicable and not smoke
    verdict = "met" if measure.ok else "**missed**"
    if not applicable:
        why = "smoke run" if smoke else "not the budget's N"
        verdict = f"({verdict}; {why})"
    row.update(
        measured=measure.value,
        unit=measure.unit,
        ok=measure.ok,
        applicable=applicable,
        shown=_shown(measure),
        verdict=verdict,
    )
    return row


# -- links into RESULTS.md -----------------------------------------------------------------------


def github_slug(title: str) -> str:
    """The anchor GitHub gives a Markdown heading (lowercase, punctuation dropped, - for space)."""
    return re.sub(r"[^\w\- ]", "", title.strip().lower()).replace(" ", "-")


@dataclass(slots=True)
class BlockLinks:
    """Where a benchmark's block (and its hand-written notes, if any) is in RESULTS.md."""

    title: str
    anchor: str
    notes_title: str | None = None
    notes_anchor: str | None = None


def block_links(text: str) -> dict[str, BlockLinks]:
    """Anchors of each block's first heading and of the ``### Notes`` heading after it.

    Computed from the file as it is after the scripts wrote their blocks, with GitHub's
    numbering of duplicate headings, so a link follows a renamed heading.
    """
    seen: dict[str, int] = {}
    links: dict[str, BlockLinks] = {}
    current: str | None = None  # block whose heading or notes come next
    in_notes_zone = False
    fenced = False
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        if fenced:
            continue
        if start := re.fullmatch(r"<!-- bench:([\w-]+):start -->", line.strip()):
            current, in_notes_zone = start.group(1), False
            continue
        if end := re.fullmatch(r"<!-- bench:([\w-]+):end -->", line.strip()):
            in_notes_zone = end.group(1) == current
            continue
        heading = re.match(r"#{1,6} (.+)", line)
        if heading is None:
            continue
        title = heading.group(1).strip()
        slug = github_slug(title)
        anchor = slug if slug not in seen else f"{slug}-{seen[slug]}"
        seen[slug] = seen.get(slug, 0) + 1
        if current is None:
            continue
        if not in_notes_zone and current not in links:
            links[current] = BlockLinks(title, anchor)
        elif in_notes_zone and title.startswith("Notes") and current in links:
            links[current].notes_title, links[current].notes_anchor = title, anchor
            current = None
    return links


def details_cell(row: dict[str, Any], budget: Budget, links: dict[str, BlockLinks]) -> str:
    """A link to the row's block, and for a missed budget to the notes that explain it."""
    block = links.get(budget.section)
    cell = f"[{budget.section}](#{block.anchor})" if block else f"`{budget.section}` block"
    if row["ok"] is False:
        notes = links.get(budget.notes or budget.section)
        cell += (
            f"; why: [{notes.notes_title}](#{notes.notes_anchor})"
            if notes and notes.notes_anchor
            else "; no hand-written notes on it yet"
        )
    return cell


# -- report -------------------------------------------------------------------------------------


@dataclass(slots=True)
class Run:
    """What the summary needs besides the budget rows: when, where, how loaded, which steps."""

    smoke: bool
    facts: dict[str, Any]
    command: str
    loads: list[float] = field(default_factory=list)
    steps: list[StepResult] = field(default_factory=list)
    started: float = field(default_factory=time.perf_counter)
    finished_at: str = ""


def render_markdown(run: Run, rows: list[dict[str, Any]], links: dict[str, BlockLinks]) -> str:
    """The summary block: context first (a figure means little without machine and load)."""
    m = run.facts
    minutes = (time.perf_counter() - run.started) / 60
    table = [
        [
            r["id"],
            r["what"],
            r["target"],
            r.get("shown", "—"),
            r["verdict"],
            details_cell(r, budget, links),
        ]
        for r, budget in zip(rows, BUDGETS, strict=True)
    ]
    steps = [
        f"  - `{s.command}`: {s.status}, {s.seconds:.0f} s"
        + (f", load {s.load_1m:.2f} at start" if s.load_1m is not None else "")
        + (f" ({s.error})" if s.error else "")
        for s in run.steps
    ]
    missed = sum(1 for r in rows if r["ok"] is False)
    unmeasured = sum(1 for r in rows if r["ok"] is None)
    return "\n".join(
        [
            "## Summary: every spec 08 budget"
            + (" (smoke run, not real figures)" if run.smoke else ""),
            "",
            "Generated by `bench/run_all.py --write-results` (`make bench`); edit outside the "
            "markers only. Every row comes from the block it links to, written by the same run; "
            "a missed budget links to the hand-written notes that profile it.",
            "",
            f"- Date: {m['date']} to {run.finished_at} ({minutes:.0f} min)",
            f"- Machine: {m['cpu_count']} CPUs ({m['cpu_model']}), {m['platform']}, "
            f"Python {m['python']}, SQLite {m['sqlite']}",
            f"- 1-minute load average at the start of each step: min {min(run.loads):.2f}, max "
            f"{max(run.loads):.2f}; at the end {run.loads[-1]:.2f} (other jobs share the cores, "
            "so compare figures of the same run)",
            f"- Command: `{run.command}`, which ran:",
            *steps,
            "- P6 rows: a fresh seekdb (OceanBase kernel) started by `tools/seekdb.py` for each "
            "of its two steps; X rows (issue 19's export/import/migrate budgets): "
            "`portability.py`, with a seekdb of its own; T and D rows (issue #31): the Stop "
            "hook's cost and the distillers' precision and recall on hand-labelled sessions; "
            "O rows (issue 32): `team_scale.py`, three daemons on a seekdb of its own (not in "
            "`--smoke`)",
            "",
            markdown_table(["id", "budget", "target", "measured", "verdict", "details"], table),
            "",
            f"{len(rows) - missed - unmeasured} of {len(rows)} rows met, {missed} missed"
            + (f", {unmeasured} not measured" if unmeasured else "")
            + ".",
        ]
    )


def write_summary(body: str, path: Path = RESULTS_PATH) -> None:
    """Rewrite the summary block, creating it right after the file's intro the first time
    (``replace_section`` appends a missing block at the end; this one belongs at the top)."""
    start, end = f"<!-- bench:{SUMMARY}:start -->", f"<!-- bench:{SUMMARY}:end -->"
    text = path.read_text(encoding="utf-8") if path.exists() else "# Benchmark results\n\n"
    if start not in text:
        first_block = re.search(r"^<!-- bench:[\w-]+:start -->$", text, re.MULTILINE)
        at = first_block.start() if first_block else len(text)
        text = f"{text[:at].rstrip()}\n\n{start}\n{end}\n\n{text[at:].lstrip()}".rstrip() + "\n"
        path.write_text(text, encoding="utf-8")
    replace_section(SUMMARY, body, path)


def build_report(run: Run) -> dict[str, Any]:
    """The JSON report: rows, rendered block and every step's full report (the smoke test
    checks each script's report from here, so each script's smoke runs once per session)."""
    by_name = {s.name: s for s in run.steps}
    rows = [evaluate(b, by_name.get(b.step), run.smoke) for b in BUDGETS]
    links = block_links(RESULTS_PATH.read_text(encoding="utf-8") if RESULTS_PATH.exists() else "")
    return {
        "benchmark": "run_all",
        "smoke": run.smoke,
        "machine": run.facts,
        "command": run.command,
        "finished_at": run.finished_at,
        "minutes": round((time.perf_counter() - run.started) / 60, 2),
        "load_average_1m": {"min": min(run.loads), "max": max(run.loads), "end": run.loads[-1]},
        "all_steps_ok": all(s.status != "failed" for s in run.steps),
        "budgets": rows,
        "markdown": render_markdown(run, rows, links),
        "steps": [s.as_json() for s in run.steps],
    }


# -- entry point --------------------------------------------------------------------------------


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--smoke",
        action="store_true",
        help="every script in its smoke mode (≈ 1 min, more under load); writes nothing",
    )
    p.add_argument(
        "--json",
        action="store_true",
        help="print the summary and every script's report as JSON on stdout",
    )
    p.add_argument(
        "--write-results",
        action="store_true",
        help="each script rewrites its RESULTS.md block, then the summary on top",
    )
    p.add_argument(
        "--no-seekdb",
        action="store_true",
        help="skip the seekdb steps (P6, O; no seekdb server is started)",
    )
    p.add_argument(
        "--seekdb-entries",
        type=int,
        default=0,
        help="N for the P6 prepare step (default the budget's 100k; loading runs at ~30-70 "
        "writes/s on seekdb, so a smaller N gives a quicker, clearly labelled run)",
    )
    p.add_argument(
        "--seekdb-load",
        choices=("import", "http"),
        default="import",
        help="how the P6 steps fill seekdb: `powercontext import` of a generated export "
        "(default; minutes for 100k) or HTTP remembers (~30-70/s: about an hour for 100k, "
        "and the remember ratio is then taken at 20k)",
    )
    p.add_argument(
        "--seekdb-dir",
        type=Path,
        help="keep seekdb and the P6 daemon's home here; a later run with the same "
        "dir reuses the loaded 100k scope instead of loading it again (~1 h)",
    )
    args = p.parse_args(argv)
    if args.smoke and args.write_results:
        p.error("--write-results with --smoke would overwrite real numbers with smoke numbers")
    if args.no_seekdb and args.seekdb_dir:
        p.error("--seekdb-dir and --no-seekdb contradict each other")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    run = Run(args.smoke, machine_facts(), command_line())
    with tempfile.TemporaryDirectory(prefix="powercontext-bench-all-") as work:
        plan = Plan(
            args.smoke,
            args.write_results,
            Path(work),
            args.seekdb_dir.resolve() if args.seekdb_dir else None,
            args.no_seekdb,
            args.seekdb_entries,
            args.seekdb_load,
        )
        run.steps += run_sqlite_steps(plan)
        run.steps += run_seekdb_steps(plan)
        run.steps.append(run_portability_step(plan))
    run.loads = [s.load_1m for s in run.steps if s.load_1m is not None]
    run.loads.append(round(os.getloadavg()[0], 2))
    run.finished_at = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    report = build_report(run)
    if args.write_results:
        write_summary(report["markdown"])
        log("== bench/RESULTS.md: summary block updated")
    print(json.dumps(report, indent=2, ensure_ascii=False) if args.json else report["markdown"])
    return 0 if report["all_steps_ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
