"""A fake PowerContext runtime for hook tests: scripted replies, recorded requests.

Listens on 127.0.0.1 (``url`` = ``http://127.0.0.1:<port>``) or, with ``unix_socket``, on a
unix-domain socket (``url`` = ``unix:<path>``; paths longer than ``sun_path`` are bound through
``/proc/self/fd/<dir fd>/<name>`` on Linux, as the runtime does). Standard library only
(``http.server`` in a thread). Each path answers with a :class:`Reply` that can also misbehave on
purpose: wait, trickle bytes, send raw (malformed) bytes or close the connection without
answering — the ways a real runtime can fail a hook.
"""

from __future__ import annotations

import json
import os
import socket
import socketserver
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

PREPARE = "/v1/context/prepare"
CAPTURE = "/v1/sources/content"
HANDOFF_NEXT = "/v1/handoff/next"
SCHEMA = "powercontext.prepared-context.v1"


def prepared_body(content: str | None, **overrides: Any) -> bytes:
    """A valid prepared-context response (``content=None`` → empty), with optional overrides."""
    document: dict[str, Any] = {
        "schema": SCHEMA,
        "status": "empty" if content is None else "ready",
        "content": content,
        "content_bytes": 0 if content is None else len(content.encode("utf-8")),
    }
    document.update(overrides)
    return json.dumps(document, ensure_ascii=False).encode("utf-8")


ACCEPTED = json.dumps(
    {"status": "accepted", "source": {"name": "content", "source_id": "x"}, "position": 1}
).encode()


@dataclass
class Reply:
    """How the stub answers one path."""

    status: int = 200
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0  # seconds to wait before answering at all
    trickle: float | None = None  # seconds between single bytes of the whole response
    raw: bytes | None = None  # exact bytes to write instead of a well-formed response
    hang_up: bool = False  # close the connection without any answer


@dataclass
class Recorded:
    path: str
    headers: dict[str, str]
    body: bytes
    at: float

    def json(self) -> Any:
        return json.loads(self.body)


#: Longest path ``bind``/``connect`` take directly (``sun_path`` minus its NUL).
SUN_PATH_MAX = 107 if sys.platform.startswith("linux") else 103


def bind_unix(sock: socket.socket, path: str) -> None:
    """Bind ``sock`` to ``path``, through the directory's ``/proc/self/fd`` entry when too long."""
    if len(os.fsencode(path)) <= SUN_PATH_MAX:
        sock.bind(path)
        return
    directory, name = os.path.split(path)
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        sock.bind(f"/proc/self/fd/{fd}/{name}")
    finally:
        os.close(fd)


class _UnixHTTPServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True

    def server_bind(self) -> None:
        bind_unix(self.socket, str(self.server_address))

    def get_request(self) -> tuple[socket.socket, tuple[str, int]]:
        connection, _ = self.socket.accept()
        return connection, ("unix", 0)  # BaseHTTPRequestHandler wants a (host, port) pair


class StubRuntime:
    def __init__(self, unix_socket: str | None = None) -> None:
        self.replies: dict[str, Reply] = {
            PREPARE: Reply(200, prepared_body(None)),
            CAPTURE: Reply(202, ACCEPTED),
        }
        self.requests: list[Recorded] = []
        #: Optional ``(path, body) -> Reply | None``, asked before ``replies`` (a reply that
        #: depends on the request, e.g. an idempotent journal).
        self.answer: Callable[[str, bytes], Reply | None] | None = None
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: object) -> None:  # quiet
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length)
                with stub._lock:
                    stub.requests.append(
                        Recorded(self.path, dict(self.headers.items()), body, time.monotonic())
                    )
                reply = stub.answer(self.path, body) if stub.answer is not None else None
                if reply is None:
                    reply = stub.replies.get(self.path) or _default_reply(self.path, body)
                stub._answer(self, reply)

            def do_GET(self) -> None:  # only the paths a test scripted (doctor's probes)
                with stub._lock:
                    stub.requests.append(
                        Recorded(self.path, dict(self.headers.items()), b"", time.monotonic())
                    )
                stub._answer(self, stub.replies.get(self.path) or Reply(404, b"{}"))

        self.unix_socket = unix_socket
        self._server: socketserver.BaseServer
        if unix_socket is None:
            tcp = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
            tcp.daemon_threads = True
            self._server = tcp
            self.port: int | None = int(tcp.server_address[1])
            self.url = f"http://127.0.0.1:{self.port}"
        else:
            self._server = _UnixHTTPServer(unix_socket, Handler)
            self.port = None
            self.url = f"unix:{unix_socket}"
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    def _answer(self, handler: BaseHTTPRequestHandler, reply: Reply) -> None:
        if reply.delay and self._stopping.wait(reply.delay):
            return
        if reply.hang_up:
            handler.close_connection = True
            handler.connection.shutdown(socket.SHUT_RDWR)
            return
        data = reply.raw if reply.raw is not None else self._render(reply)
        try:
            if reply.trickle is None:
                handler.wfile.write(data)
                handler.wfile.flush()
                return
            for index in range(len(data)):
                if self._stopping.wait(reply.trickle):
                    return
                handler.wfile.write(data[index : index + 1])
                handler.wfile.flush()
        except OSError:
            return
        finally:
            handler.close_connection = True

    @staticmethod
    def _render(reply: Reply) -> bytes:
        reason = {200: "OK", 202: "Accepted"}.get(reply.status, "Status")
        headers = {"Content-Type": "application/json", "Content-Length": str(len(reply.body))}
        headers.update(reply.headers)
        head = f"HTTP/1.1 {reply.status} {reason}\r\n" + "".join(
            f"{name}: {value}\r\n" for name, value in headers.items()
        )
        return head.encode("latin-1") + b"\r\n" + reply.body

    def paths(self) -> list[str]:
        with self._lock:
            return [request.path for request in self.requests]

    def start(self) -> StubRuntime:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        self._server.shutdown()
        self._server.server_close()
        if self.unix_socket is not None:
            with suppress(OSError):
                os.unlink(self.unix_socket)


def next_handoff_body(scope_id: str, revision: int | None) -> bytes:
    """The runtime's answer to ``POST /v1/handoff/next``."""
    ref = (
        None
        if revision is None
        else {"family": "handoff", "artifact_id": "handoff", "revision": revision}
    )
    queued_at = None if revision is None else 1_700_000_000_000
    return json.dumps({"scope_id": scope_id, "handoff_ref": ref, "queued_at": queued_at}).encode()


def _default_reply(path: str, body: bytes) -> Reply:
    """Unscripted paths: the Handoff lookup answers like a runtime with nothing queued (it
    echoes the scope asked about); anything else is an unknown route."""
    if path == HANDOFF_NEXT:
        with suppress(ValueError, KeyError, TypeError):
            return Reply(200, next_handoff_body(json.loads(body)["scope_id"], None))
    return Reply(404, b'{"error":{}}')


@contextmanager
def running_stub(unix_socket: str | None = None) -> Iterator[StubRuntime]:
    stub = StubRuntime(unix_socket).start()
    try:
        yield stub
    finally:
        stub.stop()


def dead_port() -> int:
    """A loopback port nobody listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
