"""The MCP bridge: a *stdio* MCP server the hosts start, forwarding to the runtime's ``/mcp``.

Why a bridge (``docs/decisions/mcp-bridge.md``): the hosts' own HTTP MCP clients can send a
bearer token only from an environment variable (Codex ``bearer_token_env_var``, Claude Code
``${VAR}`` in a header) and speak TCP only. The runtime's agent token lives in a file and the
runtime's default listener is a unix socket, so with nothing exported the tools were simply
missing (Codex) or refused (Claude Code, 401). Run as a command, this process resolves its
settings exactly as the hooks do (:class:`~.settings.HookSettings`: the runtime's socket
``<data dir>/powercontext.sock`` and its *agent* token ``<data dir>/auth/agent-token``, unless
``POWERCONTEXT_*`` variables, the Claude Code plugin options or ``plugins.toml`` say otherwise)
and talks to the runtime over the hooks' own transport (:func:`~.transport.exchange`: unix
socket checked for its owner, or loopback TCP; every request bounded by a deadline).

Protocol: newline-delimited JSON-RPC on stdin/stdout (MCP's stdio transport). The runtime's
``/mcp`` is stateless and answers JSON (``StreamableHTTPSessionManager(stateless=True,
json_response=True)``), so every message is one ``POST /mcp``, forwarded byte-for-byte:

* ``200`` → the JSON-RPC answer, written as one line (an SSE body, which the runtime only uses
  for ``subscriptions/listen``, is unpacked into its ``data:`` messages);
* ``202`` (a notification, or a response the host sent) → nothing;
* a JSON-RPC error body with any status (e.g. the SDK's ``400`` for an unsupported protocol
  version) → forwarded as it is.

Headers follow the protocol era the host speaks: after an ``initialize`` handshake (2024-11-05
… 2025-11-25) every later request carries ``MCP-Protocol-Version`` with the negotiated
version; a request of the per-request era (2026-07-28, its version in
``params._meta["io.modelcontextprotocol/protocolVersion"]``) carries that version plus the
routing headers ``Mcp-Method`` and ``Mcp-Name`` the SDK checks. A JSON array (a batch, which
the stateless runtime refuses as such) is forwarded one message at a time and answered with
an array.

Failures never hang or break the host: when the runtime is down, refuses the token, errs or
does not answer in time, each *request* (a message with an ``id``) gets a JSON-RPC error
(:data:`RUNTIME_ERROR`) whose message names the cause and the fix — never a token, a scope,
a tool argument or any content — and a notification gets no answer. The handshake is the
exception: ``initialize`` is then answered here (and ``server/discover`` with "method not
found", so the host falls back to ``initialize``), because a host remembers a server that
failed to *start* (Claude Code 2.1.328 leaves a plugin's stdio server alone for 15 minutes)
but retries a failing ``tools/list`` — and the next session finds the runtime again. A line
that is not JSON gets ``-32700`` (id ``null``). One content-free diagnostic line per failure
goes to stderr (the hosts keep their MCP servers' stderr in their logs), in the keys of
:mod:`.diagnostics`. End of input ends the process with status 0, once every request that
was in flight has been answered.

Limits: :data:`MAX_MESSAGE_BYTES` per message in either direction (a tool result is bounded by
the runtime's own limits long before that; the hooks' 1 MiB transport cap would be too small
for a long memory listing), :data:`CALL_DEADLINE_SECONDS` per ``tools/call`` and
:data:`DEADLINE_SECONDS` for anything else, at most :data:`MAX_IN_FLIGHT` requests at once
(the host may call tools in parallel; reading stops while all are busy).

Catalog cache (:mod:`.mcp_catalog`): Codex ``exec`` leaves out of its first model request any
MCP server that has not answered ``initialize`` + ``tools/list`` within about a second, and the
runtime loads its MCP SDK only on the first ``/mcp`` request (seconds on a loaded machine). So
the runtime's answers to ``initialize`` (per requested version), ``server/discover`` (the
per-request era) and ``tools/list`` (first page, per protocol version) are kept in the plugin's
data dir, keyed by endpoint, token fingerprint, method and version. On a match the real request
still goes out, on its own thread; as soon as the runtime has *taken* it (the request is written
to its socket: it is there, only perhaps cold) the host gets the cached answer, and the real
answer, when it arrives, refreshes the file. The cache hides the runtime's warmth, never its
absence: when the request cannot be delivered (runtime down, socket refused) the host gets what
it gets without a cache — the handshake answered here, ``tools/list`` an error — so a turn never
offers tools that cannot work. A changed tool list reaches the host at once only when the
answer it got said ``listChanged`` (then ``notifications/tools/list_changed`` is sent);
otherwise the next session lists it. ``tools/call`` and everything else always go to the
runtime. ``install`` and ``doctor`` prime the file by running this very bridge.

Start-up matters (a host starts this process with every session), so only what the hooks
already import is imported here: no ``httpx``, no ``http.client``, no ``asyncio``.
"""

from __future__ import annotations

import base64
import json
import os
import sys
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, BinaryIO, TextIO

from . import __version__
from .diagnostics import outcome_for
from .files import read_regular_file
from .mcp_catalog import ToolCatalog
from .settings import (
    HookSettings,
    SettingsError,
    agent_token_file,
    config_file_path,
    plugin_data_dir,
)
from .transport import HttpFailure, HttpResponse, describe_endpoint, exchange

__all__ = [
    "CALL_DEADLINE_SECONDS",
    "DEADLINE_SECONDS",
    "MAX_IN_FLIGHT",
    "MAX_MESSAGE_BYTES",
    "PARSE_ERROR",
    "REACH_SECONDS",
    "RUNTIME_ERROR",
    "SETTINGS_VARIABLES",
    "Bridge",
    "describe_token_source",
    "main",
]

#: Largest message accepted on stdin and largest answer read from the runtime: 8 MiB.
MAX_MESSAGE_BYTES = 8 * 1024 * 1024
#: A ``tools/call`` may take this long: generous for a database operation (the hosts keep their
#: own tool timeouts too).
CALL_DEADLINE_SECONDS = 60.0
#: Everything else (``initialize``, ``tools/list``, ``ping`` …) must be answered sooner, so
#: the host hears our explanation before its own timeout does (Claude Code waits 30 s for a
#: connection).
DEADLINE_SECONDS = 5.0
#: Requests forwarded at the same time.
MAX_IN_FLIGHT = 4
#: A cached answer waits at most this long to learn whether the runtime took the real request
#: (milliseconds when it is there, and a refused connection fails at once): long enough to
#: tell "down" from "cold", short next to Codex's one second.
REACH_SECONDS = 0.25
#: The variables the bridge's settings read. Codex starts MCP servers with a minimal
#: environment (``HOME``, ``PATH``, ``LANG``… only), so its ``.mcp.json`` forwards these by name
#: (``env_vars``); Claude Code passes its whole environment.
SETTINGS_VARIABLES = (
    "POWERCONTEXT_HOME",
    "POWERCONTEXT_URL",
    "POWERCONTEXT_TOKEN",
    "POWERCONTEXT_SOCKET",
    "XDG_CONFIG_HOME",
    "XDG_DATA_HOME",
)
#: JSON-RPC error codes: a runtime failure (implementation-defined range), a line that is not
#: JSON, and a message that is not a JSON-RPC message.
RUNTIME_ERROR = -32000
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
#: The ``initialize``-era protocol versions the runtime's MCP SDK speaks (oldest first).
HANDSHAKE_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")

_PATH = "/mcp"
_USER_AGENT = "powercontext-mcp-bridge"
_VERSION_META_KEY = "io.modelcontextprotocol/protocolVersion"
#: Per-request-era methods whose name the SDK also expects in the ``Mcp-Name`` header.
_NAME_BEARING = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}
_INLINE_METHODS = frozenset({"initialize", "server/discover"})
#: The answers the catalog cache keeps (see the module docstring).
_CACHED_METHODS = frozenset({"initialize", "server/discover", "tools/list"})
_LIST_CHANGED = b'{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}'

_UNREACHABLE = {
    "connection_failed": (
        "connection refused or closed",
        "start it with `powercontext serve`, or point POWERCONTEXT_URL at it",
    ),
    "untrusted_socket": (
        "refused: not a socket owned by this user, nothing was sent",
        "remove that file and restart `powercontext serve`",
    ),
}


class _Failure(Exception):
    """The runtime gave no usable answer: a host-facing message and the diagnostic fields."""

    def __init__(self, message: str, outcome: str, http_status: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.outcome = outcome
        self.http_status = http_status


def describe_token_source(settings: HookSettings, env: Mapping[str, str]) -> str:
    """Where the token ``settings`` holds came from, in the order the settings resolve it
    (for messages: never the token itself)."""
    if env.get("POWERCONTEXT_TOKEN", "").strip():
        return "POWERCONTEXT_TOKEN"
    if settings.host == "claude-code" and env.get("CLAUDE_PLUGIN_OPTION_TOKEN", "").strip():
        return "the plugin's token option"
    path = _agent_token_path(env)
    raw = read_regular_file(path, 64 * 1024)  # never blocks on a FIFO in its place
    from_file = raw.decode("utf-8", errors="replace").strip() if raw is not None else None
    if from_file != settings.token:
        return f"[{settings.host}] in {config_file_path()}"
    return f"the agent token file {path}"


def _agent_token_path(env: Mapping[str, str]) -> str:
    try:
        return agent_token_file(env)
    except SettingsError:
        return "<POWERCONTEXT_HOME>/auth/agent-token"


def _header_safe(value: str) -> bool:
    return all(0x20 <= ord(ch) <= 0x7E for ch in value)


def _name_header(value: str) -> str:
    """``Mcp-Name`` as the SDK encodes it: verbatim when it survives an HTTP field, else the
    ``=?base64?…?=`` sentinel."""
    if (
        _header_safe(value)
        and value == value.strip()
        and not (value.startswith("=?base64?") and value.endswith("?="))
    ):
        return value
    return f"=?base64?{base64.b64encode(value.encode('utf-8')).decode('ascii')}?="


def _message_lines(body: bytes) -> list[bytes]:
    """The JSON-RPC message(s) of a 2xx body, one compact line each (``[]`` if none)."""
    text = body.strip()
    if not text:
        return []
    try:
        document = json.loads(text)
    except ValueError:
        return _sse_messages(text)
    if b"\n" in text or b"\r" in text:
        return [_dump(document)]
    return [text]


def _sse_messages(body: bytes) -> list[bytes]:
    """The ``data:`` payloads of an SSE body that are JSON (anything else is skipped)."""
    messages: list[bytes] = []
    data: list[bytes] = []
    for raw in [*body.splitlines(), b""]:
        if raw.startswith(b"data:"):
            data.append(raw[5:].removeprefix(b" "))
        elif not raw.strip() and data:
            payload = b"\n".join(data)
            data = []
            try:
                messages.append(_dump(json.loads(payload)))
            except ValueError:
                continue
    return messages


def _dump(document: Any) -> bytes:
    return json.dumps(document, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def _error(message_id: Any, code: int, message: str, data: dict[str, Any] | None = None) -> bytes:
    error: dict[str, Any] = {"code": code, "message": message}
    if data:
        error["data"] = data
    return _dump({"jsonrpc": "2.0", "id": message_id, "error": error})


def _envelope_code(body: bytes) -> str | None:
    """The runtime's error ``code`` (a closed set of identifiers: safe to show)."""
    try:
        error = json.loads(body).get("error")
        code = error.get("code") if isinstance(error, dict) else None
    except (ValueError, AttributeError):
        return None
    return code if isinstance(code, str) and code.isascii() and len(code) <= 64 else None


def _result_of(line: bytes) -> dict[str, Any] | None:
    """The ``result`` object of a JSON-RPC answer line, or ``None``."""
    try:
        result = json.loads(line).get("result")
    except (ValueError, AttributeError):
        return None
    return result if isinstance(result, dict) else None


def _says_list_changed(result: dict[str, Any]) -> bool:
    """Whether a handshake result promised ``notifications/tools/list_changed``."""
    capabilities = result.get("capabilities")
    tools = capabilities.get("tools") if isinstance(capabilities, dict) else None
    return isinstance(tools, dict) and tools.get("listChanged") is True


class _Key:
    """What a cached answer is filed under: endpoint, token, method, protocol version (its
    ``repr`` never shows the token)."""

    __slots__ = ("endpoint", "method", "protocol", "token")

    def __init__(self, endpoint: str, token: str | None, method: str, protocol: str) -> None:
        self.endpoint = endpoint
        self.token = token
        self.method = method
        self.protocol = protocol

    def __repr__(self) -> str:
        return f"_Key({self.endpoint!r}, <token>, {self.method!r}, {self.protocol!r})"


class _Refresh:
    """The real request behind a cached answer: whoever comes second — the host's answer or
    the runtime's — handles the other's outcome, under :attr:`lock`."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.settled = threading.Event()  # the runtime took the request, or it is over
        self.result: list[bytes] | _Failure | None = None
        self.done = False
        self.served_from_cache = False


def _jsonrpc_body(body: bytes) -> bool:
    """Whether a non-2xx body is itself a JSON-RPC answer (the SDK's protocol errors)."""
    try:
        document = json.loads(body)
    except ValueError:
        return False
    return isinstance(document, dict) and document.get("jsonrpc") == "2.0" and "id" in document


class Bridge:
    """One bridge process: reads ``stdin``, forwards to the runtime, answers on ``stdout``."""

    def __init__(
        self,
        host: str,
        env: Mapping[str, str],
        stdout: BinaryIO,
        stderr: TextIO | None,
    ) -> None:
        self.host = host
        self.env = dict(env)
        self._stdout = stdout
        self._stderr = stderr
        self._write_lock = threading.Lock()
        self._slots = threading.BoundedSemaphore(MAX_IN_FLIGHT)
        self._workers_lock = threading.Lock()
        self._workers: list[threading.Thread] = []
        self._negotiated: str | None = None
        self.closed = False  # stdout is gone: the host stopped listening
        self.catalog = ToolCatalog(lambda: plugin_data_dir(host, self.env))
        self._reached = threading.Event()  # the runtime took a request in this session
        self._runtime_version: str | None = None  # serverInfo.version, for the cache file
        self._list_changed = False  # the handshake the host got promised list_changed

    # ---- the loop ----------------------------------------------------------------------

    def run(self, stdin: BinaryIO) -> int:
        """Serve until end of input (or until stdout is gone); always returns 0."""
        while not self.closed:
            line = stdin.readline(MAX_MESSAGE_BYTES + 1)
            if not line:
                break
            if len(line) > MAX_MESSAGE_BYTES and not line.endswith(b"\n"):
                while line and not line.endswith(b"\n"):  # drop the rest of the line
                    line = stdin.readline(MAX_MESSAGE_BYTES)
                self._write(
                    _error(None, INVALID_REQUEST, "message larger than 8 MiB: not forwarded")
                )
                continue
            self.handle_line(line)
        self._join_all()
        return 0

    def _start(self, target: Any, *args: Any) -> None:
        """Run ``target`` on a thread that end of input waits for."""
        worker = threading.Thread(target=target, args=args, daemon=True)
        with self._workers_lock:
            self._workers = [w for w in self._workers if w.is_alive()]
            self._workers.append(worker)
        worker.start()

    def _join_all(self) -> None:
        """Wait for every request in flight, and every cache refresh they started."""
        while True:
            with self._workers_lock:
                pending = [w for w in self._workers if w.is_alive()]
            if not pending:
                return
            for worker in pending:
                worker.join()

    def handle_line(self, line: bytes) -> None:
        text = line.strip()
        if not text:
            return
        try:
            message = json.loads(text)
        except ValueError:
            self._write(_error(None, PARSE_ERROR, "parse error: the line is not JSON"))
            return
        if isinstance(message, dict) and message.get("method") in _INLINE_METHODS:
            # The handshake is answered before the next line is read, so every later request
            # already carries the negotiated protocol version.
            self._write_all(self._answer(message, text))
            return
        self._slots.acquire()
        self._start(self._work, message, text)

    def _work(self, message: Any, raw: bytes) -> None:
        try:
            if isinstance(message, list):
                self._batch(message)
            else:
                self._write_all(self._answer(message, raw))
        finally:
            self._slots.release()

    def _batch(self, messages: list[Any]) -> None:
        if not messages:
            self._write(_error(None, INVALID_REQUEST, "invalid request: an empty batch"))
            return
        answers: list[Any] = []
        for message in messages:
            for line in self._forward(message, _dump(message)):
                answers.append(json.loads(line))
        if answers:
            self._write(_dump(answers))

    # ---- one message ---------------------------------------------------------------------

    def _answer(self, message: Any, raw: bytes) -> list[bytes]:
        """The lines to write for one message: from the catalog cache when it holds the answer
        (and the runtime took the real request, which refreshes the cache), else forwarded."""
        if not isinstance(message, dict) or message.get("method") not in _CACHED_METHODS:
            return self._forward(message, raw)
        try:
            settings: HookSettings | None = HookSettings.load(self.host, self.env)
        except SettingsError:
            settings = None  # _forward explains it
        key = self._cache_key(message, settings) if settings is not None else None
        cached = (
            self.catalog.get(key.endpoint, key.token, key.method, key.protocol)
            if key is not None
            else None
        )
        if settings is None or key is None or cached is None or not cached.startswith(b"{"):
            return self._forward(message, raw, settings, key)
        refresh = _Refresh()
        started = time.monotonic()
        self._start(self._refresh, message, raw, settings, key, cached, refresh, started)
        if not self._reached.is_set():
            refresh.settled.wait(REACH_SECONDS)
        with refresh.lock:
            result = refresh.result if refresh.done else None
            refresh.served_from_cache = result is None
        if result is not None:  # over already: the runtime's own answer, or its failure
            return self._finish(message, result, started)
        line = b'{"jsonrpc":"2.0","id":%s,"result":%s}' % (_dump(message.get("id")), cached)
        self._note_served(message, line)
        return [line]

    def _refresh(
        self,
        message: dict[str, Any],
        raw: bytes,
        settings: HookSettings,
        key: _Key,
        cached: bytes,
        refresh: _Refresh,
        started: float,
    ) -> None:
        """The real request behind a cached answer (its answer refreshes the cache)."""
        result: list[bytes] | _Failure
        try:
            result = self._fetch(message, raw, settings, key, on_sent=refresh.settled.set)
        except Exception:  # a refresh must never take the bridge down (nor hang the host)
            result = _Failure("the cache refresh failed", "invalid_response")
        with refresh.lock:
            refresh.result = result
            refresh.done = True
            served_from_cache = refresh.served_from_cache
        refresh.settled.set()
        if not served_from_cache:
            return  # the host got this very result (see _answer)
        if isinstance(result, _Failure):
            self._diagnose(result.outcome, result.http_status, started)
            return
        fresh = _result_of(result[0]) if result else None
        if (
            key.method == "tools/list"
            and self._list_changed
            and fresh is not None
            and fresh != _result_of(b'{"result":%s}' % cached)
        ):
            self._write(_LIST_CHANGED)

    def _cache_key(self, message: dict[str, Any], settings: HookSettings) -> _Key | None:
        """The cache key of a request whose answer may be cached, else ``None``: the protocol
        version is the per-request era's ``_meta`` one, the version ``initialize`` asks for,
        or the one the handshake negotiated; ``tools/list`` only without a cursor."""
        method = message.get("method")
        if method not in _CACHED_METHODS or "id" not in message:
            return None
        params = message.get("params")
        params = params if isinstance(params, dict) else {}
        meta = params.get("_meta")
        version = meta.get(_VERSION_META_KEY) if isinstance(meta, dict) else None
        if version is None and method == "initialize":
            version = params.get("protocolVersion")
        elif version is None and method == "tools/list":
            version = self._negotiated
        if not isinstance(version, str) or not _header_safe(version) or len(version) > 64:
            return None
        if method == "tools/list" and params.get("cursor") is not None:
            return None
        return _Key(describe_endpoint(settings.endpoint), settings.token, method, version)

    def _store(self, key: _Key, line: bytes) -> None:
        """Keep a successful answer in the cache (a first page of tools only)."""
        result = _result_of(line)
        if result is None or (key.method == "tools/list" and "nextCursor" in result):
            return
        if key.method != "tools/list":
            meta = result.get("_meta")  # the per-request era files it under _meta
            info = result.get("serverInfo") or (
                meta.get("io.modelcontextprotocol/serverInfo") if isinstance(meta, dict) else None
            )
            version = info.get("version") if isinstance(info, dict) else None
            if isinstance(version, str) and len(version) <= 64:
                self._runtime_version = version
        self.catalog.put(
            key.endpoint, key.token, key.method, key.protocol, _dump(result), self._runtime_version
        )

    def _note_served(self, message: dict[str, Any], line: bytes) -> None:
        """What the session must remember of an answer the host got: the negotiated version,
        and whether the server promised ``list_changed``."""
        method = message.get("method")
        if method == "initialize":
            self._remember_version(line)
        if method in _INLINE_METHODS:
            result = _result_of(line)
            self._list_changed = result is not None and _says_list_changed(result)

    def _forward(
        self,
        message: Any,
        raw: bytes,
        settings: HookSettings | None = None,
        key: _Key | None = None,
    ) -> list[bytes]:
        """The lines to write for one message: the runtime's answer, an error, or nothing."""
        if not isinstance(message, dict):
            return [_error(None, INVALID_REQUEST, "invalid request: not a JSON-RPC message")]
        started = time.monotonic()
        try:
            if settings is None:
                settings = self._settings()
            if key is None:
                key = self._cache_key(message, settings)
            result: list[bytes] | _Failure = self._fetch(message, raw, settings, key)
        except _Failure as failure:
            result = failure
        return self._finish(message, result, started)

    def _finish(
        self, message: dict[str, Any], result: list[bytes] | _Failure, started: float
    ) -> list[bytes]:
        """The host's lines for a fetch's outcome; a failure is diagnosed and explained."""
        method = message.get("method")
        expects_answer = isinstance(method, str) and "id" in message
        message_id = message.get("id") if expects_answer else None
        if isinstance(result, _Failure):
            self._diagnose(result.outcome, result.http_status, started)
            if not expects_answer:
                return []
            if method in _INLINE_METHODS:
                return [self._local_handshake(message, message_id)]
            data: dict[str, Any] = {"outcome": result.outcome}
            if result.http_status is not None:
                data["http_status"] = result.http_status
            return [_error(message_id, RUNTIME_ERROR, result.message, data)]
        if not expects_answer:
            return []
        self._note_served(message, result[0])
        return result

    def _fetch(
        self,
        message: dict[str, Any],
        raw: bytes,
        settings: HookSettings,
        key: _Key | None,
        on_sent: Callable[[], None] | None = None,
    ) -> list[bytes] | _Failure:
        """One exchange with the runtime: its answer lines (kept in the cache when ``key`` says
        so), or why there are none. Touches no session state, so it may run in the
        background."""
        method = message.get("method")
        expects_answer = isinstance(method, str) and "id" in message
        try:
            lines = self._exchange(message, raw, method, settings, on_sent)
            if expects_answer and not lines:
                raise _Failure(
                    "the PowerContext runtime accepted the request without answering it",
                    "invalid_response",
                )
        except _Failure as failure:
            return failure
        if key is not None and lines:
            self._store(key, lines[0])
        return lines

    def _settings(self) -> HookSettings:
        try:
            return HookSettings.load(self.host, self.env)
        except SettingsError as exc:
            raise _Failure(
                f"the PowerContext settings are invalid ({exc}): fix the POWERCONTEXT_* "
                f"variables or {config_file_path()}",
                "skipped",
            ) from None

    def _sent(self, then: Callable[[], None] | None) -> None:
        self._reached.set()
        if then is not None:
            then()

    def _exchange(
        self,
        message: dict[str, Any],
        raw: bytes,
        method: Any,
        settings: HookSettings,
        on_sent: Callable[[], None] | None = None,
    ) -> list[bytes]:
        headers = self._headers(message, method, settings.token)
        seconds = CALL_DEADLINE_SECONDS if method == "tools/call" else DEADLINE_SECONDS
        outcome = exchange(
            settings.endpoint,
            "POST",
            _PATH,
            raw,
            headers=headers,
            stop_at=time.monotonic() + seconds,
            max_response_bytes=MAX_MESSAGE_BYTES,
            read_error_bodies=True,
            on_sent=lambda: self._sent(on_sent),
        )
        where = describe_endpoint(settings.endpoint)
        if isinstance(outcome, HttpFailure):
            raise self._transport_failure(outcome, where, seconds)
        if 200 <= outcome.status < 300:
            return _message_lines(outcome.body)
        if _jsonrpc_body(outcome.body):
            return _message_lines(outcome.body)
        raise self._status_failure(outcome, where, settings)

    def _headers(self, message: dict[str, Any], method: Any, token: str | None) -> dict[str, str]:
        headers = {
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            "User-Agent": _USER_AGENT,
        }
        if token:
            headers["Authorization"] = f"Bearer {token}"
        params = message.get("params")
        meta = params.get("_meta") if isinstance(params, dict) else None
        version = meta.get(_VERSION_META_KEY) if isinstance(meta, dict) else None
        if isinstance(version, str):  # the per-request era: version and routing headers
            if _header_safe(version):
                headers["MCP-Protocol-Version"] = version
            if isinstance(method, str) and _header_safe(method):
                headers["Mcp-Method"] = method
            name_key = _NAME_BEARING.get(method) if isinstance(method, str) else None
            name = params.get(name_key) if name_key and isinstance(params, dict) else None
            if isinstance(name, str):
                headers["Mcp-Name"] = _name_header(name)
        elif self._negotiated is not None and method != "initialize":
            headers["MCP-Protocol-Version"] = self._negotiated
        return headers

    def _local_handshake(self, message: dict[str, Any], message_id: Any) -> bytes:
        """The handshake answered here when the runtime cannot answer it (down, refusing the
        token, erring): a server of the ``initialize`` era with tools, whose requests then fail
        with the explanation. A failed *start* is what a host remembers — Claude Code 2.1.328
        does not start a plugin's stdio server again for 15 minutes after one — while a failing
        ``tools/list`` is retried, and works in the next session once the runtime is back."""
        if message.get("method") == "server/discover":
            # "Not a per-request-era server": the host falls back to ``initialize``.
            return _error(message_id, METHOD_NOT_FOUND, "Method not found")
        params = message.get("params")
        requested = params.get("protocolVersion") if isinstance(params, dict) else None
        version = requested if requested in HANDSHAKE_VERSIONS else HANDSHAKE_VERSIONS[-1]
        self._negotiated = version
        result = {
            "protocolVersion": version,
            "capabilities": {"tools": {"listChanged": False}},
            "serverInfo": {"name": "powercontext", "version": __version__},
        }
        return _dump({"jsonrpc": "2.0", "id": message_id, "result": result})

    def _remember_version(self, line: bytes) -> None:
        try:
            result = json.loads(line).get("result")
            version = result.get("protocolVersion") if isinstance(result, dict) else None
        except (ValueError, AttributeError):
            return
        if isinstance(version, str) and _header_safe(version):
            self._negotiated = version

    def _transport_failure(self, failure: HttpFailure, where: str, seconds: float) -> _Failure:
        outcome = outcome_for(failure)
        if failure.kind in _UNREACHABLE:
            reason, fix = _UNREACHABLE[failure.kind]
            return _Failure(
                f"PowerContext runtime is not reachable at {where} ({reason}); {fix}",
                outcome,
            )
        if failure.kind == "timeout":
            return _Failure(
                f"PowerContext runtime at {where} did not answer within {seconds:.0f} s; check "
                "it with `powercontext doctor`",
                outcome,
            )
        if failure.kind == "oversize":
            return _Failure(
                "the PowerContext runtime's answer is larger than the bridge's 8 MiB limit; "
                "ask for less (a smaller limit or page)",
                outcome,
                failure.status,
            )
        return _Failure(
            f"the PowerContext runtime at {where} sent an unusable answer ({failure.kind}); "
            "install matching versions of the runtime and the plugin",
            outcome,
            failure.status,
        )

    def _status_failure(
        self, response: HttpResponse, where: str, settings: HookSettings
    ) -> _Failure:
        status = response.status
        outcome = outcome_for(response)
        code = _envelope_code(response.body)
        detail = f"HTTP {status}{' ' + code if code else ''}"
        if status == 401:
            if settings.token is None:
                path = _agent_token_path(self.env)
                return _Failure(
                    f"the PowerContext runtime requires a token ({detail}) and {path} does not "
                    "exist: start the runtime once with `powercontext serve` (it writes that "
                    "file), or set POWERCONTEXT_HOME to the runtime's data dir",
                    outcome,
                    status,
                )
            source = describe_token_source(settings, self.env)
            if source.startswith("the agent token file"):
                return _Failure(
                    f"the runtime refused the agent token ({detail}) from "
                    f"{source.removeprefix('the agent token file ')}: run `powercontext serve` "
                    "once to re-issue auth/agent-token (and check that POWERCONTEXT_HOME names "
                    "the runtime's data dir)",
                    outcome,
                    status,
                )
            return _Failure(
                f"the runtime refused the token from {source} ({detail}): set it to the "
                "runtime's agent token, or remove it to use the agent token file",
                outcome,
                status,
            )
        if status == 403:
            return _Failure(
                f"the PowerContext runtime at {where} refused the request ({detail}); "
                "`powercontext token list` shows what each token may do",
                outcome,
                status,
            )
        if status == 404:
            return _Failure(
                f"the PowerContext runtime at {where} has no MCP endpoint ({detail}): "
                "upgrade the runtime",
                outcome,
                status,
            )
        if 500 <= status < 600:
            return _Failure(
                f"the PowerContext runtime at {where} cannot serve the request now ({detail}); "
                "`powercontext doctor` says why",
                outcome,
                status,
            )
        return _Failure(
            f"the PowerContext runtime at {where} refused the request ({detail})",
            outcome,
            status,
        )

    # ---- output ------------------------------------------------------------------------

    def _write_all(self, lines: list[bytes]) -> None:
        for line in lines:
            self._write(line)

    def _write(self, line: bytes) -> None:
        with self._write_lock:
            if self.closed:
                return
            try:
                self._stdout.write(line + b"\n")
                self._stdout.flush()
            except (OSError, ValueError):
                self.closed = True

    def _diagnose(self, outcome: str, http_status: int | None, started: float) -> None:
        """One content-free line on stderr: the same keys as the hooks' diagnostics."""
        if self._stderr is None:
            return
        line: dict[str, Any] = {
            "component": f"powercontext.{self.host}.mcp",
            "event": "mcp_request",
            "outcome": outcome,
        }
        if http_status is not None:
            line["http_status"] = http_status
        line["duration_ms"] = int((time.monotonic() - started) * 1000)
        try:
            with self._write_lock:
                self._stderr.write(json.dumps(line, separators=(",", ":")) + "\n")
                self._stderr.flush()
        except (OSError, ValueError):
            pass


def main(host: str) -> int:
    """``<plugin> mcp``: serve the bridge for ``host`` on this process's stdin/stdout."""
    bridge = Bridge(host, os.environ, sys.stdout.buffer, sys.stderr)
    try:
        return bridge.run(sys.stdin.buffer)
    except KeyboardInterrupt:
        return 0
