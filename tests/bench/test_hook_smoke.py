"""Smoke test for ``bench/hook_latency.py`` (spec 08: the benchmark scripts must not rot).

It runs the real script as a subprocess in ``--smoke`` mode: the script starts its own daemon,
loads a small scope and spawns the real hook process (``python -m powercontext_hook_kit hook
codex user-prompt-submit``) a few times next to the reference processes. It checks that every
series was timed and that every hook run exited 0 with valid stdout (one envelope or nothing),
never how fast anything is: budgets live in the benchmark's report, and timed assertions would
make CI flaky on noisy machines.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
HOOK_LATENCY = REPO / "bench" / "hook_latency.py"
HOOK_SERIES = ("hook", "hook_no_capture", "plugin", "hook_env_bytecode")


@pytest.mark.e2e
@pytest.mark.timeout(60)
def test_hook_latency_smoke_times_every_process_and_every_hook_run_is_valid() -> None:
    proc = subprocess.run(
        [sys.executable, str(HOOK_LATENCY), "--smoke", "--json"],
        capture_output=True,
        text=True,
        timeout=50,
        cwd=REPO,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout)
    samples = report["config"]["samples"]

    processes = report["processes"]
    assert {"bare", "pass", "imports", "kit_import", "hook", "hook_no_capture"} <= set(processes)
    for proc_report in processes.values():
        assert proc_report["runs"] == samples
        assert proc_report["wall_ms"]["p50"] > 0
        assert proc_report["cpu_ms"]["p50"] > 0
        assert proc_report["maxrss_kib"]["max"] > 0

    hooks = [processes[key] for key in HOOK_SERIES if key in processes]
    assert len(hooks) >= 2
    for hook in hooks:
        # Exit 0 and stdout empty or exactly one valid envelope (stderr: nothing or the one
        # `empty` diagnostic), on every run; the injected pack is the one the server prepares.
        assert hook["valid"] == hook["runs"] == samples, hook["problems"]
        assert hook["injected"] + hook["empty"] == samples
        assert hook["matches_server"] == samples
    assert report["all_hook_runs_valid"] is True

    assert report["server"]["prepare_ms"]["p50"] > 0
    assert report["server"]["capture_ms"]["p50"] > 0
    assert {b["id"] for b in report["budgets"]} == {"P1"}
    assert isinstance(report["overhead_ms"], float)
    assert len(report["load_average_1m"]) == 5
