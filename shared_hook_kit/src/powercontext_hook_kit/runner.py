"""The hook process contract, shared by every host and every hook.

Read stdin once (bounded in size and time), run the flow, write exactly one compact JSON object
to stdout or nothing, and return 0 — always. The object is written as soon as the flow has it:
``UserPromptSubmit`` prints its pack right after recall, before the prompt capture and the
capture spool's delivery, so neither can delay or change what is injected. Exit code 2 on
``UserPromptSubmit`` means "block and erase the prompt" to both hosts, and any other failure
must not cost the user their turn, so a top-level guard turns every error (even a bug here)
into one diagnostic line instead.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, BinaryIO, TextIO

import msgspec

from .diagnostics import Diagnostics, Event
from .flows import record_task_result, session_start, user_prompt_submit
from .host import SESSION_START, STOP, USER_PROMPT_SUBMIT, HostAdapter, HostInfo
from .receipts import ReceiptStore
from .settings import HookSettings, SettingsError, debug_enabled, plugin_data_dir
from .spool import CaptureSpool
from .transport import Deadline

__all__ = [
    "DEFAULT_DEADLINE_SECONDS",
    "HOOK_NAMES",
    "INSTALL_OPTIONS",
    "MAX_STDIN_BYTES",
    "installed_settings",
    "run_hook",
    "run_hook_main",
]

MAX_STDIN_BYTES = 4 * 1024 * 1024
DEFAULT_DEADLINE_SECONDS = 2.0
_STDIN_CHUNK = 64 * 1024


#: ``emit`` writes the hook's one output object (the runner appends ``\n``; later calls are
#: ignored).
_Emit = Callable[[bytes], None]
#: What ``install`` rendered into the hook command (``--bootstrap``): the settings' lowest layer.
Installed = Mapping[str, object]
_HookRun = Callable[
    [HostAdapter, Mapping[str, Any], Mapping[str, str], Installed, Diagnostics, float, _Emit],
    None,
]


class _Hook(msgspec.Struct, frozen=True):
    event_name: str  # the host event this hook answers, also the output envelope's name
    primary_event: Event  # the operation a failure before the flow is reported against
    run: _HookRun


def _receipt_store(host: str, env: Mapping[str, str]) -> ReceiptStore:
    """The session receipt store in the plugin data dir, located only when first used."""
    return ReceiptStore(lambda: plugin_data_dir(host, env))


def _capture_spool(host: str, env: Mapping[str, str]) -> CaptureSpool:
    """The capture spool in the plugin data dir, located only when first used."""
    return CaptureSpool(lambda: plugin_data_dir(host, env))


def _run_user_prompt_submit(
    adapter: HostAdapter,
    payload: Mapping[str, Any],
    env: Mapping[str, str],
    installed: Installed,
    diagnostics: Diagnostics,
    started: float,
    emit: _Emit,
) -> None:
    try:
        settings = HookSettings.load(adapter.name, env, installed=installed)
    except SettingsError:
        diagnostics.record("context_prepare", "skipped")
        return
    deadline = Deadline.after(settings.deadline_seconds, start=started)

    def inject(content: str) -> None:
        emit(adapter.render_output(USER_PROMPT_SUBMIT, content))

    user_prompt_submit(
        adapter.prompt_event(payload),
        HostInfo(adapter.name),
        settings,
        diagnostics,
        deadline,
        receipts=_receipt_store(adapter.name, env),
        spool=_capture_spool(adapter.name, env),
        inject=inject,
    )


def _run_session_start(
    adapter: HostAdapter,
    payload: Mapping[str, Any],
    env: Mapping[str, str],
    installed: Installed,
    diagnostics: Diagnostics,
    started: float,
    emit: _Emit,
) -> None:
    event = adapter.session_start_event(payload)
    receipts = _receipt_store(adapter.name, env)
    try:
        settings = HookSettings.load(adapter.name, env, installed=installed)
    except SettingsError:
        diagnostics.record("context_bootstrap", "skipped")
        receipts.clear(event.session_id)  # no new pack: the old receipt must not linger
        return
    deadline = Deadline.after(settings.deadline_seconds, start=started)
    content = session_start(
        event, HostInfo(adapter.name), settings, diagnostics, deadline, receipts=receipts
    )
    if content is not None:
        emit(adapter.render_output(SESSION_START, content))


def _task_result_spool(host: str, env: Mapping[str, str]) -> CaptureSpool:
    """The task-result spool (the capture spool's machinery, its own folder and entry check)."""
    from .task_result import TASK_RESULT_SPOOL_DIR, is_task_result_body

    return CaptureSpool(
        lambda: plugin_data_dir(host, env),
        folder=TASK_RESULT_SPOOL_DIR,
        is_entry=is_task_result_body,
    )


def _run_stop(
    adapter: HostAdapter,
    payload: Mapping[str, Any],
    env: Mapping[str, str],
    installed: Installed,
    diagnostics: Diagnostics,
    started: float,
    emit: _Emit,
) -> None:
    """End of a turn: record its task result. Prints nothing (the hosts read a Stop hook's
    output as a decision to block the stop; we never block)."""
    try:
        settings = HookSettings.load(adapter.name, env, installed=installed)
    except SettingsError:
        diagnostics.record("task_result", "skipped")
        return
    deadline = Deadline.after(settings.deadline_seconds, start=started)
    record_task_result(
        adapter.stop_event(payload),
        HostInfo(adapter.name),
        settings,
        diagnostics,
        deadline,
        spool=_task_result_spool(adapter.name, env),
    )


_HOOKS: dict[str, _Hook] = {
    "user-prompt-submit": _Hook(USER_PROMPT_SUBMIT, "context_prepare", _run_user_prompt_submit),
    "session-start": _Hook(SESSION_START, "context_bootstrap", _run_session_start),
    "stop": _Hook(STOP, "task_result", _run_stop),
}

#: The hook names :func:`run_hook` accepts (the plugins' ``hook <name>`` verbs).
HOOK_NAMES: frozenset[str] = frozenset(_HOOKS)


def _read_stdin(stdin: BinaryIO, limit: int, deadline: Deadline) -> bytes | None:
    """All of stdin, or ``None`` if it is larger than ``limit`` or not closed by the deadline.

    A real file descriptor is read with ``select`` so a host that never closes the pipe cannot
    hang the hook; other streams (tests) are read directly.
    """
    try:
        fd = stdin.fileno()
    except (AttributeError, OSError, ValueError):
        fd = -1
    if fd < 0:
        data = stdin.read(limit + 1)
        return data if len(data) <= limit else None
    import select

    chunks: list[bytes] = []
    size = 0
    while True:
        remaining = deadline.remaining()
        if remaining <= 0:
            return None
        try:
            ready, _, _ = select.select([fd], [], [], remaining)
        except (OSError, ValueError):  # e.g. pipes on Windows: fall back to a bounded read
            rest = stdin.read(limit + 1 - size)
            size += len(rest)
            return b"".join([*chunks, rest]) if size <= limit else None
        if not ready:
            return None
        chunk = os.read(fd, _STDIN_CHUNK)
        if not chunk:
            return b"".join(chunks)
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)


def _decode_event(data: bytes) -> dict[str, Any] | None:
    """The event object, or ``None``. Falls back to ``json`` for lone-surrogate escapes, which
    JavaScript hosts can emit and msgspec (rightly) refuses; the adapter cleans them up."""
    try:
        payload = msgspec.json.decode(data)
    except msgspec.DecodeError:
        import json

        try:
            payload = json.loads(data)
        except (ValueError, RecursionError):
            return None
    return payload if isinstance(payload, dict) else None


def _write(stream: BinaryIO, data: bytes) -> None:
    try:
        stream.write(data)
        stream.flush()
    except (OSError, ValueError):
        pass


def run_hook(
    adapter: HostAdapter,
    hook_name: str,
    stdin: BinaryIO,
    stdout: BinaryIO,
    stderr: TextIO | None,
    env: Mapping[str, str],
    *,
    installed: Installed | None = None,
) -> int:
    """Run one hook invocation end to end; returns the exit code, which is always 0.

    ``hook_name`` is one of :data:`HOOK_NAMES` (``user-prompt-submit``, ``session-start``,
    ``stop``);
    diagnostics are labelled ``powercontext.<host>.<hook_name>``. ``installed`` holds the
    settings ``install`` wrote into the hook command (below every other layer).
    """
    started = time.monotonic()
    hook = _HOOKS.get(hook_name)
    primary: Event = hook.primary_event if hook is not None else "context_prepare"
    diagnostics: Diagnostics | None = None
    try:
        host = adapter.name
        diagnostics = Diagnostics(
            f"powercontext.{host}.{hook_name}",
            stderr,
            debug=debug_enabled(env),
            log_dir=lambda: plugin_data_dir(host, env),
        )
        if hook is None:
            diagnostics.record(primary, "skipped")
            return 0
        data = _read_stdin(
            stdin, MAX_STDIN_BYTES, Deadline.after(DEFAULT_DEADLINE_SECONDS, start=started)
        )
        payload = _decode_event(data) if data else None
        if payload is None:
            diagnostics.record(primary, "skipped")
            return 0
        reported = adapter.hook_event_name(payload)
        if reported is not None and reported != hook.event_name:
            diagnostics.record(primary, "skipped")
            return 0
        written: list[bool] = []

        def emit(output: bytes) -> None:
            if not written:  # exactly one object, whatever a flow does
                written.append(True)
                _write(stdout, output + b"\n")

        hook.run(adapter, payload, env, installed or {}, diagnostics, started, emit)
    except BaseException:  # the contract: whatever happens, exit 0 and say so on stderr
        try:
            if diagnostics is None:
                diagnostics = Diagnostics("powercontext.unknown.unknown", stderr)
            diagnostics.record(primary, "invalid_response")
        except BaseException:
            pass
    return 0


def run_hook_main(adapter: HostAdapter, hook_name: str, options: Sequence[str] = ()) -> int:
    """:func:`run_hook` on this process's real stdin/stdout/stderr and environment.

    ``options`` are the hook command's arguments after the hook name; only what ``install``
    writes there is understood (``--bootstrap``), anything else is ignored — a hook never
    fails over its command line.
    """
    return run_hook(
        adapter,
        hook_name,
        sys.stdin.buffer,
        sys.stdout.buffer,
        sys.stderr,
        os.environ,
        installed=installed_settings(options),
    )


#: The options ``install`` may write after the hook name, and the setting each one stands for.
INSTALL_OPTIONS: dict[str, tuple[str, object]] = {"--bootstrap": ("bootstrap", True)}


def installed_settings(options: Sequence[str]) -> dict[str, object]:
    """The settings a hook command's options stand for (unknown options are ignored)."""
    return dict(INSTALL_OPTIONS[option] for option in options if option in INSTALL_OPTIONS)
