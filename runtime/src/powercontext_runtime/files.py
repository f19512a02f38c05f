"""The data dir belongs to its user alone: 0700 folders, 0600 files, whatever the umask.

The database holds every scope's memory and the token hashes, the auth folder the secrets, so
nothing in the data dir may ever be readable by another local user — not for a moment after
creation (files are created with their final mode, never chmod-ed afterwards) and not after an
older release left them 0755/0644 (start-up tightens them and says so in the log).

Nor may anything in it be *another* user's (docs/security.md § Files): a data dir someone else
created, or a database, token or socket file someone else owns, is refused before anything is
read or written (:func:`check_data_dir`), even though root could chmod it — its owner may
keep an open descriptor, change the mode back, or replace the file. So is a data dir another
user can replace: a folder above it writable by others (unless sticky, like ``/tmp``) or
owned by another user than root.
"""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Iterator
from pathlib import Path

from .errors import PowerContextError

__all__ = [
    "UnsafeDataDirError",
    "check_data_dir",
    "private_dir",
    "secure_data_dir",
    "write_private_file",
]

_log = logging.getLogger("powercontext.files")

DIR_MODE = 0o700
FILE_MODE = 0o600
#: The files SQLite keeps next to a database (it creates them with the database's own mode).
SQLITE_COMPANIONS = ("", "-wal", "-shm", "-journal")
#: Write permission for anyone but the owner.
_OTHERS_WRITE = stat.S_IWGRP | stat.S_IWOTH


class UnsafeDataDirError(PowerContextError):
    """The data dir (or a file in it) is, or may become, another local user's: every command
    that opens it stops with this one sentence (exit 1) instead of serving from it."""

    default_code = "data_dir_unsafe"


def _tighten(path: Path, mode: int) -> bool:
    """Take from ``path`` every permission bit ``mode`` does not have (group and others);
    True if there was one to take.

    Only ever removes bits: a file its owner made read-only (0400) stays read-only, and the
    start-up write check then says so. A file we may not change (a read-only mount) is left as
    it is and logged — unless others may write it, which refuses the data dir.
    """
    current = stat.S_IMODE(path.stat().st_mode)
    wanted = current & mode
    if current == wanted:
        return False
    try:
        os.chmod(path, wanted)
    except OSError as exc:
        if current & _OTHERS_WRITE:
            raise UnsafeDataDirError(
                f"{path} is writable by other users (mode {current:04o}) and cannot be made "
                f"private ({type(exc).__name__}): fix its mode or choose another data dir"
            ) from None
        _log.warning("data_dir_permissions_unchanged", extra={"error_type": type(exc).__name__})
        return False
    return True


def private_dir(path: Path) -> bool:
    """Create ``path`` and its missing parents as 0700 (whatever the umask: a parent made
    0777 would let others replace the data dir); True if an existing folder had to be
    tightened."""
    existed = path.is_dir()
    missing = [folder for folder in (path, *path.parents) if not folder.exists()]
    for folder in reversed(missing):
        try:
            folder.mkdir(mode=DIR_MODE)
        except FileExistsError:  # made meanwhile by another process
            pass
        else:
            os.chmod(folder, DIR_MODE)  # mkdir's mode is filtered by the umask
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


def check_data_dir(home: Path, database: Path | None, socket: Path | None = None) -> None:
    """Refuse a data dir that is, or may become, another local user's; reads, never writes.

    Raises :class:`UnsafeDataDirError` when a folder above ``home`` is owned by another user
    than root or writable by others without the sticky bit (they could rename the data dir
    away and put their own in its place, with a socket the hooks would talk to), or when
    ``home``, an entry of it or of its ``auth`` folder, the SQLite database (wherever it is) or
    its companions, or the unix ``socket`` belongs to another uid.
    """
    uid = _euid()
    if uid is None:  # no POSIX owners (Windows): the profile folder's ACL is the boundary
        return
    for folder in _folders_above(home):
        info = _stat(folder)
        if info is None:
            continue
        if info.st_uid not in (uid, 0):
            raise UnsafeDataDirError(
                f"{folder}, a folder above the data dir {home}, belongs to another user "
                f"(uid {info.st_uid}), who could replace the data dir: choose a data dir "
                "(POWERCONTEXT_HOME, --data-dir) under folders of your own"
            )
        mode = stat.S_IMODE(info.st_mode)
        if mode & _OTHERS_WRITE and not mode & stat.S_ISVTX:
            raise UnsafeDataDirError(
                f"{folder}, a folder above the data dir {home}, is writable by other users "
                f"(mode {mode:04o}), who could replace the data dir: run `chmod go-w {folder}` "
                "or choose another data dir (POWERCONTEXT_HOME, --data-dir)"
            )
    for path in _owned_paths(home, database, socket):
        info = _stat(path)
        if info is not None and info.st_uid != uid:
            subject = f"the data dir {home}" if path == home else str(path)
            raise UnsafeDataDirError(
                f"{subject} belongs to another user (uid {info.st_uid}), who could read every "
                "scope's memory and add tokens: nothing was read or written; move it away, or "
                "choose a data dir of your own (POWERCONTEXT_HOME, --data-dir)"
            )


def secure_data_dir(home: Path, database: Path | None, socket: Path | None = None) -> list[str]:
    """Refuse another user's data dir (:func:`check_data_dir`), then make the data dir, its
    auth folder and an SQLite database (with its WAL, shared-memory and journal files)
    private; returns what had to be tightened (names relative to the data dir, logged once as
    ``data_dir_permissions_tightened``).

    A missing database file is created empty with mode 0600 first: SQLite would create it with
    0644 under the usual umask, and gives its WAL and shared-memory files the database's mode.
    """
    check_data_dir(home, database, socket)
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


def _euid() -> int | None:
    geteuid = getattr(os, "geteuid", None)
    return None if geteuid is None else int(geteuid())


def _stat(path: Path) -> os.stat_result | None:
    """``path``'s status, through a symbolic link (what it points at is what gets opened)."""
    try:
        return os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None


def _folders_above(home: Path) -> dict[Path, None]:
    """Every folder above ``home``, as written and with symbolic links resolved (both are
    walked to reach it), nearest first."""
    absolute = Path(os.path.abspath(home))
    return dict.fromkeys([*absolute.parents, *absolute.resolve().parents])


def _owned_paths(home: Path, database: Path | None, socket: Path | None) -> Iterator[Path]:
    """What must be the user's own: the data dir, what it and its auth folder hold, the
    database and its companions, the socket."""
    yield home
    for folder in (home, home / "auth"):
        if folder.is_dir():
            yield from sorted(folder.iterdir())
    if database is not None:
        yield from (database.with_name(database.name + s) for s in SQLITE_COMPANIONS)
    if socket is not None:
        yield socket


def _relative(path: Path, home: Path) -> str:
    try:
        return str(path.relative_to(home))
    except ValueError:  # a database outside the data dir
        return path.name
