"""A committed Handoff reaches the next session once: the CLI, the real SessionStart hook
process and a real daemon (docs/bootstrap.md, "Handing off to the next session")."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.helpers import cli_json, hook_env, new_scope, run_cli, run_hook_process
from tests.support.daemon import Daemon

pytestmark = pytest.mark.e2e

OBJECTIVE = "Move the invoice exporter onto the streaming writer"
HANDOFF = {
    "schema": "powercontext.handoff.v1",
    "objective": OBJECTIVE,
    "state": ["The writer is merged", "The exporter still buffers every row"],
    "disposition": "continuable",
    "next_action": "Port export_invoices() and rerun the 1M-row benchmark",
}


def start_session(env: dict[str, str], tmp_path: Path, *, outcome: str | None = None) -> str | None:
    """One real SessionStart hook process for a brand-new session; its injected context.

    A delivery is silent; ``outcome`` is the one diagnostic line expected otherwise."""
    event = {
        "session_id": f"sess-{uuid.uuid4().hex}",
        "transcript_path": str(tmp_path / "rollout.jsonl"),
        "cwd": str(tmp_path),
        "hook_event_name": "SessionStart",
        "model": "gpt-stub",
        "permission_mode": "default",
        "source": "startup",
    }
    completed = run_hook_process(
        ("powercontext_hook_kit", "hook", "codex", "session-start"), event, env
    )
    lines = [json.loads(line) for line in completed.stderr.decode().splitlines()]
    assert [line["outcome"] for line in lines] == ([outcome] if outcome else []), lines
    if not completed.stdout:
        return None
    return str(json.loads(completed.stdout)["hookSpecificOutput"]["additionalContext"])


def handoff_items(context: str) -> list[dict[str, Any]]:
    document = json.loads(context.split("\n")[4])
    return [item for item in document["items"] if item["kind"] == "handoff"]


def test_the_next_session_receives_the_handoff_once(module_daemon: Daemon, tmp_path: Path) -> None:
    scope = new_scope("handoff-next")
    s = ("--scope", scope)
    assert cli_json(module_daemon, "handoff", "next", *s)["handoff_ref"] is None
    committed = run_cli(module_daemon, "handoff", "commit", *s, json.dumps(HANDOFF))
    assert committed.returncode == 0, committed.stderr
    assert committed.stdout.strip() == (
        "handoff revision 1 (queued: the next session of this scope receives it once, "
        "if bootstrap is on)"
    )
    waiting = cli_json(module_daemon, "handoff", "next", *s)
    assert waiting["handoff_ref"] == {"family": "handoff", "artifact_id": "handoff", "revision": 1}
    assert (
        run_cli(module_daemon, "handoff", "next", *s).stdout.strip() == "handoff revision 1 waits"
    )

    env = hook_env(module_daemon, scope, tmp_path)
    first = start_session(env, tmp_path)
    assert first is not None
    [item] = handoff_items(first)
    assert item["citation"] == {"artifact_ref": waiting["handoff_ref"]}
    assert OBJECTIVE in item["content"] and "export_invoices()" in item["content"]

    assert cli_json(module_daemon, "handoff", "next", *s)["handoff_ref"] is None
    assert start_session(env, tmp_path, outcome="empty") is None  # nothing else is eligible
    again = cli_json(module_daemon, "handoff", "get", *s, "--revision", "1")
    assert again["queued"] is False and again["content"]["objective"] == OBJECTIVE


def test_bootstrap_off_leaves_the_handoff_waiting(module_daemon: Daemon, tmp_path: Path) -> None:
    scope = new_scope("handoff-off")
    s = ("--scope", scope)
    cli_json(module_daemon, "handoff", "commit", *s, json.dumps(HANDOFF))
    off = hook_env(module_daemon, scope, tmp_path, POWERCONTEXT_BOOTSTRAP="0")
    assert start_session(off, tmp_path) is None
    assert cli_json(module_daemon, "handoff", "next", *s)["handoff_ref"]["revision"] == 1


def test_withdraw_and_no_deliver(module_daemon: Daemon, tmp_path: Path) -> None:
    scope = new_scope("handoff-withdraw")
    s = ("--scope", scope)
    stored = cli_json(module_daemon, "handoff", "commit", *s, json.dumps(HANDOFF), "--no-deliver")
    assert stored["queued"] is False
    assert run_cli(module_daemon, "handoff", "commit", *s, json.dumps(HANDOFF), "--base", "1",
                   "--no-deliver").stdout.strip() == "handoff revision 2"  # fmt: skip
    assert cli_json(module_daemon, "handoff", "next", *s)["handoff_ref"] is None
    cli_json(module_daemon, "handoff", "commit", *s, json.dumps(HANDOFF), "--base", "2")
    withdrawn = run_cli(module_daemon, "handoff", "withdraw", *s)
    assert withdrawn.stdout.strip() == "withdrew handoff revision 3 (it stays readable)"
    assert run_cli(module_daemon, "handoff", "withdraw", *s).stdout.strip() == (
        "no handoff was waiting"
    )
    assert (
        start_session(hook_env(module_daemon, scope, tmp_path), tmp_path, outcome="empty") is None
    )
