"""Smoke test for the recall-quality benchmark (spec 08 Q1): the script must keep working.

It runs ``bench/recall_quality.py --json`` as a subprocess against a daemon the script starts
itself, and checks that the measurement ran and reports well-formed numbers over a dev set of
the size Q1 requires. It deliberately asserts no quality threshold: whether the targets are met
is what the benchmark reports (bench/RESULTS.md), not something CI should flake on.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
RECALL_QUALITY = REPO / "bench" / "recall_quality.py"


def _fraction(value: object) -> float:
    assert isinstance(value, (int, float)) and not isinstance(value, bool), value
    assert 0.0 <= value <= 1.0, value
    return float(value)


@pytest.mark.e2e
@pytest.mark.timeout(60)
def test_recall_quality_reports_the_three_fractions_over_a_full_size_dev_set() -> None:
    proc = subprocess.run(
        [sys.executable, str(RECALL_QUALITY), "--json"],
        capture_output=True,
        text=True,
        timeout=55,
        cwd=REPO,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout)

    short = _fraction(report["short_recall"])
    long_ = _fraction(report["long_recall"])
    unrelated = _fraction(report["unrelated_empty"])

    sizes = report["dataset"]
    assert sizes["entries"] >= 200
    assert sizes["queries"] >= 60
    assert sizes["long"] >= 10
    assert sizes["unrelated"] >= 20
    assert sizes["short"] + sizes["long"] == sizes["queries"]

    # The fractions are the counts they claim to be.
    counts = report["counts"]
    assert counts["short"][1] == sizes["short"]
    assert counts["long"][1] == sizes["long"]
    assert counts["unrelated_empty"][1] == sizes["unrelated"]
    assert short == pytest.approx(counts["short"][0] / counts["short"][1], abs=1e-4)
    assert long_ == pytest.approx(counts["long"][0] / counts["long"][1], abs=1e-4)
    assert unrelated == pytest.approx(
        counts["unrelated_empty"][0] / counts["unrelated_empty"][1], abs=1e-4
    )
    for category in report["categories"].values():
        _fraction(category["recall"])
    assert report["machine"]["cpu_count"]
