"""Pre-authentication limits: the HTTP protocol every connection runs on, with bounds.

uvicorn's httptools protocol accepts a request head of any size (httptools concatenates each
header value chunk by chunk: a 128 MiB header held one worker's event loop for ~20 s and grew
it by 256 MiB), waits for a head or a body forever, and accepts connections until the process
runs out of descriptors — where libuv's accept() then drops every connection in the backlog,
real requests included. Authentication happens only once a whole request has arrived, so all
of that is open to anyone who can reach a listener. :class:`GuardedHttpToolsProtocol` adds,
per connection and per process (each worker counts its own):

* **head size** — request line plus headers beyond ``max_head_bytes`` → ``431`` and close.
  The parser is never fed more than that, so memory and CPU stay bounded whatever is sent.
* **head deadline** — a whole request head within ``head_timeout`` seconds of the connection
  being accepted, or of the previous response on a keep-alive connection → else ``408`` and
  close (a client that trickles a byte a second gets nothing for it).
* **body deadline** — the whole body within ``body_timeout`` seconds of its head → else
  ``408`` (if no response started) and close.
* **connections per listener** — at most ``max_connections`` open on TCP, and as many again
  on the unix socket: the budgets are separate, so a TCP flood never reaches local hooks.
  The budget is also kept below the descriptor limit (``RLIMIT_NOFILE``, raised to its hard
  limit at start-up), so accept() never fails.
* **waiting connections** — a connection is *waiting* while it owes us a request (accepted
  but the request not whole yet, idle between keep-alive requests, or stalled writing because
  its client does not read) and *busy* while the application works on its request. When a
  listener has more than ``max_pending`` waiting connections, the oldest waiting one that has
  waited at least a second is closed; at ``max_connections`` the oldest waiting one is closed
  whatever its age, and only when every connection is busy is the new one refused (``503``).
  Connections that have sent something go before silent ones (accepted, nothing read yet),
  and among silent ones the loop looks at what waits unread in the kernel (a peek): part of a
  head first (a trickler: a real client's head arrives in one segment), then nothing (just
  connected), and a whole head last — a loaded loop may accept a burst of attackers before it
  reads a real client that connected among them, and a real client descheduled between its
  connect and its send looks like a fresh connection, not like a trickler. Slow or idle
  connections therefore give way to new ones, while a real request — which arrives whole
  within milliseconds — is never the oldest waiting connection for long. (An attacker that
  connects and sends nothing at all is told from a real client only by age.)
* **pipelining** — at most :data:`MAX_PIPELINED` requests queued behind the one being
  answered (one read could otherwise queue thousands). The request over that is dropped
  unanswered and nothing more is read: the queued ones are answered, the last of them with
  ``Connection: close``, and the connection closes.
* **local peers** — on Linux a unix-socket peer whose uid is not the daemon's is closed at once
  (``SO_PEERCRED``). The socket file is already 0600 in a 0700 directory; this keeps that true
  if someone loosens the permissions or points ``POWERCONTEXT_SOCKET`` at a shared folder.

Refusals are answered with the API's error envelope where no other response is in flight.
What was enforced is logged as counts only (``connection_limits_enforced``, ``code`` =
``<listener>:<reason>``, at most one line per reason every 10 s): never addresses, peers,
paths or bytes of a request.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import socket
import struct
import sys
from collections import Counter, OrderedDict
from dataclasses import dataclass
from enum import IntEnum
from http import HTTPStatus
from typing import TYPE_CHECKING, Any

import httptools
import uvicorn
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol, RequestResponseCycle

if TYPE_CHECKING:
    from uvicorn.server import ServerState

    from ..settings import Settings

__all__ = [
    "MAX_PIPELINED",
    "PEEK_LIMIT",
    "ConnectionLimits",
    "GuardedHttpToolsProtocol",
    "ServingConfig",
    "Unread",
    "connection_budget",
    "peek_unread",
]

_log = logging.getLogger("powercontext.serve")

MAX_PIPELINED = 16
#: A waiting connection younger than this is not closed to enforce ``max_pending``: a burst of
#: real clients is accepted in one go before any of their requests is read.
PENDING_GRACE_SECONDS = 1.0
#: Silent connections peeked at (oldest first) to choose one to close: bounds the system calls
#: one accept at capacity costs when a flood sends nothing.
PEEK_LIMIT = 64
#: Fewest connections a listener is given, however low the descriptor limit.
MIN_CONNECTIONS = 8
_SUMMARY_SECONDS = 10.0
_SO_PEERCRED: int | None = (
    getattr(socket, "SO_PEERCRED", None) if sys.platform.startswith("linux") else None
)
_UCRED = struct.Struct("3i")  # pid, uid, gid


@dataclass(frozen=True)
class ConnectionLimits:
    """The bounds of one serving process (see the module docstring); picklable for workers."""

    max_head_bytes: int
    head_timeout: float
    body_timeout: float
    max_connections: int
    max_pending: int
    pending_grace: float = PENDING_GRACE_SECONDS

    @classmethod
    def from_settings(
        cls, settings: Settings, *, listeners: int, nofile: int | None
    ) -> ConnectionLimits:
        return cls(
            max_head_bytes=settings.max_header_bytes,
            head_timeout=settings.header_timeout,
            body_timeout=settings.body_timeout,
            max_connections=connection_budget(settings.max_connections, listeners, nofile),
            max_pending=settings.max_pending_connections,
        )


def connection_budget(wanted: int, listeners: int, nofile: int | None) -> int:
    """Connections per listener: ``wanted``, but within the descriptor limit ``nofile``.

    Each listener gets an equal share of what :data:`~.listeners.FD_RESERVE` leaves, so the
    process cannot run out of descriptors however the connections are spread.
    """
    from .listeners import FD_RESERVE

    if nofile is None:
        return wanted
    share = (nofile - FD_RESERVE) // max(1, listeners)
    return max(MIN_CONNECTIONS, min(wanted, share))


class ServingConfig(uvicorn.Config):
    """uvicorn's Config running :class:`GuardedHttpToolsProtocol` with ``limits``.

    A module-level subclass so that the supervisor can pickle it to its workers with the
    limits inside. WebSockets are off: the API has none, and an upgrade would move the
    connection out of this protocol's accounting.
    """

    def __init__(self, app: Any, *, limits: ConnectionLimits, **options: Any) -> None:
        super().__init__(
            app,
            http=GuardedHttpToolsProtocol,
            ws="none",
            h11_max_incomplete_event_size=limits.max_head_bytes,
            **options,
        )
        self.connection_limits = limits


class Unread(IntEnum):
    """What waits unread in the kernel from a silent connection's peer, in the order silent
    connections are closed to make room (lowest first)."""

    PART = 0  #: bytes but no whole head, or the peer is gone: a trickler or a dead socket
    NOTHING = 1  #: nothing yet: just connected (a real client may be about to send)
    HEAD = 2  #: a whole request head: a real client the loop has not read yet


class _Budget:
    """One listener's connections in one process, and which of them are waiting.

    Waiting connections are kept oldest first in two queues: *silent* ones (accepted, nothing
    read from them yet) and the others. Room is made from the others first, then from silent
    ones by :class:`Unread` (a real client accepted in the same event-loop turn as a burst of
    attackers has its whole request in the kernel buffer, not read yet).
    """

    def __init__(self, limits: ConnectionLimits) -> None:
        self._limits = limits
        self.open: set[GuardedHttpToolsProtocol] = set()
        self.silent: OrderedDict[GuardedHttpToolsProtocol, float] = OrderedDict()
        self.waiting: OrderedDict[GuardedHttpToolsProtocol, float] = OrderedDict()

    def admit(self, connection: GuardedHttpToolsProtocol, now: float) -> bool:
        """Count a new connection, closing old waiting ones to make room; False: no room."""
        self.open.add(connection)
        self.silent[connection] = now
        if len(self.open) > self._limits.max_connections:
            oldest = self._oldest(besides=connection)
            if oldest is None:  # every other connection is busy
                self.release(connection)
                return False
            oldest[0].evict("evicted_at_capacity")
        while len(self.silent) + len(self.waiting) > self._limits.max_pending:
            oldest = self._oldest(besides=connection)
            if oldest is None or now - oldest[1] < self._limits.pending_grace:
                break
            oldest[0].evict("evicted_waiting")
        return True

    def _oldest(
        self, besides: GuardedHttpToolsProtocol
    ) -> tuple[GuardedHttpToolsProtocol, float] | None:
        for connection, since in self.waiting.items():
            if connection is not besides:
                return connection, since
        # Silent ones by what their peers sent and the loop has not read yet: the oldest of
        # the lowest kind (a trickler before a fresh connection before a whole request).
        best: tuple[Unread, GuardedHttpToolsProtocol, float] | None = None
        peeked = 0
        for connection, since in self.silent.items():
            if connection is besides:
                continue
            unread = connection.unread()
            if unread is Unread.PART:
                return connection, since
            if best is None or unread < best[0]:
                best = (unread, connection, since)
            peeked += 1
            if peeked >= PEEK_LIMIT:
                break
        return None if best is None else (best[1], best[2])

    def heard_from(self, connection: GuardedHttpToolsProtocol) -> None:
        since = self.silent.pop(connection, None)
        if since is not None:
            self.waiting[connection] = since

    def mark_waiting(self, connection: GuardedHttpToolsProtocol, now: float) -> None:
        if connection in self.open and connection not in self.waiting:
            self.silent.pop(connection, None)
            self.waiting[connection] = now

    def mark_busy(self, connection: GuardedHttpToolsProtocol) -> None:
        self.silent.pop(connection, None)
        self.waiting.pop(connection, None)

    def release(self, connection: GuardedHttpToolsProtocol) -> None:
        self.open.discard(connection)
        self.mark_busy(connection)


class _Admission:
    """A serving process's budgets (one per listener kind) and its enforcement counters."""

    def __init__(self, limits: ConnectionLimits) -> None:
        self.budgets = {"tcp": _Budget(limits), "unix": _Budget(limits)}
        self._counts: Counter[str] = Counter()
        self._summary: asyncio.TimerHandle | None = None

    @classmethod
    def of(cls, server_state: ServerState, limits: ConnectionLimits) -> _Admission:
        """The admission of ``server_state`` (uvicorn's state shared by one server's
        connections), created with its first connection."""
        admission = getattr(server_state, "powercontext_admission", None)
        if admission is None:
            admission = cls(limits)
            server_state.powercontext_admission = admission  # type: ignore[attr-defined]
        return admission  # type: ignore[no-any-return]

    def count(self, code: str, loop: asyncio.AbstractEventLoop) -> None:
        self._counts[code] += 1
        if self._summary is None:
            self._summary = loop.call_later(_SUMMARY_SECONDS, self._log_summary)

    def _log_summary(self) -> None:
        self._summary = None
        for code, count in sorted(self._counts.items()):
            _log.warning("connection_limits_enforced", extra={"code": code, "count": count})
        self._counts.clear()


class GuardedHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with the limits of :class:`ConnectionLimits`.

    Bookkeeping per connection: request heads parsed, requests received whole, and responses
    finished. The connection is *busy* while a whole request has no finished response yet,
    and *waiting* otherwise; the head deadline runs while every parsed head has its response.
    """

    def __init__(
        self,
        config: uvicorn.Config,
        server_state: ServerState,
        app_state: dict[str, Any],
        _loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        super().__init__(config, server_state, app_state, _loop)
        if not isinstance(config, ServingConfig):
            raise TypeError("GuardedHttpToolsProtocol needs a ServingConfig")
        self._limits = config.connection_limits
        self._admission = _Admission.of(server_state, self._limits)
        self._budget: _Budget | None = None
        self._listener = "tcp"
        self._reading_head = True
        self._head_bytes = 0
        self._heads = self._messages = self._answered = 0
        self._head_timer: asyncio.TimerHandle | None = None
        self._body_timer: asyncio.TimerHandle | None = None
        self._closed_here = False
        self._overflowed = False
        self._heard = False
        self._running: RequestResponseCycle | None = None  # the request being answered

    # -- connection ------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        sock = transport.get_extra_info("socket")
        local = getattr(sock, "family", None) == getattr(socket, "AF_UNIX", object())
        self._listener = "unix" if local else "tcp"
        if local and not _peer_is_this_user(sock):
            self._count("peer_refused")
            self._closed_here = True
            transport.abort()
            return
        budget = self._budget = self._admission.budgets[self._listener]
        if not budget.admit(self, self.loop.time()):
            self._budget = None
            self._count("refused_at_capacity")
            self._finish(_reply(503, "runtime_busy", "too many open connections; retry"))
            return
        self._arm_head_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        self._forget()
        self._disconnect_cycles()
        super().connection_lost(exc)

    def unread(self) -> Unread:
        """What the peer sent that the loop has not read yet (see :func:`peek_unread`)."""
        sock = self.transport.get_extra_info("socket") if self.transport else None
        return peek_unread(sock, self._limits.max_head_bytes)

    def evict(self, code: str) -> None:
        """Close this waiting connection to make room for another (called by its budget)."""
        self._count(code)
        self._finish(None)

    # -- input -----------------------------------------------------------------------------

    def data_received(self, data: bytes) -> None:
        if self._closed_here:
            return
        if not self._heard and self._budget is not None:
            self._heard = True
            self._budget.heard_from(self)
        if self._reading_head:
            room = self._limits.max_head_bytes - self._head_bytes
            if len(data) > room:
                heads = self._heads
                if room > 0:
                    self._head_bytes += room
                    self._feed(data[:room])
                if self._closed_here or self.transport.is_closing():
                    return
                if self._heads == heads:  # the limit was reached inside the head
                    self._count("head_too_large")
                    reply = None
                    if self._heads == self._answered:
                        reply = _reply(
                            431, "request_header_too_large", "the request head is too large"
                        )
                    self._finish(reply)
                    return
                self.data_received(data[room:])
                return
            self._head_bytes += len(data)
        self._feed(data)

    def _feed(self, data: bytes) -> None:
        """uvicorn's ``data_received``, with parse errors counted instead of logged."""
        self._unset_keepalive_if_required()
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            pass  # served as plain HTTP/1.1 (no upgrades here); the parser stops reading
        except httptools.HttpParserError:
            if self._overflowed:
                self._count("pipeline_overflow")
                self._answer_queued_then_close()
                return
            self._count("bad_request")
            reply = None
            if self._heads == self._answered:
                reply = _reply(400, "invalid_request", "the request is not valid HTTP/1.1")
            self._finish(reply)

    def _answer_queued_then_close(self) -> None:
        """After a pipeline overflow: drop the request over the limit, read nothing more, and
        close once the requests already queued are answered (the last with
        ``Connection: close``) — closing at once would cut off the response being written."""
        self._closed_here = True  # ignore further input; the budget still counts it till closed
        self._cancel(self._body_timer)  # armed for the dropped request
        self._body_timer = None
        self.pipeline.popleft()  # the newest: the one over the limit, never started
        if self.pipeline:
            self.cycle = self.pipeline[0][0]
        if self.cycle is not None and not self.cycle.response_complete:
            self.cycle.keep_alive = False
        else:
            self._finish(None)

    def _start_asgi_task(self, cycle: RequestResponseCycle, app: Any) -> None:
        self._running = cycle
        super()._start_asgi_task(cycle, app)

    def _disconnect_cycles(self) -> None:
        """Tell every unfinished request of this connection that its client is gone.

        uvicorn tells only the newest one; with pipelined requests the one the application
        is answering is an older one, whose response would then be written to a closed
        transport (a ``RuntimeError`` logged as "Exception in ASGI application"). Marked
        disconnected, its ``send`` is a no-op and the application finishes quietly.
        """
        cycles = [self._running, self.cycle, *(cycle for cycle, _ in self.pipeline)]
        for cycle in cycles:
            if cycle is not None and not cycle.response_complete:
                cycle.disconnected = True
                cycle.message_event.set()

    # -- parser callbacks ------------------------------------------------------------------

    def on_headers_complete(self) -> None:
        self._heads += 1
        self._reading_head = False
        self._cancel(self._head_timer)
        self._head_timer = None
        super().on_headers_complete()
        self._cancel(self._body_timer)
        self._body_timer = self.loop.call_later(self._limits.body_timeout, self._body_late)
        if len(self.pipeline) > MAX_PIPELINED:
            self._overflowed = True
            raise OverflowError("too many pipelined requests")  # stops the parser

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._messages += 1
        self._cancel(self._body_timer)
        self._body_timer = None
        self._reading_head = True
        self._head_bytes = 0
        if self._budget is not None and self._messages > self._answered:
            self._budget.mark_busy(self)

    def on_response_complete(self) -> None:
        self._answered += 1
        if self._budget is not None and not self._closed_here:
            if self._messages <= self._answered:
                self._budget.mark_waiting(self, self.loop.time())
            if self._heads == self._answered:
                self._arm_head_timer()
        super().on_response_complete()

    # -- output flow: a client that does not read holds its slot only until room is needed --

    def pause_writing(self) -> None:
        super().pause_writing()
        if self._budget is not None and self._messages > self._answered:
            self._budget.mark_waiting(self, self.loop.time())

    def resume_writing(self) -> None:
        super().resume_writing()
        if self._budget is not None and self._messages > self._answered:
            self._budget.mark_busy(self)

    # -- deadlines -------------------------------------------------------------------------

    def _arm_head_timer(self) -> None:
        if self._head_timer is None:
            self._head_timer = self.loop.call_later(self._limits.head_timeout, self._head_late)

    def _head_late(self) -> None:
        self._head_timer = None
        if self._closed_here or self.transport.is_closing():
            return
        self._count("head_timeout")
        reply = None
        if self._heads == self._answered:
            reply = _reply(408, "request_timeout", "the request head took too long")
        self._finish(reply)

    def _body_late(self) -> None:
        self._body_timer = None
        if self._closed_here or self.transport.is_closing():
            return
        self._count("body_timeout")
        cycle = self.cycle
        reply = None
        if cycle is not None and not cycle.response_started and self._heads == self._answered + 1:
            reply = _reply(408, "request_timeout", "the request body took too long")
        if cycle is not None and not cycle.response_complete:
            cycle.disconnected = True  # the application's receive() now sees a disconnect
            cycle.message_event.set()
        self._finish(reply)

    # -- helpers ---------------------------------------------------------------------------

    def _finish(self, reply: bytes | None) -> None:
        """Close now, answering ``reply`` first; abort if output is still queued (a client
        that does not read must not keep the descriptor)."""
        self._closed_here = True
        self._forget()
        self._disconnect_cycles()
        transport = self.transport
        if transport.is_closing():
            return
        if reply is not None and not transport.get_write_buffer_size():
            transport.write(reply)
        if transport.get_write_buffer_size():
            transport.abort()
        else:
            transport.close()

    def _forget(self) -> None:
        self._cancel(self._head_timer)
        self._cancel(self._body_timer)
        self._head_timer = self._body_timer = None
        if self._budget is not None:
            self._budget.release(self)

    def _count(self, reason: str) -> None:
        self._admission.count(f"{self._listener}:{reason}", self.loop)

    @staticmethod
    def _cancel(timer: asyncio.TimerHandle | None) -> None:
        if timer is not None:
            timer.cancel()


def peek_unread(sock: Any, max_bytes: int) -> Unread:
    """What waits unread on ``sock`` (a peek on a duplicate of its descriptor: a transport's
    socket object has no ``recv``), up to ``max_bytes``."""
    fd = sock.fileno() if sock is not None else -1
    if fd < 0:
        return Unread.PART  # closed already
    try:
        duplicate = os.dup(fd)
    except OSError:  # no descriptor left: nothing known, so nothing held against it
        return Unread.NOTHING
    try:
        with socket.socket(fileno=duplicate) as peek:
            peek.setblocking(False)  # shared with the original, which the loop set so
            waiting = peek.recv(max_bytes, socket.MSG_PEEK)
    except BlockingIOError:
        return Unread.NOTHING
    except OSError:  # reset by the peer
        return Unread.PART
    if b"\r\n\r\n" in waiting:
        return Unread.HEAD
    return Unread.PART  # part of a head, or b"": the peer has closed


def _peer_is_this_user(sock: Any) -> bool:
    """Linux: the connecting process runs as this process's user. Elsewhere: True (the 0600
    socket file in the 0700 data dir is the guard there)."""
    if _SO_PEERCRED is None or sock is None:
        return True
    try:
        credentials = sock.getsockopt(socket.SOL_SOCKET, _SO_PEERCRED, _UCRED.size)
    except OSError:
        return False
    return int(_UCRED.unpack(credentials)[1]) == os.geteuid()


def _reply(status: int, code: str, message: str) -> bytes:
    """A complete ``Connection: close`` response with the API's error envelope (spec 03)."""
    body = json.dumps({"error": {"code": code, "message": message, "details": None}}).encode()
    head = (
        f"HTTP/1.1 {status} {HTTPStatus(status).phrase}\r\n"
        "content-type: application/json\r\n"
        f"content-length: {len(body)}\r\n"
        f"x-request-id: {os.urandom(16).hex()}\r\n"
        "connection: close\r\n\r\n"
    )
    return head.encode("ascii") + body
