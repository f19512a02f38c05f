"""``doctor``'s host-neutral checks: one line each, ``fail`` makes the command exit 1.

Settings, runtime, token and version are checked over the hook's own transport; the scope with
the hook's own resolution; the dry run runs the registered command the way the host would, and
the MCP check starts the registered MCP server the way the host would (its command, arguments
and environment) and lists its tools. The host-specific checks (is the hook registered,
trusted) live in each plugin.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import tempfile
import time
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ..contract import PREPARED_CONTEXT_SCHEMA
from ..diagnostics import LOG_FILE_NAME
from ..host import USER_PROMPT_SUBMIT
from ..mcp_bridge import describe_token_source
from ..scope import ScopeError, binding_path, explain_scope, find_repository
from ..settings import (
    DEFAULT_TCP_URL,
    HookSettings,
    SettingsError,
    agent_token_file,
    config_file_path,
)
from ..spool import CaptureSpool
from ..transport import HttpFailure, UnixEndpoint, describe_endpoint, exchange

__all__ = [
    "DOCTOR_PROMPT",
    "Check",
    "CheckStatus",
    "HookRegistration",
    "bootstrap_check",
    "dry_run_check",
    "handoff_check",
    "log_tail",
    "mcp_check",
    "mcp_server_env",
    "runtime_checks",
    "scope_check",
    "spool_check",
    "task_results_check",
]

CheckStatus = Literal["ok", "warn", "fail", "skip", "info"]


@dataclass(frozen=True)
class Check:
    """One doctor line. ``fail`` makes ``doctor`` exit 1; ``fix`` says what to do about it."""

    name: str
    status: CheckStatus
    message: str
    fix: str = ""

    def line(self) -> str:
        label = {"ok": "ok  ", "warn": "WARN", "fail": "FAIL", "skip": "skip", "info": "    "}
        text = f"{label[self.status]} {self.name}: {self.message}"
        return text + (f" — {self.fix}" if self.fix else "")

    def to_json(self) -> dict[str, str]:
        return {"name": self.name, "status": self.status, "message": self.message, "fix": self.fix}


@dataclass
class HookRegistration:
    """What the host has registered for us, as found by a host's doctor checks.

    ``commands`` maps hook names (``user-prompt-submit``) to the command the host will run;
    ``data_dir`` is where those hooks write their diagnostics log; ``env`` holds variables the
    host adds for our hooks (e.g. Claude Code ``userConfig`` options).
    """

    checks: list[Check] = field(default_factory=list)
    commands: dict[str, str] = field(default_factory=dict)
    data_dir: str | None = None
    env: dict[str, str] = field(default_factory=dict)


def _http(
    settings: HookSettings,
    path: str,
    *,
    token: str | None,
    body: dict[str, Any] | None = None,
    timeout: float = 3.0,
) -> tuple[int, bytes] | str:
    """``(status, body)`` of a GET (or, with ``body``, a JSON POST), or a short reason the
    runtime could not be reached.

    The hook's own loopback transport: no proxy variables, no redirects, a bounded body.
    """
    headers = {"Accept": "application/json", "User-Agent": "powercontext-doctor"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    if body is not None:
        headers["Content-Type"] = "application/json"
    outcome = exchange(
        settings.endpoint,
        "GET" if body is None else "POST",
        path,
        None if body is None else json.dumps(body).encode(),
        headers=headers,
        stop_at=time.monotonic() + timeout,
        read_error_bodies=True,
    )
    if isinstance(outcome, HttpFailure):
        return _FAILURE_REASONS[outcome.kind]
    return outcome.status, outcome.body


_FAILURE_REASONS = {
    "timeout": "timed out",
    "connection_failed": "connection refused or closed",
    "untrusted_socket": "refused: not a socket owned by this user, nothing was sent",
    "oversize": "answer larger than 1 MiB",
    "redirect": "redirected",
    "malformed": "not an HTTP answer",
}


def _agent_token_path(env: Mapping[str, str]) -> str:
    """``<runtime data dir>/auth/agent-token`` for messages (a placeholder if it has none)."""
    try:
        return agent_token_file(env)
    except SettingsError:
        return "<POWERCONTEXT_HOME>/auth/agent-token"


def _token_source(settings: HookSettings, env: Mapping[str, str]) -> str:
    """Where the token the hook uses comes from, in the order the settings resolve it."""
    return describe_token_source(settings, env)


def _unreachable_fix(settings: HookSettings) -> str:
    if isinstance(settings.endpoint, UnixEndpoint):
        return (
            "start it with `powercontext serve` (it listens on this socket and on TCP); a runtime "
            f"that only listens on TCP needs POWERCONTEXT_URL={DEFAULT_TCP_URL}"
        )
    return "start it with `powercontext serve`, or set POWERCONTEXT_URL"


def _error_code(body: bytes) -> str | None:
    """The ``error.code`` of an error envelope, or None when the body is not one."""
    try:
        error = json.loads(body).get("error")
    except (ValueError, AttributeError):
        return None
    code = error.get("code") if isinstance(error, dict) else None
    return code if isinstance(code, str) else None


def runtime_checks(settings: HookSettings, env: Mapping[str, str]) -> list[Check]:
    """Reachable (``/health/live``), token accepted and version compatible (``/v1/capabilities``
    lists ``powercontext.prepared-context.v1``)."""
    where = describe_endpoint(settings.endpoint)
    live = _http(settings, "/health/live", token=None)
    if isinstance(live, str) or live[0] != 200:
        reason = live if isinstance(live, str) else f"HTTP {live[0]}"
        return [
            Check(
                "runtime",
                "fail",
                f"not reachable over {where} ({reason})",
                _unreachable_fix(settings),
            ),
            Check("token", "skip", "runtime not reachable"),
            Check("version", "skip", "runtime not reachable"),
        ]
    checks = [Check("runtime", "ok", f"reachable over {where}")]
    if not settings.token:
        checks.append(
            Check(
                "token",
                "fail",
                f"no token configured and {_agent_token_path(env)} does not exist",
                "set POWERCONTEXT_TOKEN, or POWERCONTEXT_HOME to the runtime's data dir "
                "(hooks use its agent token, never the operator's auth/token)",
            )
        )
        checks.append(Check("version", "skip", "no token"))
        return checks
    answer = _http(settings, "/v1/capabilities", token=settings.token)
    if isinstance(answer, str):
        return [*checks, Check("token", "fail", f"capabilities request failed ({answer})")]
    status, body = answer
    source = _token_source(settings, env)
    if status in (401, 403):
        replaced = status == 401 and _error_code(body) == "token_replaced"
        return [
            *checks,
            Check(
                "token",
                "fail",
                (
                    f"replaced when the runtime started (after an upgrade); it came from {source}"
                    if replaced
                    else f"rejected by the runtime (HTTP {status}); it came from {source}"
                ),
                (
                    "use the runtime's auth/agent-token (unset POWERCONTEXT_TOKEN to read it "
                    "from POWERCONTEXT_HOME)"
                    if replaced
                    else "use the runtime's token (`powercontext token create` for another one)"
                ),
            ),
            Check("version", "skip", "token rejected"),
        ]
    checks.append(Check("token", "ok", f"accepted (from {source})"))
    if status == 404:
        checks.append(Check("version", "fail", "the runtime has no /v1/capabilities", "upgrade it"))
        return checks
    try:
        versions = json.loads(body).get("context_versions")
    except (ValueError, AttributeError):
        versions = None
    if status != 200 or not isinstance(versions, list):
        checks.append(Check("version", "fail", f"unexpected capabilities answer (HTTP {status})"))
    elif PREPARED_CONTEXT_SCHEMA not in versions:
        checks.append(
            Check(
                "version",
                "fail",
                f"the runtime does not serve {PREPARED_CONTEXT_SCHEMA}",
                "install matching versions of the runtime and the plugin",
            )
        )
    else:
        checks.append(Check("version", "ok", f"serves {PREPARED_CONTEXT_SCHEMA}"))
    return checks


def scope_check(cwd: str, settings: HookSettings | None) -> Check:
    """Which scope the hook will use in ``cwd``, and which rule chose it."""
    override = settings.scope_id if settings is not None else None
    try:
        explained = explain_scope(cwd, override)
    except ScopeError as exc:
        if "binding" not in str(exc):  # git did not answer in time (an include it cannot read)
            fix = "check `git config --includes --get remote.origin.url` here, or `bind SCOPE_ID`"
            return Check("scope", "fail", str(exc), fix)
        repo = find_repository(cwd)
        where = f" ({binding_path(repo)})" if repo is not None else ""
        return Check(
            "scope", "fail", f"{exc}{where}", "rewrite it with `bind SCOPE_ID` or `bind --clear`"
        )
    if explained is None:
        return Check("scope", "fail", f"no scope for {cwd}", "run doctor inside your project")
    scope, source = explained
    repo = find_repository(cwd)
    rule = {
        "override": "from the scope_id setting (POWERCONTEXT_SCOPE_ID / plugins.toml)",
        "binding": f"from the repository binding {binding_path(repo) if repo else ''}".rstrip(),
        "remote": "from remote.origin.url",
        "local": (
            "from the repository root: no remote, `bind` shares memory across clones"
            if repo is not None
            else "from this directory (not a git repository)"
        ),
    }[source]
    return Check("scope", "ok", f"{scope} — {rule}")


def bootstrap_check(
    settings: HookSettings, env: Mapping[str, str], installed: Mapping[str, object] | None = None
) -> Check:
    """Informational: whether SessionStart bootstrap is on, and which setting decided it (the
    same order :meth:`HookSettings.load` resolves it in)."""
    state = "on" if settings.bootstrap else "off"
    if env.get("POWERCONTEXT_BOOTSTRAP", "").strip():
        source = "from POWERCONTEXT_BOOTSTRAP"
    elif settings.host == "claude-code" and env.get("CLAUDE_PLUGIN_OPTION_BOOTSTRAP", "").strip():
        source = "from the plugin's bootstrap option"
    else:
        source = "from install --bootstrap" if installed and "bootstrap" in installed else "default"
        with contextlib.suppress(OSError, RuntimeError, ValueError):
            path = config_file_path()
            table = tomllib.loads(Path(path).read_text("utf-8")).get(settings.host)
            value = table.get("bootstrap") if isinstance(table, dict) else None
            if value is not None and not (isinstance(value, str) and not value.strip()):
                source = f"from bootstrap in [{settings.host}] of {path}"
    hint = (
        ""
        if settings.bootstrap
        else "; turn it on with `install --bootstrap` or POWERCONTEXT_BOOTSTRAP=1 "
        "(docs/bootstrap.md)"
    )
    return Check(
        "bootstrap",
        "info",
        f"{state} ({source}): the SessionStart pack (a queued Handoff, entries tagged "
        f"bootstrap-context){hint}",
    )


def handoff_check(settings: HookSettings, scope_id: str | None) -> Check:
    """Informational: whether a Handoff waits for this scope's next session — and whether that
    session will get it (only with bootstrap on)."""
    if scope_id is None:
        return Check("handoff", "skip", "needs a scope")
    answer = _http(settings, "/v1/handoff/next", token=settings.token, body={"scope_id": scope_id})
    if isinstance(answer, str):
        return Check("handoff", "skip", f"runtime {answer}")
    status, body = answer
    if status == 404:
        return Check("handoff", "skip", "this runtime predates the Handoff queue (404)")
    if status != 200:
        return Check("handoff", "skip", f"the runtime answered HTTP {status}")
    try:
        ref = json.loads(body).get("handoff_ref")
        revision = ref.get("revision") if isinstance(ref, dict) else None
    except (ValueError, AttributeError):
        return Check("handoff", "skip", "the runtime's answer is not the next-handoff object")
    if revision is None:
        return Check("handoff", "info", "none waits for the next session")
    if settings.bootstrap:
        return Check("handoff", "info", f"revision {revision} waits: the next session gets it")
    return Check(
        "handoff",
        "warn",
        f"revision {revision} waits, but bootstrap is off: no session will get it",
        "turn bootstrap on (`install --bootstrap`, POWERCONTEXT_BOOTSTRAP=1) or "
        "`powercontext handoff withdraw`",
    )


DOCTOR_PROMPT = "What should I know about this project before I change it?"


def _parse_envelope(stdout: bytes) -> str | None:
    """The ``additionalContext`` of exactly one valid envelope followed by a newline."""
    text = stdout.decode("utf-8")
    if not text.endswith("\n") or "\n" in text[:-1]:
        raise ValueError("the hook must print one JSON object on one line")
    document = json.loads(text)
    inner = document.get("hookSpecificOutput") if isinstance(document, dict) else None
    if (
        set(document) != {"hookSpecificOutput"}
        or not isinstance(inner, dict)
        or set(inner) != {"hookEventName", "additionalContext"}
        or inner["hookEventName"] != USER_PROMPT_SUBMIT
        or not isinstance(inner["additionalContext"], str)
    ):
        raise ValueError("the envelope does not have exactly the keys the hosts accept")
    return inner["additionalContext"]


_OUTCOME_HELP = {
    "skipped": (
        "no prompt, working directory or scope, or invalid settings",
        "see the lines above",
    ),
    "authentication_failed": ("the runtime rejected the token", "see the token line"),
    "forbidden": ("the token may not use this scope", "use a token granted this scope"),
    "version_mismatch": ("the runtime is too old for this plugin", "upgrade the runtime"),
    "server_unavailable": ("the runtime is not reachable or too slow", "see the runtime line"),
    "invalid_response": ("the runtime's answer broke the contract", "upgrade runtime and plugin"),
}


def dry_run_check(
    command: str,
    shell_argv: Sequence[str],
    payload: Mapping[str, Any],
    *,
    env: Mapping[str, str],
    data_dir_vars: Sequence[str],
    cwd: str,
    timeout: float = 15.0,
) -> Check:
    """Run the registered hook command the way the host would, on a test prompt, and judge it.

    Prompt capture is switched off and the diagnostics go to a throw-away data dir, so a
    doctor run neither stores a source nor adds lines to the real log.
    """
    with tempfile.TemporaryDirectory(prefix="powercontext-doctor-") as scratch:
        run_env = dict(env)
        run_env.update(POWERCONTEXT_DEBUG="1", POWERCONTEXT_CAPTURE_PROMPTS="0")
        for name in data_dir_vars:
            run_env[name] = scratch
        started = time.monotonic()
        try:
            completed = subprocess.run(
                [*shell_argv, command],
                input=json.dumps(payload).encode("utf-8"),
                capture_output=True,
                timeout=timeout,
                env=run_env,
                cwd=cwd,
                check=False,
            )
        except subprocess.TimeoutExpired:
            return Check("dry-run", "fail", f"the hook ran longer than {timeout:.0f} s")
        except OSError as exc:
            return Check("dry-run", "fail", f"cannot run the hook: {exc.strerror}")
    elapsed = int((time.monotonic() - started) * 1000)
    lines = []
    for raw in completed.stderr.decode("utf-8", "replace").splitlines():
        with contextlib.suppress(ValueError):
            line = json.loads(raw)
            if isinstance(line, dict) and line.get("event") == "context_prepare":
                lines.append(line)
    outcome = lines[-1].get("outcome") if lines else None
    if completed.returncode != 0:
        return Check(
            "dry-run",
            "fail",
            f"the hook exited with {completed.returncode} (it must always exit 0)",
            "re-run install; " + completed.stderr.decode("utf-8", "replace").strip()[-300:],
        )
    if completed.stdout:
        try:
            context = _parse_envelope(completed.stdout)
        except (ValueError, UnicodeDecodeError, AttributeError) as exc:
            return Check("dry-run", "fail", f"invalid output: {exc}")
        size = len((context or "").encode("utf-8"))
        return Check("dry-run", "ok", f"valid envelope with a {size}-byte pack in {elapsed} ms")
    if outcome == "empty":
        return Check(
            "dry-run",
            "ok",
            f"valid empty result in {elapsed} ms: the runtime has nothing relevant for the test "
            "prompt yet, so nothing is injected",
        )
    if outcome in _OUTCOME_HELP:
        reason, fix = _OUTCOME_HELP[outcome]
        return Check("dry-run", "fail", f"nothing injected: {outcome} — {reason}", fix)
    return Check("dry-run", "fail", "the hook printed nothing and no diagnostic line")


def log_tail(directory: str | None, count: int) -> list[str]:
    """The last ``count`` lines of the diagnostics log in ``directory`` (oldest first)."""
    if directory is None or count <= 0:
        return []
    path = Path(directory) / LOG_FILE_NAME
    try:
        lines = path.read_text("utf-8", errors="replace").splitlines()
    except OSError:
        return []
    return lines[-count:]


#: A tool only a token with the ``review`` capability sees: listed means the MCP server does
#: not use the agent token (an agent could then approve its own proposals).
_REVIEW_TOOL = "approve_artifact_candidate"
_USER_CONFIG = re.compile(r"\$\{user_config\.([A-Za-z0-9_]+)\}")
MCP_DOCTOR_TIMEOUT = 10.0


def mcp_server_env(
    server: Mapping[str, Any],
    env: Mapping[str, str],
    *,
    inherit: Sequence[str] | None,
    options: Mapping[str, str],
) -> dict[str, str]:
    """The environment the host starts the MCP server ``server`` (an ``mcpServers`` entry) with.

    ``inherit`` is what the host passes on by itself (``None``: everything, like Claude Code;
    Codex passes a short list), plus the names listed in ``env_vars`` (Codex); then the entry's
    ``env``, with ``${user_config.KEY}`` replaced by the plugin option (Claude Code; ``options``
    holds them as ``CLAUDE_PLUGIN_OPTION_<KEY>``; unset → empty).
    """
    names = list(env) if inherit is None else list(inherit)
    forwarded = server.get("env_vars")
    if isinstance(forwarded, list):
        names += [name for name in forwarded if isinstance(name, str)]
    result = {name: env[name] for name in names if name in env}
    extra = server.get("env")
    if isinstance(extra, dict):
        for key, value in extra.items():
            if isinstance(key, str) and isinstance(value, str):
                result[key] = _USER_CONFIG.sub(
                    lambda m: options.get(f"CLAUDE_PLUGIN_OPTION_{m.group(1).upper()}", ""), value
                )
    return result


def _rpc(message_id: int | None, method: str, params: Mapping[str, Any] | None = None) -> bytes:
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if message_id is not None:
        message["id"] = message_id
    if params is not None:
        message["params"] = dict(params)
    return json.dumps(message).encode("utf-8") + b"\n"


def _run_mcp_server(
    argv: Sequence[str], env: Mapping[str, str], cwd: str, timeout: float
) -> dict[Any, dict[str, Any]] | str:
    """Start the server, send ``initialize``, ``notifications/initialized`` and ``tools/list``,
    close its input; its answers by id — or why there are none. Bounded by ``timeout``: a
    server that does not finish by then is killed (its whole process group)."""
    session = (
        _rpc(
            1,
            "initialize",
            {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "powercontext-doctor", "version": "1"},
            },
        )
        + _rpc(None, "notifications/initialized")
        + _rpc(2, "tools/list")
    )
    try:
        process = subprocess.Popen(
            list(argv),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=dict(env),
            cwd=cwd,
            start_new_session=True,
        )
    except OSError as exc:
        return f"cannot start `{argv[0]}`: {exc.strerror}"
    try:
        stdout, _stderr = process.communicate(session, timeout=timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        return f"no complete answer within {timeout:.0f} s"
    answers: dict[Any, dict[str, Any]] = {}
    for raw in stdout.splitlines():
        with contextlib.suppress(ValueError):
            message = json.loads(raw)
            if isinstance(message, dict) and "id" in message:
                answers[message["id"]] = message
    if not answers and process.returncode != 0:
        return f"it exited with status {process.returncode} without answering"
    return answers


def _error_text(answer: Mapping[str, Any]) -> str | None:
    error = answer.get("error")
    if error is None:
        return None
    message = error.get("message") if isinstance(error, dict) else None
    return str(message) if message else "an error without a message"


def mcp_check(
    server: Mapping[str, Any],
    *,
    host: str,
    env: Mapping[str, str],
    cwd: str,
    expected: tuple[str, list[str]] | None = None,
    script: str = "",
    timeout: float = MCP_DOCTOR_TIMEOUT,
) -> Check:
    """The MCP path end to end: start the registered server (``server``: its ``mcpServers``
    entry) with the environment ``env`` the host gives it (:func:`mcp_server_env`), then
    ``initialize`` and ``tools/list`` as a host would. ``ok`` with the number of tools, else
    the server's own explanation (the bridge names the cause and the fix)."""
    command, args = server.get("command"), server.get("args", [])
    if not isinstance(command, str) or not command or not isinstance(args, list):
        return Check(
            "mcp",
            "fail",
            "the registered MCP server has no command (an older install?)",
            f"run `{script} install`",
        )
    argv = [command, *(str(arg) for arg in args)]
    try:
        where = HookSettings.load(host, env).url
    except SettingsError as exc:
        where = f"invalid settings: {exc}"
    answers = _run_mcp_server(argv, env, cwd, timeout)
    if isinstance(answers, str):
        return Check(
            "mcp", "fail", f"the MCP server ({argv[0]}): {answers}", f"run `{script} install`"
        )
    for message_id, step in ((1, "initialize"), (2, "tools/list")):
        answer = answers.get(message_id)
        if answer is None:
            return Check("mcp", "fail", f"the MCP server did not answer {step}")
        problem = _error_text(answer)
        if problem is not None:
            return Check("mcp", "fail", f"{step} failed: {problem}")
    result = answers[2].get("result")
    tools = result.get("tools") if isinstance(result, dict) else None
    names = [t.get("name") for t in tools if isinstance(t, dict)] if isinstance(tools, list) else []
    if not names:
        return Check(
            "mcp", "fail", f"the runtime lists no tools over {where}", "check the token line"
        )
    if _REVIEW_TOOL in names:
        return Check(
            "mcp",
            "warn",
            f"{len(names)} tools over {where}, including the review tools: the MCP server does "
            "not use the agent token, so an agent could approve its own proposals",
            "remove the token setting (POWERCONTEXT_TOKEN, plugins.toml, the plugin option) to "
            "use <data dir>/auth/agent-token",
        )
    message = f"{len(names)} tools over {where}"
    if expected is not None and argv != [expected[0], *expected[1]]:
        return Check(
            "mcp",
            "warn",
            f"{message}, but the registered command is {' '.join(argv)!r}, not this installation's",
            f"re-run `{script} install` to use this one",
        )
    return Check("mcp", "ok", message)


def _dropped_in_log(directory: str) -> int:
    """Prompts the capture spool gave up, as its diagnostic lines recorded them (the log and
    its one rotated predecessor)."""
    dropped = 0
    for name in (LOG_FILE_NAME + ".1", LOG_FILE_NAME):
        try:
            lines = (Path(directory) / name).read_text("utf-8", errors="replace").splitlines()
        except OSError:
            continue
        for raw in lines:
            with contextlib.suppress(ValueError):
                line = json.loads(raw)
                count = line.get("dropped") if isinstance(line, dict) else None
                if line.get("event") == "capture_spool" and isinstance(count, int):
                    dropped += count
    return dropped


def spool_check(directory: str | None, settings: HookSettings | None) -> Check:
    """``capture spool``: how many prompts wait for the runtime and how many were given up —
    counts only, never what the prompts were."""
    if directory is None:
        return Check("capture spool", "skip", "no hook registered, so no plugin data dir")
    entries, size, age = CaptureSpool(directory).status()
    dropped = _dropped_in_log(directory)
    off = settings is not None and not settings.capture_spool
    state = "off (capture_spool)" if off else "on"
    if not entries and not dropped:
        return Check("capture spool", "info", f"{state}, no prompts waiting, none dropped")
    parts = []
    if entries:
        hours = (age or 0) / 3600
        parts.append(
            f"{entries} prompt{'s' if entries != 1 else ''} waiting ({size} bytes, oldest "
            f"{hours:.1f} h)"
        )
    parts.append(f"{dropped} dropped (diagnostics log)")
    fix = (
        "start the runtime (`powercontext serve`): waiting prompts are delivered with the next "
        "prompt it answers"
    )
    return Check("capture spool", "warn", f"{state}, {', '.join(parts)}", fix)


def task_results_check(settings: HookSettings, directory: str | None) -> Check:
    """``task results``: whether the Stop hook records each turn's task result
    (``record_task_results``), and how many wait in its spool — counts only."""
    state = "on" if settings.record_task_results else "off"
    detail = (
        "the Stop hook records each turn's bounded task result as evidence for review"
        if settings.record_task_results
        else "turn it on with POWERCONTEXT_RECORD_TASK_RESULTS=1 or record_task_results = true"
    )
    if directory is not None:
        from ..task_result import TASK_RESULT_SPOOL_DIR

        entries, _size, _age = CaptureSpool(directory, folder=TASK_RESULT_SPOOL_DIR).status()
        if entries:
            return Check(
                "task results",
                "warn",
                f"{state} (record_task_results), {entries} waiting for the runtime",
                "start the runtime (`powercontext serve`): they go out when a later turn ends",
            )
    return Check("task results", "info", f"{state} (record_task_results): {detail}")
