"""The README's two commands, as ``make`` would run them (a dry run: nothing is installed).

``make run`` installs only what serving needs (the runtime and the plugins) and says where the
``powercontext`` command is before it serves; ``make test`` installs the development tools as
well (issue 30: ``make run`` used to install the whole toolchain, 505 MB, first, and nothing
said the command lives in ``.venv/bin``).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="no make on PATH")


def dry_run(target: str) -> list[str]:
    """The commands ``make`` would run for ``target``, every prerequisite remade (``-B``)."""
    done = subprocess.run(
        ["make", "--no-print-directory", "-n", "-B", target],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return done.stdout.splitlines()


def installs(commands: list[str]) -> str:
    return "\n".join(line for line in commands if "pip install" in line)


def test_make_run_installs_what_serving_needs_and_says_where_the_command_is() -> None:
    commands = dry_run("run")
    pip = installs(commands)
    for member in ("./runtime", "./shared_hook_kit", "./codex_plugin", "./claude_code_plugin"):
        assert f"-e {member}" in pip, pip
    assert ".[dev]" not in pip and "[semantic]" not in pip, pip
    serve = next(i for i, line in enumerate(commands) if line.endswith("powercontext serve"))
    path = 'export PATH="' + str(ROOT / ".venv" / "bin") + ':$PATH"'
    hint = [i for i, line in enumerate(commands) if path in line]
    assert hint and hint[0] < serve, commands


def test_make_test_installs_the_development_tools_too() -> None:
    pip = installs(dry_run("test"))
    assert "-e ./runtime" in pip and ".[dev]" in pip and "./runtime[semantic]" in pip, pip
