"""Export: every authoritative row of the chosen scopes as ``powercontext.export`` records.

One read snapshot covers the whole export, so it is consistent while a daemon keeps writing
(what is committed after the export started is not in it; tests/e2e/test_portability_daemon.py
exports while a daemon writes). Derived data — the full-text index, document frequencies,
vectors — is left out and rebuilt by the import; so are tokens and the web console's sessions
(access, not data), bootstrap receipts, which belong to a token and expire, and recall counts,
which describe one daemon (docs/decisions/portability.md lists every table;
tests/runtime/test_portability.py fails for a table it does not).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, BinaryIO

from sqlalchemy import Connection, Table, func, select

from .. import __version__
from ..contract.common import ArtifactRef
from ..errors import NotFoundError
from ..store._records import ARTIFACT_REFS, SOURCE_REFS
from ..store.database import Database
from ..store.schema import (
    artifact_heads,
    artifact_revisions,
    candidate_versions,
    candidates,
    flush_runs,
    handoff_deliveries,
    memory_entries,
    memory_heads,
    memory_revisions,
    memory_versions,
    scope_references,
    source_heads,
    sources,
)
from .records import COUNT_KEYS, encode, header, zero_counts

__all__ = ["ExportSummary", "export", "list_scopes", "scope_lines", "scope_records"]

Progress = Callable[[int, int], None]

#: Tables whose rows say a scope exists (every other table's rows come with one of these).
SCOPE_TABLES: tuple[Table, ...] = (
    memory_heads,
    artifact_heads,
    candidates,
    scope_references,
    handoff_deliveries,
    source_heads,
)
#: The tables counted for each key of the header's and the scope records' ``counts``.
_COUNTED: dict[str, Table] = {
    "memory_entries": memory_entries,
    "memory_versions": memory_versions,
    "artifact_revisions": artifact_revisions,
    "artifact_heads": artifact_heads,
    "candidates": candidates,
    "candidate_versions": candidate_versions,
    "sources": sources,
    "flush_runs": flush_runs,
}
#: The records a progress bar counts (one per row; a scope's single records are not).
PROGRESS_KEYS = (
    "memory_versions",
    "artifact_revisions",
    "artifact_heads",
    "candidates",
    "sources",
    "flush_runs",
)
_YIELD = 2000


@dataclass(frozen=True, slots=True)
class ExportSummary:
    scopes: list[str]
    counts: dict[str, int]
    bytes: int


#: OceanBase's statement timeout while data moves (µs). Its default, 10 s (ob_query_timeout),
#: ends a statement that streams a 100k-entry scope to a busy machine, or one multi-row insert
#: waiting behind the server's merge of a large load, with error 4012 — which the store can
#: only answer as "busy". Set for the session of the export or import and put back after.
LONG_STATEMENT_US = 3600 * 1_000_000


@contextmanager
def long_statements(conn: Connection) -> Iterator[None]:
    """On OceanBase, let this session's statements run up to an hour (then restore)."""
    if conn.dialect.name != "mysql":
        yield
        return
    before = int(conn.exec_driver_sql("SELECT @@ob_query_timeout").scalar() or 0)
    conn.exec_driver_sql(f"SET SESSION ob_query_timeout = {LONG_STATEMENT_US}")
    try:
        yield
    finally:
        if before > 0:
            conn.exec_driver_sql(f"SET SESSION ob_query_timeout = {before}")


def byte_order(scopes: Iterable[str]) -> list[str]:
    return sorted(set(scopes), key=lambda s: s.encode("utf-8"))


def list_scopes(conn: Connection) -> list[str]:
    """Every scope with stored data, in byte order."""
    found: set[str] = set()
    for table in SCOPE_TABLES:
        found.update(row[0] for row in conn.execute(select(table.c.scope_id).distinct()))
    return byte_order(found)


def count_scopes(conn: Connection, scopes: Sequence[str]) -> dict[str, dict[str, int]]:
    """The ``counts`` of each scope: one grouped count per table, not one query per scope."""
    wanted = set(scopes)
    counts = {scope: zero_counts() for scope in scopes}
    for key, table in _COUNTED.items():
        rows = conn.execute(select(table.c.scope_id, func.count()).group_by(table.c.scope_id)).all()
        for scope_id, count in rows:
            if scope_id in wanted:
                counts[scope_id][key] = int(count)
    return counts


def _sorted_object(stored: str) -> Any:
    """A stored JSON object with its keys sorted at every level (the canonical form)."""
    return json.loads(stored, object_pairs_hook=lambda pairs: dict(sorted(pairs)))


def _refs(adapter: Any, stored: str) -> list[Any]:
    if stored == "[]":
        return []
    return [ref.model_dump(mode="json") for ref in adapter.validate_json(stored)]


def _artifact_ref(stored: str | None) -> dict[str, Any] | None:
    if stored is None:
        return None
    return ArtifactRef.model_validate_json(stored).model_dump(mode="json")


def _list(stored: str) -> list[Any]:
    return [] if stored == "[]" else json.loads(stored)  # type: ignore[no-any-return]


def scope_records(
    conn: Connection, scope_id: str, counts: dict[str, int]
) -> Iterator[dict[str, Any]]:
    """One scope's section, record by record, in the format's order."""
    yield {"type": "scope", "scope_id": scope_id, "counts": counts}
    head = conn.execute(
        select(memory_heads.c.revision, memory_heads.c.updated_at).where(
            memory_heads.c.scope_id == scope_id
        )
    ).first()
    if head is not None:
        yield {
            "type": "memory_head",
            "scope_id": scope_id,
            "revision": head.revision,
            "updated_at": head.updated_at,
        }
        yield from _memory_versions(conn, scope_id)
    yield from _artifact_revisions(conn, scope_id)
    heads = conn.execute(
        select(
            artifact_heads.c.family,
            artifact_heads.c.artifact_id,
            artifact_heads.c.revision,
            artifact_heads.c.updated_at,
        ).where(artifact_heads.c.scope_id == scope_id)
    ).all()
    for row in sorted(heads, key=lambda r: (r.family, r.artifact_id.encode("utf-8"))):
        yield {
            "type": "artifact_head",
            "scope_id": scope_id,
            "family": row.family,
            "artifact_id": row.artifact_id,
            "revision": row.revision,
            "updated_at": row.updated_at,
        }
    yield from _candidates(conn, scope_id)
    refs = conn.execute(
        select(scope_references).where(scope_references.c.scope_id == scope_id)
    ).first()
    if refs is not None:
        yield {
            "type": "references",
            "scope_id": scope_id,
            "references": json.loads(refs.referenced),
            "version": refs.version,
            "updated_at": refs.updated_at,
        }
    delivery = conn.execute(
        select(handoff_deliveries).where(handoff_deliveries.c.scope_id == scope_id)
    ).first()
    if delivery is not None:
        yield {
            "type": "handoff_delivery",
            "scope_id": scope_id,
            "revision": delivery.revision,
            "queued_at": delivery.queued_at,
        }
    source_head = conn.execute(
        select(source_heads).where(source_heads.c.scope_id == scope_id)
    ).first()
    if source_head is not None:
        yield {
            "type": "source_head",
            "scope_id": scope_id,
            "last_position": source_head.last_position,
            "flush_cursor": source_head.flush_cursor,
            "distill_cursor": source_head.distill_cursor,
        }
        yield from _sources(conn, scope_id)
        yield from _flush_runs(conn, scope_id)


def _memory_versions(conn: Connection, scope_id: str) -> Iterator[dict[str, Any]]:
    r, v = memory_revisions, memory_versions
    query = (
        select(
            r.c.revision,
            r.c.operation,
            r.c.created_at.label("revision_created_at"),
            v.c.entry_id,
            v.c.entry_version_id,
            v.c.version,
            v.c.state,
            v.c.kind,
            v.c.text,
            v.c.tags,
            v.c.reason,
            v.c.source_refs,
            v.c.artifact_refs,
            v.c.content_hash,
            v.c.valid_to,
            v.c.created_at,
        )
        .join(v, (v.c.scope_id == r.c.scope_id) & (v.c.entry_version_id == r.c.entry_version_id))
        .where(r.c.scope_id == scope_id)
        .order_by(r.c.revision)
    )
    for row in conn.execution_options(yield_per=_YIELD).execute(query):
        yield {
            "type": "memory_version",
            "scope_id": scope_id,
            "revision": row[0],
            "operation": row[1],
            "revision_created_at": row[2],
            "entry_id": row[3],
            "entry_version_id": row[4],
            "version": row[5],
            "state": row[6],
            "kind": row[7],
            "text": row[8],
            "tags": _list(row[9]),
            "reason": row[10],
            "source_refs": _refs(SOURCE_REFS, row[11]),
            "artifact_refs": _refs(ARTIFACT_REFS, row[12]),
            "content_hash": row[13],
            "valid_to": row[14],
            "created_at": row[15],
        }


def _artifact_revisions(conn: Connection, scope_id: str) -> Iterator[dict[str, Any]]:
    """In the order they were written (row id): the Experience search returns the newest
    first when it has to cut, so the import keeps that order."""
    a = artifact_revisions
    query = (
        select(
            a.c.family,
            a.c.artifact_id,
            a.c.revision,
            a.c.content,
            a.c.source_refs,
            a.c.artifact_refs,
            a.c.candidate_id,
            a.c.candidate_version,
            a.c.created_at,
        )
        .where(a.c.scope_id == scope_id)
        .order_by(a.c.id)
    )
    for row in conn.execution_options(yield_per=_YIELD).execute(query):
        yield {
            "type": "artifact_revision",
            "scope_id": scope_id,
            "family": row.family,
            "artifact_id": row.artifact_id,
            "revision": row.revision,
            "content": _sorted_object(row.content),
            "source_refs": _refs(SOURCE_REFS, row.source_refs),
            "artifact_refs": _refs(ARTIFACT_REFS, row.artifact_refs),
            "candidate_id": row.candidate_id,
            "candidate_version": row.candidate_version,
            "created_at": row.created_at,
        }


def _candidates(conn: Connection, scope_id: str) -> Iterator[dict[str, Any]]:
    versions: dict[str, list[dict[str, Any]]] = {}
    for row in conn.execute(
        select(candidate_versions)
        .where(candidate_versions.c.scope_id == scope_id)
        .order_by(candidate_versions.c.candidate_id, candidate_versions.c.version)
    ):
        versions.setdefault(row.candidate_id, []).append(
            {
                "version": row.version,
                "proposal": _sorted_object(row.proposal),
                "source_refs": _refs(SOURCE_REFS, row.source_refs),
                "artifact_refs": _refs(ARTIFACT_REFS, row.artifact_refs),
                "reason": row.reason,
                "created_at": row.created_at,
            }
        )
    heads = conn.execute(select(candidates).where(candidates.c.scope_id == scope_id)).all()
    for row in sorted(heads, key=lambda r: (r.created_at, r.candidate_id.encode("utf-8"))):
        yield {
            "type": "candidate",
            "scope_id": scope_id,
            "candidate_id": row.candidate_id,
            "family": row.family,
            "status": row.status,
            "version": row.version,
            "target": _artifact_ref(row.target),
            "result_artifact": _artifact_ref(row.result_artifact),
            "decision_reason": row.decision_reason,
            "proposed_by": row.proposed_by or "agent",
            "signature": row.signature,
            "created_at": row.created_at,
            "updated_at": row.updated_at,
            "versions": sorted(versions.get(row.candidate_id, []), key=lambda v: v["version"]),
        }


def _sources(conn: Connection, scope_id: str) -> Iterator[dict[str, Any]]:
    s = sources
    query = (
        select(
            s.c.position,
            s.c.source_id,
            s.c.name,
            s.c.payload_hash,
            s.c.content,
            s.c.metadata,
            s.c.created_at,
        )
        .where(s.c.scope_id == scope_id)
        .order_by(s.c.position)
    )
    for row in conn.execution_options(yield_per=_YIELD).execute(query):
        yield {
            "type": "source",
            "scope_id": scope_id,
            "position": row.position,
            "source_id": row.source_id,
            "name": row.name,
            "payload_hash": row.payload_hash,
            "content": row.content,
            "metadata": None if row.metadata is None else _sorted_object(row.metadata),
            "created_at": row.created_at,
        }


def _flush_runs(conn: Connection, scope_id: str) -> Iterator[dict[str, Any]]:
    """The flush history (counts only; the console's Activity page), by cursor."""
    f = flush_runs
    query = (
        select(f.c.to_cursor, f.c.from_cursor, f.c.sources, f.c.entries, f.c.created_at)
        .where(f.c.scope_id == scope_id)
        .order_by(f.c.to_cursor)
    )
    for row in conn.execution_options(yield_per=_YIELD).execute(query):
        yield {
            "type": "flush_run",
            "scope_id": scope_id,
            "to_cursor": row.to_cursor,
            "from_cursor": row.from_cursor,
            "sources": row.sources,
            "entries": row.entries,
            "created_at": row.created_at,
        }


def scope_lines(conn: Connection, scope_id: str, counts: dict[str, int]) -> Iterator[bytes]:
    """One scope's section as encoded lines."""
    for record in scope_records(conn, scope_id, counts):
        yield encode(record)


def resolve_scopes(conn: Connection, wanted: Sequence[str] | None) -> list[str]:
    """The scopes to export: all of them, or the named ones (each must exist)."""
    present = list_scopes(conn)
    if not wanted:
        return present
    known = set(present)
    for number, scope in enumerate(wanted, start=1):
        if scope not in known:
            # The caller opened the database itself (no token narrows what it may see), so
            # naming the scopes the database has reveals nothing it could not read anyway.
            raise NotFoundError(
                f"--scope number {number} ('{scope}') names no scope of this database; "
                + _scopes_text(present),
                code="scope_not_found",
                details={"scope_number": number, "scopes_in_database": len(present)},
            )
    return byte_order(wanted)


_SHOWN_SCOPES = 10


def _scopes_text(present: Sequence[str]) -> str:
    """The database's scopes for an error message: the first ten in byte order, then a count."""
    if not present:
        return "it has no scopes yet"
    shown = ", ".join(f"'{scope}'" for scope in present[:_SHOWN_SCOPES])
    more = len(present) - _SHOWN_SCOPES
    return f"it has {len(present)}: {shown}" + (f" and {more} more" if more > 0 else "")


def export(
    db: Database,
    out: BinaryIO,
    scopes: Sequence[str] | None = None,
    progress: Progress | None = None,
) -> ExportSummary:
    """Write the export of ``scopes`` (default: every scope) to ``out``."""
    written = 0
    with db.read() as conn, long_statements(conn):
        chosen = resolve_scopes(conn, scopes)
        per_scope = count_scopes(conn, chosen)
        totals = zero_counts()
        for counts in per_scope.values():
            for key in COUNT_KEYS:
                totals[key] += counts[key]
        line = encode(header(__version__, db.backend, chosen, totals))
        out.write(line)
        written += len(line)
        total = sum(totals[key] for key in PROGRESS_KEYS)
        done = 0
        if progress is not None:
            progress(0, total)
        for scope_id in chosen:
            for record in scope_records(conn, scope_id, per_scope[scope_id]):
                line = encode(record)
                out.write(line)
                written += len(line)
                if record["type"] in _PROGRESS_TYPES:
                    done += 1
                    if progress is not None and done % 1000 == 0:
                        progress(done, total)
        if progress is not None:
            progress(total, total)
    return ExportSummary(chosen, totals, written)


_PROGRESS_TYPES = frozenset(
    {"memory_version", "artifact_revision", "artifact_head", "candidate", "source", "flush_run"}
)
