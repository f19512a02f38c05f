"""The hooks' default transport on POSIX: the runtime's unix socket, with the agent token.

Issue 15 (item 5): over TCP, whoever holds the port gets the token and the prompt. By default a
hook now talks to ``<runtime data dir>/powercontext.sock`` — only if it is a socket owned by this
user — and sends ``<runtime data dir>/auth/agent-token`` (item 2), never the operator's
``auth/token``. There is no fall-back to TCP: a missing or untrusted socket is "unavailable".
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from powercontext_hook_kit import settings as settings_module
from tests.hook_kit.conftest import event, parse_lines, run_in_process
from tests.hook_kit.stub import (
    PREPARE,
    SUN_PATH_MAX,
    Reply,
    StubRuntime,
    prepared_body,
    running_stub,
)

pytestmark = pytest.mark.skipif(os.name != "posix", reason="the unix socket default is POSIX-only")

AGENT = "pc_agent_SENTINEL"
OPERATOR = "pc_operator_SENTINEL"
PACK = "PowerContext prepared untrusted historical context.\nover the socket"


def default_env(home: Path, tmp_path: Path, **extra: str) -> dict[str, str]:
    """A host's environment with nothing configured but the runtime's data dir."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("POWERCONTEXT_", "CLAUDE_PLUGIN_", "PLUGIN_", "XDG_"))
    }
    env.update(
        POWERCONTEXT_HOME=str(home),
        PLUGIN_DATA=str(tmp_path / "plugin-data"),
        XDG_CONFIG_HOME=str(tmp_path / "config"),
        XDG_STATE_HOME=str(tmp_path / "state"),
        XDG_DATA_HOME=str(tmp_path / "data"),
    )
    env.update(extra)
    return env


def write_tokens(home: Path) -> None:
    (home / "auth").mkdir(parents=True, exist_ok=True, mode=0o700)
    (home / "auth" / "agent-token").write_text(AGENT + "\n")
    (home / "auth" / "token").write_text(OPERATOR + "\n")


def hook_process(payload: dict[str, object], env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "powercontext_hook_kit", "hook", "codex", "user-prompt-submit"],
        input=json.dumps(payload).encode(),
        env=env,
        capture_output=True,
        timeout=60,
        check=False,
    )


def project(tmp_path: Path) -> str:
    folder = tmp_path / "project"
    folder.mkdir(exist_ok=True)
    return str(folder)


def test_by_default_the_hook_uses_the_socket_and_the_agent_token(
    unix_stub: StubRuntime, runtime_home: Path, tmp_path: Path
) -> None:
    write_tokens(runtime_home)
    unix_stub.replies[PREPARE] = Reply(200, prepared_body(PACK))
    completed = hook_process(event(cwd=project(tmp_path)), default_env(runtime_home, tmp_path))
    assert completed.returncode == 0
    assert completed.stderr == b""
    assert json.loads(completed.stdout)["hookSpecificOutput"]["additionalContext"] == PACK
    prepare, capture = unix_stub.requests
    assert (prepare.path, capture.path) == (PREPARE, "/v1/sources/content")
    for request in (prepare, capture):
        assert request.headers["Authorization"] == f"Bearer {AGENT}"  # never the operator's
        assert request.headers["Host"] == "localhost"


def test_a_missing_socket_is_unavailable_and_nothing_falls_back_to_tcp(
    stub: StubRuntime,
    runtime_home: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The runtime is down and something holds the TCP port: it hears nothing."""
    write_tokens(runtime_home)
    stub.replies[PREPARE] = Reply(200, prepared_body("ATTACKER pack"))
    monkeypatch.setattr(settings_module, "DEFAULT_TCP_URL", stub.url)  # "the port", if used
    env = default_env(runtime_home, tmp_path)
    run = run_in_process(event(cwd=project(tmp_path)), env)
    assert (run.code, run.stdout) == (0, b"")
    assert run.outcome() == "server_unavailable"
    assert stub.requests == []
    # The same through a real process (there the TCP default is the real 7411: nothing is
    # asserted about it, only that the hook fails open).
    completed = hook_process(event(cwd=project(tmp_path)), env)
    assert (completed.returncode, completed.stdout) == (0, b"")
    (line,) = parse_lines(completed.stderr.decode())
    assert (line["event"], line["outcome"]) == ("context_prepare", "server_unavailable")
    assert AGENT.encode() not in completed.stderr and OPERATOR.encode() not in completed.stderr


def test_a_planted_symlink_at_the_socket_path_gets_nothing(
    runtime_home: Path, tmp_path: Path
) -> None:
    """Someone else's listener, reached through a symlink where the runtime's socket belongs:
    refused before connecting (``server_unavailable``), not a byte of token or prompt sent."""
    write_tokens(runtime_home)
    elsewhere = tmp_path / "attacker"
    elsewhere.mkdir()
    with running_stub(str(elsewhere / "listener.sock")) as attacker:
        attacker.replies[PREPARE] = Reply(200, prepared_body("ATTACKER pack"))
        (runtime_home / "powercontext.sock").symlink_to(elsewhere / "listener.sock")
        run = run_in_process(event(cwd=project(tmp_path)), default_env(runtime_home, tmp_path))
        assert (run.code, run.stdout) == (0, b"")
        assert run.outcome() == "server_unavailable"
        assert attacker.requests == []


def test_an_explicit_tcp_url_still_uses_tcp(
    stub: StubRuntime, unix_stub: StubRuntime, runtime_home: Path, tmp_path: Path
) -> None:
    write_tokens(runtime_home)
    stub.replies[PREPARE] = Reply(200, prepared_body(PACK))
    env = default_env(runtime_home, tmp_path, POWERCONTEXT_URL=stub.url)
    run = run_in_process(event(cwd=project(tmp_path)), env)
    assert run.injected() == PACK
    assert unix_stub.requests == []
    assert stub.requests[0].headers["Authorization"] == f"Bearer {AGENT}"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="long paths: Linux only")
def test_a_data_dir_too_deep_for_sun_path_still_works(tmp_path: Path) -> None:
    home = tmp_path / ("h" * 70) / ("o" * 40) / "pc-home"
    home.mkdir(parents=True)
    write_tokens(home)
    socket_path = home / "powercontext.sock"
    assert len(os.fsencode(str(socket_path))) > SUN_PATH_MAX
    with running_stub(str(socket_path)) as deep:
        deep.replies[PREPARE] = Reply(200, prepared_body(PACK))
        completed = hook_process(event(cwd=project(tmp_path)), default_env(home, tmp_path))
        assert completed.returncode == 0, completed.stderr
        assert json.loads(completed.stdout)["hookSpecificOutput"]["additionalContext"] == PACK
        assert deep.requests[0].headers["Authorization"] == f"Bearer {AGENT}"
