"""Keep the whole test session out of the real user's directories (issue 16 #9).

Tests start real runtimes, hooks and host CLIs, and any of them that is not given a directory
falls back to the platform's: the runtime's data dir, the hooks' state dir (diagnostics,
receipts, the prompt spool), the plugins' config, ``~/.codex`` and ``~/.claude``. So before
anything runs, the session points every one of those at a private temporary folder, through
the environment (which every subprocess inherits), and at the end it checks that nothing
appeared or changed in the real ones: a test that escapes fails the run instead of writing
into a developer's home. ``HOME`` itself is kept — npm and pip read their configuration there.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

__all__ = ["GUARDED_VARIABLES", "isolate", "real_user_paths", "snapshot"]

#: Variables the session replaces, and the folder (inside the session's temporary root) each
#: one gets. XDG_CONFIG_HOME stays (pip's configuration lives there); POWERCONTEXT's own
#: config file is reached through it, so the check below also covers it.
GUARDED_VARIABLES = {
    "POWERCONTEXT_HOME": "powercontext-home",
    "XDG_DATA_HOME": "xdg-data",
    "XDG_STATE_HOME": "xdg-state",
    "CODEX_HOME": "codex-home",
    "CLAUDE_CONFIG_DIR": "claude-config",
}


def real_user_paths(env: dict[str, str] | os._Environ[str]) -> list[Path]:
    """Where the product would write for the real user, computed before isolation."""
    home = Path(env.get("HOME") or Path.home())

    def xdg(variable: str, default: str) -> Path:
        value = env.get(variable, "")
        return Path(value) if os.path.isabs(value) else home / default

    return [
        xdg("XDG_DATA_HOME", ".local/share") / "powercontext",
        xdg("XDG_STATE_HOME", ".local/state") / "powercontext",
        xdg("XDG_CONFIG_HOME", ".config") / "powercontext",
        xdg("XDG_CONFIG_HOME", ".config") / "systemd" / "user" / "powercontext.service",
        Path(env["CODEX_HOME"]) if env.get("CODEX_HOME") else home / ".codex",
        Path(env["CLAUDE_CONFIG_DIR"]) if env.get("CLAUDE_CONFIG_DIR") else home / ".claude",
        home / ".claude.json",
    ]


def snapshot(paths: list[Path]) -> dict[str, tuple[int, int]]:
    """(size, mtime in ns) of every file under ``paths`` — enough to see any write."""
    seen: dict[str, tuple[int, int]] = {}
    for root in paths:
        candidates = [root] if root.is_file() else (root.rglob("*") if root.is_dir() else [])
        for path in candidates:
            try:
                info = path.lstat()
            except OSError:
                continue
            seen[str(path)] = (info.st_size, info.st_mtime_ns)
    return seen


def isolate() -> tuple[Path, list[Path], dict[str, tuple[int, int]]]:
    """Point the guarded variables at a fresh temporary root; returns it, the real paths and
    their snapshot, for :func:`snapshot` to compare at the end."""
    real = real_user_paths(os.environ)
    before = snapshot(real)
    root = Path(tempfile.mkdtemp(prefix="powercontext-test-user-"))
    for variable, folder in GUARDED_VARIABLES.items():
        (root / folder).mkdir(mode=0o700)
        os.environ[variable] = str(root / folder)
    return root, real, before
