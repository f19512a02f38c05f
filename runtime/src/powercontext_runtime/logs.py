"""Structured logging with an allow-list: a field not listed here never reaches a log line.

Privacy is enforced by construction rather than by reviewing every call site: only the fields
below are emitted, message text comes from fixed event names, and exception details are
reduced to their type (driver exceptions carry SQL parameters, i.e. stored content).
"""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import Any

__all__ = ["configure_logging"]

ALLOWED_FIELDS = frozenset(
    {
        "method",
        "path",
        "status",
        "duration_ms",
        "request_id",
        "error_type",
        "operation",
        "backend",
        "host",
        "port",
        "count",
        "url",
        "token_file",
        "auth",
        "files",
        "code",
        # A prepared pack, as the access log reports it (RFC 0028: status, bytes, mode).
        "pack_status",
        "pack_bytes",
        "search_mode",
        "empty_reason",
        "search_fallback",
    }
)
_TRUSTED_MESSAGE_LOGGERS = ("powercontext", "uvicorn")


class _AllowListFormatter(logging.Formatter):
    def __init__(self, *, as_json: bool) -> None:
        super().__init__()
        self._as_json = as_json

    def format(self, record: logging.LogRecord) -> str:
        fields: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "event": _event(record),
        }
        for key in ALLOWED_FIELDS:
            value = record.__dict__.get(key)
            if value is not None:
                fields[key] = value
        if record.exc_info and record.exc_info[0] is not None:
            fields["error_type"] = record.exc_info[0].__name__
        if self._as_json:
            return json.dumps(fields, ensure_ascii=False, separators=(",", ":"))
        extras = " ".join(f"{k}={v}" for k, v in fields.items() if k not in ("ts", "event"))
        return f"{fields['ts']} {fields['event']} {extras}"


def _event(record: logging.LogRecord) -> str:
    # Our own records use fixed event names as messages. Third-party messages are formatted
    # only for a few well-known loggers whose arguments are addresses, never request data.
    if record.name.startswith(_TRUSTED_MESSAGE_LOGGERS):
        if record.name == "uvicorn.access":
            return "uvicorn_access"
        try:
            return record.getMessage()
        except (TypeError, ValueError):
            return str(record.msg)
    return "third_party_log"


def configure_logging(level: str = "INFO", fmt: str = "json") -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_AllowListFormatter(as_json=fmt == "json"))
    # The formatter emits none of these, and a record looked each one up (pid, thread, process
    # name): a few microseconds on every request's access line.
    logging.logProcesses = logging.logThreads = logging.logMultiprocessing = False
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        logger = logging.getLogger(name)
        logger.handlers[:] = []
        logger.propagate = True
    logging.getLogger("uvicorn.access").disabled = True
