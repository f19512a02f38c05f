"""Prompts captured by the real hook flow become Memory through flush_memory (issue 8)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.e2e.helpers import LIST, PREPARE, new_scope
from tests.support.daemon import Daemon

FLUSH = "/v1/memory/flush"
SENTINEL = "SENTINEL-flush-9d2c"


def run_hook(
    daemon: Daemon, scope: str, prompt: str, turn: str, data: Path, **extra: str
) -> subprocess.CompletedProcess[str]:
    """The real UserPromptSubmit hook process (the hook kit's module entry point)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("POWERCONTEXT_")}
    env.update(
        POWERCONTEXT_URL=daemon.url,
        POWERCONTEXT_TOKEN=daemon.token,
        POWERCONTEXT_SCOPE_ID=scope,
        PLUGIN_DATA=str(data),
        **extra,
    )
    event = {
        "session_id": "sess-flush",
        "turn_id": turn,
        "cwd": str(data),
        "hook_event_name": "UserPromptSubmit",
        "prompt": prompt,
    }
    done = subprocess.run(
        [sys.executable, "-m", "powercontext_hook_kit", "hook", "codex", "user-prompt-submit"],
        input=json.dumps(event),
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 0, done.stderr
    return done


def items(pack: dict[str, Any]) -> list[dict[str, Any]]:
    return json.loads(pack["content"].split("\n")[4])["items"] if pack["content"] else []


def test_directives_from_captured_prompts_are_flushed_and_recalled(
    module_daemon: Daemon, tmp_path: Path
) -> None:
    scope = new_scope("flush")
    run_hook(
        module_daemon,
        scope,
        f"Fix CI {SENTINEL}.\nremember: run make lint before pushing",
        "t1",
        tmp_path,
    )
    run_hook(module_daemon, scope, "记住：提交前运行单元测试", "t2", tmp_path)
    run_hook(module_daemon, scope, "just a question, nothing to remember", "t3", tmp_path)
    with module_daemon.client() as client:
        flushed = client.post(FLUSH, json={"scope_id": scope}).json()
        assert (flushed["status"], flushed["processed_source_count"]) == ("processed", 3)
        assert (flushed["previous_cursor"], flushed["current_cursor"]) == (0, 3)
        entries = client.post(LIST, json={"scope_id": scope}).json()["entries"]
        assert [(e["kind"], e["text"]) for e in entries] == [
            ("convention", "run make lint before pushing"),
            ("convention", "提交前运行单元测试"),
        ]
        for entry in entries:
            (ref,) = entry["source_refs"]
            assert ref["name"] == "content" and ref["source_id"].startswith("codex-user-prompt:")
        assert client.post(FLUSH, json={"scope_id": scope}).json()["status"] == "idle"
        for query, expected in (
            ("what should I run before pushing? lint?", entries[0]),
            ("提交前要运行什么测试", entries[1]),
        ):
            pack = client.post(PREPARE, json={"scope_id": scope, "query": query}).json()
            cited = [item["citation"]["entry_id"] for item in items(pack)]
            assert expected["citation"]["entry_id"] in cited
    assert SENTINEL not in module_daemon.log_text()


def test_the_hook_can_flush_right_after_capture(module_daemon: Daemon, tmp_path: Path) -> None:
    scope = new_scope("flush-hook")
    run_hook(
        module_daemon,
        scope,
        "remember: releases are tagged vMAJOR.MINOR.PATCH",
        "t1",
        tmp_path,
        POWERCONTEXT_FLUSH_AFTER_CAPTURE="on",
    )
    with module_daemon.client() as client:
        entries = client.post(LIST, json={"scope_id": scope}).json()["entries"]
        assert [e["text"] for e in entries] == ["releases are tagged vMAJOR.MINOR.PATCH"]
        assert client.post(FLUSH, json={"scope_id": scope}).json()["status"] == "idle"


def test_the_daemon_can_flush_periodically(tmp_path: Path) -> None:
    import time

    from tests.support.daemon import start_daemon

    scope = new_scope("flush-periodic")
    with start_daemon(tmp_path / "home", extra_env={"POWERCONTEXT_FLUSH_INTERVAL": "0.2"}) as d:
        with d.client() as client:
            captured = client.post(
                "/v1/sources/content",
                json={
                    "scope_id": scope,
                    "source_id": "p1",
                    "content": "remember: the periodic flush picked this up",
                },
            )
            assert captured.status_code == 202
            deadline = time.monotonic() + 20
            texts: list[str] = []
            while time.monotonic() < deadline and not texts:  # bounded poll of async work
                entries = client.post(LIST, json={"scope_id": scope}).json()["entries"]
                texts = [e["text"] for e in entries]
                time.sleep(0.1)
        assert texts == ["the periodic flush picked this up"]
        assert d.stop() == 0
