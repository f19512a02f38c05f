"""The export format ``powercontext.export`` version 2: records, their canonical form, checks.

An export is JSON Lines: a header line, then each scope's section — a ``scope`` record and the
scope's records in a fixed order of types (:data:`TYPE_ORDER`). Every record is one JSON
object on one line whose keys come in the order the tuples below list them; the encoding is
canonical (:func:`encode`: UTF-8, no spaces, no ASCII escaping), so the same data always gives
the same bytes, on either backend.

:class:`ScopeReader` checks one scope's records as they stream past and returns each in its
canonical form. The checks are those that keep an import from storing something the runtime
could not serve back exactly: field types and limits, gap-free revisions, versions and
positions, each entry version's content hash and each source's payload hash (which catch an
edited or damaged line), version chains (``valid_to``), heads, and the counts the ``scope``
record announces (which catch a truncated file). Errors name the line and the field, never a
value: a value can be stored content.

Version 2 added the ``flush_run`` records (and their ``counts`` key); a version 1 file has
none and is still read, its records taking their version 2 canonical form (``flush_runs``
counted 0), so a scope imported from it compares equal to its re-export. Version 3 added
fields (:data:`ADDED_FIELDS`): a candidate's ``proposed_by`` and ``signature`` and the source
head's ``distill_cursor``; an older file's records read as ``"agent"``, ``null`` and ``null``
(before the distillers only the API proposed, and nothing had been distilled).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import msgspec
from pydantic import BaseModel, TypeAdapter, ValidationError

from ..contract.bootstrap import HandoffContent
from ..contract.common import ArtifactRef, ScopeId, SourceId
from ..contract.limits import (
    ID_MAX_CHARS,
    INT64_END,
    MAX_EVIDENCE_REFS,
    MAX_TAGS,
    TAG_PATTERN,
    TASK_RESULT_PREFIX,
)
from ..contract.review import PROPOSERS, ExperienceProposal, SkillProposal
from ..contract.task_results import TaskId, TaskResult
from ..errors import InvalidRequestError
from ..store._records import ARTIFACT_REFS, SOURCE_REFS, canonical_json, sha256_hex
from ..store.memory import content_hash
from ..store.task_results import TASK_RESULT, stored_form

__all__ = [
    "COUNT_KEYS",
    "FORMAT",
    "VERSION",
    "ExportFormatError",
    "ScopeReader",
    "check_header",
    "encode",
    "header",
]

FORMAT = "powercontext.export"
VERSION = 3
#: The versions this runtime imports. Each new version only adds record types (and their
#: count keys) or fields (:data:`ADDED_FIELDS`), so an older file is a newer one without them.
READABLE = (1, 2, 3)
#: Longest line read (a captured source of 200,000 characters fits several times over); a
#: longer one is refused instead of being read into memory whole.
MAX_LINE_BYTES = 8 << 20

HEADER_KEYS = ("format", "version", "runtime", "backend", "scopes", "counts")
COUNT_KEYS = (
    "memory_entries",
    "memory_versions",
    "artifact_revisions",
    "artifact_heads",
    "candidates",
    "candidate_versions",
    "sources",
    "flush_runs",
)
#: The ``counts`` keys of each readable version.
VERSION_COUNT_KEYS = {1: COUNT_KEYS[:7], 2: COUNT_KEYS, 3: COUNT_KEYS}
#: The record types added after each readable version: a file of that version has none.
LATER_TYPES = {1: frozenset({"flush_run"}), 2: frozenset(), 3: frozenset()}
#: Fields added to a record type by a version: ``{type: {version: fields}}``; a file of an
#: earlier version has none of them.
ADDED_FIELDS: dict[str, dict[int, tuple[str, ...]]] = {
    "candidate": {3: ("proposed_by", "signature")},
    "source_head": {3: ("distill_cursor",)},
}

SCOPE = ("type", "scope_id", "counts")
MEMORY_HEAD = ("type", "scope_id", "revision", "updated_at")
MEMORY_VERSION = (
    "type", "scope_id", "revision", "operation", "revision_created_at", "entry_id",
    "entry_version_id", "version", "state", "kind", "text", "tags", "reason", "source_refs",
    "artifact_refs", "content_hash", "valid_to", "created_at",
)  # fmt: skip
ARTIFACT_REVISION = (
    "type", "scope_id", "family", "artifact_id", "revision", "content", "source_refs",
    "artifact_refs", "candidate_id", "candidate_version", "created_at",
)  # fmt: skip
ARTIFACT_HEAD = ("type", "scope_id", "family", "artifact_id", "revision", "updated_at")
CANDIDATE = (
    "type", "scope_id", "candidate_id", "family", "status", "version", "target",
    "result_artifact", "decision_reason", "proposed_by", "signature", "created_at", "updated_at",
    "versions",
)  # fmt: skip
CANDIDATE_VERSION = ("version", "proposal", "source_refs", "artifact_refs", "reason", "created_at")
REFERENCES = ("type", "scope_id", "references", "version", "updated_at")
HANDOFF_DELIVERY = ("type", "scope_id", "revision", "queued_at")
SOURCE_HEAD = ("type", "scope_id", "last_position", "flush_cursor", "distill_cursor")
SOURCE = (
    "type", "scope_id", "position", "source_id", "name", "payload_hash", "content", "metadata",
    "created_at",
)  # fmt: skip
FLUSH_RUN = ("type", "scope_id", "to_cursor", "from_cursor", "sources", "entries", "created_at")

KEYS: dict[str, tuple[str, ...]] = {
    "scope": SCOPE,
    "memory_head": MEMORY_HEAD,
    "memory_version": MEMORY_VERSION,
    "artifact_revision": ARTIFACT_REVISION,
    "artifact_head": ARTIFACT_HEAD,
    "candidate": CANDIDATE,
    "references": REFERENCES,
    "handoff_delivery": HANDOFF_DELIVERY,
    "source_head": SOURCE_HEAD,
    "source": SOURCE,
    "flush_run": FLUSH_RUN,
}
#: The order of record types inside a scope's section; the types marked once appear at most
#: once. A fixed order makes the format canonical and lets a reader check as it streams.
TYPE_ORDER = tuple(KEYS)
ONCE = frozenset({"scope", "memory_head", "references", "handoff_delivery", "source_head"})
_RANK = {name: i for i, name in enumerate(TYPE_ORDER)}

_MAX_INT = INT64_END - 1
_HEX64 = re.compile(r"^[0-9a-f]{64}$")
_ID_PATTERN = re.compile(rf"^[\x21-\x7e]{{1,{ID_MAX_CHARS}}}$")
_TAG = re.compile(TAG_PATTERN)
_TASK_ID: TypeAdapter[str] = TypeAdapter(TaskId)
#: The kinds of source a scope's journal holds (``sources.name``); any other is refused.
SOURCE_NAMES = ("content", TASK_RESULT)
_SCOPE_ID: TypeAdapter[str] = TypeAdapter(ScopeId)
_SOURCE_ID: TypeAdapter[str] = TypeAdapter(SourceId)
_CONTENT_MODELS: dict[str, type[BaseModel]] = {
    "experience": ExperienceProposal,
    "skill": SkillProposal,
    "handoff": HandoffContent,
}


class ExportFormatError(InvalidRequestError):
    """The file is not an export this runtime can import; nothing was written.

    ``details``: ``line`` (1-based) and, when one field is at fault, ``field``; never a value.
    """

    default_code = "import_invalid"


def encode(record: Mapping[str, Any]) -> bytes:
    """A record's canonical line (with its newline): compact JSON, UTF-8 unescaped, keys in
    the record's order. (msgspec writes exactly what ``json.dumps(…, ensure_ascii=False,
    separators=(",", ":"))`` writes for these records, five times faster.)"""
    return _ENCODE(record) + b"\n"


_ENCODE = msgspec.json.Encoder().encode


def header(runtime: str, backend: str, scopes: list[str], counts: Mapping[str, int]) -> dict:
    return {
        "format": FORMAT,
        "version": VERSION,
        "runtime": runtime,
        "backend": backend,
        "scopes": scopes,
        "counts": {key: counts.get(key, 0) for key in COUNT_KEYS},
    }


def zero_counts() -> dict[str, int]:
    return dict.fromkeys(COUNT_KEYS, 0)


# -- field checks ----------------------------------------------------------------------------


class _Bad(Exception):
    """One field of one record is wrong (turned into :class:`ExportFormatError` with its line)."""

    def __init__(self, field: str | None, problem: str) -> None:
        super().__init__(problem)
        self.field = field
        self.problem = problem


def keys_of(kind: str, version: int) -> tuple[str, ...]:
    """A record type's keys in a file of ``version``: :data:`KEYS` without the fields a later
    version added."""
    later = {
        name for added, names in ADDED_FIELDS.get(kind, {}).items() if added > version
        for name in names
    }  # fmt: skip
    return tuple(key for key in KEYS[kind] if key not in later)


def _fields(record: Any, keys: tuple[str, ...]) -> None:
    if not isinstance(record, dict):
        raise _Bad(None, "a record must be a JSON object")
    if len(record) != len(keys) or record.keys() != set(keys):
        for key in keys:
            if key not in record:
                raise _Bad(key, "missing field")
        raise _Bad(None, "unknown field")  # the name could be anything: not echoed


def _int(value: Any, name: str, minimum: int = 0) -> int:
    if type(value) is not int or not minimum <= value <= _MAX_INT:
        raise _Bad(name, f"must be an integer from {minimum}")
    return value


def _opt_int(value: Any, name: str, minimum: int = 0) -> int | None:
    return None if value is None else _int(value, name, minimum)


def _text(value: Any, name: str, max_chars: int | None = None) -> str:
    if type(value) is not str or not value:
        raise _Bad(name, "must be a non-empty string")
    if max_chars is not None and len(value) > max_chars:
        raise _Bad(name, f"must be at most {max_chars} characters")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise _Bad(name, "must be valid Unicode (a lone surrogate escape)") from None
    return value


def _opt_text(value: Any, name: str, max_chars: int | None = None) -> str | None:
    return None if value is None else _text(value, name, max_chars)


def _choice(value: Any, name: str, choices: Iterable[str]) -> str:
    if value not in choices or type(value) is not str:
        raise _Bad(name, "must be one of " + ", ".join(choices))
    return value


def _adapted(adapter: TypeAdapter[Any], value: Any, name: str) -> Any:
    try:
        return adapter.validate_python(value, strict=True)
    except ValidationError:
        raise _Bad(name, "is not a valid value") from None


def _id(value: Any, name: str) -> str:
    """An identifier (``EntryId``'s rule, without a validator call per field)."""
    if type(value) is not str or not _ID_PATTERN.match(value):
        raise _Bad(name, f"must be 1 to {ID_MAX_CHARS} printable ASCII characters, no spaces")
    return value


def _hex64(value: Any, name: str) -> str:
    if type(value) is not str or not _HEX64.match(value):
        raise _Bad(name, "must be 64 lowercase hex digits")
    return value


def _refs(adapter: TypeAdapter[Any], value: Any, name: str) -> list[Any]:
    """Evidence references in their canonical form (the models' field order)."""
    if type(value) is not list:
        raise _Bad(name, "must be a list")
    if not value:
        return value
    if len(value) > MAX_EVIDENCE_REFS:
        raise _Bad(name, f"holds at most {MAX_EVIDENCE_REFS} references")
    models = _adapted(adapter, value, name)
    return [model.model_dump(mode="json") for model in models]


def _ref(value: Any, name: str) -> dict[str, Any] | None:
    if value is None:
        return None
    return _adapted(_ARTIFACT_REF, value, name).model_dump(mode="json")


_ARTIFACT_REF: TypeAdapter[ArtifactRef] = TypeAdapter(ArtifactRef)


def _object(value: Any, name: str) -> dict[str, Any]:
    """A JSON object with its keys sorted at every level (how the runtime stores them)."""
    if type(value) is not dict:
        raise _Bad(name, "must be a JSON object")
    try:
        return json.loads(canonical_json(value))  # type: ignore[no-any-return]
    except (UnicodeEncodeError, ValueError):
        raise _Bad(name, "must be valid Unicode (a lone surrogate escape)") from None


def _content(family: str, value: Any, name: str) -> dict[str, Any]:
    content = _object(value, name)
    try:
        _CONTENT_MODELS[family].model_validate(content)
    except ValidationError:
        raise _Bad(name, f"is not valid {family} content") from None
    return content


def _tags(value: Any) -> list[str]:
    if type(value) is not list or len(value) > MAX_TAGS:
        raise _Bad("tags", f"must be a list of at most {MAX_TAGS} tags")
    for tag in value:
        if type(tag) is not str or not _TAG.match(tag):
            raise _Bad("tags", "holds a value that is not a tag")
    return value


# -- header ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Header:
    runtime: str
    backend: str
    scopes: list[str]
    counts: dict[str, int]  # every key of COUNT_KEYS (those the file's version lacks: 0)
    version: int = VERSION


def check_header(value: Any) -> Header:
    """The header line's fields; raises :class:`ExportFormatError` (line 1)."""
    try:
        if type(value) is not dict or value.get("format") != FORMAT:
            raise _Bad("format", f"the file is not a {FORMAT} file")
        version = value.get("version")
        if version not in READABLE or type(version) is not int:
            raise ExportFormatError(
                f"export format version {version if type(version) is int else '?'} is not one "
                f"this runtime reads (it reads versions {', '.join(map(str, READABLE))}); "
                "import it with the release that wrote it, or a newer one",
                code="import_unsupported_version",
                details={"line": 1, "field": "version", "supported": list(READABLE)},
            )
        _fields(value, HEADER_KEYS)
        runtime = _text(value["runtime"], "runtime", 64)
        backend = _choice(value["backend"], "backend", ("sqlite", "oceanbase"))
        scopes = value["scopes"]
        if type(scopes) is not list:
            raise _Bad("scopes", "must be a list")
        checked = [_adapted(_SCOPE_ID, scope, "scopes") for scope in scopes]
        keys = [s.encode("utf-8") for s in checked]
        if keys != sorted(set(keys)):
            raise _Bad("scopes", "must be distinct and in byte order")
        counts = _counts(value["counts"], "counts", version)
    except _Bad as exc:
        raise _error(1, exc) from None
    return Header(runtime, backend, checked, counts, version)


def _counts(value: Any, name: str, version: int) -> dict[str, int]:
    """The counts of a file of ``version``, with every current key (0 where it has none)."""
    keys = VERSION_COUNT_KEYS[version]
    _fields_named(value, keys, name)
    counts = zero_counts()
    counts.update({key: _int(value[key], f"{name}.{key}") for key in keys})
    return counts


def _fields_named(value: Any, keys: tuple[str, ...], name: str) -> None:
    try:
        _fields(value, keys)
    except _Bad as exc:
        raise _Bad(name if exc.field is None else f"{name}.{exc.field}", exc.problem) from None


def _error(line: int, exc: _Bad) -> ExportFormatError:
    where = f" field {exc.field}:" if exc.field else ""
    details: dict[str, Any] = {"line": line}
    if exc.field:
        details["field"] = exc.field
    return ExportFormatError(f"line {line}:{where} {exc.problem}", details=details)


# -- one scope's section ---------------------------------------------------------------------


@dataclass(slots=True)
class _Entry:
    version: int
    state: str
    valid_to: int | None
    revision: int


@dataclass(slots=True)
class ScopeReader:
    """Checks the records of one scope's section in order; :meth:`read` returns each record's
    canonical form, :meth:`finish` checks what only the whole section shows.

    It keeps small per-entry state (never texts), so a scope of 100k entries costs a few MB.
    """

    scope_id: str
    version: int = VERSION  # the file's format version
    counts: dict[str, int] = field(default_factory=zero_counts)
    expected: dict[str, int] | None = None
    memory_head: int | None = None
    revision: int = 0  # the last memory revision read
    entries: dict[str, _Entry] = field(default_factory=dict)
    version_ids: set[str] = field(default_factory=set)
    artifacts: dict[tuple[str, str], int] = field(default_factory=dict)
    heads: set[tuple[str, str]] = field(default_factory=set)
    candidate_ids: set[str] = field(default_factory=set)
    source_head: tuple[int, int] | None = None
    source_ids: set[str] = field(default_factory=set)
    position: int = 0
    flushed_to: int = 0  # the last flush run's to_cursor
    _rank: int = -1
    _seen_once: set[str] = field(default_factory=set)

    def read(self, record: Any, line: int) -> dict[str, Any]:
        try:
            return self._read(record)
        except _Bad as exc:
            raise _error(line, exc) from None

    def finish(self, line: int) -> None:
        """After the section's last record (``line``: the line after it)."""
        try:
            if self.expected is None:
                raise _Bad(None, "the scope's section has no scope record")
            if self.memory_head is not None and self.memory_head != self.revision:
                raise _Bad("revision", "the memory head is not the last revision of the scope")
            for entry in self.entries.values():
                if entry.valid_to is not None:
                    raise _Bad("valid_to", "an entry's last version must have valid_to null")
            if self.heads != set(self.artifacts):
                raise _Bad(None, "every artifact needs exactly one artifact_head record")
            if self.source_head is not None and self.source_head[0] != self.position:
                raise _Bad("last_position", "the source head is not the last source position")
            for key in COUNT_KEYS:
                if self.counts[key] != self.expected[key]:
                    raise _Bad(
                        f"counts.{key}",
                        "the scope's records do not add up to the counts its scope record "
                        "announces (a truncated or edited file)",
                    )
        except _Bad as exc:
            raise _error(line, exc) from None

    def _read(self, record: Any) -> dict[str, Any]:
        if not isinstance(record, dict):
            raise _Bad(None, "a record must be a JSON object")
        kind = record.get("type")
        if type(kind) is not str or kind not in _RANK or kind in LATER_TYPES[self.version]:
            raise _Bad("type", "unknown record type")
        if record.get("scope_id") != self.scope_id:
            raise _Bad("scope_id", "the record belongs to another scope's section")
        rank = _RANK[kind]
        if rank < self._rank or (kind in ONCE and kind in self._seen_once):
            raise _Bad("type", "records of a scope come in the format's fixed order")
        if kind != "scope" and self.expected is None:
            raise _Bad("type", "a scope's section starts with its scope record")
        self._rank = rank
        self._seen_once.add(kind)
        _fields(record, keys_of(kind, self.version))
        return _READERS[kind](self, record)

    # -- per type ------------------------------------------------------------------------------

    def _scope(self, r: dict[str, Any]) -> dict[str, Any]:
        self.expected = _counts(r["counts"], "counts", self.version)
        return {"type": "scope", "scope_id": self.scope_id, "counts": self.expected}

    def _memory_head(self, r: dict[str, Any]) -> dict[str, Any]:
        self.memory_head = _int(r["revision"], "revision")
        return {
            "type": "memory_head",
            "scope_id": self.scope_id,
            "revision": self.memory_head,
            "updated_at": _int(r["updated_at"], "updated_at"),
        }

    def _memory_version(self, r: dict[str, Any]) -> dict[str, Any]:
        if self.memory_head is None:
            raise _Bad("type", "memory versions need the scope's memory_head record first")
        revision = _int(r["revision"], "revision", 1)
        if revision != self.revision + 1:
            raise _Bad("revision", "memory revisions must be gap-free, in order, from 1")
        operation = _choice(r["operation"], "operation", ("remember", "revise", "retire"))
        entry_id = _id(r["entry_id"], "entry_id")
        version_id = _id(r["entry_version_id"], "entry_version_id")
        version = _int(r["version"], "version", 1)
        state = _choice(r["state"], "state", ("active", "inactive"))
        kind = _text(r["kind"], "kind", 128)
        text = _text(r["text"], "text")
        tags = _tags(r["tags"])
        digest = _hex64(r["content_hash"], "content_hash")
        valid_to = _opt_int(r["valid_to"], "valid_to", 1)
        if valid_to is not None and valid_to <= revision:
            raise _Bad("valid_to", "must be a later revision than the version's own")
        if digest != content_hash(kind, text, tags):
            raise _Bad(
                "content_hash",
                "does not match the version's kind, text and tags (an edited or damaged line)",
            )
        if version_id in self.version_ids:
            raise _Bad("entry_version_id", "appears twice in the scope")
        previous = self.entries.get(entry_id)
        if previous is None:
            if version != 1 or operation != "remember" or state != "active":
                raise _Bad("version", "an entry starts with version 1, remembered and active")
            self.counts["memory_entries"] += 1
        else:
            if version != previous.version + 1 or operation == "remember":
                raise _Bad("version", "an entry's versions must follow each other from 1")
            if previous.state != "active":
                raise _Bad("version", "a retired entry has no later version")
            if previous.valid_to != revision:
                raise _Bad("valid_to", "an entry's version must end where its next one starts")
            if (operation == "retire") != (state == "inactive"):
                raise _Bad("state", "retire writes an inactive version, revise an active one")
        self.entries[entry_id] = _Entry(version, state, valid_to, revision)
        self.version_ids.add(version_id)
        self.revision = revision
        self.counts["memory_versions"] += 1
        return {
            "type": "memory_version",
            "scope_id": self.scope_id,
            "revision": revision,
            "operation": operation,
            "revision_created_at": _int(r["revision_created_at"], "revision_created_at"),
            "entry_id": entry_id,
            "entry_version_id": version_id,
            "version": version,
            "state": state,
            "kind": kind,
            "text": text,
            "tags": tags,
            "reason": _opt_text(r["reason"], "reason"),
            "source_refs": _refs(SOURCE_REFS, r["source_refs"], "source_refs"),
            "artifact_refs": _refs(ARTIFACT_REFS, r["artifact_refs"], "artifact_refs"),
            "content_hash": digest,
            "valid_to": valid_to,
            "created_at": _int(r["created_at"], "created_at"),
        }

    def _artifact_revision(self, r: dict[str, Any]) -> dict[str, Any]:
        family = _choice(r["family"], "family", ("experience", "skill", "handoff"))
        artifact_id = _id(r["artifact_id"], "artifact_id")
        if family == "handoff" and artifact_id != "handoff":
            raise _Bad("artifact_id", "a scope's Handoff artifact is called handoff")
        revision = _int(r["revision"], "revision", 1)
        key = (family, artifact_id)
        if revision != self.artifacts.get(key, 0) + 1:
            raise _Bad("revision", "an artifact's revisions must be gap-free, in order, from 1")
        self.artifacts[key] = revision
        self.counts["artifact_revisions"] += 1
        candidate_id = r["candidate_id"]
        return {
            "type": "artifact_revision",
            "scope_id": self.scope_id,
            "family": family,
            "artifact_id": artifact_id,
            "revision": revision,
            "content": _content(family, r["content"], "content"),
            "source_refs": _refs(SOURCE_REFS, r["source_refs"], "source_refs"),
            "artifact_refs": _refs(ARTIFACT_REFS, r["artifact_refs"], "artifact_refs"),
            "candidate_id": None if candidate_id is None else _id(candidate_id, "candidate_id"),
            "candidate_version": _opt_int(r["candidate_version"], "candidate_version", 1),
            "created_at": _int(r["created_at"], "created_at"),
        }

    def _artifact_head(self, r: dict[str, Any]) -> dict[str, Any]:
        family = _choice(r["family"], "family", ("experience", "skill", "handoff"))
        artifact_id = _id(r["artifact_id"], "artifact_id")
        key = (family, artifact_id)
        revision = _int(r["revision"], "revision", 1)
        if self.artifacts.get(key) != revision or key in self.heads:
            raise _Bad("revision", "an artifact's head must be its last revision, once")
        self.heads.add(key)
        self.counts["artifact_heads"] += 1
        return {
            "type": "artifact_head",
            "scope_id": self.scope_id,
            "family": family,
            "artifact_id": artifact_id,
            "revision": revision,
            "updated_at": _int(r["updated_at"], "updated_at"),
        }

    def _candidate(self, r: dict[str, Any]) -> dict[str, Any]:
        candidate_id = _id(r["candidate_id"], "candidate_id")
        if candidate_id in self.candidate_ids:
            raise _Bad("candidate_id", "appears twice in the scope")
        family = _choice(r["family"], "family", ("experience", "skill"))
        version = _int(r["version"], "version", 1)
        versions = r["versions"]
        if type(versions) is not list or len(versions) != version:
            raise _Bad("versions", "must list every version of the candidate, 1 to version")
        checked = []
        for number, item in enumerate(versions, start=1):
            _fields_named(item, CANDIDATE_VERSION, "versions")
            if item["version"] != number or type(item["version"]) is not int:
                raise _Bad("versions.version", "must count from 1 in order")
            proposal = _object(item["proposal"], "versions.proposal")
            try:
                _CONTENT_MODELS[family].model_validate(proposal)
            except ValidationError:
                raise _Bad("versions.proposal", f"is not a valid {family} proposal") from None
            checked.append(
                {
                    "version": number,
                    "proposal": proposal,
                    "source_refs": _refs(SOURCE_REFS, item["source_refs"], "versions.source_refs"),
                    "artifact_refs": _refs(
                        ARTIFACT_REFS, item["artifact_refs"], "versions.artifact_refs"
                    ),
                    "reason": _opt_text(item["reason"], "versions.reason"),
                    "created_at": _int(item["created_at"], "versions.created_at"),
                }
            )
        self.candidate_ids.add(candidate_id)
        self.counts["candidates"] += 1
        self.counts["candidate_versions"] += version
        return {
            "type": "candidate",
            "scope_id": self.scope_id,
            "candidate_id": candidate_id,
            "family": family,
            "status": _choice(r["status"], "status", ("pending", "approved", "rejected")),
            "version": version,
            "target": _ref(r["target"], "target"),
            "result_artifact": _ref(r["result_artifact"], "result_artifact"),
            "decision_reason": _opt_text(r["decision_reason"], "decision_reason"),
            "proposed_by": _choice(r.get("proposed_by", "agent"), "proposed_by", PROPOSERS),
            "signature": (
                None if r.get("signature") is None else _hex64(r["signature"], "signature")
            ),
            "created_at": _int(r["created_at"], "created_at"),
            "updated_at": _int(r["updated_at"], "updated_at"),
            "versions": checked,
        }

    def _references(self, r: dict[str, Any]) -> dict[str, Any]:
        references = r["references"]
        if type(references) is not list:
            raise _Bad("references", "must be a list of scope ids")
        checked = [_adapted(_SCOPE_ID, ref, "references") for ref in references]
        return {
            "type": "references",
            "scope_id": self.scope_id,
            "references": checked,
            "version": _int(r["version"], "version", 1),
            "updated_at": _int(r["updated_at"], "updated_at"),
        }

    def _handoff_delivery(self, r: dict[str, Any]) -> dict[str, Any]:
        revision = _int(r["revision"], "revision", 1)
        if revision > self.artifacts.get(("handoff", "handoff"), 0):
            raise _Bad("revision", "names a Handoff revision the scope does not have")
        return {
            "type": "handoff_delivery",
            "scope_id": self.scope_id,
            "revision": revision,
            "queued_at": _int(r["queued_at"], "queued_at"),
        }

    def _source_head(self, r: dict[str, Any]) -> dict[str, Any]:
        self.source_head = (
            _int(r["last_position"], "last_position"),
            _int(r["flush_cursor"], "flush_cursor"),
        )
        distill_cursor = r.get("distill_cursor")
        if distill_cursor is not None:
            distill_cursor = _int(distill_cursor, "distill_cursor")
            if distill_cursor > self.source_head[0]:
                raise _Bad("distill_cursor", "is past the scope's last source position")
        return {
            "type": "source_head",
            "scope_id": self.scope_id,
            "last_position": self.source_head[0],
            "flush_cursor": self.source_head[1],
            "distill_cursor": distill_cursor,
        }

    def _source(self, r: dict[str, Any]) -> dict[str, Any]:
        if self.source_head is None:
            raise _Bad("type", "sources need the scope's source_head record first")
        position = _int(r["position"], "position", 1)
        if position != self.position + 1:
            raise _Bad("position", "source positions must be gap-free, in order, from 1")
        source_id = _adapted(_SOURCE_ID, r["source_id"], "source_id")
        if source_id in self.source_ids:
            raise _Bad("source_id", "appears twice in the scope")
        content = r["content"]
        if type(content) is not str:
            raise _Bad("content", "must be a string")
        metadata = None if r["metadata"] is None else _object(r["metadata"], "metadata")
        digest = _hex64(r["payload_hash"], "payload_hash")
        if digest != _payload_hash(content, metadata):
            raise _Bad(
                "payload_hash",
                "does not match the source's content and metadata (an edited or damaged line)",
            )
        name = _choice(r["name"], "name", SOURCE_NAMES)
        if name == TASK_RESULT:
            _check_task_result(source_id, content, metadata)
        self.position = position
        self.source_ids.add(source_id)
        self.counts["sources"] += 1
        return {
            "type": "source",
            "scope_id": self.scope_id,
            "position": position,
            "source_id": source_id,
            "name": name,
            "payload_hash": digest,
            "content": content,
            "metadata": metadata,
            "created_at": _int(r["created_at"], "created_at"),
        }

    def _flush_run(self, r: dict[str, Any]) -> dict[str, Any]:
        if self.source_head is None:
            raise _Bad("type", "flush runs need the scope's source_head record first")
        to_cursor = _int(r["to_cursor"], "to_cursor", 1)
        from_cursor = _int(r["from_cursor"], "from_cursor")
        if from_cursor < self.flushed_to or to_cursor <= from_cursor:
            raise _Bad("from_cursor", "flush runs must follow each other, each moving the cursor")
        if to_cursor > self.source_head[1]:
            raise _Bad("to_cursor", "a flush run cannot move the cursor past the flush cursor")
        self.flushed_to = to_cursor
        self.counts["flush_runs"] += 1
        return {
            "type": "flush_run",
            "scope_id": self.scope_id,
            "to_cursor": to_cursor,
            "from_cursor": from_cursor,
            "sources": _int(r["sources"], "sources"),
            "entries": _int(r["entries"], "entries"),
            "created_at": _int(r["created_at"], "created_at"),
        }


def _check_task_result(source_id: str, content: str, metadata: dict[str, Any] | None) -> None:
    """A task result as record_task_result stores it: ``task-result/<task_id>``, no metadata,
    content the canonical form of a task result within every limit (so get_task_result and
    list_task_results can serve it). Its redaction is not re-checked: what an earlier release
    stored stays importable if the rules change."""
    if not source_id.startswith(TASK_RESULT_PREFIX):
        raise _Bad("source_id", "a task result's source_id is task-result/<task_id>")
    _adapted(_TASK_ID, source_id[len(TASK_RESULT_PREFIX) :], "source_id")
    if metadata is not None:
        raise _Bad("metadata", "a task result has no metadata")
    try:
        task = TaskResult.model_validate_json(content, strict=False)
    except ValidationError:
        raise _Bad("content", "is not a task result within the limits") from None
    if stored_form(task) != content:
        raise _Bad("content", "is not a task result in its canonical form")


def _payload_hash(content: str, metadata: dict[str, Any] | None) -> str:
    try:
        return sha256_hex("content-source-v1", content, metadata)
    except UnicodeEncodeError:
        raise _Bad("content", "must be valid Unicode (a lone surrogate escape)") from None


_READERS: dict[str, Callable[[ScopeReader, dict[str, Any]], dict[str, Any]]] = {
    "scope": ScopeReader._scope,
    "memory_head": ScopeReader._memory_head,
    "memory_version": ScopeReader._memory_version,
    "artifact_revision": ScopeReader._artifact_revision,
    "artifact_head": ScopeReader._artifact_head,
    "candidate": ScopeReader._candidate,
    "references": ScopeReader._references,
    "handoff_delivery": ScopeReader._handoff_delivery,
    "source_head": ScopeReader._source_head,
    "source": ScopeReader._source,
    "flush_run": ScopeReader._flush_run,
}
