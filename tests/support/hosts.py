"""Drive the real Claude Code and Codex CLIs offline, against local model stubs.

Everything here is stdlib only so later end-to-end tests can import it cheaply:

* :func:`ensure_host_clis` installs the two pinned npm packages once into a cache folder outside
  the repository (idempotent, lock-protected, install-then-rename) and returns the executables.
* :class:`AnthropicStub` / :class:`OpenAIResponsesStub` are threaded HTTP servers on 127.0.0.1
  that record every request and answer with a minimal valid streaming reply — or, in a
  subclass overriding ``next_reply``, with a tool call (:class:`StubReply`; the task evaluation's
  scripted model, ``bench/task_eval/scripted.py``).
* :class:`BlackholeProxy` is set as ``HTTP(S)_PROXY`` for the hosts: any attempt to reach the
  internet is recorded and refused locally instead of leaving the machine.
* :func:`run_claude` / :func:`run_codex` write the host's config into a throw-away home and run
  one non-interactive turn.
* :func:`run_host` runs one turn of either host against any model URL, :func:`run_host_turn`
  one against a fresh text-only stub, and
  :func:`assert_hook_context` checks where a hook's context landed in the model request.

The verified facts behind these choices are in ``docs/decisions/real-host-facts.md``.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar, Self

CLAUDE_CODE_PACKAGE = "@anthropic-ai/claude-code"
CLAUDE_CODE_VERSION = "2.1.328"
CODEX_PACKAGE = "@openai/codex"
CODEX_VERSION = "0.169.0"
NPM_REGISTRY = "https://registry.npmjs.org/"

STUB_REPLY_TEXT = "stub-reply-ok"


# --------------------------------------------------------------------------------------------
# npm install of the two CLIs
# --------------------------------------------------------------------------------------------


class HostInstallError(RuntimeError):
    """npm is missing or the pinned host CLIs could not be installed."""


@dataclass(frozen=True)
class HostCLIs:
    claude: Path
    codex: Path
    prefix: Path
    #: Seconds spent in ``npm install`` by this call; ``None`` when a cached install was reused.
    install_seconds: float | None = None


def cache_root() -> Path:
    override = os.environ.get("POWERCONTEXT_TEST_HOSTS_CACHE")
    if override:
        return Path(override)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "powercontext-tests"


def install_dir_name() -> str:
    return f"npm-hosts-claude-code-{CLAUDE_CODE_VERSION}-codex-{CODEX_VERSION}"


def _executables(prefix: Path) -> tuple[Path, Path]:
    modules = prefix / "node_modules"
    # Claude Code's postinstall replaces bin/claude.exe with the native binary; Codex's bin is a
    # small node launcher that execve()s the platform binary (we keep the launcher: it is what a
    # user's PATH runs and it sets CODEX_MANAGED_PACKAGE_ROOT).
    return (
        modules / "@anthropic-ai" / "claude-code" / "bin" / "claude.exe",
        modules / ".bin" / "codex",
    )


_MARKER = ".powercontext-complete.json"


def _expected_marker() -> dict[str, str]:
    return {CLAUDE_CODE_PACKAGE: CLAUDE_CODE_VERSION, CODEX_PACKAGE: CODEX_VERSION}


def _is_complete(prefix: Path) -> bool:
    try:
        marker = json.loads((prefix / _MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    claude, codex = _executables(prefix)
    return marker == _expected_marker() and claude.is_file() and codex.exists()


def npm_executable() -> str | None:
    return shutil.which("npm")


def hosts_unavailable_reason(timeout: float = 10.0) -> str | None:
    """Why the real-host tests cannot run here, or ``None`` when they can.

    A complete cached install is always usable. Otherwise npm must exist and the registry must
    answer. Tests use this only to *skip* where npm is unreachable; CI has both.
    """
    if _is_complete(cache_root() / install_dir_name()):
        return None
    npm = npm_executable()
    if npm is None:
        return "npm is not installed (needed to install the pinned host CLIs)"
    try:
        subprocess.run([npm, "--version"], check=True, capture_output=True, timeout=timeout)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"npm does not run: {exc}"
    registry = _npm_registry(npm)
    try:
        with urllib.request.urlopen(registry + "-/ping", timeout=timeout) as response:
            response.read(1024)
    except OSError as exc:
        return f"npm registry {registry} unreachable: {exc}"
    return None


def _npm_registry(npm: str) -> str:
    try:
        out = subprocess.run(
            [npm, "config", "get", "registry"],
            check=True,
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        out = ""
    if not out.startswith(("http://", "https://")):
        out = NPM_REGISTRY
    return out if out.endswith("/") else out + "/"


def ensure_host_clis(root: Path | None = None, *, timeout: float = 900.0) -> HostCLIs:
    """Install (once) and return the pinned Claude Code and Codex CLIs.

    Reuses a complete install in ``root`` (default :func:`cache_root`). Concurrent callers are
    serialised with an ``flock``; the install happens in a temporary sibling folder that is only
    renamed into place after both binaries answer ``--version`` with the pinned versions.
    """
    root = root or cache_root()
    final = root / install_dir_name()
    if _is_complete(final):
        return _clis(final, None)
    npm = npm_executable()
    if npm is None:
        raise HostInstallError(
            "npm is not on PATH: install Node.js/npm to run the real-host tests "
            f"({CLAUDE_CODE_PACKAGE}@{CLAUDE_CODE_VERSION}, {CODEX_PACKAGE}@{CODEX_VERSION})"
        )
    root.mkdir(parents=True, exist_ok=True)
    with open(root / (install_dir_name() + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _is_complete(final):
            return _clis(final, None)
        staging = Path(tempfile.mkdtemp(prefix=".staging-", dir=root))
        try:
            started = time.monotonic()
            result = subprocess.run(
                [
                    npm,
                    "install",
                    "--no-audit",
                    "--no-fund",
                    "--no-save",
                    "--loglevel=error",
                    "--prefix",
                    str(staging),
                    f"{CLAUDE_CODE_PACKAGE}@{CLAUDE_CODE_VERSION}",
                    f"{CODEX_PACKAGE}@{CODEX_VERSION}",
                ],
                capture_output=True,
                text=True,
                timeout=timeout,
                check=False,
                env=_npm_env(),
            )
            elapsed = time.monotonic() - started
            if result.returncode != 0:
                raise HostInstallError(
                    f"npm install failed ({result.returncode}):\n{result.stderr[-4000:]}"
                )
            _check_versions(staging)
            staging.chmod(0o755)  # mkdtemp made it private
            (staging / _MARKER).write_text(json.dumps(_expected_marker()), encoding="utf-8")
            if final.exists():  # an incomplete leftover from an interrupted run
                shutil.rmtree(final)
            os.rename(staging, final)
        finally:
            if staging.exists():
                shutil.rmtree(staging, ignore_errors=True)
        _check_versions(final)
        return _clis(final, elapsed)


def _npm_env() -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("npm_config_update_notifier", "false")
    return env


def _clis(prefix: Path, install_seconds: float | None) -> HostCLIs:
    claude, codex = _executables(prefix)
    return HostCLIs(claude=claude, codex=codex, prefix=prefix, install_seconds=install_seconds)


def _check_versions(prefix: Path) -> None:
    claude, codex = _executables(prefix)
    with tempfile.TemporaryDirectory(prefix="pc-host-version-") as scratch:
        env = offline_env(Path(scratch))
        env.update(CLAUDE_OFFLINE_ENV)
        for exe, want in ((claude, CLAUDE_CODE_VERSION), (codex, CODEX_VERSION)):
            try:
                out = subprocess.run(
                    [str(exe), "--version"],
                    capture_output=True,
                    text=True,
                    timeout=60,
                    check=False,
                    env=env,
                )
            except OSError as exc:
                raise HostInstallError(f"{exe} does not run: {exc}") from exc
            if want not in out.stdout:
                raise HostInstallError(
                    f"{exe} --version printed {out.stdout!r} / {out.stderr[-500:]!r}, want {want}"
                )


# --------------------------------------------------------------------------------------------
# Local HTTP servers: model stubs and a black-hole proxy
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body.decode("utf-8")) if self.body else None


def _sse(events: Sequence[tuple[str, Mapping[str, Any]]]) -> bytes:
    chunks = []
    for name, data in events:
        payload = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
        chunks.append(f"event: {name}\ndata: {payload}\n\n")
    return "".join(chunks).encode("utf-8")


class _StubServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True


class _RecordingHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _StubServer

    def log_message(self, format: str, *args: Any) -> None:  # silence stderr access log
        pass

    def _record(self) -> RecordedRequest:
        length = int(self.headers.get("Content-Length") or 0)
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            body = self._read_chunked()
        else:
            body = self.rfile.read(length) if length else b""
        request = RecordedRequest(
            method=self.command,
            path=self.path,
            headers={k.lower(): v for k, v in self.headers.items()},
            body=body,
        )
        stub: HTTPStub = self.server.stub  # type: ignore[attr-defined]
        stub._append(request)
        return request

    def _read_chunked(self) -> bytes:
        parts = []
        while True:
            size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
            if size == 0:
                while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                    pass
                return b"".join(parts)
            parts.append(self.rfile.read(size))
            self.rfile.readline()

    def _send(self, status: int, body: bytes, content_type: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        if content_type == "text/event-stream":
            self.send_header("Cache-Control", "no-cache")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)
            self.wfile.flush()

    def _dispatch(self) -> None:
        request = self._record()
        stub: HTTPStub = self.server.stub  # type: ignore[attr-defined]
        status, body, content_type = stub.respond(request)
        self._send(status, body, content_type)

    do_GET = do_POST = do_HEAD = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = _dispatch


class HTTPStub:
    """A recording HTTP server on ``127.0.0.1:<free port>``; subclasses decide the replies."""

    name: ClassVar[str] = "stub"

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._requests: list[RecordedRequest] = []
        self._server = _StubServer(("127.0.0.1", 0), _RecordingHandler)
        self._server.stub = self  # type: ignore[attr-defined]
        self._thread = threading.Thread(
            target=self._server.serve_forever, name=f"{self.name}-stub", daemon=True
        )

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> Self:
        self._thread.start()
        return self

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _append(self, request: RecordedRequest) -> None:
        with self._lock:
            self._requests.append(request)

    @property
    def requests(self) -> list[RecordedRequest]:
        with self._lock:
            return list(self._requests)

    def clear(self) -> None:
        with self._lock:
            self._requests.clear()

    def summary(self) -> list[str]:
        """``METHOD path`` of everything received, for diagnostics."""
        return [f"{r.method} {r.path}" for r in self.requests]

    def respond(self, request: RecordedRequest) -> tuple[int, bytes, str]:
        raise NotImplementedError


@dataclass(frozen=True)
class StubReply:
    """One assistant message a model stub sends: plain ``text``, or one call of the host's
    ``tool`` with ``arguments`` (a scripted model, ``bench/task_eval``, drives tools this way).
    """

    text: str = STUB_REPLY_TEXT
    tool: str | None = None
    arguments: Mapping[str, Any] | None = None


class AnthropicStub(HTTPStub):
    """Answers the Anthropic Messages API the way Claude Code needs: one text reply per request
    by default; a subclass may answer with a tool call instead (:meth:`next_reply`)."""

    name = "anthropic"

    def __init__(self, reply: str = STUB_REPLY_TEXT) -> None:
        super().__init__()
        self.reply = reply
        self._counter = 0

    def model_requests(self) -> list[RecordedRequest]:
        return [r for r in self.requests if r.method == "POST" and _route(r.path) == "/v1/messages"]

    def next_reply(self, body: Mapping[str, Any]) -> StubReply:
        """What to answer to the Messages request ``body``: the fixed text unless overridden."""
        return StubReply(text=self.reply)

    def respond(self, request: RecordedRequest) -> tuple[int, bytes, str]:
        route = _route(request.path)
        if request.method == "POST" and route == "/v1/messages/count_tokens":
            return 200, b'{"input_tokens":42}', "application/json"
        if request.method == "POST" and route == "/v1/messages":
            body = request.json() or {}
            with self._lock:
                self._counter += 1
                n = self._counter
            message_id = f"msg_stub_{n:04d}"
            reply = self.next_reply(body)
            model = str(body.get("model") or "claude-stub")
            usage = {
                "input_tokens": 10,
                "output_tokens": 3,
                "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": 0,
            }
            if reply.tool is None:
                block: dict[str, Any] = {"type": "text", "text": reply.text}
                start_block: dict[str, Any] = {"type": "text", "text": ""}
                delta: dict[str, Any] = {"type": "text_delta", "text": reply.text}
                stop_reason = "end_turn"
            else:
                tool_id = f"toolu_stub_{n:04d}"
                arguments = dict(reply.arguments or {})
                block = {"type": "tool_use", "id": tool_id, "name": reply.tool, "input": arguments}
                start_block = {**block, "input": {}}
                delta = {"type": "input_json_delta", "partial_json": json.dumps(arguments)}
                stop_reason = "tool_use"
            if not body.get("stream"):
                message = {
                    "id": message_id,
                    "type": "message",
                    "role": "assistant",
                    "model": model,
                    "content": [block],
                    "stop_reason": stop_reason,
                    "stop_sequence": None,
                    "usage": usage,
                }
                return 200, json.dumps(message).encode(), "application/json"
            events = [
                (
                    "message_start",
                    {
                        "type": "message_start",
                        "message": {
                            "id": message_id,
                            "type": "message",
                            "role": "assistant",
                            "model": model,
                            "content": [],
                            "stop_reason": None,
                            "stop_sequence": None,
                            "usage": {**usage, "output_tokens": 1},
                        },
                    },
                ),
                (
                    "content_block_start",
                    {"type": "content_block_start", "index": 0, "content_block": start_block},
                ),
                (
                    "content_block_delta",
                    {"type": "content_block_delta", "index": 0, "delta": delta},
                ),
                ("content_block_stop", {"type": "content_block_stop", "index": 0}),
                (
                    "message_delta",
                    {
                        "type": "message_delta",
                        "delta": {"stop_reason": stop_reason, "stop_sequence": None},
                        "usage": {"output_tokens": 3},
                    },
                ),
                ("message_stop", {"type": "message_stop"}),
            ]
            return 200, _sse(events), "text/event-stream"
        if route == "/v1/models":
            return (
                200,
                b'{"data":[],"has_more":false,"first_id":null,"last_id":null}',
                ("application/json"),
            )
        if request.method == "HEAD" or (request.method == "GET" and route == "/"):
            return 200, b"", "text/plain"
        return (
            404,
            b'{"type":"error","error":{"type":"not_found_error","message":"stub"}}',
            ("application/json"),
        )


class OpenAIResponsesStub(HTTPStub):
    """Answers the OpenAI Responses API the way Codex needs: one text reply per request by
    default; a subclass may answer with a function call instead (:meth:`next_reply`)."""

    name = "openai"

    def __init__(self, reply: str = STUB_REPLY_TEXT) -> None:
        super().__init__()
        self.reply = reply
        self._counter = 0

    def model_requests(self) -> list[RecordedRequest]:
        return [
            r
            for r in self.requests
            if r.method == "POST" and _route(r.path) in ("/v1/responses", "/responses")
        ]

    def next_reply(self, body: Mapping[str, Any]) -> StubReply:
        """What to answer to the Responses request ``body``: the fixed text unless overridden."""
        return StubReply(text=self.reply)

    def respond(self, request: RecordedRequest) -> tuple[int, bytes, str]:
        route = _route(request.path)
        if request.method == "POST" and route in ("/v1/responses", "/responses"):
            body = request.json() or {}
            with self._lock:
                self._counter += 1
                n = self._counter
            reply = self.next_reply(body)
            response_id, item_id = f"resp_stub_{n:04d}", f"msg_stub_{n:04d}"
            model = str(body.get("model") or "gpt-stub")
            base = {
                "id": response_id,
                "object": "response",
                "model": model,
                "created_at": int(time.time()),
            }
            if reply.tool is None:
                item_events, done_item = _responses_text_events(item_id, reply.text)
            else:
                item_events, done_item = _responses_call_events(
                    f"fc_stub_{n:04d}", f"call_stub_{n:04d}", reply.tool, reply.arguments or {}
                )
            events = [
                (
                    "response.created",
                    {
                        "type": "response.created",
                        "response": {**base, "status": "in_progress", "output": []},
                    },
                ),
                *item_events,
                (
                    "response.output_item.done",
                    {
                        "type": "response.output_item.done",
                        "output_index": 0,
                        "item": done_item,
                    },
                ),
                (
                    "response.completed",
                    {
                        "type": "response.completed",
                        "response": {
                            **base,
                            "status": "completed",
                            "output": [done_item],
                            "usage": {
                                "input_tokens": 10,
                                "input_tokens_details": {"cached_tokens": 0},
                                "output_tokens": 3,
                                "output_tokens_details": {"reasoning_tokens": 0},
                                "total_tokens": 13,
                            },
                        },
                    },
                ),
            ]
            return 200, _sse(events), "text/event-stream"
        if request.method == "GET" and route in ("/v1/models", "/models"):
            return 200, b'{"object":"list","data":[],"models":[]}', "application/json"
        return (
            404,
            b'{"error":{"message":"stub: not found","type":"invalid_request_error"}}',
            ("application/json"),
        )


_Events = list[tuple[str, Mapping[str, Any]]]


def _responses_text_events(item_id: str, text: str) -> tuple[_Events, dict[str, Any]]:
    """The Responses stream of one assistant text message (before ``output_item.done``)."""
    done_item = {
        "type": "message",
        "id": item_id,
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }
    added = {**done_item, "status": "in_progress", "content": []}
    events: _Events = [
        (
            "response.output_item.added",
            {"type": "response.output_item.added", "output_index": 0, "item": added},
        ),
        (
            "response.output_text.delta",
            {
                "type": "response.output_text.delta",
                "item_id": item_id,
                "output_index": 0,
                "content_index": 0,
                "delta": text,
            },
        ),
    ]
    return events, done_item


def _responses_call_events(
    item_id: str, call_id: str, name: str, arguments: Mapping[str, Any]
) -> tuple[_Events, dict[str, Any]]:
    """The Responses stream of one function call (before ``output_item.done``)."""
    encoded = json.dumps(dict(arguments))
    done_item = {
        "type": "function_call",
        "id": item_id,
        "call_id": call_id,
        "name": name,
        "arguments": encoded,
        "status": "completed",
    }
    added = {**done_item, "arguments": "", "status": "in_progress"}
    events: _Events = [
        (
            "response.output_item.added",
            {"type": "response.output_item.added", "output_index": 0, "item": added},
        ),
        (
            "response.function_call_arguments.delta",
            {
                "type": "response.function_call_arguments.delta",
                "item_id": item_id,
                "output_index": 0,
                "delta": encoded,
            },
        ),
        (
            "response.function_call_arguments.done",
            {
                "type": "response.function_call_arguments.done",
                "item_id": item_id,
                "output_index": 0,
                "arguments": encoded,
            },
        ),
    ]
    return events, done_item


def _route(path: str) -> str:
    return path.split("?", 1)[0].rstrip("/") or "/"


class BlackholeProxy:
    """An HTTP(S) proxy that records where a host tried to go and refuses every request.

    Set as ``HTTP_PROXY``/``HTTPS_PROXY``/``ALL_PROXY`` (with ``NO_PROXY`` for loopback), it turns
    any internet access a host attempts despite the opt-out variables into a fast local failure
    that the tests can see in :attr:`attempts`.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._attempts: list[str] = []
        self._sock = socket.create_server(("127.0.0.1", 0))
        self._sock.settimeout(0.2)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="blackhole-proxy", daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._sock.getsockname()[1]}"

    @property
    def attempts(self) -> list[str]:
        with self._lock:
            return list(self._attempts)

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with conn:
                conn.settimeout(2)
                try:
                    line = conn.recv(4096).split(b"\r\n", 1)[0].decode("latin-1")
                except OSError:
                    line = "<no request line>"
                with self._lock:
                    self._attempts.append(line)
                with contextlib.suppress(OSError):
                    conn.sendall(
                        b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                    )

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._sock.close()
        self._thread.join(timeout=5)


# --------------------------------------------------------------------------------------------
# Offline environments and host runners
# --------------------------------------------------------------------------------------------

#: Claude Code opt-outs: no telemetry, auto-update, error reports, feature-flag fetches or
#: official-marketplace auto-install. Verified: with these and a black-hole proxy a ``-p`` turn
#: makes no request except ``POST /v1/messages`` to the stub.
CLAUDE_OFFLINE_ENV = {
    "DISABLE_TELEMETRY": "1",
    "DISABLE_AUTOUPDATER": "1",
    "DISABLE_ERROR_REPORTING": "1",
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "CLAUDE_CODE_DISABLE_OFFICIAL_MARKETPLACE_AUTOINSTALL": "1",
}

#: Name of the env var holding the (dummy) key for the Codex stub provider (``env_key``).
CODEX_STUB_KEY_ENV = "POWERCONTEXT_STUB_OPENAI_KEY"
CODEX_STUB_PROVIDER = "powercontext_stub"
CODEX_STUB_MODEL = "gpt-stub"

_PASSTHROUGH_ENV = ("PATH", "TZ")


def offline_env(home: Path, proxy_url: str | None = None) -> dict[str, str]:
    """A minimal environment built from scratch (nothing of the caller's host config leaks in).

    ``proxy_url`` (a :class:`BlackholeProxy`) becomes every proxy variable, with loopback
    exempted, so the only reachable endpoints are the local stubs.
    """
    env = {k: os.environ[k] for k in _PASSTHROUGH_ENV if k in os.environ}
    # Both hosts write scratch files to the temp dir (Claude Code: session notes and a socket;
    # Codex: spilled hook output under hook_outputs/): keep them inside the sandbox.
    tmpdir = home / ".tmp"
    tmpdir.mkdir(parents=True, exist_ok=True)
    env["TMPDIR"] = str(tmpdir)
    env.update(
        HOME=str(home), LANG="C.UTF-8", LC_ALL="C.UTF-8", SHELL="/bin/sh", TERM="dumb", NO_COLOR="1"
    )
    if proxy_url:
        for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
            env[name] = env[name.lower()] = proxy_url
        env["NO_PROXY"] = env["no_proxy"] = "127.0.0.1,localhost,::1"
    return env


@dataclass
class CompletedRun:
    host: str
    argv: list[str]
    returncode: int | None  # None when it had to be killed after ``timeout``
    stdout: str
    stderr: str
    seconds: float

    @property
    def timed_out(self) -> bool:
        return self.returncode is None

    def describe(self) -> str:
        return (
            f"{self.host} rc={self.returncode} in {self.seconds:.2f}s\n"
            f"argv={self.argv}\n--- stdout ---\n{self.stdout[-3000:]}\n"
            f"--- stderr ---\n{self.stderr[-3000:]}"
        )


def run_process(
    host: str,
    argv: Sequence[str],
    *,
    env: Mapping[str, str],
    cwd: Path,
    timeout: float,
    input_text: str | None = None,
) -> CompletedRun:
    """Run one CLI invocation in its own process group; kill the whole group on timeout."""
    started = time.monotonic()
    process = subprocess.Popen(
        list(argv),
        env=dict(env),
        cwd=cwd,
        text=True,
        encoding="utf-8",
        errors="replace",
        stdin=subprocess.PIPE if input_text is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        stdout, stderr = process.communicate(input_text, timeout=timeout)
        returncode: int | None = process.returncode
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, 9)
        stdout, stderr = process.communicate()
        returncode = None
    return CompletedRun(host, list(argv), returncode, stdout, stderr, time.monotonic() - started)


# ---- Claude Code ----------------------------------------------------------------------------


def claude_env(home: Path, stub_url: str, proxy_url: str | None = None) -> dict[str, str]:
    env = offline_env(home, proxy_url)
    env.update(CLAUDE_OFFLINE_ENV)
    env.update(ANTHROPIC_API_KEY="dummy", ANTHROPIC_BASE_URL=stub_url)
    return env


def write_claude_settings(home: Path, hooks: Mapping[str, Any] | None) -> Path:
    """Merge ``{"hooks": hooks}`` into ``<home>/.claude/settings.json`` (other keys are kept)."""
    path = home / ".claude" / "settings.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    settings = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
    if hooks is None:
        settings.pop("hooks", None)
    else:
        settings["hooks"] = dict(hooks)
    path.write_text(json.dumps(settings, indent=2, ensure_ascii=False), encoding="utf-8")
    return path


def run_claude(
    prompt: str,
    *,
    home: Path,
    stub_url: str,
    cwd: Path,
    timeout: float = 60.0,
    settings_hooks: Mapping[str, Any] | None = None,
    clis: HostCLIs | None = None,
    proxy_url: str | None = None,
    extra_args: Sequence[str] = (),
    extra_env: Mapping[str, str] | None = None,
) -> CompletedRun:
    """``claude -p <prompt>`` with ``HOME=<home>`` against the Anthropic stub at ``stub_url``.

    ``settings_hooks`` (the value of ``"hooks"``) is merged into ``<home>/.claude/settings.json``
    first; ``None`` leaves the settings file as it is (e.g. after a plugin install).
    """
    clis = clis or ensure_host_clis()
    if settings_hooks is not None:
        write_claude_settings(home, settings_hooks)
    env = claude_env(home, stub_url, proxy_url)
    env.update(extra_env or {})
    argv = [str(clis.claude), "-p", *extra_args, prompt]
    return run_process("claude", argv, env=env, cwd=cwd, timeout=timeout)


def run_claude_cli(
    args: Sequence[str],
    *,
    home: Path,
    cwd: Path,
    timeout: float = 60.0,
    clis: HostCLIs | None = None,
    proxy_url: str | None = None,
    stub_url: str = "http://127.0.0.1:9",
) -> CompletedRun:
    """Any other ``claude`` subcommand (e.g. ``plugin marketplace add``) in the same sandbox."""
    clis = clis or ensure_host_clis()
    env = claude_env(home, stub_url, proxy_url)
    return run_process("claude", [str(clis.claude), *args], env=env, cwd=cwd, timeout=timeout)


# ---- Codex ----------------------------------------------------------------------------------


def codex_config_toml(stub_url: str, *, plugins: bool = False, extra_toml: str = "") -> str:
    """A ``config.toml`` pointing Codex at the Responses stub, with network extras switched off.

    ``plugins=False`` also disables the ``plugins`` feature: with it on, Codex 0.169.0 syncs the
    curated plugin marketplace in the background (git/HTTPS to github.com, chatgpt.com) and no
    config key turns just that off. Enable it only for plugin-install tests (the black-hole proxy
    then refuses the sync locally).
    """
    features = "" if plugins else "\n[features]\nplugins = false\n"
    return (
        f'model = "{CODEX_STUB_MODEL}"\n'
        f'model_provider = "{CODEX_STUB_PROVIDER}"\n'
        "check_for_update_on_startup = false\n"
        "\n[analytics]\nenabled = false\n"
        f"{features}"
        f"\n[model_providers.{CODEX_STUB_PROVIDER}]\n"
        'name = "PowerContext test stub"\n'
        f'base_url = "{stub_url}/v1"\n'
        'wire_api = "responses"\n'
        f'env_key = "{CODEX_STUB_KEY_ENV}"\n'
        "request_max_retries = 0\n"
        "stream_max_retries = 0\n"
        f"{extra_toml}"
    )


def prepare_codex_home(
    codex_home: Path,
    stub_url: str,
    *,
    hooks: Mapping[str, Any] | None = None,
    plugins: bool = False,
    extra_toml: str = "",
) -> None:
    """Write ``config.toml`` (see :func:`codex_config_toml`) and, if given, ``hooks.json``."""
    codex_home.mkdir(parents=True, exist_ok=True)
    (codex_home / "config.toml").write_text(
        codex_config_toml(stub_url, plugins=plugins, extra_toml=extra_toml), encoding="utf-8"
    )
    if hooks is not None:
        write_codex_hooks(codex_home, hooks)


def write_codex_hooks(codex_home: Path, hooks: Mapping[str, Any]) -> Path:
    path = codex_home / "hooks.json"
    path.write_text(
        json.dumps({"hooks": dict(hooks)}, indent=2, ensure_ascii=False), encoding="utf-8"
    )
    return path


def codex_env(
    codex_home: Path, proxy_url: str | None = None, home: Path | None = None
) -> dict[str, str]:
    env = offline_env(home or codex_home.parent, proxy_url)
    env.update(CODEX_HOME=str(codex_home))
    env[CODEX_STUB_KEY_ENV] = "dummy"
    return env


def run_codex(
    prompt: str,
    *,
    codex_home: Path,
    stub_url: str,
    cwd: Path,
    timeout: float = 60.0,
    hooks: Mapping[str, Any] | None = None,
    plugins: bool = False,
    bypass_hook_trust: bool = True,
    clis: HostCLIs | None = None,
    proxy_url: str | None = None,
    extra_args: Sequence[str] = (),
    extra_env: Mapping[str, str] | None = None,
) -> CompletedRun:
    """``codex exec --skip-git-repo-check [--dangerously-bypass-hook-trust] <prompt>``.

    Writes ``config.toml`` when ``codex_home`` has none yet and ``hooks.json`` when ``hooks`` is
    given. The provider's ``base_url`` is also passed with ``-c`` on every run so a home prepared
    earlier (e.g. with plugins installed) follows the current stub.
    """
    clis = clis or ensure_host_clis()
    if not (codex_home / "config.toml").exists():
        prepare_codex_home(codex_home, stub_url, plugins=plugins)
    if hooks is not None:
        write_codex_hooks(codex_home, hooks)
    env = codex_env(codex_home, proxy_url)
    env.update(extra_env or {})
    argv = [
        str(clis.codex),
        "exec",
        "--skip-git-repo-check",
        "-c",
        f'model_providers.{CODEX_STUB_PROVIDER}.base_url="{stub_url}/v1"',
    ]
    if bypass_hook_trust:
        argv.append("--dangerously-bypass-hook-trust")
    argv += [*extra_args, prompt]
    return run_process("codex", argv, env=env, cwd=cwd, timeout=timeout)


def run_codex_cli(
    args: Sequence[str],
    *,
    codex_home: Path,
    cwd: Path,
    timeout: float = 60.0,
    clis: HostCLIs | None = None,
    proxy_url: str | None = None,
) -> CompletedRun:
    """Any other ``codex`` subcommand (e.g. ``plugin marketplace add``) in the same sandbox."""
    clis = clis or ensure_host_clis()
    env = codex_env(codex_home, proxy_url)
    return run_process("codex", [str(clis.codex), *args], env=env, cwd=cwd, timeout=timeout)


# ---- either host ----------------------------------------------------------------------------


def run_host(
    host: str,
    prompt: str,
    *,
    model_url: str,
    home: Path,
    cwd: Path,
    clis: HostCLIs,
    proxy_url: str | None,
    extra_env: Mapping[str, str],
    extra_args: Sequence[str] = (),
    timeout: float = 60.0,
) -> CompletedRun:
    """One prompt in a fresh non-interactive session of the real ``host`` (``"codex"`` /
    ``"claude-code"``), the user's ``home`` as prepared (e.g. by a plugin install), against the
    model server at ``model_url``.

    Codex runs *without* ``--dangerously-bypass-hook-trust``: its hooks must already be trusted,
    as a user's would be.
    """
    if host == "codex":
        return run_codex(
            prompt,
            codex_home=home / ".codex",
            stub_url=model_url,
            cwd=cwd,
            bypass_hook_trust=False,
            clis=clis,
            proxy_url=proxy_url,
            extra_args=extra_args,
            extra_env=extra_env,
            timeout=timeout,
        )
    if host == "claude-code":
        return run_claude(
            prompt,
            home=home,
            stub_url=model_url,
            cwd=cwd,
            clis=clis,
            proxy_url=proxy_url,
            extra_args=extra_args,
            extra_env=extra_env,
            timeout=timeout,
        )
    raise ValueError(f"unknown host {host!r}")


def run_host_turn(
    host: str,
    prompt: str,
    *,
    home: Path,
    cwd: Path,
    clis: HostCLIs,
    proxy_url: str,
    extra_env: Mapping[str, str],
) -> tuple[CompletedRun, RecordedRequest]:
    """One prompt in a fresh session of the real ``host`` (see :func:`run_host`) against a fresh
    text-only model stub. Asserts the turn completed with the stub's reply after exactly one
    model request, and returns the run and that request.
    """
    stubs: dict[str, type[AnthropicStub] | type[OpenAIResponsesStub]] = {
        "codex": OpenAIResponsesStub,
        "claude-code": AnthropicStub,
    }
    if host not in stubs:
        raise ValueError(f"unknown host {host!r}")
    with stubs[host]() as stub:
        run = run_host(
            host,
            prompt,
            model_url=stub.url,
            home=home,
            cwd=cwd,
            clis=clis,
            proxy_url=proxy_url,
            extra_env=extra_env,
        )
        requests = stub.model_requests()
    assert run.returncode == 0 and STUB_REPLY_TEXT in run.stdout, run.describe()
    assert len(requests) == 1, [r.path for r in requests]
    return run, requests[0]


def codex_hooks_list(
    codex_home: Path,
    cwd: Path,
    *,
    clis: HostCLIs | None = None,
    proxy_url: str | None = None,
    timeout: float = 30.0,
) -> list[dict[str, Any]]:
    """Ask ``codex app-server`` (JSON-RPC over stdio) for ``hooks/list``: every discovered hook
    with its ``key``, ``currentHash`` and ``trustStatus`` (``untrusted``/``trusted``/``modified``).
    """
    clis = clis or ensure_host_clis()
    messages = [
        {
            "id": 1,
            "method": "initialize",
            "params": {"clientInfo": {"name": "powercontext-tests", "version": "0"}},
        },
        {"method": "initialized"},
        {"id": 2, "method": "hooks/list", "params": {"cwds": [str(cwd)]}},
    ]
    process = subprocess.Popen(
        [str(clis.codex), "app-server"],
        env=codex_env(codex_home, proxy_url),
        cwd=cwd,
        text=True,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    assert process.stdin is not None and process.stdout is not None
    deadline = time.monotonic() + timeout
    timer = threading.Timer(timeout, _kill_group, (process.pid,))
    timer.start()
    try:
        for message in messages:
            process.stdin.write(json.dumps(message) + "\n")
        process.stdin.flush()
        while time.monotonic() < deadline:
            line = process.stdout.readline()
            if not line:
                break
            reply = json.loads(line)
            if reply.get("id") == 2:
                if "error" in reply:
                    raise RuntimeError(f"hooks/list failed: {reply['error']}")
                hooks: list[dict[str, Any]] = []
                for entry in reply["result"]["data"]:
                    hooks.extend(entry["hooks"])
                return hooks
        raise RuntimeError("codex app-server gave no hooks/list answer")
    finally:
        timer.cancel()
        with contextlib.suppress(OSError):
            process.stdin.close()
        if process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, 15)
        process.wait(timeout=10)


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, 9)


def codex_trust_toml(hooks: Sequence[Mapping[str, Any]]) -> str:
    """The ``config.toml`` tables that mark ``hooks`` (entries of :func:`codex_hooks_list`) as
    trusted, as the TUI's ``/hooks`` review does: ``[hooks.state."<key>"] trusted_hash``.

    For plugin hooks ``currentHash`` reads ``sha256:<hook>/sha256:<…>`` and only the part before
    the slash is stored (storing the whole value yields ``trustStatus = "modified"``).
    """
    return "".join(
        f"\n[hooks.state.{json.dumps(h['key'])}]\n"
        f"trusted_hash = {json.dumps(str(h['currentHash']).split('/')[0])}\n"
        for h in hooks
    )


# --------------------------------------------------------------------------------------------
# A probe hook: logs what the host sends, prints a known context
# --------------------------------------------------------------------------------------------

HOOK_EVENTS = ("SessionStart", "UserPromptSubmit")

_PROBE_SOURCE = r"""
import json, os, sys, time

mode, log_path = sys.argv[1], sys.argv[2]
raw = sys.stdin.buffer.read()
try:
    event = json.loads(raw.decode("utf-8"))
except ValueError:
    event = {"_raw": raw.decode("utf-8", "replace")}
name = event.get("hook_event_name", "?") if isinstance(event, dict) else "?"
record = {
    "mode": mode, "event": name, "stdin": event, "pid": os.getpid(), "ppid": os.getppid(),
    "cwd": os.getcwd(), "argv0": sys.argv[0],
    "env_keys": sorted(os.environ),
    "env": {k: v for k, v in os.environ.items()
            if k.startswith(("CLAUDE", "CODEX", "PLUGIN")) or k in ("HOME", "SHELL", "PWD")},
}
with open(log_path, "a", encoding="utf-8") as log:
    log.write(json.dumps(record, ensure_ascii=False) + "\n")
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "contexts.json"),
          encoding="utf-8") as f:
    contexts = json.load(f)
if mode == "hang":
    time.sleep(float(sys.argv[3]))
    with open(log_path, "a", encoding="utf-8") as log:
        woke = {"mode": mode, "event": name, "woke": True, "pid": os.getpid()}
        log.write(json.dumps(woke) + "\n")
if mode in ("context", "hang") and name in contexts:
    envelope = {"hookSpecificOutput": {"hookEventName": name, "additionalContext": contexts[name]}}
    # SessionStart answers with \u-escaped ASCII JSON, UserPromptSubmit with raw UTF-8.
    text = json.dumps(envelope, ensure_ascii=(name == "SessionStart"))
    sys.stdout.buffer.write(text.encode("utf-8"))
    sys.stdout.buffer.flush()
"""


def probe_context(event: str) -> str:
    """The additionalContext the probe hook emits for ``event``: non-ASCII, JSON-special
    characters, markup and an embedded newline, so any re-encoding or escaping shows."""
    return (
        f'PCTX-SENTINEL-{event} naïve «café» 日本語 🚀 "quoted" back\\slash '
        "<tag attr='x'>&amp;</tag> {\"json\": [1, 2]} tab\there\nsecond line — end"
    )


@dataclass
class ProbeHook:
    """A tiny Python hook command plus the JSON-lines log of every invocation."""

    directory: Path
    log: Path
    contexts: dict[str, str] = field(default_factory=dict)

    @property
    def script(self) -> Path:
        return self.directory / "probe_hook.py"

    def command(self, mode: str = "context", *, sleep: float = 30.0) -> str:
        """Shell command for the hooks config. ``mode``: ``context`` prints the envelope,
        ``silent`` prints nothing, ``hang`` sleeps ``sleep`` s and then prints the envelope."""
        parts = [sys.executable, "-I", "-S", str(self.script), mode, str(self.log)]
        if mode == "hang":
            parts.append(str(sleep))
        return " ".join(shlex.quote(p) for p in parts)

    def hooks_config(
        self,
        mode: str = "context",
        *,
        timeout: int | None = None,
        events: Sequence[str] = HOOK_EVENTS,
        sleep: float = 30.0,
    ) -> dict[str, Any]:
        """The ``"hooks"`` mapping (same shape for Claude Code settings and Codex hooks.json)."""
        handler: dict[str, Any] = {"type": "command", "command": self.command(mode, sleep=sleep)}
        if timeout is not None:
            # Whole seconds: Codex 0.169.0 rejects a float here and then ignores the entire
            # hooks.json (only a stderr warning). Claude Code accepts either.
            handler["timeout"] = int(timeout)
        return {event: [{"hooks": [dict(handler)]}] for event in events}

    def records(self) -> list[dict[str, Any]]:
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text("utf-8").splitlines() if line]

    def invocations(self, event: str) -> list[dict[str, Any]]:
        return [r for r in self.records() if r.get("event") == event and "stdin" in r]


def write_probe_hook(directory: Path) -> ProbeHook:
    directory.mkdir(parents=True, exist_ok=True)
    probe = ProbeHook(
        directory=directory,
        log=directory / "probe-log.jsonl",
        contexts={event: probe_context(event) for event in HOOK_EVENTS},
    )
    probe.script.write_text(_PROBE_SOURCE.lstrip(), encoding="utf-8")
    (directory / "contexts.json").write_text(json.dumps(probe.contexts), encoding="utf-8")
    return probe


# --------------------------------------------------------------------------------------------
# Where the context lands in each host's request
# --------------------------------------------------------------------------------------------


def _iter_text(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        for item in value:
            yield from _iter_text(item)
    elif isinstance(value, dict):
        text = value.get("text")
        if isinstance(text, str):
            yield text
        for key in ("content", "input"):
            if key in value:
                yield from _iter_text(value[key])


def request_texts(request: RecordedRequest) -> list[str]:
    """Every text block of the conversation in a model request (Anthropic ``messages`` and
    ``system``, or Responses ``input``/``instructions``), JSON-decoded."""
    body = request.json() or {}
    texts: list[str] = []
    for key in ("system", "instructions", "messages", "input"):
        texts.extend(_iter_text(body.get(key)))
    return texts


def locate_text(request: RecordedRequest, needle: str) -> list[dict[str, Any]]:
    """Where ``needle`` occurs: list of ``{role, index, block, type, prefix}`` for each message
    whose text contains it (``prefix``: up to 60 characters before the match)."""
    body = request.json() or {}
    found = []
    for key in ("messages", "input"):
        for index, message in enumerate(body.get(key) or []):
            content = message.get("content")
            blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
            for block_index, block in enumerate(blocks or []):
                text = block.get("text") if isinstance(block, dict) else None
                if isinstance(text, str) and needle in text:
                    start = text.index(needle)
                    found.append(
                        {
                            "field": key,
                            "role": message.get("role"),
                            "index": index,
                            "block": block_index,
                            "type": block.get("type"),
                            "prefix": text[max(0, start - 60) : start],
                            "exact": text == needle,
                        }
                    )
    return found


#: Where Codex puts a hook's context: its own developer message, right before the prompt
#: (SessionStart) or right after it (UserPromptSubmit).
_CODEX_CONTEXT_OFFSET = {"SessionStart": -1, "UserPromptSubmit": 1}


def assert_hook_context(
    request: RecordedRequest, pack: str, *, host: str, event: str, prompt: str
) -> None:
    """``pack`` reached the model request whole, once, as the context of ``event``'s hook, in the
    place ``host`` (``"codex"`` / ``"claude-code"``) gives it.

    Codex: a developer message whose only text is exactly the pack, next to the prompt (see
    ``_CODEX_CONTEXT_OFFSET``). Claude Code: a system message
    ``"<event> hook additional context: <pack>\n"``.
    """
    (place,) = locate_text(request, pack)
    if host == "codex":
        items = request.json()["input"]
        prompt_at = next(
            i
            for i, item in enumerate(items)
            if item.get("role") == "user" and item["content"][0].get("text") == prompt
        )
        assert (place["role"], place["type"], place["exact"]) == ("developer", "input_text", True)
        assert place["index"] == prompt_at + _CODEX_CONTEXT_OFFSET[event]
    elif host == "claude-code":
        assert (place["field"], place["role"]) == ("messages", "system")
        text = request.json()["messages"][place["index"]]["content"][place["block"]]["text"]
        assert text.split(f"{event} hook additional context: ", 1)[1].startswith(pack + "\n")
    else:
        raise ValueError(f"unknown host {host!r}")


# --------------------------------------------------------------------------------------------
# Local plugin marketplaces (offline install through each host's own CLI)
# --------------------------------------------------------------------------------------------


def write_claude_marketplace(
    folder: Path, name: str, plugins: Mapping[str, Path], *, version: str = "0.0.1"
) -> Path:
    """A Claude Code marketplace folder: ``.claude-plugin/marketplace.json`` listing each plugin
    directory (copied to ``plugins/<plugin>``; it must hold ``.claude-plugin/plugin.json``)."""
    entries = []
    for plugin, source in plugins.items():
        shutil.copytree(source, folder / "plugins" / plugin, dirs_exist_ok=True)
        entries.append(
            {
                "name": plugin,
                "source": f"./plugins/{plugin}",
                "version": version,
                "description": f"{plugin} (test marketplace)",
            }
        )
    manifest = {"name": name, "owner": {"name": "PowerContext tests"}, "plugins": entries}
    (folder / ".claude-plugin").mkdir(parents=True, exist_ok=True)
    (folder / ".claude-plugin" / "marketplace.json").write_text(json.dumps(manifest, indent=2))
    return folder


def write_codex_marketplace(folder: Path, name: str, plugins: Mapping[str, Path]) -> Path:
    """A Codex marketplace folder: ``.agents/plugins/marketplace.json`` listing each plugin
    directory (copied to ``plugins/<plugin>``; it must hold ``.codex-plugin/plugin.json``)."""
    entries = []
    for plugin, source in plugins.items():
        shutil.copytree(source, folder / "plugins" / plugin, dirs_exist_ok=True)
        entries.append(
            {
                "name": plugin,
                "source": {"source": "local", "path": f"./plugins/{plugin}"},
                "policy": {"installation": "AVAILABLE"},
                "category": "Productivity",
            }
        )
    manifest = {"name": name, "interface": {"displayName": name}, "plugins": entries}
    (folder / ".agents" / "plugins").mkdir(parents=True, exist_ok=True)
    (folder / ".agents" / "plugins" / "marketplace.json").write_text(json.dumps(manifest, indent=2))
    return folder


def _checked(run: CompletedRun) -> CompletedRun:
    if run.returncode != 0:
        raise RuntimeError(f"host command failed:\n{run.describe()}")
    return run


def install_claude_plugin(
    home: Path,
    marketplace: Path,
    plugin: str,
    market_name: str,
    *,
    cwd: Path,
    clis: HostCLIs | None = None,
    proxy_url: str | None = None,
) -> list[CompletedRun]:
    """``claude plugin marketplace add <folder>``, then ``claude plugin install p@m`` (user
    scope)."""
    return [
        _checked(run_claude_cli(args, home=home, cwd=cwd, clis=clis, proxy_url=proxy_url))
        for args in (
            ["plugin", "marketplace", "add", str(marketplace)],
            ["plugin", "install", f"{plugin}@{market_name}"],
        )
    ]


def install_codex_plugin(
    codex_home: Path,
    marketplace: Path,
    plugin: str,
    market_name: str,
    *,
    cwd: Path,
    clis: HostCLIs | None = None,
    proxy_url: str | None = None,
) -> list[CompletedRun]:
    """``codex plugin marketplace add <folder>`` then ``codex plugin add p@m``. The Codex home
    must enable the ``plugins`` feature (``prepare_codex_home(..., plugins=True)``)."""
    return [
        _checked(
            run_codex_cli(args, codex_home=codex_home, cwd=cwd, clis=clis, proxy_url=proxy_url)
        )
        for args in (
            ["plugin", "marketplace", "add", str(marketplace)],
            ["plugin", "add", f"{plugin}@{market_name}"],
        )
    ]


def write_probe_plugin(
    folder: Path, probe: ProbeHook, host: str, *, mode: str = "context", timeout: int = 10
) -> Path:
    """A plugin folder for ``host`` (``"claude"`` or ``"codex"``) whose ``hooks/hooks.json`` runs
    a copy of the probe script from the plugin root (``${CLAUDE_PLUGIN_ROOT}`` /
    ``${PLUGIN_ROOT}``), logging to the probe's log."""
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy(probe.script, folder / "probe_hook.py")
    shutil.copy(probe.directory / "contexts.json", folder / "contexts.json")
    manifest_dir, root_var = (
        (".claude-plugin", "CLAUDE_PLUGIN_ROOT")
        if host == "claude"
        else (".codex-plugin", "PLUGIN_ROOT")
    )
    (folder / manifest_dir).mkdir(exist_ok=True)
    (folder / manifest_dir / "plugin.json").write_text(
        json.dumps(
            {"name": folder.name, "version": "0.0.1", "description": "PowerContext test probe"}
        )
    )
    command = " ".join(
        [
            shlex.quote(sys.executable),
            "-I",
            "-S",
            f'"${{{root_var}}}/probe_hook.py"',
            mode,
            shlex.quote(str(probe.log)),
        ]
    )
    hooks = {
        event: [{"hooks": [{"type": "command", "command": command, "timeout": timeout}]}]
        for event in HOOK_EVENTS
    }
    (folder / "hooks").mkdir(exist_ok=True)
    (folder / "hooks" / "hooks.json").write_text(json.dumps({"hooks": hooks}, indent=2))
    return folder
