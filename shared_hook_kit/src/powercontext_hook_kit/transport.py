"""POST JSON to the local runtime inside one hard, absolute deadline.

A hook sits on the user's critical path: whatever the runtime does — refuse, hang, trickle bytes,
redirect, send a gigabyte — the hook must be done by its deadline. So the deadline is enforced
on *total* elapsed time (every socket operation gets only what remains), not per ``recv``.

Start-up time is most of the hook's cost, so neither httpx (an SSL context even for plain
http, ~60 ms) nor ``http.client`` (``email`` and ``ssl`` imports, ~20 ms) is used: the kit
speaks the little HTTP/1.1 a loopback JSON exchange needs on a plain socket. Only ``http://``
to loopback and ``unix:`` sockets are ever spoken, so no TLS and no proxy handling is needed:
:func:`parse_runtime_url` refuses everything else before any request is made.

Whoever holds the TCP port gets the bearer token and the prompt, and any local process can
listen on a port the runtime is not using. So the default on POSIX is the runtime's
unix-domain socket in its data dir (spec 07, issue 15), and a socket is trusted only when it is
one: before connecting, the file must be a socket (``lstat``: not a symlink, not a regular file)
owned by this user, and on Linux the listening process must run as this user too
(``SO_PEERCRED``, which also closes the window between the check and the connect). There is no
fall-back to TCP: a missing, refused or untrusted socket is simply "runtime unavailable".
"""

from __future__ import annotations

import os
import socket
import stat
import sys
import time
from collections.abc import Callable
from typing import Literal

import msgspec

__all__ = [
    "MAX_RESPONSE_BYTES",
    "REQUEST_TIMEOUT_SECONDS",
    "Deadline",
    "Endpoint",
    "HttpFailure",
    "HttpOutcome",
    "HttpResponse",
    "RuntimeEndpoint",
    "UnixEndpoint",
    "UnsafeUrl",
    "describe_endpoint",
    "exchange",
    "is_loopback_host",
    "parse_loopback_url",
    "parse_runtime_url",
    "post_json",
    "unix_sockets_supported",
]

REQUEST_TIMEOUT_SECONDS = 1.0
MAX_RESPONSE_BYTES = 1024 * 1024
_READ_CHUNK = 64 * 1024
_USER_AGENT = "powercontext-hook-kit"
_MAX_LINE = 64 * 1024
_MAX_HEADERS = 100
_FRAMING = ("content-length", "transfer-encoding")
UNIX_URL_PREFIX = "unix:"
#: Longest socket path ``connect`` takes directly (``sun_path`` minus its NUL: 108 on Linux,
#: 104 on the BSDs and macOS). Longer paths are reached through the directory (Linux only).
_SUN_PATH_MAX = 107 if sys.platform.startswith("linux") else 103


class UnsafeUrl(ValueError):
    """The configured runtime URL is neither plain ``http://`` to a loopback address nor a
    ``unix:`` socket path."""


class UntrustedSocket(OSError):
    """The socket path is not a socket owned by this user (or its listener runs as another)."""


class Deadline:
    """One absolute point in (monotonic) time by which the whole hook must be finished.

    Created once per hook process and shared by every step, so two slow requests can never add
    up to more than the host was promised.
    """

    __slots__ = ("at",)

    def __init__(self, at: float) -> None:
        self.at = at

    @classmethod
    def after(cls, seconds: float, *, start: float | None = None) -> Deadline:
        base = time.monotonic() if start is None else start
        return cls(base + seconds)

    def remaining(self) -> float:
        return self.at - time.monotonic()

    @property
    def expired(self) -> bool:
        return self.remaining() <= 0


class Endpoint(msgspec.Struct, frozen=True):
    """Where the runtime listens: a loopback host (IP literal or ``localhost``) and a port."""

    host: str
    port: int


class UnixEndpoint(msgspec.Struct, frozen=True):
    """The runtime's unix-domain socket: an absolute path (``unix:/…/powercontext.sock``)."""

    path: str


RuntimeEndpoint = Endpoint | UnixEndpoint


class HttpResponse(msgspec.Struct, frozen=True):
    """A complete answer. ``body`` is read (≤ 1 MiB) only for 2xx; otherwise it is empty."""

    status: int
    body: bytes


FailureKind = Literal[
    "timeout", "connection_failed", "untrusted_socket", "oversize", "redirect", "malformed"
]


class HttpFailure(msgspec.Struct, frozen=True):
    """No usable answer: why, and the HTTP status when one was received (redirect, oversize)."""

    kind: FailureKind
    status: int | None = None


HttpOutcome = HttpResponse | HttpFailure


def is_loopback_host(host: str) -> bool:
    """``localhost``, an IPv4 literal in 127.0.0.0/8 or the IPv6 literal ``::1``.

    Uses ``inet_pton`` (strict dotted quad, no ``127.1`` shorthand) instead of ``ipaddress`` to
    keep start-up lean; IPv4-mapped IPv6 forms are refused rather than interpreted.
    """
    if host.lower() == "localhost":
        return True
    try:
        return socket.inet_pton(socket.AF_INET, host)[0] == 127
    except OSError:
        pass
    try:
        return socket.inet_pton(socket.AF_INET6, host) == socket.inet_pton(socket.AF_INET6, "::1")
    except (OSError, ValueError):
        return False


def parse_loopback_url(url: str) -> Endpoint:
    """Parse ``http://<loopback>[:port][/]``; anything else raises :class:`UnsafeUrl`.

    The token is sent in clear text, so https, remote hosts, credentials in the URL, paths,
    queries and fragments are all refused instead of being half-supported.
    """
    scheme, sep, rest = url.strip().partition("://")
    if not sep or scheme.lower() != "http":
        raise UnsafeUrl("the runtime URL must start with http://")
    netloc, slash, path = rest.partition("/")
    if (slash and path) or "?" in netloc or "#" in netloc:
        raise UnsafeUrl("the runtime URL must not have a path, query or fragment")
    if "@" in netloc:
        raise UnsafeUrl("the runtime URL must not contain credentials")
    if netloc.startswith("["):
        host, bracket, after = netloc[1:].partition("]")
        if not bracket or (after and not after.startswith(":")):
            raise UnsafeUrl("the runtime URL has a malformed IPv6 host")
        port_text = after[1:] if after else ""
    else:
        host, _, port_text = netloc.partition(":")
    if not host or not is_loopback_host(host):
        raise UnsafeUrl("the runtime URL must name a loopback host (127.0.0.0/8, ::1, localhost)")
    if port_text:
        if not port_text.isdigit() or not 0 < int(port_text) < 65536:
            raise UnsafeUrl("the runtime URL has an invalid port")
        port = int(port_text)
    else:
        port = 80
    return Endpoint(host=host.lower(), port=port)


def unix_sockets_supported() -> bool:
    """Whether this interpreter can speak ``AF_UNIX`` (not CPython on Windows)."""
    return hasattr(socket, "AF_UNIX")


def parse_runtime_url(url: str) -> RuntimeEndpoint:
    """``unix:/absolute/path`` → :class:`UnixEndpoint`; anything else → :func:`parse_loopback_url`.

    The socket path is taken literally (no percent-decoding, no normalisation): it must be
    absolute (one leading ``/``: ``unix://…`` authority forms are refused, not guessed at), name
    a file rather than a directory, and hold no control characters.
    """
    text = url.strip()
    if text[: len(UNIX_URL_PREFIX)].lower() != UNIX_URL_PREFIX:
        return parse_loopback_url(text)
    path = text[len(UNIX_URL_PREFIX) :]
    if not unix_sockets_supported():
        raise UnsafeUrl("unix: runtime URLs are not supported on this platform")
    if not path.startswith("/") or path.startswith("//"):
        raise UnsafeUrl("a unix: runtime URL must name an absolute path (unix:/path/to/socket)")
    if path.endswith("/") or any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in path):
        raise UnsafeUrl("a unix: runtime URL must name a socket file, without control characters")
    return UnixEndpoint(path)


def describe_endpoint(endpoint: RuntimeEndpoint) -> str:
    """Which transport an endpoint uses, for ``doctor``: ``unix socket <path>`` or
    ``TCP <host>:<port>``."""
    if isinstance(endpoint, UnixEndpoint):
        return f"unix socket {endpoint.path}"
    host = f"[{endpoint.host}]" if ":" in endpoint.host else endpoint.host
    return f"TCP {host}:{endpoint.port}"


def _loopback_addresses(host: str, port: int) -> list[tuple[int, tuple[str, int]]]:
    """Addresses to try, without a resolver call: ``localhost`` means 127.0.0.1 then ::1.

    Skipping ``getaddrinfo`` keeps a misconfigured resolver from stalling the hook and keeps
    ``localhost`` from ever leaving the machine, whatever ``/etc/hosts`` says.
    """
    if host == "localhost":
        return [(socket.AF_INET, ("127.0.0.1", port)), (socket.AF_INET6, ("::1", port))]
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    return [(family, (host, port))]


def _connect(endpoint: RuntimeEndpoint, stop_at: float) -> socket.socket:
    if isinstance(endpoint, UnixEndpoint):
        return _connect_unix(endpoint.path, stop_at)
    return _connect_tcp(endpoint, stop_at)


def _connect_unix(path: str, stop_at: float) -> socket.socket:
    """Connect to the socket at ``path`` — only if it is a socket owned by this user.

    ``lstat`` (never following a symlink) must show a socket whose owner is our effective uid:
    a symlink, regular file or someone else's socket planted in a shared location is refused
    before a byte is sent. On Linux the listener's own uid (``SO_PEERCRED``) must match too, so
    swapping the file between the check and the connect gains nothing.

    Paths longer than ``sun_path`` are reached through the directory: on Linux the directory is
    opened (``O_PATH``) and ``/proc/self/fd/<fd>/<name>`` is connected to, the same way the
    runtime binds such paths; elsewhere a too-long path fails like a missing socket.
    """
    directory, name = os.path.split(path)
    dir_fd: int | None = None
    target = path
    try:
        if len(os.fsencode(path)) > _SUN_PATH_MAX:
            if not sys.platform.startswith("linux"):
                raise OSError("the socket path is too long for AF_UNIX")
            flags = os.O_DIRECTORY | os.O_CLOEXEC | getattr(os, "O_PATH", os.O_RDONLY)
            dir_fd = os.open(directory, flags)
            target = f"/proc/self/fd/{dir_fd}/{name}"
            info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        else:
            info = os.lstat(path)
        if not stat.S_ISSOCK(info.st_mode) or info.st_uid != os.geteuid():
            raise UntrustedSocket("not a socket owned by this user")
        remaining = stop_at - time.monotonic()
        if remaining <= 0:
            raise TimeoutError("deadline reached while connecting")
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.settimeout(remaining)
            sock.connect(target)
            _check_peer(sock)
        except BaseException:
            sock.close()
            raise
        return sock
    finally:
        if dir_fd is not None:
            os.close(dir_fd)


_SO_PEERCRED: int | None = (
    getattr(socket, "SO_PEERCRED", None) if sys.platform.startswith("linux") else None
)


def _check_peer(sock: socket.socket) -> None:
    """On Linux: the listening process must run as this user (``struct ucred``: pid, uid, gid)."""
    if _SO_PEERCRED is None:
        return
    credentials = sock.getsockopt(socket.SOL_SOCKET, _SO_PEERCRED, 12)
    if int.from_bytes(credentials[4:8], sys.byteorder) != os.geteuid():
        raise UntrustedSocket("the socket's listener runs as another user")


def _connect_tcp(endpoint: Endpoint, stop_at: float) -> socket.socket:
    last_error: OSError = ConnectionRefusedError("no loopback address to connect to")
    for family, address in _loopback_addresses(endpoint.host, endpoint.port):
        remaining = stop_at - time.monotonic()
        if remaining <= 0:
            raise TimeoutError("deadline reached while connecting")
        try:
            sock = socket.socket(family, socket.SOCK_STREAM)
        except OSError as exc:  # e.g. IPv6 disabled on this machine
            last_error = exc
            continue
        try:
            sock.settimeout(remaining)
            sock.connect(address)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except TimeoutError:
            sock.close()
            raise
        except OSError as exc:
            sock.close()
            last_error = exc
            continue
        return sock
    raise last_error


class _Malformed(Exception):
    """The peer's bytes are not an HTTP/1.x response we can trust."""


class _Reader:
    """Buffered reads from one socket, every ``recv`` bounded by the same absolute stop time.

    A per-call socket timeout alone would let a server trickle one byte per second forever;
    re-arming the timeout from ``stop_at`` on each call bounds the total.
    """

    __slots__ = ("_buffer", "_sock", "_stop_at", "eof")

    def __init__(self, sock: socket.socket, stop_at: float) -> None:
        self._sock = sock
        self._stop_at = stop_at
        self._buffer = bytearray()
        self.eof = False

    def _fill(self) -> bool:
        """Read more bytes into the buffer; ``False`` at end of stream."""
        if self.eof:
            return False
        remaining = self._stop_at - time.monotonic()
        if remaining <= 0:
            raise TimeoutError("deadline reached while reading")
        self._sock.settimeout(remaining)
        chunk = self._sock.recv(_READ_CHUNK)
        if not chunk:
            self.eof = True
            return False
        self._buffer += chunk
        return True

    def line(self, limit: int) -> bytes | None:
        """One CRLF- (or LF-) terminated line without its terminator; ``None`` at a clean EOF."""
        while True:
            end = self._buffer.find(b"\n", 0, limit + 1)
            if end >= 0:
                line = bytes(self._buffer[:end])
                del self._buffer[: end + 1]
                return line[:-1] if line.endswith(b"\r") else line
            if len(self._buffer) > limit:
                raise _Malformed("line too long")
            if not self._fill():
                if self._buffer:
                    raise _Malformed("truncated line")
                return None

    def exactly(self, size: int) -> bytes:
        while len(self._buffer) < size:
            if not self._fill():
                raise _Malformed("body shorter than announced")
        data = bytes(self._buffer[:size])
        del self._buffer[:size]
        return data

    def until_eof(self, limit: int) -> bytes | None:
        """Everything until the peer closes, or ``None`` as soon as it exceeds ``limit``."""
        while len(self._buffer) <= limit and self._fill():
            pass
        if len(self._buffer) > limit:
            return None
        data = bytes(self._buffer)
        self._buffer.clear()
        return data


def _read_head(reader: _Reader) -> tuple[int, dict[str, str]] | None:
    """Status and lower-cased headers of the final response (interim 1xx ones are skipped).

    ``None`` when the peer closed before sending a single byte.
    """
    while True:
        status_line = reader.line(_MAX_LINE)
        if status_line is None:
            return None
        parts = status_line.split(None, 2)
        if (
            len(parts) < 2
            or parts[0] not in (b"HTTP/1.0", b"HTTP/1.1")
            or not (len(parts[1]) == 3 and parts[1].isdigit())
        ):
            raise _Malformed("bad status line")
        status = int(parts[1])
        headers: dict[str, str] = {}
        for _ in range(_MAX_HEADERS + 1):
            line = reader.line(_MAX_LINE)
            if line is None:
                raise _Malformed("connection closed inside the headers")
            if not line:
                break
            name, colon, value = line.partition(b":")
            if not colon or not name or name != name.strip():
                raise _Malformed("bad header line")
            key = name.decode("latin-1").lower()
            text = value.strip().decode("latin-1")
            if key in _FRAMING and headers.get(key, text) != text:
                raise _Malformed("conflicting framing headers")
            headers[key] = text
        else:
            raise _Malformed("too many headers")
        if status >= 200:
            return status, headers


def _read_chunked(reader: _Reader, limit: int) -> bytes | None:
    """A ``Transfer-Encoding: chunked`` body, or ``None`` once it exceeds ``limit``."""
    chunks: list[bytes] = []
    size = 0
    while True:
        line = reader.line(_MAX_LINE)
        if line is None:
            raise _Malformed("connection closed inside a chunked body")
        size_text = line.split(b";", 1)[0].strip()
        try:
            chunk_size = int(size_text, 16)
        except ValueError:
            raise _Malformed("bad chunk size") from None
        if chunk_size < 0:
            raise _Malformed("bad chunk size")
        if chunk_size == 0:
            while reader.line(_MAX_LINE):  # trailers, up to the blank line (or EOF)
                pass
            return b"".join(chunks)
        size += chunk_size
        if size > limit:
            return None
        chunks.append(reader.exactly(chunk_size))
        if reader.line(_MAX_LINE) != b"":
            raise _Malformed("chunk not followed by CRLF")


def _read_body(reader: _Reader, headers: dict[str, str], limit: int) -> bytes | None:
    """The body framed as the headers say; ``None`` as soon as it is known to exceed ``limit``."""
    encoding = headers.get("transfer-encoding")
    if encoding is not None:
        if encoding.lower() != "chunked":
            raise _Malformed("unsupported transfer encoding")
        return _read_chunked(reader, limit)
    declared = headers.get("content-length")
    if declared is None:
        return reader.until_eof(limit)
    if not declared.isdigit():
        raise _Malformed("bad content length")
    length = int(declared)
    if length > limit:
        return None
    return reader.exactly(length)


def _request_bytes(
    method: str,
    endpoint: RuntimeEndpoint,
    path: str,
    body: bytes | None,
    headers: dict[str, str],
) -> bytes:
    if isinstance(endpoint, UnixEndpoint):
        authority = "localhost"  # a socket has no host name; the runtime expects this one
    else:
        host = f"[{endpoint.host}]" if ":" in endpoint.host else endpoint.host
        authority = f"{host}:{endpoint.port}"
    lines = [f"{method} {path} HTTP/1.1", f"Host: {authority}"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    if body is not None:
        lines.append(f"Content-Length: {len(body)}")
    lines.append("Connection: close")
    head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
    return head + (body or b"")


def exchange(
    endpoint: RuntimeEndpoint,
    method: str,
    path: str,
    body: bytes | None,
    *,
    headers: dict[str, str],
    stop_at: float,
    max_response_bytes: int = MAX_RESPONSE_BYTES,
    read_error_bodies: bool = False,
    on_sent: Callable[[], None] | None = None,
) -> HttpOutcome:
    """One HTTP/1.1 request on a fresh connection, finished by ``stop_at``; never raises for
    network behaviour. ``on_sent`` is called once the request is written (a listener took it:
    the MCP bridge's catalog cache answers from then on without waiting for the answer).

    A few dozen lines of HTTP/1.1 instead of ``http.client``: that module drags in ``email``
    and ``ssl`` (~20 ms of imports) for header parsing and HTTPS the hook never uses. The same
    exchange runs over TCP loopback or the runtime's unix socket (``Host: localhost``), with the
    same absolute deadline for connect, send and receive. Only what a local JSON exchange needs
    is spoken: one request, ``Connection: close``, a response framed by ``Content-Length``,
    chunked encoding or the end of the stream. Redirects are reported, never followed. Non-2xx
    bodies are skipped unless ``read_error_bodies``.
    """
    if stop_at - time.monotonic() <= 0:
        return HttpFailure("timeout")
    sock: socket.socket | None = None
    try:
        sock = _connect(endpoint, stop_at)
        remaining = stop_at - time.monotonic()
        if remaining <= 0:
            return HttpFailure("timeout")
        sock.settimeout(remaining)
        sock.sendall(_request_bytes(method, endpoint, path, body, headers))
        if on_sent is not None:
            on_sent()
        reader = _Reader(sock, stop_at)
        head = _read_head(reader)
        if head is None:
            return HttpFailure("connection_failed")
        status, response_headers = head
        if 300 <= status < 400:
            return HttpFailure("redirect", status)
        if not 200 <= status < 300 and not read_error_bodies:
            return HttpResponse(status, b"")
        payload = _read_body(reader, response_headers, max_response_bytes)
        if payload is None:
            return HttpFailure("oversize", status)
        return HttpResponse(status, payload)
    except TimeoutError:
        return HttpFailure("timeout")
    except _Malformed:
        return HttpFailure("malformed")
    except UntrustedSocket:
        return HttpFailure("untrusted_socket")
    except OSError:
        return HttpFailure("connection_failed")
    finally:
        if sock is not None:
            sock.close()


def post_json(
    endpoint: RuntimeEndpoint,
    path: str,
    body: bytes,
    *,
    token: str | None,
    deadline: Deadline,
    request_timeout: float = REQUEST_TIMEOUT_SECONDS,
    max_response_bytes: int = MAX_RESPONSE_BYTES,
) -> HttpOutcome:
    """POST ``body`` (already-encoded JSON) to ``path``; never raises for network behaviour.

    The request may take at most ``min(request_timeout, deadline.remaining())`` in total —
    connect, send, headers and body together. Redirects are reported, never followed.
    """
    budget = min(request_timeout, deadline.remaining())
    if budget <= 0:
        return HttpFailure("timeout")
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json",
        "User-Agent": _USER_AGENT,
    }
    if token:
        headers["Authorization"] = f"Bearer {token}"
    return exchange(
        endpoint,
        "POST",
        path,
        body,
        headers=headers,
        stop_at=time.monotonic() + budget,
        max_response_bytes=max_response_bytes,
    )
