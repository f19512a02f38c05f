"""Extractors: what in a window of captured sources becomes Memory (spec 06 § Extraction).

An extractor is a plain callable from sources to proposed entries. It runs *outside* any
database transaction (a model call may take seconds); the flush then commits the entries and
the cursor advance together.

This module is the public extension point for your own extractor
(``POWERCONTEXT_EXTRACTOR=package.module:Name``, docs/flush.md § Your own extractor): implement
:class:`Extractor` over :class:`CapturedSource` and return :class:`ExtractedEntry` values; the
flush service checks what it returns before anything is written.
"""

from __future__ import annotations

import importlib
import inspect
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

__all__ = [
    "BUILTIN_EXTRACTORS",
    "CapturedSource",
    "ExtractedEntry",
    "Extractor",
    "ExtractorLoadError",
    "is_extractor_path",
    "load_extractor",
]

#: The extractors the runtime ships; any other ``POWERCONTEXT_EXTRACTOR`` is an object path.
BUILTIN_EXTRACTORS = ("directives", "openai-compatible")

_OBJECT_PATH = re.compile(
    r"^(?P<module>[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)"
    r":(?P<attr>[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)$"
)
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


@dataclass(frozen=True, slots=True)
class CapturedSource:
    """One captured prompt of the window: its journal position, id and full text."""

    position: int
    source_id: str
    content: str


@dataclass(frozen=True, slots=True)
class ExtractedEntry:
    """A proposed Memory entry. ``source_ids`` is its evidence: 1..32 ids of the window's
    sources (they become the entry's ``source_refs``)."""

    kind: str
    text: str
    source_ids: tuple[str, ...]


class Extractor(Protocol):
    """``name`` (1..64 of ``[A-Za-z0-9._-]``) and a call from a window to proposed entries.

    Raise ``UnavailableError(code="extraction_unavailable")`` (or any exception) when it cannot
    answer now: the flush then fails with 503 and its cursor stays, so the next flush retries
    the same window.
    """

    name: str

    def __call__(self, sources: Sequence[CapturedSource]) -> list[ExtractedEntry]: ...


class ExtractorLoadError(ValueError):
    """``POWERCONTEXT_EXTRACTOR`` names no usable extractor (the message says why)."""


def is_extractor_path(value: str) -> bool:
    """Is ``value`` of the form ``package.module:Attribute`` (a custom extractor)?"""
    return _OBJECT_PATH.match(value) is not None


def load_extractor(path: str) -> Extractor:
    """The extractor ``package.module:Attribute`` names, imported in this process.

    ``Attribute`` is a class (instantiated without arguments: it reads its own configuration,
    e.g. from the environment) or a ready object with ``name`` and ``__call__``. Anything else
    raises :class:`ExtractorLoadError`, so a daemon never starts with an extractor it cannot
    call. The message names the path and, for an import, what is missing; for a failing
    constructor only the exception's type (its text is the extractor's own).
    """
    match = _OBJECT_PATH.match(path)
    if match is None:
        raise ExtractorLoadError(
            f"POWERCONTEXT_EXTRACTOR must be {' or '.join(BUILTIN_EXTRACTORS)} or "
            "package.module:Attribute"
        )
    try:
        target: object = importlib.import_module(match["module"])
        for part in match["attr"].split("."):
            target = getattr(target, part)
        extractor = target() if inspect.isclass(target) else target
    except (ImportError, AttributeError) as exc:  # names only: say which one is missing
        raise ExtractorLoadError(f"the extractor {path} cannot be loaded: {exc}") from exc
    except Exception as exc:  # its constructor failed; its message is the extractor's own
        raise ExtractorLoadError(
            f"the extractor {path} cannot be created ({type(exc).__name__})"
        ) from exc
    name = getattr(extractor, "name", None)
    if not callable(extractor) or not isinstance(name, str) or not _NAME.match(name):
        raise ExtractorLoadError(
            f"the extractor {path} must be callable and have a name of 1..64 [A-Za-z0-9._-]"
        )
    return extractor  # type: ignore[return-value]
