"""Smoke test of ``bench/write_scaling.py --embeddings local`` (issue 17's "remember p50 ≤ 10 ms
including embedding"), so the script's semantic-channel path never rots: its smoke mode as a
subprocess against a daemon it starts itself with the local model, nothing written.

Like the other bench smoke tests it checks that the report is complete and consistent, never
how fast: every timed remember answered, and every lag sample ended with the entry's vector
stored (the script raises if one never appears).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "bench" / "write_scaling.py"

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]


def test_write_scaling_with_the_channel_on_reports_the_embedding_lag() -> None:
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--smoke", "--json", "--embeddings", "local",
         "--lag-samples", "5"],
        capture_output=True, text=True, timeout=290, cwd=REPO,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-5000:]
    report = json.loads(proc.stdout)
    assert "embeddings local" in report["target"]
    assert report["config"]["embeddings"] == "local" and report["config"]["lag_samples"] == 5
    assert [s["n"] for s in report["sizes"]] == report["config"]["sizes"]
    for size in report["sizes"]:
        assert size["samples"] == report["config"]["samples"]
        assert size["latency_ms"]["p50"] > 0
        lag = size["vector_lag_ms"]
        assert 0 < lag["min"] <= lag["p50"] <= lag["max"]
        # The next size starts where this one's writes (timed and lagged) ended.
        assert size["n_after"] == size["n"] + 5 + report["config"]["samples"] + 5
    assert "vector stored p50" in proc.stderr


def test_write_scaling_refuses_embeddings_against_a_url() -> None:
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--embeddings", "local", "--url", "http://127.0.0.1:9",
         "--token", "t"],
        capture_output=True, text=True, timeout=60, cwd=REPO,
    )  # fmt: skip
    assert proc.returncode == 2 and "--embeddings reads the self-started daemon" in proc.stderr
