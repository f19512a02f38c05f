"""POST JSON to the local runtime inside one hard, absolute deadline.

A hook sits on the user's critical path: whatever the runtime does — refuse, hang, trickle bytes,
redirect, send a gigabyte — the hook must be done by its deadline. So the deadline is enforced
on *total* elapsed time (every socket operation gets only what remains), not per ``recv``.

Standard library ``http.client`` is used instead of httpx because start-up time is most of the
hook's cost (spec 07: httpx builds an SSL context even for plain http, ~60 ms more per prompt).
Only plain ``http://`` to loopback is ever spoken, so no TLS and no proxy handling is needed:
:func:`parse_loopback_url` refuses everything else before any request is made.
"""

from __future__ import annotations

import http.client
import io
import socket
import time
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
    "UnsafeUrl",
    "is_loopback_host",
    "parse_loopback_url",
    "post_json",
]

REQUEST_TIMEOUT_SECONDS = 1.0
MAX_RESPONSE_BYTES = 1024 * 1024
_READ_CHUNK = 64 * 1024
_USER_AGENT = "powercontext-hook-kit"


class UnsafeUrl(ValueError):
    """The configured runtime URL is not plain ``http://`` to a loopback address."""


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


class HttpResponse(msgspec.Struct, frozen=True):
    """A complete answer. ``body`` is read (≤ 1 MiB) only for 2xx; otherwise it is empty."""

    status: int
    body: bytes


FailureKind = Literal["timeout", "connection_failed", "oversize", "redirect", "malformed"]


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


class _DeadlineReader(io.RawIOBase):
    """Raw socket reader that gives each ``recv`` only the time left until ``stop_at``.

    A per-call socket timeout alone would let a server trickle one byte per second forever;
    re-arming the timeout from an absolute stop time bounds the total.
    """

    def __init__(self, owner: _DeadlineSocket) -> None:
        super().__init__()
        self._owner = owner
        self._sock = owner.sock
        self._stop_at = owner.stop_at

    def readable(self) -> bool:
        return True

    def close(self) -> None:
        if not self.closed:
            super().close()
            self._owner.reader_closed()

    def readinto(self, buffer: memoryview | bytearray) -> int:  # type: ignore[override]
        remaining = self._stop_at - time.monotonic()
        if remaining <= 0:
            raise TimeoutError("deadline reached while reading")
        self._sock.settimeout(remaining)
        return self._sock.recv_into(buffer)


class _DeadlineSocket:
    """The three socket methods ``http.client`` uses, each bounded by the same stop time.

    Like a real socket, it stays open while a reader made by :meth:`makefile` is open:
    ``http.client`` closes the connection as soon as a ``Connection: close`` response starts
    and leaves the response to finish reading.
    """

    def __init__(self, sock: socket.socket, stop_at: float) -> None:
        self.sock = sock
        self.stop_at = stop_at
        self._readers = 0
        self._closing = False

    def sendall(self, data: bytes) -> None:
        remaining = self.stop_at - time.monotonic()
        if remaining <= 0:
            raise TimeoutError("deadline reached while sending")
        self.sock.settimeout(remaining)
        self.sock.sendall(data)

    def makefile(self, mode: str = "rb") -> io.BufferedReader:
        self._readers += 1
        return io.BufferedReader(_DeadlineReader(self), _READ_CHUNK)

    def reader_closed(self) -> None:
        self._readers -= 1
        if self._closing and self._readers <= 0:
            self.sock.close()

    def close(self) -> None:
        self._closing = True
        if self._readers <= 0:
            self.sock.close()


def _loopback_addresses(host: str, port: int) -> list[tuple[int, tuple[str, int]]]:
    """Addresses to try, without a resolver call: ``localhost`` means 127.0.0.1 then ::1.

    Skipping ``getaddrinfo`` keeps a misconfigured resolver from stalling the hook and keeps
    ``localhost`` from ever leaving the machine, whatever ``/etc/hosts`` says.
    """
    if host == "localhost":
        return [(socket.AF_INET, ("127.0.0.1", port)), (socket.AF_INET6, ("::1", port))]
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    return [(family, (host, port))]


def _connect(endpoint: Endpoint, stop_at: float) -> socket.socket:
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


class _Connection(http.client.HTTPConnection):
    """``HTTPConnection`` whose socket never outlives the request's stop time."""

    def __init__(self, endpoint: Endpoint, stop_at: float) -> None:
        super().__init__(endpoint.host, endpoint.port, timeout=max(stop_at - time.monotonic(), 0))
        self._endpoint = endpoint
        self._stop_at = stop_at

    def connect(self) -> None:
        sock = _DeadlineSocket(_connect(self._endpoint, self._stop_at), self._stop_at)
        self.sock = sock  # type: ignore[assignment]  # duck-typed: sendall, makefile, close


def _read_capped(response: http.client.HTTPResponse, limit: int) -> bytes | None:
    """The body, or ``None`` as soon as it is known to exceed ``limit`` (never buffered whole)."""
    declared = response.getheader("Content-Length")
    if declared is not None and declared.strip().isdigit() and int(declared) > limit:
        return None
    chunks: list[bytes] = []
    size = 0
    while True:
        chunk = response.read(_READ_CHUNK)
        if not chunk:
            return b"".join(chunks)
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)


def post_json(
    endpoint: Endpoint,
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
    stop_at = time.monotonic() + budget
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json",
        "User-Agent": _USER_AGENT,
        "Connection": "close",
    }
    if token:
        headers["Authorization"] = f"Bearer {token}"
    connection = _Connection(endpoint, stop_at)
    response: http.client.HTTPResponse | None = None
    try:
        connection.request("POST", path, body=body, headers=headers)
        response = connection.getresponse()
        status = response.status
        if 300 <= status < 400:
            return HttpFailure("redirect", status)
        if not 200 <= status < 300:
            return HttpResponse(status, b"")
        payload = _read_capped(response, max_response_bytes)
        if payload is None:
            return HttpFailure("oversize", status)
        return HttpResponse(status, payload)
    except TimeoutError:
        return HttpFailure("timeout")
    except http.client.RemoteDisconnected:
        return HttpFailure("connection_failed")
    except http.client.HTTPException:
        return HttpFailure("malformed")
    except OSError:
        return HttpFailure("connection_failed")
    finally:
        if response is not None:
            response.close()
        connection.close()
