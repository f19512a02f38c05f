"""Runs the tasks through the real hosts, arm by arm, and measures each run.

One runtime (a real ``powercontext serve`` in a temp dir) serves the whole evaluation. Per host
and arm there is one throw-away user (``tests/support/plugin_sandbox.py``: its own ``$HOME``,
host config dir and offline environment); the plugin is installed with its real ``install``
in every arm but ``control``. Per task a fresh git repository is created from the task's
fixture and gets its own scope (``POWERCONTEXT_SCOPE_ID`` in the user's shell, every arm alike;
the agent's ``powercontext`` CLI reads it too), seeded with the task's Memory except in the
``empty`` arm. In the ``down`` arm the user's shell points at a runtime that is not running.

What is measured per run, from three independent places (never content):

* the task's check on the repository → ``success``;
* the hook's own diagnostics line (``POWERCONTEXT_DEBUG=1`` makes the hook write its
  ``context_prepare`` outcome even on success) → ``prepare_outcome``, ``pack_prepared``,
  ``injected_bytes`` (``content_bytes``) and ``hook_prepare_ms`` (its ``duration_ms``: the
  hook's prepare call, from request to validated pack);
* the runtime's access log → ``runtime_prepares``, ``runtime_pack_bytes``, ``entry_gets``;
* scripted mode only, the model requests themselves → ``wire``: how many packs reached the
  model, their bytes, whether they were valid and marked untrusted, and whether any injected
  instruction was visible outside a pack frame.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from tests.support.daemon import Daemon, free_port, start_daemon
from tests.support.hosts import (
    CODEX_STUB_KEY_ENV,
    BlackholeProxy,
    CompletedRun,
    HostCLIs,
    run_host,
)
from tests.support.plugin_sandbox import SANDBOXES, PluginSandbox, init_repo

from .conversation import View, view_of
from .scripted import INJECTION, is_task_conversation, scripted_model
from .tasks import ARMS, Task, TaskContext

HOSTS = ("claude-code", "codex")
#: Model modes: the scripted server (CI), or the user's model through the host's own API.
MODES = ("scripted", "anthropic", "openai")
#: Which host a real model drives.
REAL_MODE_HOST = {"anthropic": "claude-code", "openai": "codex"}
PREPARE = "/v1/context/prepare"
GET = "/v1/memory/entries/get"
#: Where the hosts' APIs live when the user sets no base URL (the SDKs' own defaults).
ANTHROPIC_DEFAULT_BASE_URL = "https://api.anthropic.com"
OPENAI_DEFAULT_BASE_URL = "https://api.openai.com/v1"
#: The model provider the sandboxed Codex config defines (tests/support/hosts.py); in
#: ``openai`` mode its ``base_url`` and key are the user's.
CODEX_PROVIDER = "powercontext_stub"


@dataclass
class RunResult:
    host: str
    arm: str
    task: str
    success: bool
    check: str
    turn_completed: bool
    turn_seconds: float
    prepare_outcome: str | None
    pack_prepared: bool
    injected_bytes: int
    hook_prepare_ms: int | None
    runtime_prepares: int
    runtime_pack_bytes: list[int]
    entry_gets: int
    model_requests: int | None = None
    wire: dict[str, Any] | None = None
    error: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class EvalConfig:
    hosts: Sequence[str] = HOSTS
    tasks: Sequence[Task] = ()
    arms: Sequence[str] = ARMS
    mode: str = "scripted"
    turn_timeout: float = 240.0
    work_dir: Path | None = None
    progress: Callable[[str], None] = lambda message: None


# --- the user of each arm --------------------------------------------------------------------


@dataclass
class ArmUser:
    """One throw-away user of ``host`` for one arm (plugin installed unless ``control``)."""

    host: str
    arm: str
    sandbox: PluginSandbox
    root: Path
    #: Variables set in this user's shell for every turn (the runtime, or a dead one).
    shell: dict[str, str] = field(default_factory=dict)

    @property
    def diagnostics_log(self) -> Path:
        return self.sandbox.plugin_data_dir / "diagnostics.log"


def make_user(
    host: str, arm: str, root: Path, daemon: Daemon, clis: HostCLIs, proxy_url: str
) -> ArmUser:
    """A user of ``host`` with the real host CLI (private bin dir) and the ``powercontext`` CLI
    (``~/.local/bin``), pointed at ``daemon``."""
    root.mkdir(parents=True, exist_ok=True)
    remote = f"git@github.com:acme-eval/{host}-{arm}-{uuid.uuid4().hex[:8]}.git"
    sandbox = SANDBOXES[host].create(root, proxy_url, remote=remote)
    sandbox.with_host_cli(clis)
    _install_powercontext_cli(sandbox.home)
    sandbox.use_runtime(daemon)
    user = ArmUser(host, arm, sandbox, root)
    if arm != "control":
        report = sandbox.run_json("install", timeout=300)
        if report.get("mode") != "plugin":
            raise RuntimeError(f"{host} install did not install the plugin: {report}")
    if host == "claude-code":
        allow_shell(sandbox.home)
    if arm == "down":  # the runtime this user's shell names is not running
        dead = root / "no-runtime"
        dead.mkdir()
        user.shell.update(
            POWERCONTEXT_URL=f"http://127.0.0.1:{free_port()}", POWERCONTEXT_HOME=str(dead)
        )
    return user


def allow_shell(home: Path) -> None:
    """Let Claude Code's ``-p`` run the agent's shell commands: ``permissions.allow: ["Bash"]``
    in the user's settings (merged; the same in every arm). ``--allowedTools`` would do too, but
    it takes a variadic list that swallows the prompt after it."""
    path = home / ".claude" / "settings.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    settings = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
    permissions = settings.setdefault("permissions", {})
    allow = permissions.setdefault("allow", [])
    if "Bash" not in allow:
        allow.append("Bash")
    path.write_text(json.dumps(settings, indent=2), encoding="utf-8")


def user_bin(home: Path) -> Path:
    return home / ".local" / "bin"


def _install_powercontext_cli(home: Path) -> None:
    """``powercontext`` in ``~/.local/bin`` (where ``pip install --user`` puts it), with a
    ``~/.profile`` putting that on ``PATH`` as Debian's default one does: Codex runs the
    agent's commands in a login shell, which resets ``PATH``."""
    script = user_bin(home) / "powercontext"
    script.parent.mkdir(parents=True, exist_ok=True)
    script.write_text(
        f'#!/bin/sh\nexec {sys.executable} -m powercontext_runtime.cli.main "$@"\n',
        encoding="utf-8",
    )
    script.chmod(0o755)
    profile = home / ".profile"
    profile.write_text('PATH="$HOME/.local/bin:$PATH"\n', encoding="utf-8")


def make_repo(path: Path, task: Task) -> Path:
    """A git repository at ``path`` holding the task's fixture, committed."""
    init_repo(path, None)
    for relative, content in task.files.items():
        target = path / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content, encoding="utf-8")
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(path)}
    for args in (
        ["add", "-A"],
        [
            "-c",
            "user.name=eval",
            "-c",
            "user.email=eval@example.invalid",
            "commit",
            "-qm",
            "fixture",
        ],
    ):
        subprocess.run(["git", "-C", str(path), *args], check=True, env=env, capture_output=True)
    return path


# --- seeding and the runtime's side ----------------------------------------------------------


def seed(daemon: Daemon, task: Task, scope: str) -> list[dict[str, Any]]:
    written = []
    with daemon.client() as client:
        for entry in task.memory:
            body = {"scope_id": scope, "kind": entry.kind, "text": entry.text}
            response = client.post("/v1/memory/remember", json=body)
            response.raise_for_status()
            written.append(response.json())
    return written


def reviser(daemon: Daemon, scope: str) -> Callable[[dict[str, Any], str], dict[str, Any]]:
    """Revise an entry (a ``remember`` answer) to ``text`` at the current head."""

    def revise(written: dict[str, Any], text: str) -> dict[str, Any]:
        entry_id = written["entry"]["citation"]["entry_id"]
        with daemon.client() as client:
            listed = client.post("/v1/memory/entries/list", json={"scope_id": scope, "limit": 100})
            listed.raise_for_status()
            (current,) = [
                e for e in listed.json()["entries"] if e["citation"]["entry_id"] == entry_id
            ]
            body = {"scope_id": scope, "citation": current["citation"], "text": text}
            response = client.post("/v1/memory/entries/revise", json=body)
            response.raise_for_status()
            return dict(response.json())

    return revise


def _lines_after(path: Path, offset: int) -> list[dict[str, Any]]:
    """JSON lines appended to ``path`` after byte ``offset`` (others skipped)."""
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            raw = f.read()
    except OSError:
        return []
    lines = []
    for line in raw.decode("utf-8", "replace").splitlines():
        try:
            parsed = json.loads(line)
        except ValueError:
            continue
        if isinstance(parsed, dict):
            lines.append(parsed)
    return lines


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def access_lines(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The access-log lines of the runtime, reduced to what the evaluation may read."""
    keep = ("path", "status", "pack_status", "pack_bytes", "duration_ms")
    return [
        {key: line[key] for key in keep if key in line}
        for line in lines
        if line.get("event") == "http_request"
    ]


@contextmanager
def _watch_prepare(
    log: Path, offset: int, callback: Callable[[], None] | None
) -> Iterator[list[str]]:
    """Real-model mode: call ``callback`` once the runtime logged a prepare after ``offset``
    (the turn's pack exists), from a thread, until the turn ends. Yields a list that holds
    what went wrong in ``callback``, if anything (the run reports it as its error)."""
    failures: list[str] = []
    if callback is None:
        yield failures
        return
    stop = threading.Event()

    def watch() -> None:
        while not stop.wait(0.05):
            if any(line.get("path") == PREPARE for line in _lines_after(log, offset)):
                try:
                    callback()
                except Exception as exc:  # reported with the run, never lost in the thread
                    failures.append(f"the during-turn change failed: {type(exc).__name__}")
                return

    thread = threading.Thread(target=watch, name="eval-watch-prepare", daemon=True)
    thread.start()
    try:
        yield failures
    finally:
        stop.set()
        thread.join(timeout=30)  # a change already under way finishes before the check


# --- one run ---------------------------------------------------------------------------------


@dataclass
class Model:
    """Where the hosts' model requests go, and the extra CLI flags each host needs to let the
    agent act in the repository (the same in every arm)."""

    mode: str
    proxy_url: str | None

    def host_args(self, host: str) -> list[str]:
        if host == "claude-code":  # the shell is allowed in the settings (allow_shell)
            model = os.environ.get("POWERCONTEXT_EVAL_CLAUDE_MODEL")
            return ["--model", model] if model and self.mode != "scripted" else []
        args = ["--dangerously-bypass-approvals-and-sandbox"]
        if self.mode != "openai":
            return args
        # The user's endpoint exactly as given: this ``-c`` comes after (and so overrides) the
        # ``<url>/v1`` that ``run_codex`` derives from :meth:`real_url`.
        base = json.dumps(self.openai_base_url())
        args += ["-c", f"model_providers.{CODEX_PROVIDER}.base_url={base}"]
        # The key is for Codex's own requests only: not in the agent's shell (where a model's
        # `env` would put it into the transcript) nor in Codex's shell snapshots on disk.
        args += ["-c", f"shell_environment_policy.exclude={json.dumps([CODEX_STUB_KEY_ENV])}"]
        model = os.environ.get("POWERCONTEXT_EVAL_CODEX_MODEL")
        return [*args, "-c", f"model={json.dumps(model)}"] if model else args

    def env(self, host: str, home: Path) -> dict[str, str]:
        """The user's API key for a real model (never printed), meant for the host's own
        model requests only. Both hosts would hand it on to the agent's shell, where a model's
        ``env`` puts it into its context and the host's transcript: Codex's shell policy
        excludes it (:meth:`host_args`); Claude Code sources ``CLAUDE_ENV_FILE`` before every
        Bash command, and this one unsets it. (``CLAUDE_CODE_SUBPROCESS_ENV_SCRUB`` would
        need bubblewrap.)"""
        if self.mode == "anthropic":
            guard = home / ".powercontext-eval-bash-env.sh"
            guard.write_text("unset ANTHROPIC_API_KEY\n", encoding="utf-8")
            return {
                "ANTHROPIC_API_KEY": os.environ["ANTHROPIC_API_KEY"],
                "CLAUDE_ENV_FILE": str(guard),
            }
        if self.mode == "openai":
            return {CODEX_STUB_KEY_ENV: os.environ["OPENAI_API_KEY"]}
        return {}

    def openai_base_url(self) -> str:
        """``OPENAI_BASE_URL`` as the OpenAI SDKs and Codex read it: the API root, ``/v1``
        included; Codex posts to ``<it>/responses``. A trailing ``/`` is dropped."""
        return (os.environ.get("OPENAI_BASE_URL") or OPENAI_DEFAULT_BASE_URL).rstrip("/")

    def real_url(self) -> str:
        """The model URL handed to the host: ``ANTHROPIC_BASE_URL`` as is (Claude Code posts
        to ``<it>/v1/messages``), or the OpenAI base without its ``/v1`` (``run_codex``
        appends one; :meth:`host_args` then sets the exact base anyway)."""
        if self.mode == "anthropic":
            return os.environ.get("ANTHROPIC_BASE_URL") or ANTHROPIC_DEFAULT_BASE_URL
        return self.openai_base_url().removesuffix("/v1")


def run_task(
    task: Task,
    user: ArmUser,
    daemon: Daemon,
    clis: HostCLIs,
    model: Model,
    timeout: float,
) -> RunResult:
    host, arm = user.host, user.arm
    label = f"{host}-{arm}-{task.id}-{uuid.uuid4().hex[:8]}"
    scope = f"git:github.com/acme-eval/{label}"
    repo = make_repo(user.root / "repos" / task.id, task)
    ctx = TaskContext(scope=scope, revise=reviser(daemon, scope))
    if arm != "empty":
        ctx.entries = seed(daemon, task, scope)
    during = (lambda: task.during_turn(ctx)) if task.during_turn is not None else None
    env = {
        **user.sandbox.extra_env,
        **user.shell,
        **task.hook_env,
        **model.env(host, user.sandbox.home),
        "POWERCONTEXT_SCOPE_ID": scope,
        "POWERCONTEXT_DEBUG": "1",
        # The agent runs shell commands: the user's bin dir, then the usual system tools.
        "PATH": os.pathsep.join(
            [str(user_bin(user.sandbox.home)), os.environ.get("PATH", "/usr/bin:/bin")]
        ),
    }
    log_offset = _size(daemon.stderr_path)
    diag_offset = _size(user.diagnostics_log)
    requests: list[dict[str, Any]] | None = None
    failures: list[str] = []
    with ExitStack() as stack:
        if model.mode == "scripted":
            stub = stack.enter_context(
                scripted_model(host, task.prompt, task.step, on_first_request=during)
            )
            url = stub.url
        else:
            url = model.real_url()
            failures = stack.enter_context(_watch_prepare(daemon.stderr_path, log_offset, during))
        run = run_host(
            host,
            task.prompt,
            model_url=url,
            home=user.sandbox.home,
            cwd=repo,
            clis=clis,
            proxy_url=model.proxy_url,
            extra_env=env,
            extra_args=model.host_args(host),
            timeout=timeout,
        )
        if model.mode == "scripted":
            requests = [r.json() or {} for r in stub.model_requests()]
    ctx.access = access_lines(_lines_after(daemon.stderr_path, log_offset))
    check = task.check(repo, ctx)
    result = _result(task, user, run, ctx, check, diag_offset, requests)
    if failures:  # the task's concurrent change did not happen: the run measured nothing
        result.success = False
        result.error = "; ".join([*failures, *([result.error] if result.error else [])])
    return result


def _result(
    task: Task,
    user: ArmUser,
    run: CompletedRun,
    ctx: TaskContext,
    check: Any,
    diag_offset: int,
    requests: list[dict[str, Any]] | None,
) -> RunResult:
    prepares = [
        line
        for line in _lines_after(user.diagnostics_log, diag_offset)
        if line.get("event") == "context_prepare"
    ]
    outcome = prepares[-1].get("outcome") if prepares else None
    injected = int(prepares[-1].get("content_bytes") or 0) if outcome == "injected" else 0
    runtime = [line for line in ctx.access if line.get("path") == PREPARE]
    return RunResult(
        host=user.host,
        arm=user.arm,
        task=task.id,
        success=check.passed and run.returncode == 0,
        check=check.detail,
        turn_completed=run.returncode == 0,
        turn_seconds=round(run.seconds, 3),
        prepare_outcome=outcome,
        pack_prepared=outcome == "injected",
        injected_bytes=injected,
        hook_prepare_ms=prepares[-1].get("duration_ms") if prepares else None,
        runtime_prepares=len(runtime),
        runtime_pack_bytes=[int(line.get("pack_bytes") or 0) for line in runtime],
        entry_gets=sum(1 for line in ctx.access if line.get("path") == GET),
        model_requests=len(requests) if requests is not None else None,
        wire=wire_facts(user.host, task, requests) if requests is not None else None,
        error=None if run.returncode == 0 else _failure(run),
    )


def wire_facts(host: str, task: Task, requests: list[dict[str, Any]]) -> dict[str, Any]:
    """What the model was actually sent: the packs in the task conversation's first request
    (later requests repeat the same conversation), and whether any injected instruction was
    visible outside a pack frame in any request."""
    views: list[View] = [view_of(host, body) for body in requests]
    main = [view for view in views if is_task_conversation(view, task.prompt)]
    first = main[0] if main else View()
    return {
        "packs": len(first.packs),
        "pack_bytes": [pack.content_bytes for pack in first.packs],
        "valid": all(pack.valid for pack in first.packs),
        "marked_untrusted": all(pack.marked_untrusted for pack in first.packs),
        "items": sum(len(pack.items or []) for pack in first.packs),
        "truncated_items": sum(
            1 for pack in first.packs for item in pack.items or [] if item.get("truncated")
        ),
        "injection_outside_frame": any(INJECTION.search(view.outside) for view in views),
        "tool_calls": len(main[-1].calls) if main else 0,
    }


def _failure(run: CompletedRun) -> str:
    if run.timed_out:
        return f"the {run.host} turn timed out after {run.seconds:.0f} s"
    return f"{run.host} exited {run.returncode}"


# --- the whole evaluation --------------------------------------------------------------------


def evaluate(config: EvalConfig, clis: HostCLIs) -> list[RunResult]:
    """Every task × arm × host, sequentially (one agent at a time: latencies stay comparable)."""
    if config.mode not in MODES:
        raise ValueError(f"unknown model mode {config.mode!r} (one of {MODES})")
    hosts = list(config.hosts)
    if config.mode != "scripted":
        hosts = [h for h in hosts if h == REAL_MODE_HOST[config.mode]]
    results: list[RunResult] = []
    with ExitStack() as stack:
        if config.work_dir is not None:
            root = config.work_dir
            root.mkdir(parents=True, exist_ok=True)
        else:
            root = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="pc-task-eval-")))
        proxy_url: str | None = None
        if config.mode == "scripted":  # offline: anything but loopback is refused locally
            proxy_url = stack.enter_context(BlackholeProxy()).url
        daemon = stack.enter_context(start_daemon(root / "runtime-home"))
        model = Model(config.mode, proxy_url)
        for host in hosts:
            for arm in config.arms:
                started = time.monotonic()
                user = make_user(host, arm, root / host / arm, daemon, clis, proxy_url or "")
                config.progress(f"{host}/{arm}: user ready in {time.monotonic() - started:.1f} s")
                for task in config.tasks:
                    result = run_task(task, user, daemon, clis, model, config.turn_timeout)
                    results.append(result)
                    config.progress(
                        f"{host}/{arm}/{task.id}: success={result.success} "
                        f"prepare={result.prepare_outcome} bytes={result.injected_bytes} "
                        f"turn={result.turn_seconds:.1f}s"
                    )
    return results
