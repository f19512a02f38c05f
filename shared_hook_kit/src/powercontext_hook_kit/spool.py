"""The capture spool: prompts the runtime could not take, kept until it can (issue 16, item 4).

A prompt is captured right after recall (:mod:`.flows`); when the runtime is down at that moment
(connection refused, socket missing, timeout, 5xx) the capture request is kept here, in the
plugin's persistent data dir, and sent by the next hook run whose runtime answers — oldest
first, each entry removed only once the runtime acknowledged it. Capture is idempotent by
``source_id`` (spec 02 § Sources: the same payload again returns the original journal position),
so an entry sent twice — a crash between the runtime's ``202`` and the local removal — is still
journaled exactly once.

Layout (``<plugin data dir>/capture-spool/``, folder 0700, files 0600)::

    <spooled at: Unix ns, 20 digits>-<16 hex random>-<failed attempts>.json
        one entry: exactly the capture request body the hook would have sent
    .<entry name>.tmp    an entry being written; renamed into place once complete
    .lock                ``flock``-ed by the one process delivering

Design rules, and why:

- **One file per entry**, written to a temporary file and renamed into place (``os.replace``):
  an entry is either complete or absent, and delivering one means unlinking one file — no
  rewrite of the whole spool per delivered prompt. Names sort in spooling order.
- **Bounded**: at most :data:`MAX_ENTRIES` entries and :data:`MAX_BYTES` bytes; making room
  drops the *oldest* entries (the newest prompts are the likeliest still to matter). Entries
  older than :data:`RETENTION_SECONDS` are dropped: a week-old prompt is stale, and prompts
  should not linger on disk. An entry the runtime answered oddly (a 500, a malformed answer)
  :data:`MAX_ATTEMPTS` times is dropped too, so it cannot block the spool until it expires.
  Every drop is counted for the caller's diagnostic line.
- **One deliverer at a time**: delivery holds an exclusive, non-blocking ``flock`` on ``.lock``;
  a second hook process finding it held delivers nothing (it never waits). Appending takes no
  lock (the rename is atomic); two appenders making room at the same moment may drop one entry
  more than needed, and a drop racing a delivery may count an entry as dropped that was in fact
  delivered — never the reverse. Without ``fcntl`` (Windows) delivery runs unlocked: a
  duplicate send is absorbed by the runtime's idempotency.
- **Never a crash, never content in a message**: every operation returns counts; I/O errors
  make the spool behave as empty (delivery) or count the prompt as dropped (append).
- No ``fsync``: after a power cut an entry may be empty or torn; it then fails validation and
  is dropped (counted), which is what an outage that long costs anyway.
"""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, suppress
from typing import Literal

import msgspec

from .files import read_regular_file, replace_with_private_file
from .settings import plugin_data_dir

__all__ = [
    "MAX_ATTEMPTS",
    "MAX_BYTES",
    "MAX_ENTRIES",
    "MAX_ENTRY_BYTES",
    "RETENTION_SECONDS",
    "SPOOL_DIR_NAME",
    "AppendReport",
    "CaptureSpool",
    "DeliveryReport",
    "SpoolStatus",
    "Verdict",
    "spool_status",
]

SPOOL_DIR_NAME = "capture-spool"
MAX_ENTRIES = 200
MAX_BYTES = 4 * 1024 * 1024
#: Above the hook's largest capture body (1,000,000 bytes); a bigger file is not ours.
MAX_ENTRY_BYTES = 1024 * 1024
RETENTION_SECONDS = 7 * 24 * 60 * 60
MAX_ATTEMPTS = 3
_STALE_TEMP_SECONDS = 60 * 60
_LOCK_NAME = ".lock"
_SUFFIX = ".json"
_HEX = frozenset("0123456789abcdef")
_NS = 1_000_000_000

#: What the runtime's answer to one delivered entry means for it:
#: ``delivered`` — acknowledged (202, also for a duplicate): remove it;
#: ``rejected`` — can never be accepted (409 ``source_conflict``, 413, 422, 403): remove it, count
#: it dropped, go on with the next; ``deferred`` — not now (runtime unreachable, 503, 401, 404):
#: keep it and stop; ``failed`` — an odd answer (500, a malformed reply): keep it with one more
#: failed attempt (dropped after :data:`MAX_ATTEMPTS`) and stop.
Verdict = Literal["delivered", "rejected", "deferred", "failed"]


class _Capture(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """The shape of a spooled capture request (what the hook sends to ``/v1/sources/content``)."""

    scope_id: str
    source_id: str
    content: str
    metadata: dict[str, str | bool | int]


_CAPTURE_DECODER = msgspec.json.Decoder(_Capture)


# Reports are msgspec structs, not NamedTuples: every hook process imports this module, and a
# NamedTuple class costs ~0.2 ms to create, a struct a tenth of that.


class AppendReport(msgspec.Struct, frozen=True):
    spooled: bool  # the entry is in the spool
    dropped: int  # entries dropped to make room or as expired (and the new one, if not spooled)
    pending: int  # entries in the spool afterwards, as this process saw it


class DeliveryReport(msgspec.Struct, frozen=True):
    delivered: int = 0
    dropped: int = 0
    pending: int = 0  # entries left after this run, as this process saw them
    busy: bool = False  # another process holds the delivery lock: nothing was sent
    stopped: Verdict | None = None  # ``deferred``/``failed`` when an answer stopped delivery


class SpoolStatus(msgspec.Struct, frozen=True):
    """What ``doctor`` shows: how many prompts wait, their size, the oldest one's age in
    seconds (``None`` when empty). Unpacks like a tuple: ``entries, size, age = status``."""

    entries: int
    bytes: int
    oldest_age_seconds: float | None

    def __iter__(self) -> Iterator[int | float | None]:
        return iter((self.entries, self.bytes, self.oldest_age_seconds))


#: One entry file: (name, spooled at ns, failed attempts, size) — names sort in spooling order.
_Entry = tuple[str, int, int, int]


def _parse_name(name: str) -> tuple[int, int] | None:
    """``(spooled at ns, failed attempts)`` of an entry file name, or ``None`` if not one."""
    if not name.endswith(_SUFFIX) or not name.isascii():
        return None
    parts = name[: -len(_SUFFIX)].split("-")
    if len(parts) != 3:
        return None
    stamp, nonce, attempts = parts
    if len(stamp) != 20 or not stamp.isdigit():
        return None
    if len(nonce) != 16 or not set(nonce) <= _HEX:
        return None
    if not 1 <= len(attempts) <= 3 or not attempts.isdigit():
        return None
    return int(stamp), int(attempts)


def _entry_name(spooled_ns: int, nonce: str, attempts: int) -> str:
    return f"{spooled_ns:020d}-{nonce}-{attempts}{_SUFFIX}"


def _is_capture(raw: bytes) -> bool:
    try:
        _CAPTURE_DECODER.decode(raw)
    except (msgspec.MsgspecError, ValueError, TypeError, RecursionError):
        return False
    return True


class CaptureSpool:
    """The spooled capture requests in ``<directory>/capture-spool/``.

    ``directory`` (the plugin data dir) may be a callable so it is located only when the spool
    is used. ``clock`` returns Unix seconds (tests); the bounds are parameters for tests too.
    No method raises for I/O trouble.

    ``folder`` and ``is_entry`` let another request kind reuse the machinery in its own folder
    (the task-result spool: ``task-result-spool``, entries checked against its contract).
    """

    def __init__(
        self,
        directory: str | Callable[[], str],
        *,
        folder: str = SPOOL_DIR_NAME,
        is_entry: Callable[[bytes], bool] | None = None,
        clock: Callable[[], float] = time.time,
        max_entries: int = MAX_ENTRIES,
        max_bytes: int = MAX_BYTES,
        retention_seconds: float = RETENTION_SECONDS,
    ) -> None:
        self._directory = directory
        self._folder = folder
        self._is_entry = is_entry or _is_capture
        self._clock = clock
        self._max_entries = max_entries
        self._max_bytes = max_bytes
        self._retention_ns = int(retention_seconds * _NS)

    @property
    def path(self) -> str:
        """The spool folder (resolves the data dir; may raise like the resolver)."""
        directory = self._directory
        return os.path.join(directory() if callable(directory) else directory, self._folder)

    # -- public API: never raises ------------------------------------------------------------

    def append(self, body: bytes) -> AppendReport:
        """Keep one capture request (the exact body) as the newest entry, making room first.

        ``dropped`` counts the entries given up for it (oldest first, and expired ones) — and
        the request itself when it could not be kept (too large, or the disk refused).
        """
        dropped = 0
        try:
            spool = self._ensure_folder()
            entries, dropped = self._live(spool)
            if len(body) > min(MAX_ENTRY_BYTES, self._max_bytes) or self._max_entries < 1:
                return AppendReport(False, dropped + 1, len(entries))
            size = sum(entry[3] for entry in entries)
            while entries and (
                len(entries) + 1 > self._max_entries or size + len(body) > self._max_bytes
            ):
                oldest = entries.pop(0)
                size -= oldest[3]
                if _unlink(spool, oldest[0]):
                    dropped += 1
            stamp = max(self._now_ns(), entries[-1][1] + 1 if entries else 0)
            _write_new(spool, _entry_name(stamp, os.urandom(8).hex(), 0), body)
            return AppendReport(True, dropped, len(entries) + 1)
        except (OSError, RuntimeError, ValueError):
            return AppendReport(False, dropped + 1, 0)

    def deliver(
        self, send: Callable[[bytes], Verdict], keep_going: Callable[[], bool]
    ) -> DeliveryReport:
        """Send the spooled requests oldest first through ``send`` while ``keep_going()``.

        Each entry is removed only after ``send`` says ``delivered`` (or ``rejected``); see
        :data:`Verdict`. Returns at once, sending nothing, when the spool is empty or another
        process is delivering (``busy``). Unreadable or foreign entries are dropped (counted).
        """
        try:
            spool = self.path
            if not self._has_entries(spool):
                return DeliveryReport()
            with _delivery_lock(spool) as locked:
                if not locked:
                    return DeliveryReport(pending=len(self._scan(spool)), busy=True)
                return self._deliver_locked(spool, send, keep_going)
        except (OSError, RuntimeError, ValueError):
            return DeliveryReport()

    def status(self) -> SpoolStatus:
        """Entries, bytes and the oldest entry's age in seconds (``None`` when empty); read-only,
        so expired entries still count until the next hook run drops them."""
        try:
            entries = self._scan(self.path)
        except (OSError, RuntimeError, ValueError):
            return SpoolStatus(0, 0, None)
        if not entries:
            return SpoolStatus(0, 0, None)
        age = max(self._now_ns() - entries[0][1], 0) / _NS
        return SpoolStatus(len(entries), sum(entry[3] for entry in entries), age)

    # -- internals ---------------------------------------------------------------------------

    def _now_ns(self) -> int:
        return int(self._clock() * _NS)

    def _ensure_folder(self) -> str:
        """The spool folder, created 0700 (and its data dir); refused unless it is a real
        directory owned by this user (a symlink or file in its place is not followed)."""
        spool = self.path
        os.makedirs(os.path.dirname(spool), mode=0o700, exist_ok=True)
        with suppress(FileExistsError):
            os.mkdir(spool, 0o700)
        info = os.lstat(spool)
        if not stat.S_ISDIR(info.st_mode):
            raise NotADirectoryError("the capture spool is not a directory")
        if hasattr(os, "geteuid") and info.st_uid != os.geteuid():
            raise PermissionError("the capture spool belongs to another user")
        if stat.S_IMODE(info.st_mode) & 0o077:
            os.chmod(spool, 0o700)
        return spool

    def _has_entries(self, spool: str) -> bool:
        """Cheap check on every hook run: is there any entry name at all (no stat)?"""
        try:
            with os.scandir(spool) as listing:
                return any(_parse_name(item.name) is not None for item in listing)
        except (FileNotFoundError, NotADirectoryError):
            return False

    def _scan(self, spool: str) -> list[_Entry]:
        """Every entry (regular files with an entry name), oldest first; stale temporary files
        of a writer that died are removed on the way."""
        entries: list[_Entry] = []
        now = time.time()
        try:
            listing = os.scandir(spool)
        except (FileNotFoundError, NotADirectoryError):
            return entries
        with listing:
            for item in listing:
                parsed = _parse_name(item.name)
                try:
                    info = item.stat(follow_symlinks=False)
                except OSError:
                    continue
                if parsed is None:
                    if (
                        item.name.startswith(".")
                        and item.name.endswith(".tmp")
                        and now - info.st_mtime > _STALE_TEMP_SECONDS
                    ):
                        _unlink(spool, item.name)
                    continue
                if stat.S_ISREG(info.st_mode):
                    entries.append((item.name, parsed[0], parsed[1], info.st_size))
        entries.sort()
        return entries

    def _live(self, spool: str) -> tuple[list[_Entry], int]:
        """The entries that have not expired, and how many expired ones were dropped."""
        oldest_kept = self._now_ns() - self._retention_ns
        live: list[_Entry] = []
        dropped = 0
        for entry in self._scan(spool):
            name, spooled_ns, _, _ = entry
            if spooled_ns >= oldest_kept:
                live.append(entry)
            elif _unlink(spool, name):
                dropped += 1
        return live, dropped

    def _deliver_locked(
        self, spool: str, send: Callable[[bytes], Verdict], keep_going: Callable[[], bool]
    ) -> DeliveryReport:
        entries, dropped = self._live(spool)
        delivered = 0
        left = len(entries)
        stopped: Verdict | None = None
        for name, spooled_ns, attempts, _ in entries:
            if not keep_going():
                break
            path = os.path.join(spool, name)
            raw = read_regular_file(path, MAX_ENTRY_BYTES, follow_symlinks=False)
            if raw is None or not self._is_entry(raw):
                # Gone meanwhile (an appender made room): nothing to count. Torn or foreign:
                # it can never be delivered.
                if os.path.lexists(path) and _unlink(spool, name):
                    dropped += 1
                left -= 1
                continue
            verdict = send(raw)
            if verdict == "delivered":
                _unlink(spool, name)  # if this fails, the resend is a harmless duplicate
                delivered += 1
                left -= 1
                continue
            if verdict == "rejected":
                if _unlink(spool, name):
                    dropped += 1
                left -= 1
                continue
            if verdict == "failed":
                if attempts + 1 >= MAX_ATTEMPTS:
                    if _unlink(spool, name):
                        dropped += 1
                    left -= 1
                else:
                    nonce = name.split("-")[1]
                    renamed = _entry_name(spooled_ns, nonce, attempts + 1)
                    with suppress(OSError):
                        os.replace(path, os.path.join(spool, renamed))
            stopped = verdict
            break
        return DeliveryReport(delivered, dropped, left, False, stopped)


def _unlink(spool: str, name: str) -> bool:
    """Remove one file; ``False`` if it was already gone or could not be removed."""
    try:
        os.unlink(os.path.join(spool, name))
    except OSError:
        return False
    return True


def _write_new(spool: str, name: str, data: bytes) -> None:
    """Write ``data`` as ``<spool>/<name>`` through ``<spool>/.<name>.tmp``: readers see the
    whole entry or none of it."""
    replace_with_private_file(os.path.join(spool, f".{name}.tmp"), os.path.join(spool, name), data)


@contextmanager
def _delivery_lock(spool: str) -> Iterator[bool]:
    """Try once, without waiting, to become the one process delivering; yields whether it did.

    A lock held by another process (even a stopped one) means "someone else delivers": the hook
    never waits for it. Without ``fcntl``, or on a filesystem that cannot lock, delivery goes
    ahead unlocked — a duplicate send is absorbed by the runtime's idempotency.
    """
    try:
        import fcntl
    except ImportError:
        yield True
        return
    flags = (
        os.O_RDWR
        | os.O_CREAT
        | getattr(os, "O_NONBLOCK", 0)  # a FIFO there cannot block us
        | getattr(os, "O_NOFOLLOW", 0)
        | getattr(os, "O_CLOEXEC", 0)
    )
    try:
        fd = os.open(os.path.join(spool, _LOCK_NAME), flags, 0o600)
    except OSError:
        yield True
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            locked = False
        except OSError:  # e.g. ENOLCK: no locking here
            locked = True
        else:
            locked = True
        yield locked
    finally:
        os.close(fd)  # closing releases the lock


def spool_status(host: str, env: Mapping[str, str]) -> SpoolStatus:
    """The spool of ``host``'s plugin (its data dir as the hooks resolve it) — for ``doctor``:
    ``(entries, bytes, oldest_age_seconds)``. Never raises; an unreadable spool reads empty."""
    try:
        directory = plugin_data_dir(host, env)
    except (OSError, RuntimeError, ValueError):
        return SpoolStatus(0, 0, None)
    return CaptureSpool(directory).status()
