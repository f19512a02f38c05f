"""Shared CLI plumbing: output, errors, arguments read from files or standard input, clients.

Streams and exit codes (spec 01; the contract is written out in docs/api.md § The command line):

- success: the result on stdout — human text, or with ``--json`` one JSON document — exit 0;
- an operation error (the runtime refused the request, could not be reached, or the client
  refused to send it): exit 1;
- a usage error (the command line cannot be used: unknown flag, missing argument, an ``@FILE``
  that cannot be read, a value that is not JSON; nothing was sent): exit 2.

Errors always go to stderr, never to stdout: one line ``powercontext: …`` for people, and with
``--json`` exactly one JSON document on one line, the HTTP API's error envelope
``{"error": {"code", "message", "details"}}`` (``usage_error`` for exit 2).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from pydantic import BaseModel

if TYPE_CHECKING:
    from ..client import PowerContextClient

#: The ``code`` of every usage error (exit 2) in ``--json`` mode.
USAGE_ERROR = "usage_error"
_MAX_HUMAN_ERRORS = 5


class UsageError(Exception):
    """The command line cannot be used (exit 2); raised by the parser and by handlers."""

    def __init__(
        self,
        message: str,
        *,
        usage: str | None = None,
        prog: str | None = None,
        details: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.usage = usage
        self.prog = prog
        self.details = details


class Parser(argparse.ArgumentParser):
    """argparse, except that an error is raised (as :class:`UsageError`) instead of printed,
    so ``main`` can report it as text or as JSON. Subparsers inherit the class."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(message, usage=self.format_usage().strip(), prog=self.prog)


def wants_json(argv: Sequence[str]) -> bool:
    """Whether ``--json`` (or an abbreviation argparse would accept) is on the command line
    before any ``--``: how errors are reported when the command line itself cannot be parsed."""
    for arg in argv:
        if arg == "--":
            return False
        if arg.startswith("--j") and "--json".startswith(arg):
            return True
    return False


# -- output ----------------------------------------------------------------------------------


def emit(value: BaseModel | dict[str, Any] | list[Any], *, as_json: bool, human: str) -> None:
    if as_json:
        data = value.model_dump(mode="json") if isinstance(value, BaseModel) else value
        sys.stdout.write(json.dumps(data, ensure_ascii=False, indent=2) + "\n")
    else:
        sys.stdout.write(human.rstrip("\n") + "\n")


def fail(message: str) -> int:
    sys.stderr.write(f"powercontext: {message}\n")
    return 1


def report_error(code: str, message: str, details: dict[str, Any] | None, *, as_json: bool) -> None:
    """One error on stderr: the envelope as one JSON line, or ``powercontext: …`` for people."""
    if as_json:
        envelope = {"error": {"code": code, "message": message, "details": details}}
        sys.stderr.write(json.dumps(envelope, ensure_ascii=False, separators=(",", ":")) + "\n")
    else:
        sys.stderr.write(f"powercontext: {_human_error(code, message, details)}\n")


def operation_failed(
    code: str, message: str, details: dict[str, Any] | None, *, as_json: bool
) -> int:
    report_error(code, message, details, as_json=as_json)
    return 1


def usage_failed(exc: UsageError, *, as_json: bool) -> NoReturn:
    """Report a usage error and exit 2 (``SystemExit``, as argparse itself does)."""
    if as_json:
        details = dict(exc.details or {})
        if exc.usage:
            details["usage"] = exc.usage
        report_error(USAGE_ERROR, exc.message, details or None, as_json=True)
    elif exc.prog is not None:  # argparse's own format: the usage, then "prog: error: …"
        sys.stderr.write(f"{exc.usage}\n{exc.prog}: error: {exc.message}\n")
    else:
        sys.stderr.write(f"powercontext: {exc.message}\n")
    raise SystemExit(2)


def _human_error(code: str, message: str, details: dict[str, Any] | None) -> str:
    """``message (code)`` plus the details on the same line: validation errors as
    ``field: message``, anything else as ``key=value`` (an artifact as ``family:id:revision``)."""
    if not details:
        return f"{message} ({code})"
    errors = details.get("errors")
    if isinstance(errors, list) and errors:
        parts = []
        for error in errors[:_MAX_HUMAN_ERRORS]:
            if not isinstance(error, dict):
                parts.append(str(error))
                continue
            loc = [str(part) for part in error.get("loc", [])]
            if loc and loc[0] == "body":
                loc = loc[1:]
            parts.append(f"{'.'.join(loc) or 'body'}: {error.get('msg', 'invalid value')}")
        more = len(errors) - _MAX_HUMAN_ERRORS
        return f"{message} ({code}): " + "; ".join(parts) + (f" (+{more} more)" if more > 0 else "")
    pairs = ", ".join(f"{key}={_compact(value)}" for key, value in details.items())
    return f"{message} ({code}; {pairs})"


def _compact(value: Any) -> str:
    if isinstance(value, dict) and set(value) == {"family", "artifact_id", "revision"}:
        return artifact_text(value)
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def compaction_pending(backend: str) -> str:
    """The line a bulk load (import, migrate, reindex) adds on OceanBase, whose full-text index
    is searched slowly until the server's next major compaction (store/compaction.py)."""
    if backend != "oceanbase":
        return ""
    return (
        "\nOceanBase searches what was just written more slowly (short prompts' p95 4x on "
        "seekdb at 100k) until the server's next major compaction, daily off-peak; "
        "`powercontext compact` starts one now (it rewrites the whole tenant: an "
        "administrator's call on a shared cluster)"
    )


def artifact_text(ref: BaseModel | dict[str, Any]) -> str:
    """An artifact reference as the CLI takes it: ``FAMILY:ID:REVISION``."""
    data = ref.model_dump(mode="json") if isinstance(ref, BaseModel) else ref
    return f"{data['family']}:{data['artifact_id']}:{data['revision']}"


def field_lines(key: str, value: Any, indent: str = "  ") -> list[str]:
    """One field for people: a list one item per line (``- item``), multi-line text indented
    under its key, JSON for anything else that is not text."""
    inner = indent + "  "
    if isinstance(value, list):
        if not value:
            return [f"{indent}{key}: (none)"]
        lines = [f"{indent}{key}:"]
        for item in value:
            text = item if isinstance(item, str) else _compact(item)
            first, *rest = text.splitlines() or [""]
            lines.append(f"{inner}- {first}")
            lines += [f"{inner}  {line}".rstrip() for line in rest]
        return lines
    if isinstance(value, str):
        if "\n" in value.strip("\n"):
            return [f"{indent}{key}:", *(f"{inner}{line}".rstrip() for line in value.splitlines())]
        return [f"{indent}{key}: {value}"]
    return [f"{indent}{key}: {_compact(value)}"]


# -- arguments -------------------------------------------------------------------------------


def read_stdin(what: str) -> str:
    """All of standard input as UTF-8 text; invalid UTF-8 is a usage error."""
    buffer = getattr(sys.stdin, "buffer", None)
    if buffer is None:  # a text stream put in place by a test or an embedding program
        return sys.stdin.read()
    return _decode(buffer.read(), what, "standard input", {"argument": what})


def read_file(path: str, what: str) -> str:
    """The UTF-8 text of the ``@FILE`` argument ``what``; any problem is a one-line usage error."""
    details = {"argument": what, "path": path}
    if not path:
        raise UsageError(f"{what}: '@' must be followed by a file name", details=details)
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        reason = "no such file"
    except IsADirectoryError:
        reason = "is a directory, not a file"
    except PermissionError:
        reason = "permission denied" if not os.path.isdir(path) else "is a directory, not a file"
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
    else:
        return _decode(data, what, path, details)
    raise UsageError(f"{what}: cannot read {path}: {reason}", details=details)


def _decode(data: bytes, what: str, where: str, details: dict[str, Any]) -> str:
    """UTF-8 (a byte-order mark dropped) with universal newlines, as a text-mode read gives."""
    try:
        return data.decode("utf-8-sig").replace("\r\n", "\n").replace("\r", "\n")
    except UnicodeDecodeError as exc:
        raise UsageError(
            f"{what}: {where} is not UTF-8 text (invalid byte at offset {exc.start})",
            details=details,
        ) from None


def json_argument(value: str, what: str) -> Any:
    """A JSON argument given inline, as ``@FILE``, or as ``-`` for standard input."""
    if value == "-":
        text = read_stdin(what)
    elif value.startswith("@"):
        text = read_file(value[1:], what)
    else:
        text = value
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(
            f"{what} must be JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})",
            details={"argument": what},
        ) from None


# -- clients ---------------------------------------------------------------------------------


def scoped_client(args: argparse.Namespace) -> PowerContextClient:
    """A client for a scoped verb; a missing scope is a usage error (exit 2, spec 01)."""
    from ..client import PowerContextClient

    if not args.scope:
        raise UsageError(
            "--scope (or POWERCONTEXT_SCOPE_ID) is required", details={"argument": "--scope"}
        )
    return PowerContextClient(args.url, token=args.token)
