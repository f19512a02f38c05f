"""What the terminal shows is what is stored: the plugin command line's rendering of text it
did not write (paths, scope ids, the runtime's and the host CLI's answers, diagnostic lines).

The same rules as the runtime CLI's ``powercontext_runtime.cli.output.visible`` (docs/security.md,
"What the terminal shows is what is stored"); the hook kit does not depend on the runtime, so
the rules are written here too, and tests/runtime/test_cli_visible.py checks both give the same
output character for character.
"""

from __future__ import annotations

import json
import unicodedata
from typing import Any

__all__ = ["json_text", "visible"]

#: Controls (C0, DEL, C1), invisible formatting (bidi overrides and isolates, LRM/RLM, ALM,
#: zero-width and tag characters), line/paragraph separators and lone surrogates.
_HIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})
#: ZWNJ and ZWJ shape the visible text around them: shown as they are.
_SHAPING = frozenset("\u200c\u200d")
_NAMED_ESCAPES = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}
#: After a backslash, what would make it read as an escape: such a backslash is doubled.
_ESCAPE_LETTERS = frozenset("\\xuUntr")


def _hidden(ch: str, multiline: bool) -> bool:
    if ch.isprintable():
        return False
    if ch == "\n":
        return not multiline
    return ch not in _SHAPING and unicodedata.category(ch) in _HIDDEN_CATEGORIES


def _escape(ch: str) -> str:
    named = _NAMED_ESCAPES.get(ch)
    if named is not None:
        return named
    code = ord(ch)
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def visible(text: str, *, multiline: bool = False) -> str:
    """Every character a terminal would act on or hide as an escape (``\\x1b``, ``\\u202e``;
    a newline only without ``multiline``); a backslash doubled where it could read as one."""
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


def json_text(data: Any, *, indent: int | None = None) -> str:
    """Exact JSON whose strings cannot act on a terminal: what :func:`visible` escapes is
    written as a JSON ``\\u`` escape (JSON itself escapes only C0)."""
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
