"""A throw-away user of one PowerContext plugin, for every test that installs or runs a plugin.

A :class:`PluginSandbox` is one fake user of this machine: ``$HOME`` with the host's config
folder, a git repository with an origin remote, and an environment built from scratch (the
real-host harness's offline environment, ``tests/support/hosts.py``), so the developer's own
host config, PowerContext token or data dirs can never leak in or be touched. The real host CLI
is put on ``PATH`` only for tests that ask for it (:meth:`PluginSandbox.with_host_cli`).

* ``tests/codex`` and ``tests/claude_code`` run the plugin's command line in it
  (:meth:`PluginSandbox.run`). Their conftests import the fixtures at the end of this module
  (``sandbox``, ``live``, ``runtime_daemon``) and say which host they test (``plugin_host``).
* The real-host end-to-end tests (``tests/e2e/test_real_hosts_*``) use a :class:`RealHostUser`:
  a sandbox with the real host CLI and a runtime, where the plugin is installed by its own
  ``install`` and each turn runs the real host against a model stub.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import stat
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Self

import pytest

from tests.support.daemon import Daemon, start_daemon
from tests.support.hosts import (
    BlackholeProxy,
    CompletedRun,
    HostCLIs,
    RecordedRequest,
    claude_env,
    codex_env,
    prepare_codex_home,
    run_host_turn,
)

#: Hook verb of each host event (``<python> -I -m <module> hook <verb>``).
HOOK_VERBS = {"UserPromptSubmit": "user-prompt-submit", "SessionStart": "session-start"}
#: A model URL nothing listens on: the plugin's own command line never talks to a model.
_NO_MODEL = "http://127.0.0.1:9"


@dataclass
class PluginSandbox:
    """One fake user of this machine with one host's plugin; subclasses add the host's files."""

    host: ClassVar[str]  # integration name: "codex" / "claude-code"
    module: ClassVar[str]  # the plugin's module: ``python -m <module> …``
    cli_name: ClassVar[str]  # the host CLI, as users have it on PATH
    needs_node: ClassVar[bool] = False  # the host CLI is a node launcher (Codex)
    user_hooks_name: ClassVar[str]  # the user hooks file in the config folder
    #: The origin of the test repository; ``{id}`` makes it one no other test uses.
    remote_pattern: ClassVar[str]

    home: Path
    repo: Path
    bin_dir: Path  # first on PATH: where the host CLI is linked
    base_env: dict[str, str]
    extra_env: dict[str, str] = field(default_factory=dict)

    @classmethod
    def create(cls, root: Path, proxy_url: str, *, remote: str) -> Self:
        """A user under ``root`` without a runtime, offline: every proxy variable points at
        ``proxy_url`` (a :class:`BlackholeProxy`), and no model is ever called."""
        home = root / "home"
        bin_dir = root / "bin"
        bin_dir.mkdir()
        repo = init_repo(root / "repo", remote)
        env = cls.offline_env(home, proxy_url)
        env["PATH"] = _private_path(bin_dir, node=cls.needs_node)
        return cls(home, repo, bin_dir, env)

    @classmethod
    def offline_env(cls, home: Path, proxy_url: str) -> dict[str, str]:
        """Write the host's config into ``home``; return the host's offline environment."""
        raise NotImplementedError

    @property
    def config_dir(self) -> Path:
        """The host's user config folder (``~/.codex``, ``~/.claude``)."""
        return self.home / f".{self.cli_name}"

    @property
    def marketplace(self) -> Path:
        """The local marketplace ``install`` renders (the user data dir, under this ``$HOME``)."""
        return self.home / ".local/share/powercontext/hosts" / self.host / "marketplace"

    @property
    def plugin_data_dir(self) -> Path:
        """The data dir the host gives the installed plugin's hooks (their diagnostics log)."""
        return self.config_dir / "plugins" / "data" / "powercontext-powercontext-local"

    def env(self, **overrides: str) -> dict[str, str]:
        """The user's shell environment; an override set to ``""`` removes that variable."""
        env = {**self.base_env, **self.extra_env, **overrides}
        return {key: value for key, value in env.items() if value != ""}

    def with_host_cli(self, clis: HostCLIs) -> None:
        """Put the real host CLI (and nothing else of the npm prefix) on ``PATH`` under the name
        users have."""
        link = self.bin_dir / self.cli_name
        if not link.exists():
            link.symlink_to(clis.codex if self.cli_name == "codex" else clis.claude)

    def use_runtime(self, daemon: Daemon) -> None:
        """Point the user's shell at a real runtime (URL + its token file, as a user would)."""
        self.extra_env.update(POWERCONTEXT_URL=daemon.url, POWERCONTEXT_HOME=str(daemon.home))

    def run(
        self,
        *args: str,
        cwd: Path | None = None,
        stdin: str | None = None,
        timeout: float = 120,
        **env: str,
    ) -> subprocess.CompletedProcess[str]:
        """``python -m <plugin module> <args>`` as this user, in the repository by default."""
        return subprocess.run(
            [sys.executable, "-m", self.module, *args],
            cwd=cwd or self.repo,
            env=self.env(**env),
            input=stdin,
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def run_json(
        self, *args: str, expect: int = 0, timeout: float = 120, **env: str
    ) -> dict[str, Any]:
        """:meth:`run` with ``--json``: asserts the exit code, returns the report."""
        done = self.run(*args, "--json", timeout=timeout, **env)
        assert done.returncode == expect, (done.returncode, done.stdout, done.stderr)
        return json.loads(done.stdout)

    def doctor(self, *args: str, **env: str) -> tuple[int, dict[str, Any]]:
        """``doctor --json``: its exit code (0 healthy, 1 a failed check) and its report."""
        done = self.run("doctor", "--json", *args, **env)
        assert done.returncode in (0, 1), done.stderr
        return done.returncode, json.loads(done.stdout)

    def backups(self, path: Path) -> list[Path]:
        """The backups ``install`` kept of ``path`` (at most one: ``<file>.powercontext-backup``)
        — and any timestamped ones an older version piled up."""
        return sorted(path.parent.glob(f"{path.name}{BACKUP_SUFFIX}*"))

    def snapshot(self) -> TreeSnapshot:
        """The whole ``$HOME`` of this user, to compare before ``install`` and after
        ``uninstall`` (see :func:`tree_snapshot`)."""
        return tree_snapshot(self.home)

    def ledger(self) -> Path:
        """Where ``install`` records what it found (only while installed)."""
        return self.marketplace.parent / "install-ledger.json"

    @property
    def user_hooks_file(self) -> Path:
        """The host's user-level hooks document (where ``install --no-host-cli`` merges)."""
        return self.config_dir / self.user_hooks_name

    def user_hooks(self) -> dict[str, Any]:
        return json.loads(self.user_hooks_file.read_text("utf-8"))


@dataclass
class ClaudeSandbox(PluginSandbox):
    """A Claude Code user (``$HOME/.claude``)."""

    host: ClassVar[str] = "claude-code"
    module: ClassVar[str] = "powercontext_claude_code"
    cli_name: ClassVar[str] = "claude"
    user_hooks_name: ClassVar[str] = "settings.json"
    remote_pattern: ClassVar[str] = "https://github.com/acme/claude-{id}"

    @classmethod
    def offline_env(cls, home: Path, proxy_url: str) -> dict[str, str]:
        return claude_env(home, _NO_MODEL, proxy_url)

    @property
    def settings_file(self) -> Path:
        return self.user_hooks_file

    def settings(self) -> dict[str, Any]:
        return self.user_hooks()

    def claude(self, *args: str) -> subprocess.CompletedProcess[str]:
        """The real ``claude`` (see :meth:`with_host_cli`) as this user, in the repository."""
        return subprocess.run(
            ["claude", *args],
            cwd=self.repo,
            env=self.env(),
            capture_output=True,
            text=True,
            timeout=120,
        )


@dataclass
class CodexSandbox(PluginSandbox):
    """A Codex user (``$HOME/.codex`` as ``$CODEX_HOME``, plugins enabled)."""

    host: ClassVar[str] = "codex"
    module: ClassVar[str] = "powercontext_codex"
    cli_name: ClassVar[str] = "codex"
    needs_node: ClassVar[bool] = True
    user_hooks_name: ClassVar[str] = "hooks.json"
    remote_pattern: ClassVar[str] = "https://github.com/acme/codex-{id}.git"

    @classmethod
    def offline_env(cls, home: Path, proxy_url: str) -> dict[str, str]:
        """``config.toml`` with the ``plugins`` feature on (Codex runs plugin hooks only then)."""
        prepare_codex_home(home / ".codex", _NO_MODEL, plugins=True)
        return codex_env(home / ".codex", proxy_url, home=home)

    @property
    def codex_home(self) -> Path:
        return self.config_dir

    @property
    def hooks_file(self) -> Path:
        return self.user_hooks_file

    @property
    def config_file(self) -> Path:
        return self.codex_home / "config.toml"

    def hooks(self) -> dict[str, Any]:
        return self.user_hooks()


def init_repo(path: Path, remote: str | None) -> Path:
    """A git repository at ``path``, with ``remote`` as ``origin`` (the scope comes from it)."""
    path.mkdir(parents=True, exist_ok=True)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(path)}
    subprocess.run(["git", "init", "-q", str(path)], check=True, env=env)
    if remote:
        subprocess.run(
            ["git", "-C", str(path), "remote", "add", "origin", remote], check=True, env=env
        )
    return path


def _private_path(bin_dir: Path, *, node: bool) -> str:
    """``PATH``: our private bin dir (where :meth:`PluginSandbox.with_host_cli` links the host
    CLI), plus a folder with only ``node`` when the host CLI needs it — never a ``codex`` or
    ``claude`` the developer may have installed."""
    parts = [str(bin_dir)]
    executable = shutil.which("node") if node else None
    if executable:
        node_bin = bin_dir.parent / "node-bin"
        node_bin.mkdir(exist_ok=True)
        if not (node_bin / "node").exists():
            (node_bin / "node").symlink_to(executable)
        parts.append(str(node_bin))
    return os.pathsep.join(parts)


#: ``relative path → (kind, permission bits, content)``; content is a file's bytes or a
#: symlink's target, ``None`` for a folder.
TreeSnapshot = dict[str, tuple[str, int, bytes | str | None]]
#: The one backup ``install`` keeps of a file it changes, next to it.
BACKUP_SUFFIX = ".powercontext-backup"
#: Left out of a home snapshot: the sandbox's ``TMPDIR`` (``offline_env`` puts it in the home so
#: the hosts' scratch files stay in the test; on a real machine it is ``/tmp``, not the home).
SNAPSHOT_SKIPPED = (".tmp",)


def tree_snapshot(root: Path, *, skip: Sequence[str] = SNAPSHOT_SKIPPED) -> TreeSnapshot:
    """Every path under ``root`` with its kind, permission bits and content: "exactly as
    before" means equal snapshots — same paths, same bytes, same modes (mtimes excepted).
    ``skip``: names directly under ``root`` that are left out."""
    snapshot: TreeSnapshot = {}
    for folder, dirs, names in os.walk(root):
        if Path(folder) == root:
            dirs[:] = [name for name in dirs if name not in skip]
            names = [name for name in names if name not in skip]
        for name in sorted([*dirs, *names]):
            path = Path(folder) / name
            info = path.lstat()
            relative = path.relative_to(root).as_posix()
            mode = stat.S_IMODE(info.st_mode)
            if stat.S_ISLNK(info.st_mode):
                snapshot[relative] = ("link", mode, os.readlink(path))
            elif stat.S_ISDIR(info.st_mode):
                snapshot[relative] = ("dir", mode, None)
            else:
                snapshot[relative] = ("file", mode, path.read_bytes())
    return snapshot


def snapshot_diff(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[str]:
    """What differs between two :func:`tree_snapshot` results, one readable line each."""
    lines = [f"appeared: {path}" for path in sorted(set(after) - set(before))]
    lines += [f"vanished: {path}" for path in sorted(set(before) - set(after))]
    for path in sorted(set(before) & set(after)):
        (kind, mode, content), (kind2, mode2, content2) = before[path], after[path]
        if kind != kind2:
            lines.append(f"{path}: {kind} became {kind2}")
        if mode != mode2:
            lines.append(f"{path}: mode {mode:04o} became {mode2:04o}")
        if content != content2:
            shown = content2[:300] if isinstance(content2, bytes) else content2
            lines.append(f"{path}: content changed, now {shown!r}")
    return lines


def assert_install_cycles_leave_no_trace(
    sandbox: PluginSandbox,
    *args: str,
    installed: Callable[[dict[str, Any]], None],
    cycles: int = 3,
) -> None:
    """``install`` (twice: the second changes nothing) → ``uninstall``, ``cycles`` times; after
    each uninstall the user's home must be exactly what it was before the first install, and
    while installed there is at most one backup per file. ``installed(report)`` checks that
    the first install of a cycle really installed (so a no-op cannot pass)."""
    before = sandbox.snapshot()
    for cycle in range(1, cycles + 1):
        report = sandbox.run_json("install", *args, timeout=180)
        installed(report)
        again = sandbox.run_json("install", *args, timeout=180)
        assert again["changed"] is False, (cycle, again)
        backups = [path for path in sandbox.snapshot() if BACKUP_SUFFIX in path]
        assert all(path.endswith(BACKUP_SUFFIX) for path in backups), backups  # one per file
        sandbox.run_json("uninstall", *args, timeout=180)
        diff = snapshot_diff(before, sandbox.snapshot())
        assert not diff, f"cycle {cycle} left traces:\n" + "\n".join(diff)


#: The sandbox class of each host.
SANDBOXES: dict[str, type[PluginSandbox]] = {"codex": CodexSandbox, "claude-code": ClaudeSandbox}
#: Both plugin hosts, by integration name (the ``host`` of every plugin and of the runtime).
HOSTS = tuple(SANDBOXES)


def plugin_handlers(
    module: str, document: dict[str, Any], event: str = "UserPromptSubmit"
) -> list[dict[str, Any]]:
    """The handlers of ``module``'s plugin in a hooks document under ``event`` (each event runs
    its own hook verb; ``install --bootstrap`` adds ``--bootstrap`` after it)."""
    suffix = ["-m", module, "hook", HOOK_VERBS[event]]

    def ours(command: str) -> bool:
        tokens = shlex.split(command)
        if tokens[-1:] == ["--bootstrap"]:
            tokens = tokens[:-1]
        return tokens[-4:] == suffix

    return [
        handler
        for group in document.get("hooks", {}).get(event, [])
        for handler in group.get("hooks", [])
        if ours(handler.get("command", ""))
    ]


# --------------------------------------------------------------------------------------------
# The installed hook command, run as a host runs it
# --------------------------------------------------------------------------------------------


def write_json(path: Path, document: object) -> bytes:
    """Write ``document`` as a user's file would be (compact: unlike how ``install`` writes
    JSON, so a rewrite shows); returns the bytes, to compare backups with."""
    path.parent.mkdir(parents=True, exist_ok=True)
    raw = json.dumps(document).encode()
    path.write_bytes(raw)
    return raw


def assert_installed_hook_injects_the_pack(
    sandbox: PluginSandbox,
    daemon: Daemon,
    event: dict[str, Any],
    *,
    scope_variable: str,
    transport: str = "tcp",
) -> None:
    """Install into the user's hooks file, then run the UserPromptSubmit command found there
    the way the hosts do — ``/bin/sh -c`` from ``/`` with an empty ``PATH`` (the command is
    absolute) and ``event`` on stdin — and check it prints exactly the pack the runtime
    prepares for ``event["prompt"]`` in the scope set through ``scope_variable``.

    ``transport="unix"``: no ``POWERCONTEXT_URL`` — the hook's default, the daemon's socket in
    ``POWERCONTEXT_HOME``, with the agent token found there (the daemon's TCP port is a random
    one, so only the socket can have answered)."""
    scope = f"{sandbox.cli_name}-test:hook-command"
    daemon.client().post(
        "/v1/memory/remember",
        json={"scope_id": scope, "kind": "fact", "text": "Deploys go out on Tuesdays only"},
    ).raise_for_status()
    sandbox.run_json("install", "--no-host-cli")
    (handler,) = plugin_handlers(sandbox.module, sandbox.user_hooks())
    body = {"scope_id": scope, "query": event["prompt"], "max_bytes": 8000}
    expected = daemon.client().post("/v1/context/prepare", json=body).json()
    assert expected["status"] == "ready"
    done = subprocess.run(
        ["/bin/sh", "-c", handler["command"]],
        input=json.dumps(event),
        capture_output=True,
        text=True,
        cwd="/",
        env=sandbox.env(
            PATH="/nonexistent",
            **{scope_variable: scope},
            **({"POWERCONTEXT_URL": ""} if transport == "unix" else {}),
        ),
        timeout=30,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {
        "hookSpecificOutput": {
            "hookEventName": "UserPromptSubmit",
            "additionalContext": expected["content"],
        }
    }


# --------------------------------------------------------------------------------------------
# The real host, with the plugin installed by its own `install`
# --------------------------------------------------------------------------------------------


@dataclass
class RealHostUser:
    """A sandbox user with the real host CLI on ``PATH`` and a runtime in the shell, whose
    repository's ``remote.origin.url`` gives ``scope`` (the realistic path)."""

    sandbox: PluginSandbox
    scope: str
    clis: HostCLIs
    proxy: BlackholeProxy

    @property
    def host(self) -> str:
        return self.sandbox.host

    def install(self, *options: str) -> dict[str, Any]:
        """``install`` as the user runs it; with the host CLI on PATH it must pick the plugin."""
        report = self.sandbox.run_json("install", *options, timeout=180)
        assert report["mode"] == "plugin", report
        return report

    def turn(self, prompt: str, **extra_env: str) -> tuple[CompletedRun, RecordedRequest]:
        """One prompt in a fresh host session (see :func:`run_host_turn`). The runtime
        variables, and ``extra_env``, are set the way a user would: in the shell."""
        sandbox = self.sandbox
        return run_host_turn(
            self.host,
            prompt,
            home=sandbox.home,
            cwd=sandbox.repo,
            clis=self.clis,
            proxy_url=self.proxy.url,
            extra_env={**sandbox.extra_env, **extra_env},
        )

    def diagnostics(self) -> list[dict[str, Any]]:
        """The plugin hooks' diagnostics log, one JSON object a line."""
        log = self.sandbox.plugin_data_dir / "diagnostics.log"
        return [json.loads(line) for line in log.read_text("utf-8").splitlines()]


#: What the ``plugin_user`` fixture (``tests/e2e/conftest.py``) gives: ``(host, runtime) → user``.
PluginUserFactory = Callable[[str, Daemon], RealHostUser]


def real_host_user(
    host: str, runtime: Daemon, *, root: Path, clis: HostCLIs, proxy: BlackholeProxy
) -> RealHostUser:
    """A :class:`RealHostUser` of ``host`` under ``root``, pointed at ``runtime``; its project's
    origin is an ssh remote no other test uses."""
    label = f"{host}-e2e-{uuid.uuid4().hex[:10]}"
    sandbox = SANDBOXES[host].create(root, proxy.url, remote=f"git@github.com:acme/{label}.git")
    sandbox.with_host_cli(clis)
    sandbox.use_runtime(runtime)
    return RealHostUser(sandbox, f"git:github.com/acme/{label}", clis, proxy)


# --------------------------------------------------------------------------------------------
# Fixtures of the plugin packages (each conftest imports them and defines ``plugin_host``)
# --------------------------------------------------------------------------------------------


@pytest.fixture
def sandbox(plugin_host: str, tmp_path: Path, proxy: BlackholeProxy) -> PluginSandbox:
    """A user of ``plugin_host`` without a running runtime, offline (no model is ever called)."""
    kind = SANDBOXES[plugin_host]
    remote = kind.remote_pattern.format(id=uuid.uuid4().hex[:8])
    return kind.create(tmp_path, proxy.url, remote=remote)


@pytest.fixture(scope="package")
def runtime_daemon(plugin_host: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    """A real ``powercontext serve`` shared by the package's tests (each uses its own scope)."""
    with start_daemon(tmp_path_factory.mktemp(f"{plugin_host}-runtime") / "home") as running:
        yield running


@pytest.fixture
def live(sandbox: PluginSandbox, runtime_daemon: Daemon) -> PluginSandbox:
    """The sandbox pointed at the real runtime (URL + its token file, as a user would)."""
    sandbox.use_runtime(runtime_daemon)
    return sandbox


def checks_by_name(report: dict[str, Any]) -> dict[str, dict[str, str]]:
    """A doctor report's checks, keyed by name."""
    return {check["name"]: check for check in report["checks"]}
