"""Smoke test of ``bench/distill_quality.py`` (issue #31 item 3), so the script never rots.

Two runs of the real script as a subprocess, as ``run_all.py`` would run it: on the committed
sessions (the report is complete, the goals it states are met, nothing secret is proposed,
and no RESULTS.md is touched without ``--write-results``), and on three tiny sessions written
to ``tmp_path`` whose figures are worked out by hand: one keeper found, one wrong proposal,
one labelled lesson missed, so precision 1/2 and recall 1/2.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "bench" / "distill_quality.py"
NO_TABLE = "E   sqlite3.OperationalError: no such table: invoices\n1 error in 0.2s"
ASSERT = "FAILED tests/test_a.py::test_total - AssertionError: assert 1 == 2"


def _run(*args: str) -> dict:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--json", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return json.loads(done.stdout)


def _session(tmp: Path, sid: str, checks: list, changes: list, keep: list) -> None:
    task = {"goal": "g", "outcome": "succeeded", "changes": changes, "checks": checks}
    body = {"id": sid, "split": "dev", "about": sid, "task": task, "keep": keep}
    (tmp / f"{sid}.json").write_text(json.dumps(body), encoding="utf-8")


def test_on_the_committed_sessions() -> None:
    before = (REPO / "bench" / "RESULTS.md").read_bytes()
    report = _run()
    assert report["sessions"] >= 30
    assert report["goals"]["precision"]["ok"] and report["goals"]["recall"]["ok"]
    assert report["goals"]["secrets"]["ok"] and report["secrets"]["leaking_proposals"] == 0
    assert report["goals"]["dedup"]["ok"]
    assert set(report["per_rule"]) == {
        "fail-then-pass", "flags-changed", "needs-prior-command", "regenerate-after-edit"
    }  # fmt: skip
    assert (REPO / "bench" / "RESULTS.md").read_bytes() == before


def test_hand_worked_figures(tmp_path: Path) -> None:
    prior = [
        {"command": "pytest", "exit_status": 1, "output_tail": NO_TABLE},
        {"command": "alembic upgrade head", "exit_status": 0, "output_tail": ""},
        {"command": "pytest", "exit_status": 0, "output_tail": ""},
    ]
    _session(
        tmp_path,
        "a-kept",
        prior,
        [],
        [{"rule": "needs-prior-command", "terms": ["alembic upgrade"], "group": "g1"}],
    )
    fix = [
        {"command": "pytest", "exit_status": 1, "output_tail": ASSERT},
        {"command": "pytest", "exit_status": 0, "output_tail": ""},
    ]
    _session(tmp_path, "b-wrong", fix, [{"path": "app/x.py", "added": 1, "removed": 1}], [])
    _session(tmp_path, "c-missed", [], [],
             [{"rule": "flags-changed", "terms": ["--all-features"], "group": "g2"}])  # fmt: skip
    report = _run("--data", str(tmp_path))
    assert (report["proposed"], report["kept"], report["labelled"], report["found"]) == (2, 1, 2, 1)
    assert report["precision"] == 0.5 and report["recall"] == 0.5
    assert report["per_rule"]["fail-then-pass"] == {"proposed": 1, "kept": 0}
    rows = {row["id"]: row for row in report["rows"]}
    assert rows["c-missed"]["missed"] == [{"rule": "flags-changed", "terms": ["--all-features"]}]
