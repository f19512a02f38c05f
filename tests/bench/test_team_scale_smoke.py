"""Smoke test of ``bench/team_scale.py`` (OceanBase at team scale: one database, three daemons,
many scopes, over HTTP), so the script never rots: its smoke mode as a subprocess against a
fresh database on the test session's seekdb, nothing written to RESULTS.md.

Like the other bench smoke tests it checks that the report is complete and consistent (every
measured scope has its latencies, the mixed load's counts add up, each process's CPU and
memory are there), never how fast: and that every cross-daemon correctness check passed, and
that a second run reuses the load.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.backends import database_url_for

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "bench" / "team_scale.py"
CHECKS = {"approvals", "writers", "visibility", "revoke", "sigkill"}
BUDGETS = {"single.p50", "single.p95", "mixed.ok_per_s", "mixed.prepare_p95", "mixed.5xx", "checks"}

pytestmark = [pytest.mark.e2e, pytest.mark.oceanbase, pytest.mark.timeout(900)]


def _run(url: str, *extra: str) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--smoke", "--json", "--database-url", url, *extra],
        capture_output=True, text=True, timeout=420, cwd=REPO,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-5000:]
    return json.loads(proc.stdout)


def _latency(stats: dict[str, float] | None) -> None:
    assert stats is not None
    assert 0 < stats["min"] <= stats["p50"] <= stats["p95"] <= stats["max"]


def _check_report(report: dict[str, Any]) -> None:
    cfg = report["config"]
    assert cfg["daemons"] == 3 and cfg["clients"] == 12 and report["shape"] is None

    sizes = [s["entries"] for s in report["single"]]
    assert sizes == sorted(sizes) and set(cfg["large"]) <= set(sizes) and len(sizes) >= 2
    for scope in report["single"]:
        for kind in ("short", "long"):
            measured = scope[kind]
            assert measured["prompts"] == cfg["queries"]
            _latency(measured["prepare_ms"])
            _latency(measured["search_ms"])
            assert 0 <= measured["packs_ready"] <= measured["prompts"]
        _latency(scope["remember_ms"])
        assert scope["cpu_cores"]["other processes"] >= 0

    mixed = report["mixed"]
    ops = mixed["ops"]
    assert set(ops) == {"prepare", "search", "remember"}
    assert mixed["requests"] == sum(o["requests"] for o in ops.values()) > 0
    assert mixed["ok"] == sum(o["ok"] for o in ops.values()) > 0
    assert mixed["errors_5xx"] == sum(o["errors_5xx"] for o in ops.values())
    for op in ops.values():
        assert sum(op["errors"].values()) == op["requests"] - op["ok"]
    prepare = ops["prepare"]
    assert prepare["ok"] > 0 and 0 <= prepare["over_deadline"] <= prepare["requests"]
    assert 0 <= prepare["packs_ready"] <= prepare["ok"]
    assert mixed["ok_per_second"] > 0 and mixed["wall_s"] >= cfg["duration"]
    assert set(mixed["ok_per_second_by_daemon"]) == {"daemon 1", "daemon 2", "daemon 3"}
    cores = mixed["cpu_cores"]
    assert {"clients", "daemon 1", "daemon 2", "daemon 3", "other processes"} <= set(cores)
    assert all(value >= 0 for value in cores.values())
    for name in ("daemon 1", "daemon 2", "daemon 3"):
        assert report["memory_kib"][name]["rss_kib"] > 0
    if report["memory_kib"]["seekdb"] is not None:  # a local server: its process was found
        assert report["memory_kib"]["seekdb"]["rss_kib"] > 0 and "seekdb" in cores

    checks = {c["name"]: c for c in report["checks"]}
    assert set(checks) == CHECKS
    for check in checks.values():
        assert check["passed"] is True, check
    assert checks["approvals"]["outcomes"]["200"] == 1
    assert checks["writers"]["acknowledged"] > 0
    assert checks["visibility"]["visible"] == checks["visibility"]["reads"] > 0
    assert checks["revoke"]["before"] == [200] * 3 and checks["revoke"]["after"] == [401] * 3
    assert checks["sigkill"]["acknowledged"] >= checks["sigkill"]["acknowledged_when_killed"]
    assert report["internal_errors_logged"] == 0

    rows = {row["key"]: row for row in report["budgets"]}
    loaded = not report["load"]["reused"]  # an import to measure: issue 32's import budget
    assert set(rows) == BUDGETS | ({"load.entries_per_s"} if loaded else set())
    assert {row["id"] for row in rows.values()} == {"O1", "O2", "O3"} | (
        {"O4"} if loaded else set()
    )
    for row in rows.values():
        assert isinstance(row["ok"], bool) and row["applicable"] is False  # smoke sizes
    assert rows["checks"]["measured"] == len(CHECKS) and rows["checks"]["ok"] is True
    if loaded:
        imported = rows["load.entries_per_s"]
        assert imported["measured"] == report["load"]["entries_per_second"] > 0
        assert imported["ok"] is (imported["measured"] >= 5_000)


def test_the_team_bench_measures_three_daemons_and_every_check_passes(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    url = database_url_for("oceanbase", request, tmp_path)
    first = _run(url, "--no-compact")
    assert first["load"]["reused"] is False and first["load"]["entries_per_second"] > 0
    _check_report(first)
    again = _run(url, "--reuse")
    assert again["load"]["reused"] is True and again["load"]["entries_since"] > 0
    _check_report(again)
    assert [s["entries"] for s in again["single"]] == [s["entries"] for s in first["single"]]
