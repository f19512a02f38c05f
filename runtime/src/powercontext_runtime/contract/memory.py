"""Memory and source-capture operations (spec 02 § Memory, § Sources; spec 03)."""

from __future__ import annotations

import json
import unicodedata
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field, model_validator

from . import limits
from .common import (
    ArtifactRef,
    EntryId,
    MemoryCitation,
    MemoryRef,
    ScopeId,
    SourceId,
    SourceRef,
    StrictModel,
    json_depth,
)

__all__ = [
    "CaptureSourceRequest",
    "CaptureSourceResponse",
    "CapturedSource",
    "GetMemoryEntryRequest",
    "GetSourceRequest",
    "ListMemoryChangesRequest",
    "ListMemoryEntriesRequest",
    "ListMemoryEntryVersionsRequest",
    "MemoryChange",
    "MemoryChanges",
    "MemoryEntry",
    "MemoryEntryHistory",
    "MemoryEntryList",
    "MemoryEntryVersion",
    "MemoryWriteResult",
    "RememberMemoryRequest",
    "RetireMemoryEntryRequest",
    "ReviseMemoryEntryRequest",
    "SearchHit",
    "SearchMemoryRequest",
    "SearchMemoryResponse",
]


def _utf8(value: str, what: str) -> bytes:
    # JSON may carry lone surrogates (``"\\ud800"``) that no database can store; reject them
    # with a message that does not echo the offending input.
    try:
        return value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(f"{what} must be valid Unicode (no lone surrogates)") from None


def _normalise_text(value: str) -> str:
    value = unicodedata.normalize("NFC", value).strip()
    if not value:
        raise ValueError("text must not be blank")
    if len(_utf8(value, "text")) > limits.MEMORY_TEXT_MAX_BYTES:
        raise ValueError(f"text must be at most {limits.MEMORY_TEXT_MAX_BYTES} UTF-8 bytes")
    return value


def _normalise_kind(value: str) -> str:
    value = unicodedata.normalize("NFC", value).strip()
    _utf8(value, "kind")
    if not 1 <= len(value) <= limits.MEMORY_KIND_MAX_CHARS:
        raise ValueError(f"kind must be 1..{limits.MEMORY_KIND_MAX_CHARS} characters")
    return value


def _normalise_tags(value: list[str]) -> list[str]:
    # Tags are a set: duplicates collapse and storage order is sorted, so equal sets hash equal.
    return sorted(set(value))


def _check_not_blank(value: str) -> str:
    if not value.strip():
        raise ValueError("must not be blank")
    return value


Text = Annotated[str, AfterValidator(_normalise_text)]
Kind = Annotated[str, AfterValidator(_normalise_kind)]
Tag = Annotated[str, Field(pattern=limits.TAG_PATTERN)]
Tags = Annotated[list[Tag], Field(max_length=limits.MAX_TAGS), AfterValidator(_normalise_tags)]
Reason = Annotated[str, Field(max_length=limits.MEMORY_REASON_MAX_CHARS)]
SourceRefs = Annotated[list[SourceRef], Field(max_length=limits.MAX_EVIDENCE_REFS)]
ArtifactRefs = Annotated[list[ArtifactRef], Field(max_length=limits.MAX_EVIDENCE_REFS)]
Query = Annotated[
    str, Field(min_length=1, max_length=limits.QUERY_MAX_CHARS), AfterValidator(_check_not_blank)
]


class MemoryEntry(StrictModel):
    citation: MemoryCitation
    version: int = Field(ge=1)
    kind: str
    text: str
    tags: list[str]
    state: Literal["active", "inactive"]
    reason: str | None
    source_refs: list[SourceRef]
    artifact_refs: list[ArtifactRef]


class MemoryWriteResult(StrictModel):
    memory: MemoryRef
    entry: MemoryEntry


class RememberMemoryRequest(StrictModel):
    scope_id: ScopeId
    kind: Kind
    text: Text
    tags: Tags = []
    reason: Reason | None = None
    expected_revision: Annotated[int, Field(ge=0, lt=limits.INT64_END)] | None = None
    source_refs: SourceRefs = []
    artifact_refs: ArtifactRefs = []


class ReviseMemoryEntryRequest(StrictModel):
    scope_id: ScopeId
    citation: MemoryCitation
    text: Text | None = None
    kind: Kind | None = None
    tags: Tags | None = None
    reason: Reason | None = None
    source_refs: SourceRefs = []
    artifact_refs: ArtifactRefs = []

    @model_validator(mode="after")
    def _changes_something(self) -> ReviseMemoryEntryRequest:
        if self.text is None and self.kind is None and self.tags is None:
            raise ValueError("revise needs at least one of text, kind or tags")
        return self


class RetireMemoryEntryRequest(StrictModel):
    scope_id: ScopeId
    citation: MemoryCitation
    reason: Reason | None = None


class GetMemoryEntryRequest(StrictModel):
    scope_id: ScopeId
    citation: MemoryCitation


class ListMemoryEntriesRequest(StrictModel):
    scope_id: ScopeId
    include_inactive: bool = False
    limit: Annotated[int, Field(ge=1, le=limits.LIST_LIMIT_MAX)] = limits.LIST_LIMIT_DEFAULT
    cursor: Annotated[str, Field(min_length=1, max_length=512)] | None = None
    #: Optional filters, answered from indexes (no scan of the scope): entries whose current
    #: version has exactly this kind (NFC, stripped, as stored) and/or this tag.
    kind: Kind | None = None
    tag: Tag | None = None
    #: ``active`` (what the default lists), ``inactive`` (retired only) or ``any``; instead of
    #: ``include_inactive`` (``true`` is ``any``), never together with it.
    state: Literal["active", "inactive", "any"] | None = None

    @model_validator(mode="after")
    def _one_state_switch(self) -> ListMemoryEntriesRequest:
        if self.state is not None and "include_inactive" in self.model_fields_set:
            raise ValueError("use either state or include_inactive, not both")
        return self

    @property
    def wanted_state(self) -> Literal["active", "inactive", "any"]:
        if self.state is not None:
            return self.state
        return "any" if self.include_inactive else "active"


class MemoryEntryList(StrictModel):
    memory: MemoryRef | None
    entries: list[MemoryEntry]
    next_cursor: str | None


class ListMemoryEntryVersionsRequest(StrictModel):
    scope_id: ScopeId
    entry_id: EntryId
    limit: Annotated[int, Field(ge=1, le=limits.LIST_LIMIT_MAX)] = limits.LIST_LIMIT_DEFAULT
    cursor: Annotated[str, Field(min_length=1, max_length=512)] | None = None


class MemoryEntryVersion(StrictModel):
    """One immutable version of an entry. ``citation`` is exact: it names the revision the
    version was written in, so ``get_memory_entry`` returns this very version from it."""

    citation: MemoryCitation
    version: int = Field(ge=1)
    kind: str
    text: str
    tags: list[str]
    state: Literal["active", "inactive"]
    reason: str | None
    source_refs: list[SourceRef]
    artifact_refs: list[ArtifactRef]
    #: What made it: ``remember`` (version 1), ``revise`` or ``retire`` (an inactive version).
    operation: Literal["remember", "revise", "retire"]
    #: It is the entry's version in revisions ``valid_from_revision`` up to (not including)
    #: ``valid_to_revision``; ``null``: still current.
    valid_from_revision: int
    valid_to_revision: int | None
    created_at: str


class MemoryEntryHistory(StrictModel):
    memory: MemoryRef | None  # the head revision when this was read
    entry_id: str
    versions: list[MemoryEntryVersion]  # newest first
    next_cursor: str | None


class SearchMemoryRequest(StrictModel):
    scope_id: ScopeId
    query: Query
    limit: Annotated[int, Field(ge=1, le=limits.SEARCH_LIMIT_MAX)] = limits.SEARCH_LIMIT_DEFAULT
    #: ``auto``: hybrid when the semantic channel is configured, else fts. ``vector`` and
    #: ``hybrid`` are accepted only when ``get_capabilities`` lists them.
    mode: Literal["auto", "fts", "vector", "hybrid"] = "auto"


class SearchHit(StrictModel):
    citation: MemoryCitation
    text: str
    score: Annotated[float, Field(ge=0.0, le=1.0)]
    matched_by: Literal["fts", "vector", "fts+vector"]


class SearchMemoryResponse(StrictModel):
    memory: MemoryRef | None
    #: The search that actually ran: a hybrid search whose query embedding failed or missed
    #: its deadline ran (and reports) ``fts``.
    mode: Literal["fts", "vector", "hybrid"]
    hits: list[SearchHit]


class ListMemoryChangesRequest(StrictModel):
    scope_id: ScopeId
    since_revision: Annotated[int, Field(ge=0, lt=limits.INT64_END)] = 0
    limit: Annotated[int, Field(ge=1, le=limits.CHANGES_LIMIT_MAX)] = limits.CHANGES_LIMIT_DEFAULT


class MemoryChange(StrictModel):
    revision: int
    operation: Literal["remember", "revise", "retire"]
    entry_id: str
    entry_version_id: str
    created_at: str


class MemoryChanges(StrictModel):
    memory: MemoryRef | None
    changes: list[MemoryChange]


def _check_metadata(value: dict[str, Any]) -> dict[str, Any]:
    if json_depth(value, limits.SOURCE_METADATA_MAX_DEPTH) > limits.SOURCE_METADATA_MAX_DEPTH:
        # Checked first: the encoding below recurses, and get_source could not answer it.
        raise ValueError(
            f"metadata must nest at most {limits.SOURCE_METADATA_MAX_DEPTH} levels deep"
        )
    try:
        encoded = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except ValueError:
        # Python's parser lets NaN, Infinity and 1e400 through; none of them is JSON, and
        # stored they would make the source's metadata unreadable to any strict reader.
        raise ValueError("metadata numbers must be finite") from None
    if len(_utf8(encoded, "metadata")) > limits.SOURCE_METADATA_MAX_BYTES:
        raise ValueError(
            f"metadata must encode to at most {limits.SOURCE_METADATA_MAX_BYTES} bytes of JSON"
        )
    return value


def _not_reserved(value: str) -> str:
    # Task results are recorded by record_task_result under this prefix; a prompt captured
    # there could pass for one (docs/decisions/task-results.md § Reserved prefix).
    if value.startswith(limits.TASK_RESULT_PREFIX):
        raise ValueError(
            f"source ids starting with {limits.TASK_RESULT_PREFIX!r} are reserved for task "
            "results (record_task_result)"
        )
    return value


class CaptureSourceRequest(StrictModel):
    scope_id: ScopeId
    source_id: Annotated[SourceId, AfterValidator(_not_reserved)]
    content: Annotated[str, Field(min_length=1, max_length=limits.SOURCE_CONTENT_MAX_CHARS)]
    metadata: Annotated[dict[str, Any], AfterValidator(_check_metadata)] | None = None


class CaptureSourceResponse(StrictModel):
    status: Literal["accepted"]
    source: SourceRef
    position: int = Field(ge=1)


class GetSourceRequest(StrictModel):
    scope_id: ScopeId
    source_id: SourceId


class CapturedSource(StrictModel):
    """A captured source read back (``get_source``): what evidence naming it points at.

    Untrusted stored text, exactly as captured; never logged."""

    source: SourceRef
    position: int = Field(ge=1)  # its place in the scope's capture journal
    content: str
    metadata: dict[str, Any] | None
    created_at: str
    flushed: bool  # whether the flush cursor has passed it (flush_memory processed it)
