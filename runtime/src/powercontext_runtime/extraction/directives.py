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

__all__ = ["DirectivesExtractor"]

_DIRECTIVE = re.compile(
    r"^[ \t>*-]*(?:remember[ \t]*[:：]|记住[ \t]*[:：]|#remember\b[ \t]*[:：]?)[ \t]*(?P<text>.+)$",
    re.IGNORECASE | re.MULTILINE,
)


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
