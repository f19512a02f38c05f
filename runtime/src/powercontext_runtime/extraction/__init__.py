"""Extractors: what in a window of captured sources becomes Memory (spec 06 § Extraction).

An extractor is a plain callable from sources to proposed entries. It runs *outside* any
database transaction (a model call may take seconds); the flush then commits the entries and
the cursor advance together.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

__all__ = ["CapturedSource", "ExtractedEntry", "Extractor"]


@dataclass(frozen=True, slots=True)
class CapturedSource:
    position: int
    source_id: str
    content: str


@dataclass(frozen=True, slots=True)
class ExtractedEntry:
    kind: str
    text: str
    source_ids: tuple[str, ...]  # evidence: which captured sources this came from


class Extractor(Protocol):
    name: str

    def __call__(self, sources: Sequence[CapturedSource]) -> list[ExtractedEntry]: ...
