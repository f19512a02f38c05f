"""Smoke test of ``bench/console_latency.py`` (issue #18's console budget), so the script never
rots: its smoke mode as a subprocess, against a daemon it starts itself, nothing written.

Like the other bench smoke tests it checks that the report is complete and consistent — every
page, every call with a server time from the daemon's own access log — never how fast.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "bench" / "console_latency.py"
PAGES = {
    "Review Inbox", "Memory (list)", "Memory (a filter, worst)", "Memory (search)",
    "Memory (an entry and its history)", "Memory (a cited revision, from the Inbox)",
    "Pack inspector (2,000-char prompt)", "Bootstrap",
    "Activity (90 days)", "the page itself (HTML + app.js)",
}  # fmt: skip

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]


def test_the_console_bench_measures_every_page_from_the_servers_log(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--smoke", "--json", "--data-dir", str(tmp_path / "home")],
        capture_output=True,
        text=True,
        timeout=230,
        cwd=REPO,
    )
    assert proc.returncode == 0, proc.stderr[-5000:]
    report = json.loads(proc.stdout)
    assert report["smoke"] is True and report["entries"] == 300
    assert report["loaded"]["loaded"] is True and report["loaded"]["entries"] == 300
    assert set(report["pages"]) == PAGES
    for page in report["pages"].values():
        assert page["server_p95_sum_ms"] > 0 and isinstance(page["met"], bool)
        assert set(page["calls"]) <= {*report["calls"], "list_memory_entries (worst filter)"}
    for name, call in report["calls"].items():
        server, client = call["server_ms"], call["client_ms"]
        assert 0 < server["p50"] <= server["p95"] <= server["max"], name
        assert server["p50"] <= client["p50"] + 1.0, name  # the server's part of the trip
    assert report["worst_filter"] in report["calls"]
    # A second run on the same data dir loads nothing.
    again = subprocess.run(
        [sys.executable, str(SCRIPT), "--smoke", "--json", "--data-dir", str(tmp_path / "home"),
         "--samples", "1"],
        capture_output=True, text=True, timeout=230, cwd=REPO,
    )  # fmt: skip
    assert again.returncode == 0, again.stderr[-5000:]
    assert json.loads(again.stdout)["loaded"] == {"loaded": False}
    # The bulk path (`powercontext import` of a generated export) loads the same scope.
    bulk = subprocess.run(
        [sys.executable, str(SCRIPT), "--smoke", "--json", "--bulk-load", "--samples", "1",
         "--data-dir", str(tmp_path / "bulk")],
        capture_output=True, text=True, timeout=230, cwd=REPO,
    )  # fmt: skip
    assert bulk.returncode == 0, bulk.stderr[-5000:]
    bulk_report = json.loads(bulk.stdout)
    assert bulk_report["loaded"]["load"] == "import" and bulk_report["loaded"]["entries"] == 300
    assert set(bulk_report["pages"]) == PAGES
    assert "list_memory_changes (a cited revision)" in bulk_report["pages"]["Review Inbox"]["calls"]
