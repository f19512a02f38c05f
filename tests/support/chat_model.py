"""A real OpenAI-compatible ``POST /v1/chat/completions`` server for tests (stdlib, loopback).

Each test chooses the next answer (:meth:`FakeChatModel.answer_content` for the assistant's
message text, or ``reply`` for any status and raw body) and reads what was sent
(``requests``: the decoded JSON bodies, ``headers``: the last request's headers). With
``slow`` set, the server holds its answer until :attr:`release` is set (the fixture's
teardown), so a client's timeout — not a sleep — decides the case. Used by the opt-in
extractor's tests (test_flush_contract.py) and the model distiller's
(test_distill_model.py).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["FakeChatModel", "fake_chat_model"]


class FakeChatModel:
    """A local chat-completions endpoint whose next answer each test chooses."""

    def __init__(self) -> None:
        self.reply: tuple[int, bytes] = (200, b"{}")
        self.slow = False  # answer only after the client's timeout (or at shutdown)
        self.release = threading.Event()
        self.requests: list[dict[str, Any]] = []
        self.headers: dict[str, str] = {}
        model = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers["Content-Length"])
                model.headers = {k.lower(): v for k, v in self.headers.items()}
                model.requests.append(json.loads(self.rfile.read(length)))
                if model.slow:
                    model.release.wait(timeout=5)
                status, body = model.reply
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (the timeout case)

            def log_message(self, *_: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        ).start()

    def answer_content(self, content: str) -> None:
        """The next answer: a 200 completion whose assistant message is ``content``."""
        body = {"choices": [{"message": {"role": "assistant", "content": content}}]}
        self.reply = (200, json.dumps(body).encode())

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


@contextmanager
def fake_chat_model() -> Iterator[FakeChatModel]:
    model = FakeChatModel()
    try:
        yield model
    finally:
        model.close()
