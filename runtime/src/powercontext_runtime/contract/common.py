"""Shared field types and references used across every area of the API."""

from __future__ import annotations

import re
import unicodedata
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from . import limits

__all__ = [
    "ArtifactRef",
    "EntryId",
    "MemoryCitation",
    "MemoryRef",
    "ScopeId",
    "SourceId",
    "SourceRef",
    "StrictModel",
    "check_scope_pattern",
    "json_depth",
]


class StrictModel(BaseModel):
    """Base of every wire model: unknown fields are rejected and types are not coerced."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


#: Characters a key may not contain: controls (Cc), invisible formatting such as zero-width
#: spaces and bidi overrides (Cf: U+200B, U+202E …), line/paragraph separators (Zl, Zp) and
#: lone surrogates (Cs). Two keys that look identical on screen must be the same key, and a
#: key must not reorder or hide the text around it where it is shown.
_FORBIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs"})


def _has_forbidden_character(value: str) -> bool:
    return any(unicodedata.category(ch) in _FORBIDDEN_CATEGORIES for ch in value)


def _check_opaque_key(value: str) -> str:
    """Caller-chosen keys are validated, never normalised: they compare byte-for-byte.

    Surrounding whitespace is refused because MySQL-protocol ``_bin`` collations ignore
    trailing spaces: ``"a"`` and ``"a "`` would be one key there and two on SQLite.
    """
    if not value.strip():
        raise ValueError("must contain a non-whitespace character")
    if value != value.strip():
        raise ValueError("must not start or end with whitespace")
    if _has_forbidden_character(value):
        raise ValueError("must not contain control, invisible formatting or separator characters")
    return value


def check_scope_pattern(pattern: str) -> str:
    """A token's scope grant: an exact scope id, or one ending in a single ``*`` (a prefix;
    ``*`` alone is every scope). The part before ``*`` obeys the scope id rules, so a pattern
    that could never match (``' x'``, ``'a\u200b*'``) is refused when the token is made."""
    prefix = pattern[:-1] if pattern.endswith("*") else pattern
    if "*" in prefix:
        raise ValueError("a scope pattern may contain only one trailing *")
    if len(prefix) > limits.SCOPE_ID_MAX_CHARS:
        raise ValueError(f"a scope pattern is at most {limits.SCOPE_ID_MAX_CHARS} characters")
    try:
        if prefix == pattern:  # an exact id
            _check_opaque_key(prefix)
        elif prefix:  # a prefix may end in a space ("git:a *" matches "git:a b")
            _check_opaque_key(prefix + "x")
    except ValueError as exc:
        raise ValueError(f"a scope pattern {exc}") from None
    return pattern


_PRINTABLE_ASCII = re.compile(r"^[\x21-\x7e]+$")


def _check_id(value: str) -> str:
    if not _PRINTABLE_ASCII.match(value):
        raise ValueError("identifiers are printable ASCII without spaces")
    return value


ScopeId = Annotated[
    str,
    Field(min_length=1, max_length=limits.SCOPE_ID_MAX_CHARS),
    AfterValidator(_check_opaque_key),
]
EntryId = Annotated[
    str, Field(min_length=1, max_length=limits.ID_MAX_CHARS), AfterValidator(_check_id)
]

Family = Literal["memory", "experience", "skill", "handoff"]


class ArtifactRef(StrictModel):
    """An exact, immutable revision of one artifact."""

    family: Family
    artifact_id: EntryId
    revision: int = Field(ge=1, lt=limits.INT64_END)


class MemoryRef(StrictModel):
    """A revision of a scope's single Memory artifact."""

    family: Literal["memory"]
    artifact_id: Literal["memory"]
    revision: int = Field(ge=1, lt=limits.INT64_END)

    @classmethod
    def at(cls, revision: int) -> MemoryRef:
        return cls(family="memory", artifact_id="memory", revision=revision)


class MemoryCitation(StrictModel):
    """Names one immutable entry version as it was in one Memory revision."""

    memory_ref: MemoryRef
    entry_id: EntryId
    entry_version_id: EntryId


SourceId = Annotated[
    str,
    Field(min_length=1, max_length=limits.SOURCE_ID_MAX_CHARS),
    AfterValidator(_check_opaque_key),
]


class SourceRef(StrictModel):
    """Evidence pointing at a captured source: a captured prompt (``content``) or a recorded
    task result (``task-result``, whose ``source_id`` is ``task-result/<task_id>``)."""

    name: Literal["content", "task-result"]
    source_id: SourceId


def json_depth(value: Any, limit: int) -> int:
    """How deeply ``value`` (parsed JSON) nests lists and objects, counted up to ``limit + 1``.

    Iterative, so it cannot overflow the stack on the very input it is there to refuse, and
    it stops as soon as the answer is over ``limit``.
    """
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        deepest = max(deepest, depth)
        if deepest > limit:
            return deepest
        stack.extend((child, depth + 1) for child in children)
    return deepest


def dump(model: BaseModel) -> dict[str, Any]:
    """JSON-ready dict of a wire model (the one way responses are serialised).

    By alias, exactly like the HTTP routes (``response_model_by_alias=True``): a field such as
    ``HandoffContent.schema_`` is ``schema`` on the wire, and the MCP output schemas advertise
    the aliases, so anything else is a response clients rightly reject as invalid.
    """
    return model.model_dump(mode="json", by_alias=True)
