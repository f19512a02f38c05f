"""The daemon's listening sockets: TCP and the unix-domain socket, bound before the ready line.

uvicorn would bind the TCP socket itself, after the ready line was printed and after the
runtime had opened the database; a busy port then surfaced as a uvicorn log line and exit 3.
Binding here first means: the ready line names sockets that already accept connections
(``listen`` is called, so early clients queue instead of being refused), a busy port or a live
daemon on the socket stops start-up with one clear sentence before the database is touched,
and both sockets can be handed to every worker (``Server.run(sockets=…)``).

The unix socket (see :mod:`powercontext_runtime.local_socket`):

* is created 0600 — bound under umask 0o177, so there is no moment at which another user may
  connect — in a directory created 0700 when missing;
* replaces a stale socket file (nothing answers a connect: a crashed daemon's leftover), but is
  never taken from a live listener, and never replaces something that is not a socket;
* is removed on clean shutdown, only if the file there is still the one bound here.
"""

from __future__ import annotations

import errno
import os
import socket
import stat
from dataclasses import dataclass, field
from pathlib import Path

from ..local_socket import SocketAddress, SocketPathError, unix_url

__all__ = ["FD_RESERVE", "ListenError", "Listeners", "open_listeners", "raise_file_limit"]

#: Descriptors kept free of connections in each process: the database pool (up to 17
#: SQLite connections with their WAL and shared-memory files), the prompt connection, log and
#: pipe descriptors. Running out would make the event loop's accept() fail, and libuv then
#: drops every connection waiting in the backlog, real ones included.
FD_RESERVE = 128
_SOCKET_MODE = 0o600
_DIR_MODE = 0o700
#: macOS refuses RLIM_INFINITY for RLIMIT_NOFILE; OPEN_MAX is what it accepts.
_DARWIN_OPEN_MAX = 10240


class ListenError(Exception):
    """A socket could not be bound; the message is for the operator, with what to do."""


@dataclass
class Listeners:
    """The bound sockets of one daemon (TCP first), and the unix socket file to clean up."""

    tcp: socket.socket
    unix: socket.socket | None = None
    unix_path: Path | None = None
    _unix_identity: tuple[int, int] | None = field(default=None, repr=False)

    @property
    def sockets(self) -> list[socket.socket]:
        return [self.tcp] if self.unix is None else [self.tcp, self.unix]

    @property
    def tcp_url(self) -> str:
        host, port = self.tcp.getsockname()[:2]
        return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"

    @property
    def unix_url(self) -> str | None:
        return None if self.unix_path is None else unix_url(self.unix_path)

    def close(self) -> None:
        """Close the sockets and remove the socket file, if it is still the one bound here."""
        for sock in self.sockets:
            sock.close()
        if self.unix_path is None or self._unix_identity is None:
            return
        try:
            with SocketAddress(self.unix_path) as address:
                info = os.lstat(address.address)
                if (info.st_dev, info.st_ino) == self._unix_identity:
                    os.unlink(address.address)
        except OSError:
            pass  # already gone, or the directory with it
        self._unix_identity = None


def open_listeners(host: str, port: int, unix_path: Path | None, backlog: int) -> Listeners:
    """Bind and listen on TCP ``host:port`` and, unless None, the unix socket ``unix_path``."""
    tcp = _bind_tcp(host, port, backlog)
    if unix_path is None:
        return Listeners(tcp)
    try:
        unix, identity = _bind_unix(unix_path, backlog)
    except BaseException:
        tcp.close()
        raise
    return Listeners(tcp, unix, unix_path, identity)


def _bind_tcp(host: str, port: int, backlog: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        if os.name == "posix":  # on Windows SO_REUSEADDR would let a second daemon share it
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(backlog)
    except OSError as exc:
        sock.close()
        where = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        if exc.errno == errno.EADDRINUSE:
            reason = (
                "the address is already in use (another `powercontext serve`, or another "
                "program); stop it or choose another --port"
            )
        else:
            reason = exc.strerror or type(exc).__name__
        raise ListenError(f"cannot listen on {where}: {reason}") from None
    sock.set_inheritable(True)
    return sock


def _bind_unix(path: Path, backlog: int) -> tuple[socket.socket, tuple[int, int]]:
    if not path.parent.exists():
        path.parent.mkdir(mode=_DIR_MODE, parents=True, exist_ok=True)
    try:
        address = SocketAddress(path)
    except (SocketPathError, OSError) as exc:
        raise ListenError(f"cannot use the socket unix:{path}: {exc}") from None
    with address:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            try:
                _bind_private(sock, address.address)
            except OSError as exc:
                if exc.errno != errno.EADDRINUSE:
                    raise
                _remove_stale(path, address.address)
                _bind_private(sock, address.address)
            os.chmod(address.address, _SOCKET_MODE)
            info = os.lstat(address.address)
            sock.listen(backlog)
        except OSError as exc:
            sock.close()
            raise ListenError(
                f"cannot listen on unix:{path}: {exc.strerror or type(exc).__name__}"
            ) from None
        except BaseException:
            sock.close()
            raise
    sock.set_inheritable(True)
    return sock, (info.st_dev, info.st_ino)


def _bind_private(sock: socket.socket, address: str) -> None:
    """``bind`` creates the socket file with mode 0777 & ~umask: 0600 under umask 0o177.

    The umask is process-wide, so this runs while serve is still single-threaded (before the
    runtime, its pool threads and the background jobs exist).
    """
    previous = os.umask(0o177)
    try:
        sock.bind(address)
    finally:
        os.umask(previous)


def _remove_stale(path: Path, address: str) -> None:
    """Unlink the socket file at ``address`` if nothing listens on it; refuse otherwise."""
    info = os.lstat(address)
    if not stat.S_ISSOCK(info.st_mode):
        raise ListenError(
            f"cannot listen on unix:{path}: the file there is not a socket; move it away or "
            "set POWERCONTEXT_SOCKET (serve --socket) to another path"
        )
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(2.0)
    try:
        probe.connect(address)
    except (ConnectionRefusedError, FileNotFoundError):
        os.unlink(address)  # a leftover of a daemon that did not shut down cleanly
        return
    except OSError:
        pass  # e.g. a full backlog: somebody is listening
    finally:
        probe.close()
    raise ListenError(
        f"cannot listen on unix:{path}: another daemon is already listening there (is "
        "`powercontext serve` running for this data dir?); stop it or choose another --socket"
    )


def raise_file_limit() -> int | None:
    """Raise the soft ``RLIMIT_NOFILE`` to the hard limit; the soft limit now in force.

    Every connection is a descriptor, and the connection budget is derived from this limit
    (:func:`powercontext_runtime.serving.limits.connection_budget`); the common soft default
    of 1,024 is far below what the hard limit allows. None where the limit does not exist.
    """
    try:
        import resource
    except ImportError:  # Windows
        return None
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    ceiling = _DARWIN_OPEN_MAX if hard == resource.RLIM_INFINITY else hard
    for target in (ceiling, min(ceiling, _DARWIN_OPEN_MAX)):
        if target <= soft:
            break
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (ValueError, OSError):
            continue
        soft = target
        break
    return None if soft == resource.RLIM_INFINITY else soft
