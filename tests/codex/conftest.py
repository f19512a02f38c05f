"""Fixtures for the Codex plugin: a throw-away user (HOME, CODEX_HOME) and a real runtime.

``powercontext-codex`` always runs as a subprocess with an environment built from scratch (the
real-host harness's offline environment), so the developer's own Codex config, PowerContext
token or data dirs can never leak in or be touched. The real Codex CLI comes from the
real-host harness and is put on ``PATH`` only for tests that ask for it.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
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
from tests.support.hosts import BlackholeProxy, HostCLIs, codex_env, prepare_codex_home

MODULE = "powercontext_codex"
HOOK_SUFFIX = ["-m", MODULE, "hook", "user-prompt-submit"]


@dataclass
class CodexSandbox:
    """One fake user of this machine: ``$HOME``, ``$CODEX_HOME`` and a git repository."""

    root: Path
    codex_home: Path
    repo: Path
    bin_dir: Path
    base_env: dict[str, str]
    extra_env: dict[str, str] = field(default_factory=dict)

    @property
    def home(self) -> Path:
        return self.codex_home.parent

    @property
    def hooks_file(self) -> Path:
        return self.codex_home / "hooks.json"

    @property
    def config_file(self) -> Path:
        return self.codex_home / "config.toml"

    @property
    def marketplace(self) -> Path:
        return self.home / ".local/share/powercontext/hosts/codex/marketplace"

    def env(self, **overrides: str) -> dict[str, str]:
        env = {**self.base_env, **self.extra_env, **overrides}
        return {key: value for key, value in env.items() if value != ""}

    def with_codex(self, clis: HostCLIs) -> None:
        """Put the real ``codex`` (and nothing else of the npm prefix) on ``PATH``."""
        link = self.bin_dir / "codex"
        if not link.exists():
            link.symlink_to(clis.codex)

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

    def hooks(self) -> dict[str, Any]:
        return json.loads(self.hooks_file.read_text("utf-8"))

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


def _path_without_hosts(bin_dir: Path) -> str:
    """Our private bin dir, plus only what the host CLIs themselves need (``node`` for the
    Codex launcher) — never a ``codex`` or ``claude`` the developer may have installed."""
    parts = [str(bin_dir)]
    node = shutil.which("node")
    if node:
        node_bin = bin_dir.parent / "node-bin"
        node_bin.mkdir(exist_ok=True)
        if not (node_bin / "node").exists():
            (node_bin / "node").symlink_to(node)
        parts.append(str(node_bin))
    return os.pathsep.join(parts)


@pytest.fixture
def sandbox(tmp_path: Path, proxy: BlackholeProxy) -> CodexSandbox:  # noqa: F811
    """A Codex user without a running runtime; ``config.toml`` enables plugins, offline."""
    codex_home = tmp_path / "home" / ".codex"
    prepare_codex_home(codex_home, "http://127.0.0.1:9", plugins=True)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    env = codex_env(codex_home, proxy.url, home=tmp_path / "home")
    env["PATH"] = _path_without_hosts(bin_dir)
    repo = init_repo(tmp_path / "repo", f"https://github.com/acme/codex-{uuid.uuid4().hex[:8]}.git")
    return CodexSandbox(tmp_path, codex_home, repo, bin_dir, env)


@pytest.fixture(scope="package")
def runtime_daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    """A real ``powercontext serve`` shared by this package's tests (each uses its own scope)."""
    with start_daemon(tmp_path_factory.mktemp("codex-runtime") / "home") as running:
        yield running


@pytest.fixture
def live(sandbox: CodexSandbox, runtime_daemon: Daemon) -> CodexSandbox:
    """The sandbox pointed at the real runtime (URL + its token file, as a user would)."""
    sandbox.extra_env.update(
        POWERCONTEXT_URL=runtime_daemon.url, POWERCONTEXT_HOME=str(runtime_daemon.home)
    )
    return sandbox
