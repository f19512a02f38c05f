"""The hook commands ``install`` registers (and the MCP server command), and the marker that
tells our entries apart.

The command runs an absolute interpreter with isolation flags (no PATH lookup, shim, ``uv`` or
network at prompt time); the same module recognises that command — and a console script
registered by hand — among the user's own hooks, which is how every other step finds *only*
our entries.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import sys
from collections.abc import Sequence

from ..host import SESSION_START, STOP, USER_PROMPT_SUBMIT
from .report import InstallError

__all__ = [
    "HOOK_EVENTS",
    "HOOK_TIMEOUT_SECONDS",
    "hook_command",
    "hook_command_options",
    "hook_command_verb",
    "hook_events_text",
    "mcp_command",
]

#: Every hook the plugins register: hook name (``hook <name>`` verb) → host event name.
HOOK_EVENTS: dict[str, str] = {
    "session-start": SESSION_START,
    "user-prompt-submit": USER_PROMPT_SUBMIT,
    "stop": STOP,  # end of turn: the task result (issue #31)
}


def hook_events_text() -> str:
    """Every registered host event for a human line: ``SessionStart, UserPromptSubmit and Stop``."""
    *first, last = HOOK_EVENTS.values()
    return f"{', '.join(first)} and {last}" if first else last


#: Hosts kill a hook after this many seconds. Whole seconds: Codex 0.169.0 ignores a whole
#: hooks.json whose ``timeout`` is not an integer. The hook bounds itself by its own deadline
#: (``deadline_seconds``, default 2 s), so this only matters for a hook that is broken.
HOOK_TIMEOUT_SECONDS = 10


def _interpreter_flags(module: str) -> list[str]:
    """``-I`` (isolated: the user's repository, ``PYTHONPATH`` and user site cannot shadow our
    modules), unless the package itself lives in the user site, which ``-I`` would hide; then
    ``-E -P``, the same minus the user site."""
    import importlib.util
    import site

    spec = importlib.util.find_spec(module)
    origin = spec.origin if spec is not None else None
    user_site = site.getusersitepackages() if site.ENABLE_USER_SITE else None
    if origin and user_site and os.path.realpath(origin).startswith(os.path.realpath(user_site)):
        return ["-E", "-P"]
    return ["-I"]


def _canonical_interpreter() -> str:
    """``sys.executable``, spelled the same however this process was started.

    Inside a virtual environment ``bin/python3`` (a console script's shebang) and ``bin/python``
    (``python -m``) are the same interpreter; always writing ``<venv>/bin/python`` keeps a
    second install idempotent. Outside one, the path is kept as is: ``/usr/bin/python3`` may
    later point at another Python that does not have this package.
    """
    executable = sys.executable
    if not executable or sys.prefix == sys.base_prefix:
        return executable
    folder = os.path.dirname(os.path.abspath(executable))
    candidate = os.path.join(folder, "python")
    with contextlib.suppress(OSError):
        if os.path.realpath(folder) == os.path.realpath(os.path.join(sys.prefix, "bin")) and (
            os.path.samefile(candidate, executable)
        ):
            return candidate
    return executable


def _interpreter(executable: str | None) -> str:
    """The absolute interpreter our commands run (see :func:`_canonical_interpreter`)."""
    python = executable if executable is not None else _canonical_interpreter()
    if not python:
        raise InstallError("cannot tell which Python runs this command (sys.executable is empty)")
    python = os.path.abspath(python)
    if not os.access(python, os.X_OK):
        raise InstallError(f"the Python interpreter {python} is not executable")
    return python


def hook_command(
    module: str,
    hook_name: str,
    *,
    executable: str | None = None,
    options: Sequence[str] = (),
) -> str:
    """``<absolute python> -I -m <module> hook <hook_name> [options]``, quoted for a POSIX
    shell. ``options`` are install-time settings (:data:`~..runner.INSTALL_OPTIONS`).

    The interpreter path is absolute and *not* resolved through symlinks (a virtualenv's
    ``python`` is a symlink whose location selects the environment). No PATH lookup, shim,
    ``uv`` or network install ever runs at prompt time.
    """
    python = _interpreter(executable)
    return shlex.join(
        [python, *_interpreter_flags(module), "-m", module, "hook", hook_name, *options]
    )


def mcp_command(module: str, *, executable: str | None = None) -> tuple[str, list[str]]:
    """``(<absolute python>, ["-I", "-m", <module>, "mcp"])``: the stdio MCP server the plugins'
    ``.mcp.json`` registers — the same interpreter and isolation flags as the hooks, as an
    executable and its arguments (the hosts start MCP servers without a shell)."""
    python = _interpreter(executable)
    return python, [*_interpreter_flags(module), "-m", module, "mcp"]


def hook_command_options(command: object, module: str, script: str | None = None) -> list[str]:
    """The arguments after the hook name in one of our hook commands (``[]`` otherwise)."""
    if hook_command_verb(command, module, script) is None:
        return []
    tokens = shlex.split(str(command))
    for index in range(len(tokens) - 3):
        if tokens[index : index + 3] == ["-m", module, "hook"]:
            return tokens[index + 4 :]
    return tokens[3:]


def hook_command_verb(command: object, module: str, script: str | None = None) -> str | None:
    """The hook name if ``command`` is one of *our* hook commands, else ``None``.

    This is the marker that identifies our entries among the user's: ``-m <module> hook
    <name>`` (what :func:`hook_command` writes), or ``<…/script> hook <name>`` for a console
    script someone registered by hand.
    """
    if not isinstance(command, str):
        return None
    try:
        tokens = shlex.split(command)
    except ValueError:
        return None
    for index in range(len(tokens) - 3):
        if tokens[index : index + 3] == ["-m", module, "hook"]:
            return tokens[index + 3]
    if script and len(tokens) >= 3 and os.path.basename(tokens[0]) == script:
        return tokens[2] if tokens[1] == "hook" else None
    return None
