"""The MCP bridge's catalog cache: the runtime's last answers to the handshake and ``tools/list``.

Why (``docs/decisions/mcp-bridge.md`` § Catalog cache): Codex ``exec`` builds its first model
request without any MCP server that has not answered ``initialize`` + ``tools/list`` within
about a second, and the runtime loads its MCP SDK only on the first ``/mcp`` request (≈ 0.5 s
idle, seconds on a loaded machine). These answers change only with the runtime's version and
the token's capabilities, so the bridge keeps the last ones in the plugin's persistent data dir
(``mcp-catalog.json``, next to the diagnostics log and the receipt store) and answers from it
at once while the real request goes on in the background::

    {"schema": "powercontext.mcp-catalog.v1",
     "salt": "<32 hex: random per file>",
     "entries": [{"endpoint": "unix socket /…/powercontext.sock",
                  "token": "<sha256 hex of salt + token>",
                  "method": "tools/list", "protocol": "2025-06-18",
                  "runtime_version": "0.9.0", "stored_at": <Unix seconds>,
                  "result": {…the runtime's JSON-RPC result…}}]}

Design rules, and why:

- An entry matches on everything that decides the answer: the endpoint (as
  :func:`~.transport.describe_endpoint` names it: no URL ever carries more), the token's
  fingerprint (another token may list other tools: the review tools), the method and the
  protocol version. The fingerprint is a salted SHA-256 of a high-entropy runtime token, the
  salt random per file: the file never holds the token, and a fingerprint means nothing
  outside it. ``runtime_version`` (the runtime's ``serverInfo.version``) is kept only for
  diagnostics: a newer runtime is noticed by the background refresh, not by the key.
- Only results, never a request: a tool list and the server's description, no memory content,
  no scope id, no argument. ``tools/list`` is cached only for the first page (no cursor, no
  ``nextCursor``).
- Written atomically 0600 (:func:`~.files.replace_with_private_file`) and only when an answer
  changed. Within a bridge, updates take turns (its refreshes of ``initialize`` and
  ``tools/list`` finish together); across processes there is no lock: two sessions refreshing
  at once may lose one update, which the next session redoes — a file lock could only make a
  session wait.
- Bounded: :data:`MAX_ENTRIES` entries (newest kept), :data:`MAX_RESULT_BYTES` per result,
  :data:`MAX_FILE_BYTES` per file.
- Never an error for the host: a missing, unreadable, corrupt, foreign or oversized file is a
  miss, and the next answer replaces it. The cache is a hint, not a record.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from typing import Literal

import msgspec

from .digest import sha256
from .files import read_regular_file, replace_with_private_file

__all__ = [
    "CATALOG_FILE_NAME",
    "CATALOG_SCHEMA",
    "MAX_ENTRIES",
    "MAX_FILE_BYTES",
    "MAX_RESULT_BYTES",
    "ToolCatalog",
]

CATALOG_FILE_NAME = "mcp-catalog.json"
CATALOG_SCHEMA = "powercontext.mcp-catalog.v1"
#: A few endpoints × tokens × protocol versions × three methods; older entries go first.
MAX_ENTRIES = 24
#: A tool list is tens of KiB; anything far larger is not worth a file read per session.
MAX_RESULT_BYTES = 512 * 1024
MAX_FILE_BYTES = 2 * 1024 * 1024
_SALT_BYTES = 16
_FINGERPRINT_DOMAIN = b"powercontext.mcp-catalog.token\x00"
_HEX = frozenset("0123456789abcdef")


class _Entry(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    endpoint: str
    token: str
    method: str
    protocol: str
    runtime_version: str | None
    stored_at: int
    result: msgspec.Raw


class _File(msgspec.Struct, forbid_unknown_fields=True):
    schema: Literal["powercontext.mcp-catalog.v1"]
    salt: str
    entries: list[_Entry]


_DECODER = msgspec.json.Decoder(_File)
_ENCODER = msgspec.json.Encoder()


def _fingerprint(salt: str, token: str | None) -> str:
    """The token's salted SHA-256 (hex); ``-`` for no token at all."""
    if token is None:
        return "-"
    return sha256(_FINGERPRINT_DOMAIN + salt.encode("ascii") + token.encode("utf-8")).hexdigest()


def _valid_salt(salt: str) -> bool:
    return len(salt) == 2 * _SALT_BYTES and set(salt) <= _HEX


class ToolCatalog:
    """The cached MCP answers in ``<dir>/mcp-catalog.json``; every method fails open.

    ``directory`` may be a callable, so the plugin data dir is only located when the cache is
    used. ``clock`` returns Unix seconds (tests).
    """

    def __init__(
        self, directory: str | Callable[[], str], *, clock: Callable[[], float] = time.time
    ) -> None:
        self._directory = directory
        self._clock = clock
        self._lock = threading.Lock()  # one read-modify-write at a time in this process

    @property
    def path(self) -> str:
        """Where the file lives (resolves the directory; may raise like the resolver)."""
        directory = self._directory
        return os.path.join(directory() if callable(directory) else directory, CATALOG_FILE_NAME)

    def get(self, endpoint: str, token: str | None, method: str, protocol: str) -> bytes | None:
        """The cached JSON result for this key, or ``None`` (a miss, also on any error)."""
        try:
            document = self._load(self.path)
        except (OSError, RuntimeError, ValueError):
            return None
        if document is None:
            return None
        fingerprint = _fingerprint(document.salt, token)
        for entry in reversed(document.entries):
            if (entry.endpoint, entry.token, entry.method, entry.protocol) == (
                endpoint,
                fingerprint,
                method,
                protocol,
            ):
                return bytes(entry.result)
        return None

    def put(
        self,
        endpoint: str,
        token: str | None,
        method: str,
        protocol: str,
        result: bytes,
        runtime_version: str | None,
    ) -> bool:
        """Remember ``result`` (a JSON object) for this key; ``False`` if nothing was written
        (unchanged, too large, or the file could not be written)."""
        if len(result) > MAX_RESULT_BYTES or not result.startswith(b"{"):
            return False
        with self._lock:
            return self._put(endpoint, token, method, protocol, result, runtime_version)

    def _put(
        self,
        endpoint: str,
        token: str | None,
        method: str,
        protocol: str,
        result: bytes,
        runtime_version: str | None,
    ) -> bool:
        try:
            path = self.path
            try:
                document = self._load(path)
            except OSError:  # e.g. a directory in its place: the write below fails too
                document = None
            if document is None:
                document = _File(CATALOG_SCHEMA, os.urandom(_SALT_BYTES).hex(), [])
            fingerprint = _fingerprint(document.salt, token)
            key = (endpoint, fingerprint, method, protocol)
            kept: list[_Entry] = []
            for entry in document.entries:
                if (entry.endpoint, entry.token, entry.method, entry.protocol) != key:
                    kept.append(entry)
                elif bytes(entry.result) == result and entry.runtime_version == runtime_version:
                    return False  # the answer did not change: no write
            kept.append(
                _Entry(
                    endpoint=endpoint,
                    token=fingerprint,
                    method=method,
                    protocol=protocol,
                    runtime_version=runtime_version,
                    stored_at=int(self._clock()),
                    result=msgspec.Raw(result),
                )
            )
            data = self._encode(document.salt, kept[-MAX_ENTRIES:])
            os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
            temporary = f"{path}.{os.getpid()}.{time.monotonic_ns()}.tmp"
            replace_with_private_file(temporary, path, data)
            return True
        except (OSError, RuntimeError, ValueError):
            return False

    @staticmethod
    def _encode(salt: str, entries: list[_Entry]) -> bytes:
        """The file's bytes, dropping the oldest entries until it fits :data:`MAX_FILE_BYTES`."""
        while True:
            data = _ENCODER.encode(_File(CATALOG_SCHEMA, salt, entries))
            if len(data) <= MAX_FILE_BYTES or len(entries) <= 1:
                return data
            entries = entries[1:]

    @staticmethod
    def _load(path: str) -> _File | None:
        """The file's document, or ``None`` when it is missing or not ours (unreadable,
        oversized, corrupt, another schema, a FIFO in its place — read without blocking)."""
        raw = read_regular_file(path, MAX_FILE_BYTES)
        if raw is None:
            return None
        try:
            document = _DECODER.decode(raw)
        except (msgspec.MsgspecError, ValueError, TypeError, RecursionError):
            return None
        return document if _valid_salt(document.salt) else None
