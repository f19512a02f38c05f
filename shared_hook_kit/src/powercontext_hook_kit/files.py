"""Reading small local files without ever blocking the hook.

A hook runs inside the user's project and has a hard deadline, but ``open()`` has none: opening
a FIFO for reading waits for a writer forever, and a device file can be endless. Every file the
hook reads on its way to a request (git's ``.git``/``config``/``commondir`` pointers, the
workspace binding, ``plugins.toml``, the runtime's token file, the receipt store) goes through
:func:`read_regular_file`: opened with ``O_NONBLOCK`` (so the open itself cannot wait), checked
with ``fstat`` to be a regular file *after* opening (no window for a swap), and read up to a
bound. Anything else reads as "not there".
"""

from __future__ import annotations

import os
import stat
from contextlib import suppress

__all__ = [
    "NONBLOCKING_READ_FLAGS",
    "read_regular_file",
    "read_regular_file_tail",
    "replace_with_private_file",
]

#: ``O_NONBLOCK``: an open that would wait (a FIFO without writer, some devices) returns at once;
#: ``O_NOCTTY``: a terminal never becomes the hook's controlling terminal.
NONBLOCKING_READ_FLAGS = (
    os.O_RDONLY
    | getattr(os, "O_NONBLOCK", 0)
    | getattr(os, "O_NOCTTY", 0)
    | getattr(os, "O_CLOEXEC", 0)
    | getattr(os, "O_BINARY", 0)
)
_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


def read_regular_file(path: str, limit: int, *, follow_symlinks: bool = True) -> bytes | None:
    """At most ``limit`` bytes of the regular file at ``path``, or ``None``.

    ``None`` when the file is missing, unreadable, not a regular file (FIFO, socket, device,
    directory), larger than ``limit``, or — with ``follow_symlinks=False`` — a symlink.
    Never blocks on the file's type: the open is non-blocking and the type is checked on the
    opened descriptor. Raises nothing for I/O errors.
    """
    flags = NONBLOCKING_READ_FLAGS | (0 if follow_symlinks else _O_NOFOLLOW)
    try:
        fd = os.open(path, flags)
    except (OSError, ValueError):  # ValueError: a NUL in the path
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > limit:
            return None
        chunks: list[bytes] = []
        size = 0
        while size <= limit:
            chunk = os.read(fd, limit + 1 - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        return b"".join(chunks) if size <= limit else None
    except OSError:
        return None
    finally:
        os.close(fd)


def replace_with_private_file(temporary: str, path: str, data: bytes) -> None:
    """Write ``data`` to the new file ``temporary`` (0600 whatever the umask, never through a
    symlink) and rename it over ``path``: readers see the old bytes or the new, never a mix,
    and no other user ever can. A directory at ``path`` is never replaced."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(temporary, flags | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0), 0o600)
    try:
        try:
            if hasattr(os, "fchmod"):
                os.fchmod(fd, 0o600)  # exact mode, whatever the umask
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
        finally:
            os.close(fd)
        if os.path.isdir(path):
            raise IsADirectoryError(path)
        os.replace(temporary, path)
    except BaseException:
        with suppress(OSError):
            os.unlink(temporary)
        raise


def read_regular_file_tail(path: str, limit: int) -> tuple[bytes, bool] | None:
    """The last ``limit`` bytes of the regular file at ``path`` and whether that is all of it,
    or ``None`` (missing, unreadable, not a regular file).

    For files that only ever grow at the end (host transcripts): what happened last is what a
    hook wants, and the read stays bounded however long the session ran. Opened like
    :func:`read_regular_file` — non-blocking, type checked on the descriptor — and raises
    nothing for I/O errors.
    """
    try:
        fd = os.open(path, NONBLOCKING_READ_FLAGS)
    except (OSError, ValueError):
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return None
        start = max(info.st_size - limit, 0)
        if start:
            os.lseek(fd, start, os.SEEK_SET)
        chunks: list[bytes] = []
        size = 0
        while size < limit:
            chunk = os.read(fd, limit - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        return b"".join(chunks), start == 0
    except OSError:
        return None
    finally:
        os.close(fd)
