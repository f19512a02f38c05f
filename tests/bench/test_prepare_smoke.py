"""Smoke test for ``bench/prepare_latency.py`` (spec 08: the benchmark scripts must not rot).

It runs the real script as a subprocess in ``--smoke`` mode against a daemon the script starts
itself, and checks that every size and prompt kind got timed and the throughput phase completed.
It never asserts how fast anything is: budgets live in the benchmark's report, and timed
assertions would make CI flaky on noisy machines.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PREPARE_LATENCY = REPO / "bench" / "prepare_latency.py"


@pytest.mark.e2e
@pytest.mark.timeout(60)
def test_prepare_latency_smoke_reports_latency_per_size_and_kind_and_throughput() -> None:
    proc = subprocess.run(
        [sys.executable, str(PREPARE_LATENCY), "--smoke", "--json"],
        capture_output=True,
        text=True,
        timeout=50,
        cwd=REPO,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout)

    config = report["config"]
    sizes = report["sizes"]
    assert [s["n"] for s in sizes] == config["sizes"]
    assert len(sizes) >= 2
    for size in sizes:
        assert set(size["kinds"]) == {"short", "long"}
        for kind in size["kinds"].values():
            p50 = kind["latency_ms"]["p50"]
            assert isinstance(p50, float)
            assert p50 > 0
            assert kind["samples"] == config["samples"]
            assert kind["ready"] + kind["empty"] == kind["samples"]

    for floor in report["floor_ms"].values():
        assert floor["p50"] > 0

    throughput = report["throughput"]
    assert throughput["n"] == sizes[-1]["n"]
    assert throughput["requests"] > 0
    assert throughput["requests_per_second"] > 0
    assert throughput["latency_ms"]["p50"] > 0
    # A self-started daemon runs here, so its memory is known.
    assert report["daemon_memory_kib"]["rss_kib"] > 0
    assert {b["id"] for b in report["budgets"]} == {"P2", "P3", "P7"}
