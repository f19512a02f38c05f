"""Fixtures for the Claude Code plugin: a throw-away user (``$HOME/.claude``) and a real runtime.

``powercontext-claude-code`` always runs as a subprocess with an environment built from scratch
(the real-host harness's offline Claude environment), so the developer's own Claude settings,
PowerContext token or data dirs can never leak in or be touched. The real ``claude`` comes
from the real-host harness and is put on ``PATH`` only for tests that ask for it.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.hosts.conftest import host_clis, proxy  # noqa: F401  (shared fixtures)
from tests.support.daemon import Daemon, start_daemon
from tests.support.hosts import BlackholeProxy, HostCLIs, claude_env

MODULE = "powercontext_claude_code"
HOOK_SUFFIX = ["-m", MODULE, "hook", "user-prompt-submit"]
PLUGIN_ID = "powercontext@powercontext-local"


@dataclass
class ClaudeSandbox:
    """One fake user of this machine: ``$HOME`` (with ``.claude``) and a git repository."""

    home: Path
    repo: Path
    bin_dir: Path
    base_env: dict[str, str]
    extra_env: dict[str, str] = field(default_factory=dict)

    @property
    def settings_file(self) -> Path:
        return self.home / ".claude" / "settings.json"

    @property
    def marketplace(self) -> Path:
        return self.home / ".local/share/powercontext/hosts/claude-code/marketplace"

    def env(self, **overrides: str) -> dict[str, str]:
        env = {**self.base_env, **self.extra_env, **overrides}
        return {key: value for key, value in env.items() if value != ""}

    def with_claude(self, clis: HostCLIs) -> None:
        """Put the real ``claude`` on ``PATH`` under the name users have."""
        link = self.bin_dir / "claude"
        if not link.exists():
            link.symlink_to(clis.claude)

    def run(
        self, *args: str, cwd: Path | None = None, stdin: str | None = None, **env: str
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", MODULE, *args],
            cwd=cwd or self.repo,
            env=self.env(**env),
            input=stdin,
            capture_output=True,
            text=True,
            timeout=120,
        )

    def run_json(self, *args: str, expect: int = 0, **env: str) -> dict[str, Any]:
        done = self.run(*args, "--json", **env)
        assert done.returncode == expect, (done.returncode, done.stdout, done.stderr)
        return json.loads(done.stdout)

    def claude(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["claude", *args],
            cwd=self.repo,
            env=self.env(),
            capture_output=True,
            text=True,
            timeout=120,
        )

    def settings(self) -> dict[str, Any]:
        return json.loads(self.settings_file.read_text("utf-8"))

    def backups(self, path: Path) -> list[Path]:
        return sorted(path.parent.glob(f"{path.name}.powercontext-backup-*"))


HOOK_NAMES = {"UserPromptSubmit": "user-prompt-submit", "SessionStart": "session-start"}


def our_handlers(document: dict[str, Any], event: str = "UserPromptSubmit") -> list[dict]:
    """Our handlers registered under ``event`` (each event runs its own hook verb)."""
    suffix = [*HOOK_SUFFIX[:-1], HOOK_NAMES[event]]
    return [
        handler
        for group in document.get("hooks", {}).get(event, [])
        for handler in group.get("hooks", [])
        if shlex.split(handler.get("command", ""))[-4:] == suffix
    ]


def init_repo(path: Path, remote: str | None) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(path)}
    subprocess.run(["git", "init", "-q", str(path)], check=True, env=env)
    if remote:
        subprocess.run(
            ["git", "-C", str(path), "remote", "add", "origin", remote], check=True, env=env
        )
    return path


@pytest.fixture
def sandbox(tmp_path: Path, proxy: BlackholeProxy) -> ClaudeSandbox:  # noqa: F811
    """A Claude Code user without a running runtime, offline (no model is ever called)."""
    home = tmp_path / "home"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    env = claude_env(home, "http://127.0.0.1:9", proxy.url)
    env["PATH"] = str(bin_dir)  # the Claude Code binary is native: it needs nothing else
    repo = init_repo(tmp_path / "repo", f"https://github.com/acme/claude-{uuid.uuid4().hex[:8]}")
    return ClaudeSandbox(home, repo, bin_dir, env)


@pytest.fixture(scope="package")
def runtime_daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    """A real ``powercontext serve`` shared by this package's tests (each uses its own scope)."""
    with start_daemon(tmp_path_factory.mktemp("claude-runtime") / "home") as running:
        yield running


@pytest.fixture
def live(sandbox: ClaudeSandbox, runtime_daemon: Daemon) -> ClaudeSandbox:
    """The sandbox pointed at the real runtime (URL + its token file, as a user would)."""
    sandbox.extra_env.update(
        POWERCONTEXT_URL=runtime_daemon.url, POWERCONTEXT_HOME=str(runtime_daemon.home)
    )
    return sandbox
