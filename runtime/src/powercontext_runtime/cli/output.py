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

What the terminal shows is what is stored (docs/security.md): stored, agent-written and
server-returned text reaches a terminal only through :func:`visible`, which shows control,
invisible-formatting and separator characters as escapes (``\\x1b``, ``\\u202e``) instead of
letting the terminal act on them. :func:`emit` and the error writers escape whatever a formatter
left (a backstop), and ``--json`` output escapes the same characters the JSON way (``\\u009b``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import unicodedata
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
        sys.stdout.write(json_text(data, indent=2) + "\n")
    else:
        sys.stdout.write(_backstop(human.rstrip("\n"), multiline=True) + "\n")


def fail(message: str) -> int:
    sys.stderr.write(f"powercontext: {visible(message)}\n")
    return 1


def report_error(code: str, message: str, details: dict[str, Any] | None, *, as_json: bool) -> None:
    """One error on stderr: the envelope as one JSON line, or ``powercontext: …`` for people."""
    if as_json:
        envelope = {"error": {"code": code, "message": message, "details": details}}
        sys.stderr.write(json_text(envelope) + "\n")
    else:
        line = _backstop(_human_error(code, message, details), multiline=False)
        sys.stderr.write(f"powercontext: {line}\n")


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
        usage = _backstop(exc.usage or "", multiline=True)
        sys.stderr.write(f"{usage}\n{exc.prog}: error: {visible(exc.message)}\n")
    else:
        sys.stderr.write(f"powercontext: {visible(exc.message)}\n")
    raise SystemExit(2)


def _human_error(code: str, message: str, details: dict[str, Any] | None) -> str:
    """``message (code)`` plus the details on the same line: validation errors as
    ``field: message``, anything else as ``key=value`` (an artifact as ``family:id:revision``).
    Everything in it may come from the server, so every part is shown with :func:`visible`."""
    head = f"{visible(message)} ({visible(code)}"
    if not details:
        return f"{head})"
    errors = details.get("errors")
    if isinstance(errors, list) and errors:
        parts = []
        for error in errors[:_MAX_HUMAN_ERRORS]:
            if not isinstance(error, dict):
                parts.append(_compact(error))
                continue
            loc = [str(part) for part in error.get("loc", [])]
            if loc and loc[0] == "body":
                loc = loc[1:]
            where = visible(".".join(loc) or "body")
            parts.append(f"{where}: {visible(str(error.get('msg', 'invalid value')))}")
        more = len(errors) - _MAX_HUMAN_ERRORS
        return f"{head}): " + "; ".join(parts) + (f" (+{more} more)" if more > 0 else "")
    pairs = ", ".join(f"{visible(str(key))}={_compact(value)}" for key, value in details.items())
    return f"{head}; {pairs})"


def _compact(value: Any) -> str:
    """A detail or list item on one line, shown with :func:`visible`."""
    if isinstance(value, dict) and set(value) == {"family", "artifact_id", "revision"}:
        return artifact_text(value)
    if isinstance(value, str):
        return visible(value)
    return json_text(value)


# -- what the terminal shows -----------------------------------------------------------------

#: Unicode categories a terminal acts on or hides instead of showing: controls (Cc: C0 such as
#: ESC, BEL, CR; DEL; C1 such as CSI U+009B and NEL U+0085), invisible formatting (Cf: bidi
#: overrides and isolates, LRM/RLM, ALM, zero-width characters, tag characters), line and
#: paragraph separators (Zl, Zp) and lone surrogates (Cs, which UTF-8 cannot even encode).
_HIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})
#: Format characters that shape the visible text around them rather than hide or reorder it:
#: ZWNJ and ZWJ (Persian and Indic words, emoji sequences) are shown as they are.
_SHAPING = frozenset("\u200c\u200d")
_NAMED_ESCAPES = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}
#: After a backslash, what would make it read as the start of an escape: such a backslash is
#: shown doubled (``\\\\``); any other backslash is shown as itself.
_ESCAPE_LETTERS = frozenset("\\xuUntr")


def _hidden(ch: str, multiline: bool) -> bool:
    """Whether ``ch`` is shown as an escape (``\\n`` only where the text is one line)."""
    if ch.isprintable():  # letters, digits, punctuation, CJK, emoji, ordinary spaces
        return False
    if ch == "\n":
        return not multiline
    return ch not in _SHAPING and unicodedata.category(ch) in _HIDDEN_CATEGORIES


def _escape(ch: str) -> str:
    """``\\t \\n \\r``, else ``\\xHH`` (C0, DEL, C1), ``\\uHHHH`` or ``\\UHHHHHHHH``."""
    named = _NAMED_ESCAPES.get(ch)
    if named is not None:
        return named
    code = ord(ch)
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def visible(text: str, *, multiline: bool = False) -> str:
    """``text`` as a terminal must show untrusted text: exactly what is stored, nothing it acts on.

    Every character a terminal would act on or hide (see ``_HIDDEN_CATEGORIES``) becomes an
    escape, so ``…| sh\\r\\x1b[2K  action: …`` shows the carriage return and the erase-line
    sequence instead of performing them; a newline stays a line break only with ``multiline``.
    A backslash is shown as itself unless what follows could read as an escape (``\\``, ``x``,
    ``u``, ``U``, ``n``, ``t``, ``r`` or an escaped character): then it is doubled. So ``\\\\``
    is always one stored backslash and ``\\x1b`` always one stored ESC, while ``C:\\dev`` or
    ``\\d+`` read as typed.
    """
    if text.isprintable() and "\\" not in text:
        return text
    shown = []
    for index, ch in enumerate(text):
        if ch == "\\":
            after = text[index + 1 : index + 2]
            doubled = after != "" and (after in _ESCAPE_LETTERS or _hidden(after, multiline))
            shown.append("\\\\" if doubled else "\\")
        elif _hidden(ch, multiline):
            shown.append(_escape(ch))
        else:
            shown.append(ch)
    return "".join(shown)


def visible_block(text: str, indent: str) -> list[str]:
    """Multi-line untrusted text as lines under ``indent``: split only at ``\\n`` (a carriage
    return, form feed or U+2028 is shown, never taken as a line break), each line
    :func:`visible`, so no line of it can pass for the output's own structure."""
    return [f"{indent}{visible(line)}".rstrip() for line in text.split("\n")]


def _backstop(text: str, *, multiline: bool) -> str:
    """Escape whatever hidden character a formatter left in ``text`` (every formatter passes
    untrusted text through :func:`visible`, so this changes nothing unless one forgot).
    Backslashes are left alone: the text is already shown text, not stored text."""
    if text.isprintable():
        return text
    return "".join(_escape(ch) if _hidden(ch, multiline) else ch for ch in text)


def json_text(data: Any, *, indent: int | None = None) -> str:
    """JSON for ``--json``: the exact document, with every character :func:`visible` would
    escape written as a JSON ``\\u`` escape (JSON itself escapes only C0), so a C1 CSI or a
    bidi override in a stored string cannot act on a terminal either; parsers read the same
    strings. One line without ``indent``."""
    separators = (",", ":") if indent is None else None
    text = json.dumps(data, ensure_ascii=False, indent=indent, separators=separators)
    if text.replace("\n", "").isprintable():
        return text
    return "".join(_json_escape(ch) if _hidden(ch, True) else ch for ch in text)


def _json_escape(ch: str) -> str:
    code = ord(ch)
    if code < 0x10000:
        return f"\\u{code:04x}"
    code -= 0x10000
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


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
    """An artifact reference as the CLI takes it: ``FAMILY:ID:REVISION`` (shown)."""
    data = ref.model_dump(mode="json") if isinstance(ref, BaseModel) else ref
    return visible(f"{data['family']}:{data['artifact_id']}:{data['revision']}")


def field_lines(key: str, value: Any, indent: str = "  ") -> list[str]:
    """One field for people: a list one item per line (``- item``), multi-line text indented
    under its key, JSON for anything else that is not text; all of it :func:`visible`."""
    inner = indent + "  "
    key = visible(key)
    if isinstance(value, list):
        if not value:
            return [f"{indent}{key}: (none)"]
        lines = [f"{indent}{key}:"]
        for item in value:
            if isinstance(item, str):
                first, *rest = item.split("\n")
                lines.append(f"{inner}- {visible(first)}".rstrip())
                lines += visible_block("\n".join(rest), f"{inner}  ") if rest else []
            else:
                lines.append(f"{inner}- {_compact(item)}")
        return lines
    if isinstance(value, str):
        if "\n" in value.strip("\n"):
            return [f"{indent}{key}:", *visible_block(value, inner)]
        return [f"{indent}{key}: {visible(value)}"]
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
    from ..contract.common import json_depth
    from ..contract.limits import JSON_MAX_DEPTH

    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(
            f"{what} must be JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})",
            details={"argument": what},
        ) from None
    except RecursionError:
        value = None  # refused below, like a value that parsed but nests too deeply
    else:
        if json_depth(value, JSON_MAX_DEPTH) <= JSON_MAX_DEPTH:
            return value
    raise UsageError(
        f"{what} must be JSON nested at most {JSON_MAX_DEPTH} levels deep",
        details={"argument": what},
    )


# -- clients ---------------------------------------------------------------------------------


def scoped_client(args: argparse.Namespace) -> PowerContextClient:
    """A client for a scoped verb; a missing scope is a usage error (exit 2, spec 01)."""
    from ..client import PowerContextClient

    if not args.scope:
        raise UsageError(
            "--scope (or POWERCONTEXT_SCOPE_ID) is required", details={"argument": "--scope"}
        )
    return PowerContextClient(args.url, token=args.token)
