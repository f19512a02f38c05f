"""Prompts written while the daemon is down reach its journal once it is back — exactly once,
in prompt order, even when a delivery is repeated after a crash (issue 16, item 4)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from tests.e2e.helpers import FLUSH, LIST, hook_env, new_scope, run_hook_process
from tests.support.daemon import Daemon, start_daemon

SENTINEL = "SENTINEL-spool-4b7e"
HOOK = ("powercontext_hook_kit", "hook", "codex", "user-prompt-submit")
SPOOL = "capture-spool"


def prompt_event(prompt: str, turn: str, cwd: Path) -> dict[str, Any]:
    return {
        "session_id": "sess-spool",
        "turn_id": turn,
        "cwd": str(cwd),
        "hook_event_name": "UserPromptSubmit",
        "prompt": prompt,
    }


def journal(daemon: Daemon, scope: str) -> list[tuple[int, str, str]]:
    """(position, source id, content) of the scope's captured sources, read from the database."""
    rows = daemon.query(
        "SELECT position, source_id, content FROM sources WHERE scope_id = ? ORDER BY position",
        scope,
    )
    return [(int(position), str(source), str(content)) for position, source, content in rows]


def spool_entries(data: Path) -> list[Path]:
    folder = data / SPOOL
    return sorted(folder.glob("*.json")) if folder.exists() else []


def test_prompts_spooled_while_the_daemon_is_down_reach_the_journal_once(tmp_path: Path) -> None:
    scope = new_scope("spool")
    home = tmp_path / "home"
    data = tmp_path / "plugin-data"  # what hook_env names PLUGIN_DATA
    prompts = [f"Fix CI {SENTINEL}.\nremember: rule {n} holds" for n in range(6)]

    with start_daemon(home) as daemon:
        env = hook_env(daemon, scope, tmp_path, POWERCONTEXT_CAPTURE_PROMPTS="1")
        run_hook_process(HOOK, prompt_event(prompts[0], "t0", tmp_path), env)
        assert [content for _, _, content in journal(daemon, scope)] == prompts[:1]
        assert daemon.stop() == 0
        first_log = daemon.log_text()

    # -- the daemon is down: every turn completes, every prompt is kept -------------------------
    for number in (1, 2, 3):
        done = run_hook_process(HOOK, prompt_event(prompts[number], f"t{number}", tmp_path), env)
        assert done.stdout == b""
        [line] = [json.loads(text) for text in done.stderr.decode().splitlines()]
        assert (line["event"], line["outcome"]) == ("context_prepare", "server_unavailable")
    assert len(spool_entries(data)) == 3
    saved = tmp_path / "saved-spool"
    shutil.copytree(data / SPOOL, saved)

    # -- back up (same data dir, a new port): the spool goes first, then the new prompt ---------
    with start_daemon(home) as daemon:
        env = hook_env(daemon, scope, tmp_path, POWERCONTEXT_CAPTURE_PROMPTS="1")
        done = run_hook_process(HOOK, prompt_event(prompts[4], "t4", tmp_path), env)
        lines = [json.loads(text) for text in done.stderr.decode().splitlines()]
        assert [line["event"] for line in lines] == ["context_prepare"]  # delivery: silent
        rows = journal(daemon, scope)
        assert [content for _, _, content in rows] == prompts[:5]
        assert [position for position, _, _ in rows] == [1, 2, 3, 4, 5]
        assert spool_entries(data) == []

        # A hook that died after the daemon's 202 but before removing the entries: they are
        # sent again with the next prompt and answered as the duplicates they are.
        for entry in saved.glob("*.json"):
            shutil.copy2(entry, data / SPOOL / entry.name)
        done = run_hook_process(
            HOOK, prompt_event(prompts[5], "t5", tmp_path), {**env, "POWERCONTEXT_DEBUG": "1"}
        )
        lines = [json.loads(text) for text in done.stderr.decode().splitlines()]
        [spool_line] = [line for line in lines if line["event"] == "capture_spool"]
        assert (spool_line["outcome"], spool_line["delivered"], spool_line["dropped"]) == (
            "delivered",
            3,
            0,
        )
        after = journal(daemon, scope)
        assert after[:5] == rows  # the resent entries kept their positions: journaled once
        assert [(position, content) for position, _, content in after[5:]] == [(6, prompts[5])]
        assert spool_entries(data) == []

        # The prompts kept through the outage become Memory like any other.
        with daemon.client() as client:
            flushed = client.post(FLUSH, json={"scope_id": scope}).json()
            assert (flushed["status"], flushed["processed_source_count"]) == ("processed", 6)
            entries = client.post(LIST, json={"scope_id": scope}).json()["entries"]
        assert sorted(entry["text"] for entry in entries) == [f"rule {n} holds" for n in range(6)]
        assert daemon.stop() == 0
        logs = [first_log, daemon.log_text()]

    diagnostics = (data / "diagnostics.log").read_text()
    for text in [*logs, diagnostics]:
        assert SENTINEL not in text
