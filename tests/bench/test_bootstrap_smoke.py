"""The bootstrap benchmark keeps working (no timing assertions: budgets live in bench/)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "bench" / "bootstrap_latency.py"


def test_bootstrap_benchmark_smoke() -> None:
    done = subprocess.run([sys.executable, str(SCRIPT), "--smoke", "--json"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout)
    assert report["samples"] == 20
    assert report["fresh_ms"]["p50"] > 0 and report["replay_ms"]["p50"] > 0
    assert report["items_per_pack"] >= 2 and 0 < report["content_bytes"] <= 4096
