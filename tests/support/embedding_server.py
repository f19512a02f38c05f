"""A real OpenAI-compatible ``POST /v1/embeddings`` server for tests (stdlib, loopback).

Vectors are deterministic "topic" vectors: each dimension is one topic, and a text scores on
a topic for every keyword of that topic it contains (English or Chinese), plus a small
constant on the last dimension so no vector is zero. Texts about the same topic in two
languages therefore share a direction while sharing no word — the case the semantic channel
exists for. A ``dimension`` above the topics' pads the vector with zeros, so the server can
stand in for a real model's size (bge-m3's 1024). ``delay`` (seconds) and ``status`` make it
slow or failing; clearing ``gate`` holds every answer until it is set again (a server that
never answers in time, without a timing guess). ``requests`` counts calls, ``last_headers``
and ``last_model`` keep the last request's headers and model name.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

TOPICS: tuple[tuple[str, ...], ...] = (
    ("continuous integration", "pipeline", "持续集成", "流水线", "ci "),
    ("payment", "charge", "idempotent", "扣款", "支付"),
    ("login", "oauth", "登录", "认证"),
    ("database", "storage", "数据库", "存储"),
    ("release", "changelog", "发布", "版本"),
    ("banana", "recipe", "香蕉"),
)
DIMENSION = len(TOPICS) + 1


def topic_vector(text: str) -> list[float]:
    lowered = text.lower() + " "
    vector = [float(sum(lowered.count(word) for word in words)) for words in TOPICS]
    vector.append(0.05)
    return vector


def _sized(vector: list[float], dimension: int) -> list[float]:
    """``vector`` cut or zero-padded to ``dimension`` (a wrong size on purpose, or a real one)."""
    return (vector + [0.0] * dimension)[:dimension]


@dataclass
class EmbeddingServer:
    url: str = ""
    delay: float = 0.0
    status: int = 200
    dimension: int = DIMENSION
    requests: int = 0
    last_headers: dict[str, str] = field(default_factory=dict)
    last_model: str = ""
    gate: threading.Event = field(default_factory=threading.Event)


@contextmanager
def embedding_server() -> Iterator[EmbeddingServer]:
    state = EmbeddingServer()
    state.gate.set()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("content-length", 0))
            body: Any = json.loads(self.rfile.read(length))
            state.requests += 1
            state.last_headers = {k.lower(): v for k, v in self.headers.items()}
            state.last_model = str(body.get("model", ""))
            state.gate.wait()
            if state.delay:
                time.sleep(state.delay)
            if self.path != "/v1/embeddings" or state.status != 200:
                self.send_response(404 if self.path != "/v1/embeddings" else state.status)
                self.end_headers()
                return
            inputs = body["input"]
            data = [
                {
                    "object": "embedding",
                    "index": i,
                    "embedding": _sized(topic_vector(t), state.dimension),
                }
                for i, t in enumerate(inputs)
            ]
            # Answer out of order: the client must place rows by ``index``.
            payload = json.dumps({"object": "list", "data": data[::-1], "model": body["model"]})
            raw = payload.encode()
            try:
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client's deadline passed while the gate held the answer: its choice

        def log_message(self, *_: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    state.url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
