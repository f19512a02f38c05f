"""Misbehaving loopback clients for the pre-auth limit tests: trickled heads, floods.

Everything here is bounded: a fixed number of sockets, loops that end on a deadline or a stop
event, and every socket closed on the way out. Only 127.0.0.1 is ever contacted.
"""

from __future__ import annotations

import contextlib
import selectors
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

#: A request head that never ends: one more header byte at a time, forever (until closed).
_TRICKLE = b"GET /health/live HTTP/1.1\r\nHost: localhost\r\nX-Slow: " + b"a" * 1_000_000


@dataclass
class _Slow:
    sock: socket.socket
    opened: float
    sent: int = 0


@dataclass
class Flood:
    """``count`` connections to ``port`` that each send one head byte every ``interval``
    seconds and are opened again as soon as the server closes them (a persistent attacker).

    Run it with :meth:`running`; ``closed_by_server`` counts the server's closes.
    """

    port: int
    count: int
    interval: float = 1.0
    closed_by_server: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)

    @contextlib.contextmanager
    def running(self, *, settle_seconds: float = 2.0) -> Iterator[Flood]:
        thread = threading.Thread(target=self._run, daemon=True)
        thread.start()
        try:
            # Give the flood time to occupy the server before the caller measures anything;
            # correctness does not depend on it (the flood keeps reopening anyway).
            self._stop.wait(settle_seconds)
            yield self
        finally:
            self._stop.set()
            thread.join(timeout=30)

    def _open(self, selector: selectors.BaseSelector) -> None:
        sock = socket.socket()
        sock.setblocking(False)
        try:
            sock.connect(("127.0.0.1", self.port))
        except BlockingIOError:
            pass
        except OSError:
            sock.close()
            return
        selector.register(sock, selectors.EVENT_READ, _Slow(sock, time.monotonic()))

    def _run(self) -> None:
        selector = selectors.DefaultSelector()
        try:
            for _ in range(self.count):
                self._open(selector)
            while not self._stop.is_set():
                for key, _ in selector.select(timeout=min(self.interval, 0.2)):
                    with contextlib.suppress(OSError):
                        if key.fileobj.recv(65536):  # type: ignore[union-attr]
                            continue  # an answer (408/431/503) before the close
                    selector.unregister(key.fileobj)
                    key.fileobj.close()
                    self.closed_by_server += 1
                    if not self._stop.is_set():
                        self._open(selector)
                now = time.monotonic()
                for key in list(selector.get_map().values()):
                    slow: _Slow = key.data
                    if now - slow.opened >= slow.sent * self.interval:
                        with contextlib.suppress(OSError):
                            slow.sock.send(_TRICKLE[slow.sent : slow.sent + 1])
                        slow.sent += 1
        finally:
            for key in list(selector.get_map().values()):
                key.fileobj.close()
            selector.close()


def trickle_until_closed(port: int, *, every: float, bound: float) -> tuple[bool, bytes]:
    """Send a request head one byte every ``every`` seconds until the server closes the
    connection or ``bound`` seconds pass; (closed by the server, what it answered)."""
    answer = b""
    deadline = time.monotonic() + bound
    with socket.create_connection(("127.0.0.1", port), timeout=bound) as sock:
        sent = 0
        while time.monotonic() < deadline:
            try:
                sock.send(_TRICKLE[sent : sent + 1])
            except OSError:
                return True, answer
            sent += 1
            if _readable(sock, every):
                try:
                    data = sock.recv(65536)
                except OSError:
                    return True, answer
                if not data:
                    return True, answer
                answer += data
    return False, answer


def _readable(sock: socket.socket, timeout: float) -> bool:
    """Whether ``sock`` becomes readable (data or a close) within ``timeout`` seconds."""
    with selectors.DefaultSelector() as selector:
        selector.register(sock, selectors.EVENT_READ)
        return bool(selector.select(timeout))
