"""A fake PowerContext runtime on 127.0.0.1 for hook tests: scripted replies, recorded requests.

Standard library only (``http.server`` in a thread). Each path answers with a :class:`Reply`
that can also misbehave on purpose: wait, trickle bytes, send raw (malformed) bytes or close
the connection without answering — the ways a real runtime can fail a hook.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

PREPARE = "/v1/context/prepare"
CAPTURE = "/v1/sources/content"
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


class StubRuntime:
    def __init__(self) -> None:
        self.replies: dict[str, Reply] = {
            PREPARE: Reply(200, prepared_body(None)),
            CAPTURE: Reply(202, ACCEPTED),
        }
        self.requests: list[Recorded] = []
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
                reply = stub.replies.get(self.path, Reply(404, b'{"error":{}}'))
                stub._answer(self, reply)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.port = int(self._server.server_address[1])
        self.url = f"http://127.0.0.1:{self.port}"
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


@contextmanager
def running_stub() -> Iterator[StubRuntime]:
    stub = StubRuntime().start()
    try:
        yield stub
    finally:
        stub.stop()


def dead_port() -> int:
    """A loopback port nobody listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
