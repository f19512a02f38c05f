"""Smoke test of ``bench/distill_quality.py`` (issue #31 item 3), so the script never rots.

Runs of the real script as a subprocess, as ``run_all.py`` would run it: on the committed
sessions and transcript scripts (the report is complete, the goals it states are met, nothing
secret is proposed or stored, both host formats give the same task, and no RESULTS.md is
touched without ``--write-results``); and, for each mode, on three tiny sessions written to
``tmp_path`` whose figures are worked out by hand: one keeper found, one wrong proposal, one
labelled lesson missed, so precision 1/2 and recall 1/2. The transcript renderer is checked
in process too: what the real hook parser reads from both renderings of a script is what the
script did, line counts worked out by hand.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import msgspec
import pytest

from bench.transcript_render import HOSTS, render
from powercontext_hook_kit.task_result import TurnRef, parse_transcript

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
    transcripts = report["transcripts"]
    assert transcripts["sessions"] >= 30 and transcripts["sessions_with_planted_secrets"] >= 5
    assert set(transcripts["hosts"]) == {"claude-code", "codex"}
    for host in transcripts["hosts"].values():
        assert host["parsed"] == host["sessions"] == transcripts["sessions"]
        assert host["redactions"] > 0 and host["unreproduced_candidates"] == 0
        assert not any(host["secrets"].values()), host["secrets"]
    assert transcripts["parity"]["mismatches"] == []
    assert all(goal["ok"] for goal in transcripts["goals"].values()), transcripts["goals"]
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
    report = _run("--data", str(tmp_path), "--transcripts", "none")
    assert report["transcripts"] is None
    assert (report["proposed"], report["kept"], report["labelled"], report["found"]) == (2, 1, 2, 1)
    assert report["precision"] == 0.5 and report["recall"] == 0.5
    assert report["per_rule"]["fail-then-pass"] == {"proposed": 1, "kept": 0}
    rows = {row["id"]: row for row in report["rows"]}
    assert rows["c-missed"]["missed"] == [{"rule": "flags-changed", "terms": ["--all-features"]}]


# -- the transcript mode -------------------------------------------------------------------

SENTINEL_URL = "postgresql://app:SENTINELpw0a1b@db:5432/app"


def _script(tmp: Path, sid: str, steps: list, keep: list, **extra: Any) -> None:
    body = {"id": sid, "split": "blind", "about": sid, "keep": keep, "prompt": f"do {sid}",
            "steps": steps, "final": "done", **extra}  # fmt: skip
    (tmp / f"{sid}.json").write_text(json.dumps(body), encoding="utf-8")


def test_transcript_mode_hand_worked_figures(tmp_path: Path) -> None:
    """Through both host formats, the Stop hook's parser, a real runtime and the worker: a
    prior-command lesson found (its output carries a raw database URL password, which must not
    be stored), a code pointer nobody labelled (wrong), a flag lesson labelled but absent."""
    no_table = (
        f"connecting to {SENTINEL_URL}\nE   sqlite3.OperationalError: no such table: invoices"
    )
    _script(
        tmp_path,
        "a-kept",
        [
            {"run": "pytest", "exit": 1, "output": no_table},
            {"run": "alembic upgrade head", "exit": 0, "output": ""},
            {"run": "pytest", "exit": 0, "output": "3 passed"},
        ],
        [{"rule": "needs-prior-command", "terms": ["alembic upgrade", "pytest"], "group": "g1"}],
    )
    _script(
        tmp_path,
        "b-wrong",
        [
            {"run": "pytest", "exit": 1, "output": ASSERT},
            {"edit": "app/x.py", "old": "return 1", "new": "return 2"},
            {"run": "pytest", "exit": 0, "output": "1 passed"},
        ],
        [],
    )
    _script(
        tmp_path,
        "c-missed",
        [{"run": "ls", "exit": 0, "output": "Cargo.toml"}],
        [{"rule": "flags-changed", "terms": ["--all-features"], "group": "g2"}],
    )
    report = _run("--transcripts", str(tmp_path))["transcripts"]
    assert report["sessions"] == 3 and report["sessions_with_planted_secrets"] == 1
    assert report["parity"]["mismatches"] == []
    for name, host in report["hosts"].items():
        figures = (host["proposed"], host["kept"], host["labelled"], host["found"])
        assert figures == (2, 1, 2, 1), name
        assert host["precision"] == 0.5 and host["recall"] == 0.5
        assert host["redactions"] >= 1 and not any(host["secrets"].values())
        rows = {row["id"]: row for row in host["rows"]}
        assert [p["rule"] for p in rows["a-kept"]["proposed"]] == ["needs-prior-command"]
        assert [p["kept"] for p in rows["b-wrong"]["proposed"]] == [False]
        assert rows["c-missed"]["missed"] == [
            {"rule": "flags-changed", "terms": ["--all-features"]}
        ]
        assert rows["a-kept"]["outcome"] == "succeeded"
    assert not report["goals"]["codex.precision"]["ok"] and report["goals"]["secrets"]["ok"]


def _parsed(script: dict[str, Any], host: str) -> dict[str, Any]:
    rendered = render(script, host)
    event = rendered.stop_event
    ref = TurnRef(event["session_id"], event.get("turn_id") or event.get("prompt_id"))
    parsed = parse_transcript(rendered.transcript, host, ref, cwd=event["cwd"])
    assert parsed is not None
    task = msgspec.to_builtins(parsed[0])
    assert task.pop("host") == host and task.pop("session_ref") == event["session_id"]
    return task


@pytest.mark.parametrize("host", HOSTS)
def test_rendered_transcripts_parse_to_what_the_script_did(host: str) -> None:
    """Each step kind in both formats, read by the real parser: an earlier turn is not this
    turn's; an Edit (1 line for 1, inside a 4-line file), a MultiEdit (2 lines for 2), a Write
    (3 new lines), a refused edit (nothing), failing and passing commands in order."""
    script = {
        "id": "render-check",
        "before": [{"prompt": "earlier", "steps": [{"run": "make old", "exit": 2}], "final": "x"}],
        "prompt": "fix it",
        "files": {"app/a.py": "import os\n\n\ndef f():\n    return 1\n"},
        "steps": [
            {"run": "pytest -q", "exit": 1, "output": ["FAILED t.py::test_f", "1 failed"]},
            {"edit": "app/a.py", "old": "    return 1", "new": "    return 2"},
            {"edit": "app/b.py", "edits": [{"old": "x = 1\ny = 2", "new": "x = 3\ny = 4"}]},
            {"edit": "app/a.py", "old": "not there", "new": "z", "fails": True},
            {"write": "app/c.py", "content": "a = 1\nb = 2\nc = 3\n"},
            {"say": "now the tests"},
            {"run": "pytest -q", "exit": 0, "output": "2 passed\n"},
        ],
        "final": "fixed",
    }
    assert _parsed(script, host) == {
        "goal": "fix it",
        "outcome": "succeeded",
        "changes": [
            {"path": "app/a.py", "added": 1, "removed": 1},
            {"path": "app/b.py", "added": 2, "removed": 2},
            {"path": "app/c.py", "added": 3, "removed": 0},
        ],
        "checks": [
            {"command": "pytest -q", "exit_status": 1,
             "output_tail": "FAILED t.py::test_f\n1 failed"},
            {"command": "pytest -q", "exit_status": 0, "output_tail": "2 passed"},
        ],
    }  # fmt: skip
    aborted = {**script, "interrupted": True, "final": None}
    assert _parsed(aborted, host)["outcome"] == "abandoned"
