"""Fixtures for the hook kit: an isolated user environment and a stub runtime.

Every test gets private XDG directories (so the developer's real ``plugins.toml``, runtime
token, socket or state directory can never leak in) and no ``POWERCONTEXT_*`` / plugin
variables from the outer shell. ``stub`` listens on TCP loopback, ``unix_stub`` on a unix
socket in a runtime data dir of its own (``runtime_home``), ``any_stub`` is each in turn.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from powercontext_hook_kit import StandardHostAdapter, run_hook
from tests.hook_kit.stub import StubRuntime, running_stub

TOKEN = "tok-SENTINEL-7f3a"

LINE_KEYS = {
    "component",
    "event",
    "outcome",
    "http_status",
    "context_status",
    "content_bytes",
    "duration_ms",
    # capture_spool lines only: counts
    "spooled",
    "delivered",
    "dropped",
    "pending",
}
COUNT_KEYS = ("http_status", "content_bytes", "duration_ms", "spooled", "delivered", "dropped",
              "pending")  # fmt: skip
SPEC_OUTCOMES = {
    "skipped",
    "disabled",
    "empty",
    "authentication_failed",
    "forbidden",
    "version_mismatch",
    "server_unavailable",
    "invalid_response",
    "receipt_rejected",
}
#: The kit's additions to spec 07's set: the capture spool gave prompts up; the Stop hook found
#: no turn to record in the host's transcript.
KIT_OUTCOMES = {"dropped", "no_task_result"}
DEBUG_OUTCOMES = {"injected", "captured", "flushed", "spooled", "delivered", "recorded"}

_ISOLATED_PREFIXES = ("POWERCONTEXT_", "CLAUDE_PLUGIN_", "PLUGIN_", "GIT_")


@pytest.fixture(autouse=True)
def isolated_user(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "user"
    for name in list(os.environ):
        if name.startswith(_ISOLATED_PREFIXES):
            monkeypatch.delenv(name)
    for variable, folder in (
        ("XDG_CONFIG_HOME", "config"),
        ("XDG_DATA_HOME", "data"),
        ("XDG_STATE_HOME", "state"),
        ("XDG_CACHE_HOME", "cache"),
    ):
        (home / folder).mkdir(parents=True)
        monkeypatch.setenv(variable, str(home / folder))
    return home


@pytest.fixture
def stub() -> Iterator[StubRuntime]:
    with running_stub() as running:
        yield running


@pytest.fixture
def runtime_home(tmp_path: Path) -> Path:
    """A runtime data dir (``POWERCONTEXT_HOME``): where the socket and the agent token live."""
    home = tmp_path / "pc-home"
    (home / "auth").mkdir(parents=True, mode=0o700)
    return home


@pytest.fixture
def unix_stub(runtime_home: Path) -> Iterator[StubRuntime]:
    """The stub on ``<runtime_home>/powercontext.sock`` (the hooks' default on POSIX)."""
    with running_stub(str(runtime_home / "powercontext.sock")) as running:
        yield running


@pytest.fixture(params=["tcp", "unix"])
def any_stub(request: pytest.FixtureRequest, runtime_home: Path) -> Iterator[StubRuntime]:
    """The stub over each transport: the same exchange must behave the same on both."""
    path = None if request.param == "tcp" else str(runtime_home / "powercontext.sock")
    with running_stub(path) as running:
        yield running


def parse_lines(stderr: str) -> list[dict[str, Any]]:
    """Every stderr line as JSON, checked against the closed key and outcome sets."""
    lines = [json.loads(line) for line in stderr.splitlines() if line.strip()]
    for line in lines:
        assert set(line) <= LINE_KEYS, line
        assert {"component", "event", "outcome"} <= set(line), line
        assert line["outcome"] in SPEC_OUTCOMES | KIT_OUTCOMES | DEBUG_OUTCOMES, line
        for key in COUNT_KEYS:
            assert key not in line or type(line[key]) is int, line
        assert line.get("context_status") in (None, "ready", "empty", "skipped"), line
    return lines


@dataclass
class HookRun:
    code: int
    stdout: bytes
    stderr: str
    lines: list[dict[str, Any]]

    def injected(self, event_name: str = "UserPromptSubmit") -> str | None:
        """The injected context, after checking stdout is exactly one envelope or nothing."""
        if not self.stdout:
            return None
        assert self.stdout.endswith(b"\n") and self.stdout.count(b"\n") == 1
        document = json.loads(self.stdout)
        assert list(document) == ["hookSpecificOutput"]
        output = document["hookSpecificOutput"]
        assert list(output) == ["hookEventName", "additionalContext"]
        assert output["hookEventName"] == event_name
        return str(output["additionalContext"])

    def outcome(self, event: str = "context_prepare") -> str | None:
        matching = [line for line in self.lines if line["event"] == event]
        assert len(matching) <= 1, self.lines
        return matching[0]["outcome"] if matching else None


def event(prompt: str = "how do we run the contract tests?", **fields: Any) -> dict[str, Any]:
    document: dict[str, Any] = {
        "session_id": "sess-1",
        "turn_id": "turn-1",
        "cwd": fields.pop("cwd", "/"),
        "hook_event_name": "UserPromptSubmit",
        "prompt": prompt,
    }
    document.update(fields)
    return document


def run_in_process(
    payload: bytes | dict[str, Any],
    env: dict[str, str],
    *,
    host: str = "codex",
    hook: str = "user-prompt-submit",
) -> HookRun:
    """``run_hook`` with in-memory streams: same code path as the process, minus start-up."""
    stdin = io.BytesIO(payload if isinstance(payload, bytes) else json.dumps(payload).encode())
    stdout = io.BytesIO()
    stderr = io.StringIO()
    code = run_hook(StandardHostAdapter(host), hook, stdin, stdout, stderr, env)
    return HookRun(code, stdout.getvalue(), stderr.getvalue(), parse_lines(stderr.getvalue()))


def hook_env(stub_url: str, data_dir: Path, **extra: str) -> dict[str, str]:
    env = {
        "POWERCONTEXT_URL": stub_url,
        "POWERCONTEXT_TOKEN": TOKEN,
        "POWERCONTEXT_SCOPE_ID": "git:example.com/acme/SENTINEL-scope",
        "PLUGIN_DATA": str(data_dir),
    }
    env.update(extra)
    return env


def finishes(function: Callable[[], Any], unblock: list[Path]) -> tuple[bool, Any]:
    """Run ``function`` in a thread; whether it finished within a generous bound, its result.

    A call stuck opening a FIFO is freed afterwards by opening each of ``unblock`` for writing,
    so a failing test does not leave a thread blocked forever.
    """
    outcome: list[Any] = []
    thread = threading.Thread(target=lambda: outcome.append(_capture(function)), daemon=True)
    thread.start()
    thread.join(30)
    finished = not thread.is_alive()
    for fifo in unblock:
        with contextlib.suppress(OSError):
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
    thread.join(5)
    return finished, outcome[0] if outcome else None


def _capture(function: Callable[[], Any]) -> Any:
    try:
        return function()
    except Exception as exc:  # the caller asserts on it
        return exc
