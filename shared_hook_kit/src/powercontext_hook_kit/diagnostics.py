"""Content-free diagnostic lines: what happened to each hook operation, never what was in it.

Hooks fail open and print nothing on stdout when something goes wrong, so this one JSON line on
stderr (and in a small rotated log file for ``doctor``) is the only way a user or an integration
test can tell "nothing relevant to inject" from "runtime down" or "token rejected". The key set
and the outcome set are closed, and the values are numbers or members of closed sets, so a
query, prompt, pack, citation, scope id, token or body can never end up in a line.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Literal, TextIO

import msgspec

from .transport import HttpFailure, HttpOutcome

__all__ = [
    "DEBUG_ONLY_OUTCOMES",
    "LOG_FILE_NAME",
    "OUTCOMES",
    "Diagnostics",
    "Event",
    "Outcome",
    "outcome_for",
]

Event = Literal[
    "context_prepare",
    "source_capture",
    "capture_spool",
    "memory_flush",
    "context_bootstrap",
    "bootstrap_receipt",
    "handoff_lookup",
    "task_result",
    "task_result_spool",
]

Outcome = Literal[
    "skipped",
    "disabled",
    "empty",
    "authentication_failed",
    "forbidden",
    "version_mismatch",
    "server_unavailable",
    "invalid_response",
    "receipt_rejected",
    "dropped",
    "injected",
    "captured",
    "flushed",
    "spooled",
    "delivered",
    "recorded",
    "no_task_result",
]

#: Every outcome a line can carry. The first nine are spec 07's closed set; ``dropped`` (the
#: capture spool gave prompts up: full, expired, refused by the runtime, or not writable) is the
#: kit's one addition to it; ``no_task_result`` (the Stop hook found no turn to record in the
#: host's transcript: unreadable, malformed, or a turn without a request) is the task-result
#: hook's; ``injected``, ``captured``, ``flushed``, ``spooled``, ``delivered`` and
#: ``recorded`` describe success and are only ever written when debugging is on.
OUTCOMES: frozenset[str] = frozenset(Outcome.__args__)  # type: ignore[attr-defined]

#: Outcomes that are normal operation, so they are silent unless debugging: a successful
#: injection or capture, a prompt kept in (or delivered from) the capture spool, and a feature
#: the user switched off (one line per prompt would be noise).
DEBUG_ONLY_OUTCOMES: frozenset[str] = frozenset(
    {"injected", "captured", "flushed", "spooled", "delivered", "recorded", "disabled"}
)

LOG_FILE_NAME = "diagnostics.log"
_LOG_MAX_BYTES = 256 * 1024


def outcome_for(result: HttpOutcome) -> Outcome:
    """Map a transport result that is *not* the expected success to the closed outcome set.

    401/403/404 have their own outcomes (404 means the runtime predates the endpoint); timeouts,
    refused connections, a socket that is not this user's (nothing was sent to it) and every
    5xx mean the runtime is not serving; anything else — other
    statuses, redirects, oversize or malformed answers — is an invalid response.
    """
    if isinstance(result, HttpFailure):
        if result.kind in ("timeout", "connection_failed", "untrusted_socket"):
            return "server_unavailable"
        return "invalid_response"
    if result.status == 401:
        return "authentication_failed"
    if result.status == 403:
        return "forbidden"
    if result.status == 404:
        return "version_mismatch"
    if 500 <= result.status < 600:
        return "server_unavailable"
    return "invalid_response"


class _Line(msgspec.Struct, omit_defaults=True):
    """The closed key set of one diagnostic line, in output order."""

    component: str
    event: str
    outcome: str
    http_status: int | None = None
    context_status: str | None = None
    content_bytes: int | None = None
    duration_ms: int | None = None
    # ``capture_spool`` / ``task_result_spool`` only: requests kept, delivered and given up in
    # this run, and how many wait in the spool afterwards. Counts, never what they held.
    spooled: int | None = None
    delivered: int | None = None
    dropped: int | None = None
    pending: int | None = None


class _LogLine(_Line, omit_defaults=True):
    """The log-file form: the same line plus when it happened, for ``doctor``."""

    time: str | None = None


_ENCODER = msgspec.json.Encoder()


class Diagnostics:
    """Writes at most one line per operation to ``stream`` and to the plugin's log file.

    ``log_dir`` is a callable so the data directory (which may need ``platformdirs``) is only
    resolved when a line is actually written — the silent success path never pays for it.
    Writing never raises: a broken stderr or a read-only disk must not turn into a hook error.
    """

    def __init__(
        self,
        component: str,
        stream: TextIO | None,
        *,
        debug: bool = False,
        log_dir: Callable[[], str | None] | None = None,
    ) -> None:
        self.component = component
        self.debug = debug
        self._stream = stream
        self._log_dir = log_dir
        self._recorded: set[str] = set()
        self._written: set[str] = set()

    def recorded(self, event: Event) -> bool:
        """Whether ``event`` already has an outcome (written or deliberately silent)."""
        return event in self._recorded

    def record(
        self,
        event: Event,
        outcome: Outcome,
        *,
        http_status: int | None = None,
        context_status: Literal["ready", "empty", "skipped"] | None = None,
        content_bytes: int | None = None,
        duration_ms: int | None = None,
        spooled: int | None = None,
        delivered: int | None = None,
        dropped: int | None = None,
        pending: int | None = None,
        quiet: bool = False,
    ) -> None:
        """Record the outcome of one operation: at most one line is ever written per event.

        Silent outcomes (success, ``disabled``, and ``quiet`` ones that another line already
        explains) are written only when debugging; a later outcome for the same event still
        gets its line then, so a failure after a silent success (a bug while printing the
        pack) is not lost.
        """
        if event in self._written:
            return
        self._recorded.add(event)
        if (quiet or outcome in DEBUG_ONLY_OUTCOMES) and not self.debug:
            return
        self._written.add(event)
        line = _Line(
            component=self.component,
            event=event,
            outcome=outcome,
            http_status=http_status,
            context_status=context_status,
            content_bytes=content_bytes,
            duration_ms=duration_ms,
            spooled=spooled,
            delivered=delivered,
            dropped=dropped,
            pending=pending,
        )
        self._write_stream(line)
        self._append_log(line)

    def _write_stream(self, line: _Line) -> None:
        if self._stream is None:
            return
        try:
            self._stream.write(_ENCODER.encode(line).decode("utf-8") + "\n")
            self._stream.flush()
        except (OSError, ValueError):
            pass

    def _append_log(self, line: _Line) -> None:
        if self._log_dir is None:
            return
        try:
            directory = self._log_dir()
            if directory is None:
                return
            stamped = _LogLine(
                **{field: getattr(line, field) for field in line.__struct_fields__},
                time=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            )
            _append_rotating(os.path.join(directory, LOG_FILE_NAME), _ENCODER.encode(stamped))
        except (OSError, ValueError, RuntimeError, ImportError):
            pass


def _append_rotating(path: str, line: bytes) -> None:
    """Append one line, first moving a full log aside (one old file kept: ``<name>.1``).

    Bounded at roughly twice the limit on disk. Concurrent hooks may race on the rotation and
    lose a line; that is acceptable for a troubleshooting log and needs no lock.
    """
    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    try:
        if os.stat(path).st_size >= _LOG_MAX_BYTES:
            os.replace(path, path + ".1")
    except FileNotFoundError:
        pass
    # O_NONBLOCK: a FIFO put in the log's place fails the append instead of hanging the hook.
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_NONBLOCK", 0)
    fd = os.open(path, flags, 0o600)
    try:
        os.write(fd, line + b"\n")
    finally:
        os.close(fd)
