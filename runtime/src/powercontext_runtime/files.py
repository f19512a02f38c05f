"""The data dir belongs to its user alone: 0700 folders, 0600 files, whatever the umask.

The database holds every scope's memory and the token hashes, the auth folder the secrets, so
nothing in the data dir may ever be readable by another local user — not for a moment after
creation (files are created with their final mode, never chmod-ed afterwards) and not after an
older release left them 0755/0644 (start-up tightens them and says so in the log).
"""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path

__all__ = ["private_dir", "secure_data_dir", "write_private_file"]

_log = logging.getLogger("powercontext.files")

DIR_MODE = 0o700
FILE_MODE = 0o600
#: The files SQLite keeps next to a database (it creates them with the database's own mode).
SQLITE_COMPANIONS = ("", "-wal", "-shm", "-journal")


def _tighten(path: Path, mode: int) -> bool:
    """Take from ``path`` every permission bit ``mode`` does not have (group and others);
    True if there was one to take.

    Only ever removes bits: a file its owner made read-only (0400) stays read-only, and the
    start-up write check then says so. A file we may not change (another owner, a read-only
    mount) is left as it is and logged, rather than stopping the daemon here.
    """
    current = stat.S_IMODE(path.stat().st_mode)
    wanted = current & mode
    if current == wanted:
        return False
    try:
        os.chmod(path, wanted)
    except OSError as exc:
        _log.warning("data_dir_permissions_unchanged", extra={"error_type": type(exc).__name__})
        return False
    return True


def private_dir(path: Path) -> bool:
    """Create ``path`` (and missing parents of it inside nothing shared) as 0700; True if an
    existing folder had to be tightened."""
    existed = path.is_dir()
    path.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
    tightened = _tighten(path, DIR_MODE)
    return existed and tightened


def write_private_file(path: Path, text: str) -> None:
    """Atomically replace ``path`` with ``text`` in a file that is 0600 from its creation.

    A missing folder is created 0700; an existing one keeps its mode (``secure_data_dir``
    tightens the data dir's own folders)."""
    if not path.parent.is_dir():
        private_dir(path.parent)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, FILE_MODE)
    try:
        os.fchmod(fd, FILE_MODE)  # an existing tmp file keeps its old mode under O_CREAT
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            fd = -1
            handle.write(text)
    finally:
        if fd != -1:
            os.close(fd)
    os.replace(tmp, path)


def secure_data_dir(home: Path, database: Path | None) -> list[str]:
    """Make the data dir, its auth folder and an SQLite database (with its WAL, shared-memory
    and journal files) private; returns what had to be tightened (names relative to the data
    dir, logged once as ``data_dir_permissions_tightened``).

    A missing database file is created empty with mode 0600 first: SQLite would create it with
    0644 under the usual umask, and gives its WAL and shared-memory files the database's mode.
    """
    tightened = []
    if private_dir(home):
        tightened.append(".")
    auth = home / "auth"
    if auth.exists() and _tighten(auth, DIR_MODE):
        tightened.append("auth")
    for token_file in sorted(auth.glob("*")) if auth.is_dir() else []:
        if token_file.is_file() and _tighten(token_file, FILE_MODE):
            tightened.append(f"auth/{token_file.name}")
    if database is not None:
        if not database.parent.exists():  # an existing folder elsewhere is the user's to set
            private_dir(database.parent)
        if not database.exists():
            os.close(os.open(database, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW, FILE_MODE))
        for suffix in SQLITE_COMPANIONS:
            companion = database.with_name(database.name + suffix)
            if companion.is_file() and _tighten(companion, FILE_MODE):
                tightened.append(_relative(companion, home))
    if tightened:
        _log.warning(
            "data_dir_permissions_tightened", extra={"count": len(tightened), "files": tightened}
        )
    return tightened


def _relative(path: Path, home: Path) -> str:
    try:
        return str(path.relative_to(home))
    except ValueError:  # a database outside the data dir
        return path.name
