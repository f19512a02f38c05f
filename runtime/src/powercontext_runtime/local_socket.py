"""The daemon's unix-domain socket: its default place, its URL form, and over-long paths.

Why a socket file: a TCP port belongs to whichever local process binds it first. While the
daemon is down any program can listen on 127.0.0.1:7411 and receive the hooks' all-scopes
token and raw prompts. ``<data dir>/powercontext.sock`` is a file in the owner's private data
directory, created mode 0600, so only the owner (and root) can reach it, and nobody else can
put a listener there. Hooks and the CLI therefore use it by default on POSIX; TCP stays for
remote and other clients.

URL form everywhere (``POWERCONTEXT_URL``, ``--url``): ``unix:/absolute/path/powercontext.sock``.
Over the socket, requests are ordinary HTTP/1.1 with ``Host: localhost``.

Long paths: ``sun_path`` holds 108 bytes on Linux and 104 on macOS and the BSDs, including
the terminating NUL, and data dirs (pytest's ``tmp_path``, deep home directories) can be
longer. On Linux a longer path is reached through its directory: the directory is opened
(``O_PATH``) and the socket is addressed as ``/proc/self/fd/<fd>/powercontext.sock``, which
the kernel resolves to the same file, so ``bind`` creates and ``connect`` reaches the real
socket. Elsewhere a path that does not fit is an error that says what to shorten.

This module is imported by the client and the server alike, so it stays standard-library only.
"""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path
from types import TracebackType

__all__ = [
    "SOCKET_NAME",
    "URL_SCHEME",
    "SocketAddress",
    "SocketPathError",
    "max_address_bytes",
    "parse_unix_url",
    "unix_sockets_supported",
    "unix_url",
]

SOCKET_NAME = "powercontext.sock"
URL_SCHEME = "unix:"
_LINUX = sys.platform.startswith("linux")


class SocketPathError(ValueError):
    """A unix socket path that cannot be used; the message says why and what to change."""


def unix_sockets_supported() -> bool:
    """AF_UNIX stream sockets as this module uses them: POSIX systems (not Windows)."""
    return os.name == "posix" and hasattr(socket, "AF_UNIX")


def max_address_bytes() -> int:
    """Longest socket path ``bind``/``connect`` accept here (``sun_path`` minus its NUL)."""
    return 107 if _LINUX else 103


def unix_url(path: Path | str) -> str:
    return f"{URL_SCHEME}{path}"


def parse_unix_url(url: str) -> Path | None:
    """The socket path of a ``unix:/absolute/path`` URL, or None for any other URL."""
    if not url.startswith(URL_SCHEME):
        return None
    raw = url[len(URL_SCHEME) :]
    if not raw.startswith("/") or raw.startswith("//") or "\0" in raw:
        raise SocketPathError(f"a unix socket URL is unix:/absolute/path, not {url!r}")
    return Path(raw)


class SocketAddress:
    """What to pass to ``bind``/``connect`` for ``path``, however long ``path`` is.

    ``address`` is the path itself when it fits; otherwise (Linux) a ``/proc/self/fd`` path
    through an open descriptor of the directory, kept until :meth:`close`. With
    ``missing_ok`` a directory that does not exist yet is not an error: ``address`` is then
    the plain path, and connecting to it fails like connecting to any absent socket.
    """

    def __init__(self, path: Path, *, missing_ok: bool = False) -> None:
        self.path = path
        self._dir_fd: int | None = None
        limit = max_address_bytes()
        if len(os.fsencode(path)) <= limit:
            self.address = str(path)
            return
        if not _LINUX:
            raise SocketPathError(
                f"the socket path {path} is {len(os.fsencode(path))} bytes, longer than the "
                f"{limit} a unix socket address holds here; set POWERCONTEXT_SOCKET (or "
                "POWERCONTEXT_HOME) to a shorter path"
            )
        try:
            self._dir_fd = os.open(path.parent, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
        except (FileNotFoundError, NotADirectoryError):
            if not missing_ok:
                raise
            self.address = str(path)
            return
        self.address = f"/proc/self/fd/{self._dir_fd}/{path.name}"
        if len(os.fsencode(self.address)) > limit:
            self.close()
            raise SocketPathError(
                f"the socket file name {path.name!r} is too long for a unix socket address"
            )

    def close(self) -> None:
        if self._dir_fd is not None:
            os.close(self._dir_fd)
            self._dir_fd = None

    def __enter__(self) -> SocketAddress:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
