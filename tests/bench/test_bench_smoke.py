"""Smoke test for the benchmarks: the scripts must keep working (spec 08: "CI runs a small smoke
version so the scripts never rot").

It runs the real script as a subprocess against a daemon the script starts itself, exactly as a
developer would. It asserts that the run succeeds and reports sane numbers, never how fast they
are: budgets live in the benchmarks, and timed assertions would make CI flaky on noisy machines.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
WRITE_SCALING = REPO / "bench" / "write_scaling.py"


@pytest.mark.e2e
@pytest.mark.timeout(60)
def test_write_scaling_smoke_reports_p50_for_both_sizes() -> None:
    proc = subprocess.run(
        [sys.executable, str(WRITE_SCALING), "--smoke", "--json"],
        capture_output=True,
        text=True,
        timeout=50,
        cwd=REPO,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout)

    sizes = report["sizes"]
    assert [s["n"] for s in sizes] == report["config"]["sizes"]
    assert len(sizes) == 2
    for size in sizes:
        p50 = size["latency_ms"]["p50"]
        assert isinstance(p50, float)
        assert p50 > 0
        assert size["samples"] == report["config"]["samples"]
    assert report["ratio_p50"] > 0
    assert report["machine"]["cpu_count"]
