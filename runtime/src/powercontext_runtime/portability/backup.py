"""``powercontext backup``: a consistent copy of the SQLite database, taken online.

SQLite's online backup API (``sqlite3.Connection.backup``) copies every page in one step,
inside one read transaction: in WAL mode writers go on committing meanwhile, and the copy is
the database exactly as it was when the step began — every write acknowledged before the
backup started is in it, none that started later is half in it. (A step-wise copy would
restart from scratch whenever another connection wrote between steps, and under a busy
daemon might never finish.)

The copy is written next to the destination under a temporary name, checked with
``PRAGMA integrity_check``, switched to a single self-contained file (rollback journal, no
``-wal`` beside it), made private (0600: it holds token hashes and every stored text) and
only then moved into place, so a failed backup never leaves a partial file at the path.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ..errors import ConflictError, InvalidRequestError, NotFoundError, UnavailableError
from ..store.database import BUSY_TIMEOUT_SECONDS

__all__ = ["BackupResult", "backup_sqlite"]


@dataclass(frozen=True, slots=True)
class BackupResult:
    path: Path
    bytes: int
    pages: int
    scopes: int
    memory_entries: int


class BackupUnsupportedError(InvalidRequestError):
    default_code = "backup_unsupported"


def unsupported_on_oceanbase() -> BackupUnsupportedError:
    return BackupUnsupportedError(
        "backup copies an SQLite database; this one is OceanBase: use the database's own "
        "backup (OceanBase's physical backup, or obdumper/mysqldump for a logical copy), or "
        "`powercontext export` for a portable copy of the data"
    )


def _same_file(a: Path, b: Path) -> bool:
    try:
        return a.samefile(b)
    except OSError:
        return False


def backup_sqlite(source: Path, destination: Path, *, force: bool = False) -> BackupResult:
    """Copy the database file ``source`` to ``destination`` (see the module docstring)."""
    if not source.is_file():
        raise NotFoundError(
            f"no SQLite database at {source}", code="database_not_found", details=None
        )
    destination = destination.expanduser()
    if destination.is_dir():
        raise InvalidRequestError(f"{destination} is a directory; name the backup file")
    for live in (source, Path(f"{source}-wal"), Path(f"{source}-shm")):
        if destination.absolute() == live.absolute() or _same_file(destination, live):
            raise InvalidRequestError("the backup path is the live database's own file")
    if destination.exists() and not force:
        raise ConflictError(
            f"{destination} already exists; pass --force to replace it", code="backup_exists"
        )
    folder = destination.parent if str(destination.parent) else Path(".")
    if not folder.is_dir():
        raise NotFoundError(f"no folder {folder} for the backup", code="folder_not_found")
    fd, partial = tempfile.mkstemp(prefix=f".{destination.name}.", suffix=".partial", dir=folder)
    os.close(fd)  # mkstemp made it 0600; sqlite3 opens it by name
    try:
        pages = _copy(source, Path(partial))
        result = _check(Path(partial), pages)
        os.chmod(partial, 0o600)
        os.replace(partial, destination)
        with contextlib.suppress(OSError):  # the rename itself survives a crash
            dir_fd = os.open(folder, os.O_RDONLY)
            try:
                os.fsync(dir_fd)
            finally:
                os.close(dir_fd)
    except BaseException:
        for leftover in (partial, f"{partial}-journal", f"{partial}-wal", f"{partial}-shm"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(leftover)
        raise
    return BackupResult(destination, destination.stat().st_size, result[0], result[1], result[2])


def _copy(source: Path, partial: Path) -> int:
    try:
        with (
            contextlib.closing(sqlite3.connect(source, timeout=BUSY_TIMEOUT_SECONDS)) as src,
            contextlib.closing(sqlite3.connect(partial)) as dst,
        ):
            src.backup(dst)  # pages=-1: every page in one step, one snapshot
            dst.execute("PRAGMA journal_mode=DELETE")  # one self-contained file
            (pages,) = dst.execute("PRAGMA page_count").fetchone()
            return int(pages)
    except sqlite3.Error as exc:
        raise UnavailableError(
            f"the backup could not be taken ({type(exc).__name__}); the database was not changed"
        ) from None


def _check(partial: Path, pages: int) -> tuple[int, int, int]:
    """``(pages, scopes, memory entries)`` of the copy, after its integrity check."""
    try:
        with contextlib.closing(sqlite3.connect(partial)) as copy:
            verdict = [row[0] for row in copy.execute("PRAGMA integrity_check")]
            if verdict != ["ok"]:
                raise UnavailableError(
                    "the copy failed its integrity check; nothing was written at the backup "
                    "path (check the source with `powercontext doctor`)",
                    code="backup_corrupt",
                )
            tables = {row[0] for row in copy.execute("SELECT name FROM sqlite_master")}
            scopes = entries = 0
            if "memory_heads" in tables:
                (scopes,) = copy.execute("SELECT count(*) FROM memory_heads").fetchone()
            if "memory_entries" in tables:
                (entries,) = copy.execute("SELECT count(*) FROM memory_entries").fetchone()
    except sqlite3.Error as exc:
        raise UnavailableError(
            f"the copy could not be checked ({type(exc).__name__})", code="backup_corrupt"
        ) from None
    return pages, int(scopes), int(entries)
