"""The local bootstrap receipt store: the last delivered bootstrap receipt per host session.

Spec 05 § Host side: after a SessionStart pack was claimed and injected, the *first following*
``UserPromptSubmit`` passes its receipt id as ``bootstrap_receipt_id`` so recall does not repeat
what the session already holds. Hooks are separate processes, so the id is handed over through a
small file in the plugin's persistent data dir (``bootstrap-receipts.json``)::

    {"schema": "powercontext.hook-receipts.v1",
     "sessions": {"<sha256 hex of the host session id>":
                  {"receipt_id": "rcpt_…", "stored_at": <Unix seconds>}}}

Design rules, and why:

- Keys are the sha256 of the session id, never the id itself: the file then reveals nothing a
  transcript path or a host log could be joined with. Receipt ids are server-generated and carry
  no content.
- Written atomically (temporary file + ``os.replace``, mode 0600) so a concurrent reader sees the
  old or the new file, never half of one; a best-effort ``flock`` on a sibling lock file keeps
  concurrent sessions from losing each other's updates (without it, one update may be lost —
  harmless: de-duplication fails open).
- Bounded (the newest :data:`MAX_SESSIONS` sessions) and expiring (:data:`RETENTION_SECONDS`, the
  server's receipt retention: an older id could only ever be ignored by the server).
- Never a crash: an unreadable, corrupt or foreign file counts as empty and is rewritten by the
  next change; I/O errors make the store behave as empty. The store is a hint, not a record.
- No ``fsync``: losing the last update in a power cut only costs one de-duplication, and a sync
  would cost every hook milliseconds on slow disks.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Literal

import msgspec

from .contract import is_receipt_id
from .digest import text_sha256
from .files import read_regular_file, replace_with_private_file

__all__ = [
    "MAX_SESSIONS",
    "RECEIPTS_FILE_NAME",
    "RECEIPTS_SCHEMA",
    "RETENTION_SECONDS",
    "ReceiptStore",
    "session_key",
]

RECEIPTS_FILE_NAME = "bootstrap-receipts.json"
RECEIPTS_SCHEMA = "powercontext.hook-receipts.v1"
MAX_SESSIONS = 256
RETENTION_SECONDS = 30 * 24 * 60 * 60
#: Entries dated further in the future than this (a clock that jumped back) are dropped.
_FUTURE_TOLERANCE_SECONDS = 24 * 60 * 60
#: Far above MAX_SESSIONS entries (≈ 230 bytes each); anything larger is not our file.
_MAX_FILE_BYTES = 256 * 1024
_LOCK_WAIT_SECONDS = 0.5
_LOCK_RETRY_SECONDS = 0.002
_HEX = frozenset("0123456789abcdef")


class _Entry(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    receipt_id: str
    stored_at: int


class _File(msgspec.Struct, forbid_unknown_fields=True):
    schema: Literal["powercontext.hook-receipts.v1"]
    sessions: dict[str, _Entry]


_DECODER = msgspec.json.Decoder(_File)
_ENCODER = msgspec.json.Encoder()


def session_key(session_id: str) -> str:
    """The file's key for a host session: sha256 (hex) of the session id's UTF-8 bytes."""
    return text_sha256(session_id)


def _is_key(key: str) -> bool:
    return len(key) == 64 and set(key) <= _HEX


class ReceiptStore:
    """The most recent bootstrap receipt id per host session, in ``<dir>/bootstrap-receipts.json``.

    ``directory`` may be a callable so the plugin data dir (which can need ``platformdirs``) is
    only located when the store is actually used. ``clock`` returns Unix seconds (tests).
    A ``None`` session (the host sent no usable id) has no receipt and changes nothing.
    """

    def __init__(
        self,
        directory: str | Callable[[], str],
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._directory = directory
        self._clock = clock

    # -- public API: never raises ------------------------------------------------------------

    def get(self, session_id: str | None) -> str | None:
        """The stored receipt id for this session, or ``None`` (also on any error)."""
        if session_id is None:
            return None
        try:
            entries, _ = self._load(self._path())
        except (OSError, RuntimeError, ValueError):
            return None
        entry = entries.get(session_key(session_id))
        return entry.receipt_id if entry is not None else None

    def put(self, session_id: str | None, receipt_id: str) -> bool:
        """Remember ``receipt_id`` as this session's latest; ``False`` if it could not be saved."""
        if session_id is None or not is_receipt_id(receipt_id):
            return False
        key = session_key(session_id)
        stored_at = int(self._clock())

        def change(entries: dict[str, _Entry]) -> bool:
            entries.pop(key, None)  # re-insert: the newest entry goes last
            entries[key] = _Entry(receipt_id, stored_at)
            return True

        return self._update(change)

    def consume(self, session_id: str | None, receipt_id: str | None = None) -> str | None:
        """Remove and return this session's receipt id (only if it equals ``receipt_id``, when
        given — so a receipt stored meanwhile by a newer SessionStart is not thrown away)."""
        if session_id is None:
            return None
        key = session_key(session_id)
        taken: list[str] = []

        def change(entries: dict[str, _Entry]) -> bool:
            entry = entries.get(key)
            if entry is None or (receipt_id is not None and entry.receipt_id != receipt_id):
                return False
            del entries[key]
            taken.append(entry.receipt_id)
            return True

        self._update(change)
        return taken[0] if taken else None

    def clear(self, session_id: str | None) -> None:
        """Forget this session's receipt (a stale one must never reach a later prompt)."""
        if session_id is None:
            return
        key = session_key(session_id)

        def change(entries: dict[str, _Entry]) -> bool:
            return entries.pop(key, None) is not None

        self._update(change)

    @property
    def path(self) -> str:
        """Where the file lives (resolves the directory; may raise like the resolver)."""
        return self._path()

    # -- internals ---------------------------------------------------------------------------

    def _dir(self) -> str:
        directory = self._directory
        return directory() if callable(directory) else directory

    def _path(self) -> str:
        return os.path.join(self._dir(), RECEIPTS_FILE_NAME)

    def _load(self, path: str) -> tuple[dict[str, _Entry], bool]:
        """The live entries and whether the file needs rewriting (corrupt, expired, invalid).

        A missing file is simply empty; one that cannot be read as a regular file of at most
        256 KiB (unreadable, oversized, a directory or FIFO in its place — read without
        blocking) is empty and dirty.
        """
        raw = read_regular_file(path, _MAX_FILE_BYTES)
        if raw is None:
            return {}, os.path.lexists(path)
        try:
            document = _DECODER.decode(raw)
        except (msgspec.MsgspecError, ValueError, TypeError, RecursionError):
            return {}, True
        now = self._clock()
        live: dict[str, _Entry] = {}
        for key, entry in document.sessions.items():
            age = now - entry.stored_at
            if (
                _is_key(key)
                and is_receipt_id(entry.receipt_id)
                and -_FUTURE_TOLERANCE_SECONDS <= age <= RETENTION_SECONDS
            ):
                live[key] = entry
        return live, len(live) != len(document.sessions)

    def _update(self, change: Callable[[dict[str, _Entry]], bool]) -> bool:
        """Load, apply ``change`` and write back if anything changed; ``False`` on any error."""
        try:
            directory = self._dir()
            path = os.path.join(directory, RECEIPTS_FILE_NAME)
            with _locked(directory):
                try:
                    entries, dirty = self._load(path)
                except OSError:  # unreadable (e.g. a directory in its place): start over
                    entries, dirty = {}, True
                changed = change(entries)
                if not (changed or dirty):
                    return True
                if not entries and not os.path.lexists(path):
                    return True
                _write_atomically(path, _bounded(entries))
            return True
        except (OSError, RuntimeError, ValueError):
            return False


def _bounded(entries: dict[str, _Entry]) -> dict[str, _Entry]:
    """The newest :data:`MAX_SESSIONS` entries, oldest first (stable for equal times)."""
    ordered = sorted(entries.items(), key=lambda item: item[1].stored_at)
    return dict(ordered[-MAX_SESSIONS:])


def _write_atomically(path: str, entries: dict[str, _Entry]) -> None:
    data = _ENCODER.encode(_File(schema=RECEIPTS_SCHEMA, sessions=entries))
    temporary = f"{path}.{os.getpid()}.{time.monotonic_ns()}.tmp"
    replace_with_private_file(temporary, path, data)


@contextmanager
def _locked(directory: str) -> Iterator[None]:
    """Best-effort exclusive lock for a read-modify-write, waiting at most ~0.5 s.

    Without ``fcntl`` (Windows), or when the lock cannot be had in time (a stopped process holds
    it), the update goes ahead unlocked: a lost update is harmless, a hung hook is not.
    """
    os.makedirs(directory, mode=0o700, exist_ok=True)
    try:
        import fcntl
    except ImportError:
        yield
        return
    fd = os.open(
        os.path.join(directory, RECEIPTS_FILE_NAME + ".lock"),
        os.O_RDWR | os.O_CREAT | getattr(os, "O_NONBLOCK", 0),  # a FIFO there cannot block us
        0o600,
    )
    try:
        give_up = time.monotonic() + _LOCK_WAIT_SECONDS
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError:
                if time.monotonic() >= give_up:
                    break
                time.sleep(_LOCK_RETRY_SECONDS)
        yield
    finally:
        os.close(fd)  # closing releases the lock
