"""Running a host's own CLI (``codex``, ``claude``): bounded in time, never on a TTY.

Registering a plugin goes through the host's CLI so the host writes its own config; this module
only runs those commands and turns a failure into an :class:`InstallError` that quotes the
end of the host's output.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .report import InstallError

__all__ = ["CliResult", "find_executable", "run_cli"]


@dataclass(frozen=True)
class CliResult:
    argv: list[str]
    returncode: int
    stdout: str
    stderr: str

    def json(self) -> Any:
        try:
            return json.loads(self.stdout)
        except ValueError as exc:
            raise InstallError(f"`{self.display()}` did not print JSON") from exc

    def display(self) -> str:
        return shlex.join([os.path.basename(self.argv[0]), *self.argv[1:]])


def find_executable(name: str, explicit: str | None = None) -> str | None:
    """``explicit`` (must be an executable file) or ``name`` on ``PATH``; ``None`` if absent."""
    if explicit:
        path = os.path.abspath(os.path.expanduser(explicit))
        if not (os.path.isfile(path) and os.access(path, os.X_OK)):
            raise InstallError(f"{explicit} is not an executable file")
        return path
    return shutil.which(name)


def run_cli(
    argv: Sequence[str],
    *,
    timeout: float = 60.0,
    check: bool = True,
    env: Mapping[str, str] | None = None,
    cwd: str | None = None,
    stdin: str | None = None,
) -> CliResult:
    """Run a host CLI command to completion (no TTY, bounded time).

    ``check``: a non-zero exit raises :class:`InstallError` with the end of its stderr.
    """
    try:
        completed = subprocess.run(
            list(argv),
            input=stdin,
            stdin=None if stdin is not None else subprocess.DEVNULL,
            capture_output=True,
            text=True,
            encoding="utf-8",
            errors="replace",
            timeout=timeout,
            env=dict(env) if env is not None else None,
            cwd=cwd,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise InstallError(f"`{shlex.join(argv)}` did not finish within {timeout:.0f} s") from exc
    except OSError as exc:
        raise InstallError(f"cannot run {argv[0]}: {exc.strerror}") from exc
    result = CliResult(list(argv), completed.returncode, completed.stdout, completed.stderr)
    if check and completed.returncode != 0:
        tail = (completed.stderr.strip() or completed.stdout.strip())[-1500:]
        raise InstallError(f"`{result.display()}` failed (exit {completed.returncode}):\n{tail}")
    return result
