"""The default extractor: explicit memory directives in captured prompts (pure, offline).

A line that starts with ``remember:``, ``记住：`` or ``#remember`` (any case; ASCII or
full-width colon) becomes one ``convention`` entry holding the rest of the line, citing the
prompt it came from. Nothing is inferred, summarised or guessed — the user said it.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence

from ..contract.limits import MEMORY_TEXT_MAX_BYTES
from . import CapturedSource, ExtractedEntry

__all__ = ["DirectivesExtractor", "without_directives"]

_DIRECTIVE = re.compile(
    r"^[ \t>*-]*(?:remember[ \t]*[:：]|记住[ \t]*[:：]|#remember\b[ \t]*[:：]?)[ \t]*(?P<text>.+)$",
    re.IGNORECASE | re.MULTILINE,
)


def without_directives(text: str) -> str:
    """``text`` without its directive lines.

    A directive is a memory write addressed to PowerContext, not part of what the prompt asks:
    recall for the prompt must not be steered (or diluted) by the fact being stored (issue 17:
    "What should I know before pushing?" plus one ``remember:`` line recalled nothing).
    """
    return _DIRECTIVE.sub("", text)


class DirectivesExtractor:
    name = "directives"

    def __call__(self, sources: Sequence[CapturedSource]) -> list[ExtractedEntry]:
        entries: list[ExtractedEntry] = []
        for source in sources:
            for match in _DIRECTIVE.finditer(source.content):
                text = unicodedata.normalize("NFC", match.group("text")).strip()
                if text and len(text.encode("utf-8")) <= MEMORY_TEXT_MAX_BYTES:
                    entries.append(ExtractedEntry("convention", text, (source.source_id,)))
        return entries
