"""Import: load a ``powercontext.export`` file into a database, all or nothing per file.

Two passes over the file. The first checks every line (:class:`~.records.ScopeReader`) and
every scope against the database: a scope that is not there is to be imported, one that is
there with exactly the same records (the same canonical bytes as exporting it would give) is
skipped — so an import can be run again — and one that is there with anything else refuses
the whole import before anything is written (``import_conflict``). Scopes are never merged.

The second pass writes each new scope in one transaction, with batched multi-row inserts,
and re-reads its section while it does: a file that changed in between is refused, and that
scope's transaction rolled back. Ids, revisions, citations and timestamps are the file's;
only internal row ids are new, assigned in the file's order so the search sees the scope in
the order it was written. The derived full-text index of the new scopes is built in the same
transaction; vectors (the semantic channel) are left to the embedding worker, which finds
every version without one.
"""

from __future__ import annotations

import hashlib
import json
import operator
import os
import sys
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from multiprocessing import get_context
from typing import IO, Any

import msgspec
from sqlalchemy import Connection, Table, func, insert, select

from ..contract.common import json_depth
from ..contract.limits import JSON_MAX_DEPTH
from ..errors import ConflictError
from ..store._records import canonical_json
from ..store._sqlite import sqlite_driver
from ..store.database import Database
from ..store.memory import facet_rows
from ..store.review import experience_search_text
from ..store.schema import (
    artifact_heads,
    artifact_revisions,
    candidate_versions,
    candidates,
    flush_runs,
    handoff_deliveries,
    memory_entries,
    memory_facets,
    memory_heads,
    memory_revisions,
    memory_versions,
    scope_references,
    source_heads,
    sources,
)
from .exporter import PROGRESS_KEYS, SCOPE_TABLES, count_scopes, long_statements, scope_lines
from .records import (
    COUNT_KEYS,
    MAX_LINE_BYTES,
    VERSION,
    ExportFormatError,
    Header,
    ScopeReader,
    check_header,
    encode,
    zero_counts,
)

__all__ = ["ImportSummary", "import_file", "plan_import"]

Analyze = Callable[[str], list[str]]
Progress = Callable[[int, int], None]

#: Rows per multi-row insert. seekdb refuses very large statements (error 11049), and the
#: full-text table has its own smaller batch (store/fulltext.py).
_BATCH = {"sqlite": 5000, "oceanbase": 500}
_MAX_CONFLICTS_SHOWN = 10
_INDEX_CHUNK = 5000  # search documents analysed and added at a time
#: From this many entry versions on, the analysis runs in a worker process (below, the
#: import takes a few seconds at most and a worker gains nothing).
_PARALLEL_MIN = 20_000
#: Scopes an OceanBase import writes at once unless told, each on a connection of its own:
#: the server runs one transaction's statements on one thread (docs/decisions/
#: oceanbase-writes.md, "Several scopes at once").
_OCEANBASE_JOBS = 2
_IMPORT_CACHE_KIB = 256 * 1024  # SQLite page cache while a scope loads (only what it uses)


@dataclass(slots=True)
class ScopeSection:
    """Where one scope's records are in the file, and what pass 1 found about them."""

    index: int
    scope_id: str
    line: int  # of its scope record
    start: int  # byte offset of that line
    end: int = 0  # byte offset after its last line
    raw_digest: str = ""
    counts: dict[str, int] = field(default_factory=zero_counts)
    action: str = "import"  # or "identical"
    version: int = VERSION  # the file's format version


@dataclass(slots=True)
class ImportPlan:
    header: Header
    sections: list[ScopeSection]

    @property
    def new(self) -> list[ScopeSection]:
        return [s for s in self.sections if s.action == "import"]


@dataclass(frozen=True, slots=True)
class ImportSummary:
    scopes: int  # in the file
    imported: int
    identical: int
    counts: dict[str, int]  # of the imported scopes
    dry_run: bool = False


# -- reading -----------------------------------------------------------------------------------


def _read_at(handle: IO[bytes], offset: int, size: int) -> bytes:
    """Up to ``size`` bytes from ``offset``. Scopes may be written by several threads at once,
    each reading its own section of the one handle: a seek and its read are one step."""
    with _READ_LOCK:
        handle.seek(offset)
        return handle.read(size)


_READ_LOCK = threading.Lock()
_BLOCK = 1 << 20  # bytes read at a time


def _lines(handle: IO[bytes], start: int, first_line: int) -> Iterator[tuple[int, int, bytes]]:
    """(line number, byte offset, raw line) from ``start``; refuses over-long lines.

    Reads by offset, block by block, so that it never depends on where the handle was left
    (another thread's reader may have moved it)."""
    offset, number, position = start, first_line, start
    pending = b""
    while True:
        block = _read_at(handle, position, _BLOCK)
        position += len(block)
        data = pending + block if pending else block
        cut = 0
        while (newline := data.find(b"\n", cut)) >= 0:
            raw = data[cut : newline + 1]
            if len(raw) > MAX_LINE_BYTES:
                raise _too_long(number)
            yield number, offset, raw
            offset += len(raw)
            number += 1
            cut = newline + 1
        pending = data[cut:]
        if len(pending) > MAX_LINE_BYTES:
            raise _too_long(number)
        if not block:
            if pending:
                yield number, offset, pending
            return


def _too_long(number: int) -> ExportFormatError:
    return ExportFormatError(
        f"line {number}: longer than {MAX_LINE_BYTES:,} bytes", details={"line": number}
    )


def _parse(raw: bytes, number: int) -> Any:
    if raw in (b"\n", b"\r\n"):
        raise ExportFormatError(f"line {number}: an empty line", details={"line": number})
    try:
        record = _DECODE(raw)
    except msgspec.DecodeError as exc:
        # msgspec's message names the problem and a byte offset, never the input itself.
        raise ExportFormatError(
            f"line {number}: not valid JSON ({exc}): a damaged or truncated file",
            details={"line": number},
        ) from None
    except RecursionError:
        raise _too_deep(number) from None
    # Bounded here, well below the interpreter's recursion limit, so that no check or write
    # after this (all of them recursive) can overflow on a line the decoder let through.
    # Counting brackets first keeps the walk off all but lines that could be that deep.
    brackets = raw.count(b"[") + raw.count(b"{")
    if brackets > JSON_MAX_DEPTH and json_depth(record, JSON_MAX_DEPTH) > JSON_MAX_DEPTH:
        raise _too_deep(number)
    return record


def _too_deep(number: int) -> ExportFormatError:
    return ExportFormatError(
        f"line {number}: JSON nested more than {JSON_MAX_DEPTH} levels deep: not an export "
        "this runtime wrote",
        details={"line": number},
    )


#: msgspec: about four times faster than ``json.loads`` on these lines, and stricter (a lone
#: surrogate escape or invalid UTF-8 is an error, not a string that cannot be stored).
_DECODE = msgspec.json.Decoder().decode


def plan_import(handle: IO[bytes], progress: Progress | None = None) -> ImportPlan:
    """Pass 1: check the whole file; raises :class:`ExportFormatError` at the first fault."""
    lines = _lines(handle, 0, 1)
    first = next(lines, None)
    if first is None:
        raise ExportFormatError("line 1: the file is empty", details={"line": 1})
    head = check_header(_parse(first[2], 1))
    total = sum(head.counts[key] for key in PROGRESS_KEYS)
    sections: list[ScopeSection] = []
    reader: ScopeReader | None = None
    digest = hashlib.sha256()
    done = 0
    number = 1
    end = len(first[2])
    for number, offset, raw in lines:
        end = offset + len(raw)
        record = _parse(raw, number)
        if isinstance(record, dict) and record.get("type") == "scope":
            if reader is not None:
                _close(reader, sections[-1], digest, number, offset)
            index = len(sections)
            if index >= len(head.scopes) or record.get("scope_id") != head.scopes[index]:
                raise ExportFormatError(
                    f"line {number}: the scopes' sections must follow the header's list",
                    details={"line": number, "field": "scope_id"},
                )
            sections.append(
                ScopeSection(index, head.scopes[index], number, offset, version=head.version)
            )
            reader = ScopeReader(head.scopes[index], head.version)
            digest = hashlib.sha256()
        elif reader is None:
            raise ExportFormatError(
                f"line {number}: a scope's section starts with its scope record",
                details={"line": number, "field": "type"},
            )
        reader.read(record, number)
        digest.update(raw)
        if record["type"] in _PROGRESS_TYPES:
            done += 1
            if progress is not None and done % 1000 == 0:
                progress(done, total)
    if reader is not None:
        _close(reader, sections[-1], digest, number + 1, end)
    if len(sections) != len(head.scopes):
        raise ExportFormatError(
            f"line {number + 1}: the file ends before the header's last scope (a truncated file)",
            details={"line": number + 1},
        )
    totals = zero_counts()
    for section in sections:
        for key in COUNT_KEYS:
            totals[key] += section.counts[key]
    if totals != head.counts:
        raise ExportFormatError(
            "line 1: the header's counts do not match the file's records",
            details={"line": 1, "field": "counts"},
        )
    if progress is not None:
        progress(total, total)
    return ImportPlan(head, sections)


_PROGRESS_TYPES = frozenset(
    {"memory_version", "artifact_revision", "artifact_head", "candidate", "source", "flush_run"}
)


def _close(
    reader: ScopeReader, section: ScopeSection, digest: Any, next_line: int, end: int
) -> None:
    reader.finish(next_line)
    section.end = end
    section.raw_digest = digest.hexdigest()
    section.counts = dict(reader.counts)


def _raw_records(
    handle: IO[bytes], section: ScopeSection
) -> Iterator[tuple[int, bytes, dict[str, Any]]]:
    """The section's lines as parsed, unchecked: for pass 2, which compares their digest."""
    for number, offset, raw in _lines(handle, section.start, section.line):
        if offset >= section.end:
            return
        record = _parse(raw, number)
        if not isinstance(record, dict):
            raise _file_changed(section)
        yield number, raw, record


def _unchanged(handle: IO[bytes], section: ScopeSection) -> bool:
    digest = hashlib.sha256()
    for _, offset, raw in _lines(handle, section.start, section.line):
        if offset >= section.end:
            break
        digest.update(raw)
    return digest.hexdigest() == section.raw_digest


def _file_changed(section: ScopeSection) -> ExportFormatError:
    return ExportFormatError(
        f"line {section.line}: the file changed while it was being imported",
        code="import_file_changed",
        details={"line": section.line},
    )


def _section_records(
    handle: IO[bytes], section: ScopeSection
) -> Iterator[tuple[int, dict[str, Any]]]:
    """The section's canonical records, checked again, then its raw digest compared."""
    reader = ScopeReader(section.scope_id, section.version)
    digest = hashlib.sha256()
    last = section.line
    for number, offset, raw in _lines(handle, section.start, section.line):
        if offset >= section.end:
            break
        digest.update(raw)
        last = number
        yield number, reader.read(_parse(raw, number), number)
    reader.finish(last + 1)
    if digest.hexdigest() != section.raw_digest:
        raise _file_changed(section)


# -- checking against the database -------------------------------------------------------------


def _existing(conn: Connection) -> set[str]:
    found: set[str] = set()
    for table in SCOPE_TABLES:
        found.update(row[0] for row in conn.execute(select(table.c.scope_id).distinct()))
    return found


def _scope_exists(conn: Connection, scope_id: str) -> bool:
    return any(
        conn.execute(select(table.c.scope_id).where(table.c.scope_id == scope_id).limit(1)).first()
        for table in SCOPE_TABLES
    )


def _stored_like_file(
    conn: Connection, handle: IO[bytes], section: ScopeSection, counts: dict[str, int]
) -> bool:
    """Whether exporting the stored scope gives exactly the section's canonical records."""
    ours = hashlib.sha256()
    for line in scope_lines(conn, section.scope_id, counts):
        ours.update(line)
    theirs = hashlib.sha256()
    for _, record in _section_records(handle, section):
        theirs.update(encode(record))
    return ours.digest() == theirs.digest()


def mismatched_sections(
    db: Database, handle: IO[bytes], plan: ImportPlan, progress: Progress | None = None
) -> list[ScopeSection]:
    """The file's scopes whose stored records differ from the file's (after an import: none),
    compared as :func:`check_against` compares them, in one read snapshot."""
    wrong = []
    with db.read() as conn, long_statements(conn):
        present = _existing(conn)
        stored = count_scopes(conn, [s.scope_id for s in plan.sections if s.scope_id in present])
        for done, section in enumerate(plan.sections, start=1):
            if section.scope_id not in present or not _stored_like_file(
                conn, handle, section, stored[section.scope_id]
            ):
                wrong.append(section)
            if progress is not None:
                progress(done, len(plan.sections))
    return wrong


def check_against(db: Database, handle: IO[bytes], plan: ImportPlan) -> None:
    """Mark the scopes already present identically; refuse if any is present otherwise."""
    conflicts: list[ScopeSection] = []
    with db.read() as conn, long_statements(conn):
        present = _existing(conn)
        there = [s for s in plan.sections if s.scope_id in present]
        stored = count_scopes(conn, [s.scope_id for s in there])
        for section in there:
            if _stored_like_file(conn, handle, section, stored[section.scope_id]):
                section.action = "identical"
            else:
                conflicts.append(section)
    if conflicts:
        shown = [{"scope_index": s.index, "line": s.line} for s in conflicts]
        first = conflicts[0]
        raise ConflictError(
            f"{len(conflicts)} of the file's scopes already exist in this database with other "
            f"content (the first: scope number {first.index + 1}, line {first.line}); "
            "import does not merge scopes, so nothing was written",
            code="import_conflict",
            details={"conflicts": shown[:_MAX_CONFLICTS_SHOWN], "count": len(conflicts)},
        )


# -- writing -----------------------------------------------------------------------------------


class _Rows:
    """Rows for one table, inserted in batches straight through the driver's ``executemany``
    (SQLAlchemy's per-row parameter processing cost a third of a SQLite import; on OceanBase
    this path and the full-text rows' took a quarter off the importing process's CPU). On
    OceanBase PyMySQL sends each batch as one multi-row ``INSERT``, as SQLAlchemy did; the
    batch stays under the server's statement memory limit."""

    def __init__(self, conn: Connection, table: Table, batch: int) -> None:
        self._conn = conn
        self._columns = [column.name for column in table.columns]
        mark = "?" if conn.dialect.name == "sqlite" else "%s"
        marks = ", ".join(mark for _ in self._columns)
        self._sql = f"INSERT INTO {table.name} ({', '.join(self._columns)}) VALUES ({marks})"
        self._tuple = operator.itemgetter(*self._columns)
        self._batch = batch
        self._rows: list[dict[str, Any]] = []

    def add(self, row: dict[str, Any]) -> None:
        self._rows.append(row)
        if len(self._rows) >= self._batch:
            self.flush()

    def flush(self) -> None:
        if not self._rows:
            return
        if self._conn.dialect.name == "sqlite":
            sqlite_driver(self._conn).executemany(self._sql, map(self._tuple, self._rows))
        else:
            with self._conn.connection.driver_connection.cursor() as cursor:  # type: ignore[union-attr]
                cursor.executemany(self._sql, list(map(self._tuple, self._rows)))
        self._rows = []


def _analyse_joined(analyze: Analyze, texts: list[str]) -> list[str]:
    """Each text's terms joined by spaces (one short string per document crosses the process
    boundary, not a list of thirty)."""
    return [" ".join(analyze(text)) for text in texts]


def _can_fork() -> bool:
    """Whether a worker can be forked safely, and would help.

    Forked, not spawned: a spawned worker re-imports the ``__main__`` module of whatever
    program called the import, and runs it again if it has no ``if __name__ ==
    "__main__"`` guard. A fork copies this process instead, which is safe only while it runs
    one thread (no lock can be held by a thread the child does not have) and on Linux (macOS
    system libraries are not fork-safe). The child never touches the database connections it
    inherits: it only runs the analyser, and leaves through ``os._exit``.
    """
    return (
        sys.platform.startswith("linux")
        and (os.cpu_count() or 1) > 1
        and threading.active_count() == 1
    )


class _Analyser:
    """The search texts of a load, analysed in a worker process while this one parses and
    writes rows; in this process when the load is small or no worker can be had.

    The analyser is the largest single cost of an import (≈ 30 µs an entry, a quarter of it)
    and needs nothing from the database, so on a machine with two cores it runs beside the
    inserts instead of before them. Texts are sent in chunks as their versions stream past;
    a version that a later one supersedes is analysed for nothing, which costs only revisions.
    """

    def __init__(self, analyze: Analyze, expected: int) -> None:
        self._analyze = analyze
        self._pool: Any = None
        if expected >= _PARALLEL_MIN and _can_fork():
            try:
                self._pool = ProcessPoolExecutor(1, mp_context=get_context("fork"))
                # The pool forks at its first task: make that now, while this process still
                # runs one thread (scopes written at once each have a thread).
                self._pool.submit(int).result()
            except (OSError, ValueError, RuntimeError):  # no processes to be had: analyse here
                self._pool = None

    def submit(self, texts: list[str]) -> Callable[[], list[str]]:
        """Start analysing ``texts``; the returned callable gives their joined terms."""
        if self._pool is not None:
            try:
                future = self._pool.submit(_analyse_joined, self._analyze, texts)
            except (OSError, RuntimeError):  # the worker died: analyse here from now on
                self._pool = None
            else:
                return future.result
        return lambda: _analyse_joined(self._analyze, texts)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None


@dataclass(slots=True)
class _Current:
    """An entry's current version while its records stream past."""

    created_revision: int
    version_id: str
    version: int
    state: str
    content_hash: str
    rowid: int
    active: bool
    kind: str
    tags: list[str]


def _next_id(conn: Connection, table: Table) -> int:
    return int(conn.execute(select(func.max(table.c.id))).scalar() or 0) + 1


#: The tables whose row ids an import assigns itself, with the count that sizes each block.
_ID_TABLES = ((memory_versions, "memory_versions"), (artifact_revisions, "artifact_revisions"))
#: OceanBase: ids left free between what is committed and an import's block, for rows that
#: running daemons had numbered but not committed when the block was taken.
_LIVE_GAP = 10_000


class _RowIds:
    """Internal row ids for the scopes being written: a block per scope and table, in which
    the scope's rows get ascending ids in the file's order.

    SQLite has one writer: inside a scope's transaction nothing else writes, so the block
    starts at ``max(id) + 1``. OceanBase serves daemons while it imports, and a daemon's
    insert takes the table's next ``AUTO_INCREMENT`` value, which the server moves past every
    explicit id the moment it is inserted, committed or not: once a scope's first batch was
    in, a daemon's next row took the id its second batch needed, and the scope failed
    (``Duplicate entry``), again on every retry. So on OceanBase all the scopes' blocks are
    taken at once, ``_LIVE_GAP`` above the committed rows, and the counter is moved past them
    (``ALTER TABLE … AUTO_INCREMENT``, ignored by the server if already beyond) before any
    is written; daemons number their rows after it. Scopes written at once take disjoint
    blocks, and a retried scope a fresh one (a daemon's row may have landed in its first).
    """

    def __init__(self, db: Database, sections: list[ScopeSection]) -> None:
        self._db = db
        self._lock = threading.Lock()
        self._blocks: dict[tuple[int, str], range] = {}
        self._end: dict[str, int] = {}
        if db.backend != "oceanbase":
            return
        moved: list[Table] = []
        with db.read() as conn:
            for table, key in _ID_TABLES:
                start = first = _next_id(conn, table) + _LIVE_GAP
                for section in sections:
                    count = section.counts[key]
                    self._blocks[section.index, table.name] = range(first, first + count)
                    first += count
                self._end[table.name] = first
                if first > start:  # rows to import into this table
                    moved.append(table)
        for table in moved:
            self._move_counter(table, self._end[table.name])

    def blocks(self, conn: Connection, section: ScopeSection) -> tuple[range, range]:
        """The scope's blocks for this attempt: its versions', its artifact revisions'."""
        versions, artifacts = (self._block(conn, section, table, key) for table, key in _ID_TABLES)
        return versions, artifacts

    def _block(self, conn: Connection, section: ScopeSection, table: Table, key: str) -> range:
        count = section.counts[key]
        if self._db.backend == "sqlite":
            first = _next_id(conn, table)
            return range(first, first + count)
        with self._lock:
            block = self._blocks.pop((section.index, table.name), None)
            if block is not None:
                return block
            if count == 0:
                return range(0)
            # A retry: after everything committed and everything handed out.
            first = max(self._end[table.name], _next_id(conn, table) + _LIVE_GAP)
            self._end[table.name] = first + count
        self._move_counter(table, first + count)
        return range(first, first + count)

    def _move_counter(self, table: Table, end: int) -> None:
        statement = f"ALTER TABLE {table.name} AUTO_INCREMENT = {int(end)}"
        self._db.maintain(lambda conn: conn.exec_driver_sql(statement))


class _Overrun(Exception):
    """More rows than pass 1 counted: the file changed (the caller says so)."""


class _ScopeWriter:
    """Writes one scope's records inside the caller's transaction."""

    def __init__(
        self,
        db: Database,
        conn: Connection,
        analyze: Analyze,
        analyser: _Analyser,
        ids: tuple[range, range],
    ) -> None:
        batch = _BATCH[db.backend]
        self._db = db
        self._conn = conn
        self._analyze = analyze
        self._analyser = analyser
        # Texts of active versions not sent to the analyser yet, and the chunks sent:
        # (row ids, their joined terms when ready).
        self._texts: list[tuple[int, str]] = []
        self._chunks: list[tuple[list[int], Callable[[], list[str]]]] = []
        self._versions = _Rows(conn, memory_versions, batch)
        self._revisions = _Rows(conn, memory_revisions, batch)
        self._artifacts = _Rows(conn, artifact_revisions, batch)
        self._sources = _Rows(conn, sources, batch)
        self._flush_runs = _Rows(conn, flush_runs, batch)
        self._version_ids, self._artifact_ids = (iter(block) for block in ids)
        self._entries: dict[str, _Current] = {}
        self._experience: dict[str, tuple[int, dict[str, str]]] = {}
        self.scope_id = ""

    def write(self, record: dict[str, Any]) -> None:
        kind = record["type"]
        getattr(self, "_" + kind)(record)

    def _scope(self, r: dict[str, Any]) -> None:
        self.scope_id = r["scope_id"]

    def _memory_head(self, r: dict[str, Any]) -> None:
        self._conn.execute(
            insert(memory_heads).values(
                scope_id=r["scope_id"], revision=r["revision"], updated_at=r["updated_at"]
            )
        )

    def _memory_version(self, r: dict[str, Any]) -> None:
        rowid = _take(self._version_ids)
        revision = r["revision"]
        tags = r["tags"]
        self._versions.add(
            {
                "id": rowid,
                "scope_id": r["scope_id"],
                "entry_id": r["entry_id"],
                "entry_version_id": r["entry_version_id"],
                "version": r["version"],
                "kind": r["kind"],
                "text": r["text"],
                "tags": canonical_json(tags) if tags else "[]",
                "reason": r["reason"],
                "source_refs": _refs_json(r["source_refs"]),
                "artifact_refs": _refs_json(r["artifact_refs"]),
                "content_hash": r["content_hash"],
                "state": r["state"],
                "valid_from": revision,
                "valid_to": r["valid_to"],
                "created_at": r["created_at"],
            }
        )
        self._revisions.add(
            {
                "scope_id": r["scope_id"],
                "revision": revision,
                "operation": r["operation"],
                "entry_id": r["entry_id"],
                "entry_version_id": r["entry_version_id"],
                "created_at": r["revision_created_at"],
            }
        )
        active = r["state"] == "active"
        previous = self._entries.get(r["entry_id"])
        self._entries[r["entry_id"]] = _Current(
            revision if previous is None else previous.created_revision,
            r["entry_version_id"],
            r["version"],
            r["state"],
            r["content_hash"],
            rowid,
            active,
            r["kind"],
            list(tags or []),
        )
        if active:
            # What the search indexes (store/memory.py ``_search_text``).
            self._texts.append((rowid, r["text"] + ("\n" + " ".join(tags) if tags else "")))
            if len(self._texts) >= _INDEX_CHUNK:
                self._send()

    def _send(self) -> None:
        rowids = [rowid for rowid, _ in self._texts]
        self._chunks.append((rowids, self._analyser.submit([text for _, text in self._texts])))
        self._texts = []

    def _artifact_revision(self, r: dict[str, Any]) -> None:
        rowid = _take(self._artifact_ids)
        self._artifacts.add(
            {
                "id": rowid,
                "scope_id": r["scope_id"],
                "family": r["family"],
                "artifact_id": r["artifact_id"],
                "revision": r["revision"],
                "content": canonical_json(r["content"]),
                "source_refs": _refs_json(r["source_refs"]),
                "artifact_refs": _refs_json(r["artifact_refs"]),
                "candidate_id": r["candidate_id"],
                "candidate_version": r["candidate_version"],
                "created_at": r["created_at"],
            }
        )
        if r["family"] == "experience":
            self._experience[r["artifact_id"]] = (rowid, r["content"])

    def _artifact_head(self, r: dict[str, Any]) -> None:
        self._conn.execute(
            insert(artifact_heads).values(
                scope_id=r["scope_id"],
                family=r["family"],
                artifact_id=r["artifact_id"],
                revision=r["revision"],
                updated_at=r["updated_at"],
            )
        )

    def _candidate(self, r: dict[str, Any]) -> None:
        self._conn.execute(
            insert(candidates).values(
                scope_id=r["scope_id"],
                candidate_id=r["candidate_id"],
                family=r["family"],
                status=r["status"],
                version=r["version"],
                target=None if r["target"] is None else canonical_json(r["target"]),
                result_artifact=None
                if r["result_artifact"] is None
                else canonical_json(r["result_artifact"]),
                decision_reason=r["decision_reason"],
                # Absent from a version 1-2 file (written as parsed: records.ADDED_FIELDS).
                proposed_by=r.get("proposed_by", "agent"),
                signature=r.get("signature"),
                created_at=r["created_at"],
                updated_at=r["updated_at"],
            )
        )
        self._conn.execute(
            insert(candidate_versions),
            [
                {
                    "scope_id": r["scope_id"],
                    "candidate_id": r["candidate_id"],
                    "version": v["version"],
                    "proposal": canonical_json(v["proposal"]),
                    "source_refs": _refs_json(v["source_refs"]),
                    "artifact_refs": _refs_json(v["artifact_refs"]),
                    "reason": v["reason"],
                    "created_at": v["created_at"],
                }
                for v in r["versions"]
            ],
        )

    def _references(self, r: dict[str, Any]) -> None:
        self._conn.execute(
            insert(scope_references).values(
                scope_id=r["scope_id"],
                referenced=json.dumps(r["references"]),  # as store/bootstrap.py writes it
                version=r["version"],
                updated_at=r["updated_at"],
            )
        )

    def _handoff_delivery(self, r: dict[str, Any]) -> None:
        self._conn.execute(
            insert(handoff_deliveries).values(
                scope_id=r["scope_id"], revision=r["revision"], queued_at=r["queued_at"]
            )
        )

    def _source_head(self, r: dict[str, Any]) -> None:
        self._conn.execute(
            insert(source_heads).values(
                scope_id=r["scope_id"],
                last_position=r["last_position"],
                flush_cursor=r["flush_cursor"],
                distill_cursor=r.get("distill_cursor"),  # absent before version 3
            )
        )

    def _source(self, r: dict[str, Any]) -> None:
        self._sources.add(
            {
                "scope_id": r["scope_id"],
                "position": r["position"],
                "source_id": r["source_id"],
                "name": r["name"],
                "payload_hash": r["payload_hash"],
                "content": r["content"],
                "metadata": None if r["metadata"] is None else canonical_json(r["metadata"]),
                "created_at": r["created_at"],
            }
        )

    def _flush_run(self, r: dict[str, Any]) -> None:
        self._flush_runs.add(
            {
                "scope_id": r["scope_id"],
                "to_cursor": r["to_cursor"],
                "from_cursor": r["from_cursor"],
                "sources": r["sources"],
                "entries": r["entries"],
                "created_at": r["created_at"],
            }
        )

    def finish(self) -> None:
        """The rest of the buffered rows, the entries' pointers and the search documents."""
        rows_of = (
            self._versions,
            self._revisions,
            self._artifacts,
            self._sources,
            self._flush_runs,
        )
        for rows in rows_of:
            rows.flush()
        if self._texts:
            self._send()
        entries = _Rows(self._conn, memory_entries, _BATCH[self._db.backend])
        # Derived like the search documents: the list filters' and bootstrap's facet rows.
        facets = _Rows(self._conn, memory_facets, _BATCH[self._db.backend])
        indexed: set[int] = set()
        for entry_id, current in self._entries.items():
            for row in facet_rows(
                self.scope_id,
                entry_id,
                current.created_revision,
                current.kind,
                current.tags,
                current.state,
            ):
                facets.add(row)
            entries.add(
                {
                    "scope_id": self.scope_id,
                    "entry_id": entry_id,
                    "created_revision": current.created_revision,
                    "current_version_id": current.version_id,
                    "current_version": current.version,
                    "state": current.state,
                    "content_hash": current.content_hash,
                }
            )
            if current.active:
                indexed.add(current.rowid)
        entries.flush()
        facets.flush()
        fulltext = self._db.fulltext
        # Chunk by chunk, in row id order (versions were sent as they came): only the versions
        # still current are indexed. A chunk's terms are joined strings until here, so a 100k
        # scope's analysed terms never exist as lists all at once. The term frequencies are
        # summed over the chunks and written once: per chunk, the scope's common terms were
        # upserted again by every chunk.
        counts: Counter[str] = Counter()
        documents_indexed = 0
        for rowids, terms in self._chunks:
            documents = [
                (rowid, joined.split(" ") if joined else [])
                for rowid, joined in zip(rowids, terms(), strict=True)
                if rowid in indexed
            ]
            fulltext.add_many(self._conn, "memory", self.scope_id, documents, counts)
            documents_indexed += len(documents)
        self._chunks = []
        fulltext.add_frequencies(self._conn, "memory", self.scope_id, counts, documents_indexed)
        experience = sorted(
            (rowid, self._analyze(experience_search_text(content)))
            for rowid, content in self._experience.values()
        )
        fulltext.add_many(self._conn, "experience", self.scope_id, experience)


def _take(ids: Iterator[int]) -> int:
    rowid = next(ids, None)
    if rowid is None:
        raise _Overrun
    return rowid


def _refs_json(refs: list[Any]) -> str:
    """Evidence as the stores write it (``dump_refs``: the models' field order)."""
    return "[]" if not refs else json.dumps(refs, separators=(",", ":"))


@contextmanager
def _large_cache(conn: Connection) -> Iterator[None]:
    """On SQLite, a page cache large enough for a big scope's index pages while it loads.

    Ids are random, so each new row lands on a random page of each unique index; with the
    default 2 MiB cache a 100k-entry scope re-read pages for most of its rows (the import
    slowed from 9k to 6k entries/s between 20k and 100k entries). The connection's own size
    is restored afterwards: it goes back to the pool.
    """
    if conn.dialect.name != "sqlite":
        yield
        return
    driver = sqlite_driver(conn)
    (before,) = driver.execute("PRAGMA cache_size").fetchone()
    driver.execute(f"PRAGMA cache_size=-{_IMPORT_CACHE_KIB}")
    try:
        yield
    finally:
        driver.execute(f"PRAGMA cache_size={int(before)}")


def _write_section(
    db: Database,
    handle: IO[bytes],
    section: ScopeSection,
    analyze: Analyze,
    analyser: _Analyser,
    ids: _RowIds,
    progress: Callable[[int], None],
) -> None:
    reported = [0]

    def advance(step: int) -> None:
        reported[0] += step
        progress(step)

    def work(conn: Connection) -> None:
        advance(-reported[0])  # a retried attempt starts its count again
        if _scope_exists(conn, section.scope_id):
            raise ConflictError(
                f"scope number {section.index + 1} (line {section.line}) was created in this "
                "database while the import ran; the import stopped there: the scopes it had "
                "written stay, and running it again skips them",
                code="import_conflict",
                details={"conflicts": [{"scope_index": section.index, "line": section.line}]},
            )
        writer = _ScopeWriter(db, conn, analyze, analyser, ids.blocks(conn, section))
        done = 0
        digest = hashlib.sha256()
        try:
            with _large_cache(conn), long_statements(conn):
                # Pass 1 checked these very bytes (the digest below proves it), so the records
                # are written as parsed, without checking each again.
                for _, raw, record in _raw_records(handle, section):
                    digest.update(raw)
                    writer.write(record)
                    if record["type"] in _PROGRESS_TYPES:
                        done += 1
                        if done % 1000 == 0:
                            advance(1000)
                writer.finish()
            changed = digest.hexdigest() != section.raw_digest
        except Exception:
            # A record pass 1 would have refused can only come from a file that changed since;
            # anything else is re-raised as it is.
            if not _unchanged(handle, section):
                raise _file_changed(section) from None
            raise
        if changed:
            raise _file_changed(section)  # rolls the scope's transaction back
        advance(done % 1000)

    db.write(work)


def summarize(plan: ImportPlan, *, dry_run: bool = False) -> ImportSummary:
    new = plan.new
    counts = zero_counts()
    for section in new:
        for key in COUNT_KEYS:
            counts[key] += section.counts[key]
    return ImportSummary(
        scopes=len(plan.sections),
        imported=len(new),
        identical=len(plan.sections) - len(new),
        counts=counts,
        dry_run=dry_run,
    )


def write_plan(
    db: Database,
    handle: IO[bytes],
    plan: ImportPlan,
    analyze: Analyze,
    progress: Progress | None = None,
    *,
    jobs: int | None = None,
) -> None:
    """Pass 2: write the plan's new scopes, one transaction each, ``jobs`` scopes at a time
    on OceanBase (default ``_OCEANBASE_JOBS``)."""
    new = plan.new
    total = sum(map(_size, new))
    lock = threading.Lock()
    written = [0]

    def advance(step: int) -> None:
        with lock:
            written[0] += step
            if progress is not None and step:
                progress(written[0], total)

    if progress is not None:
        progress(0, total)
    versions = sum(section.counts["memory_versions"] for section in new)
    # SQLite has one writer at a time: a second scope would only wait for the first, and
    # time out behind a large one.
    workers = 1 if db.backend == "sqlite" else min(jobs or _OCEANBASE_JOBS, len(new))
    # Started before any writer thread: the analyser's worker is forked, which is safe only
    # while this process runs one thread.
    analyser = _Analyser(analyze, versions)
    ids = _RowIds(db, new)

    def write(section: ScopeSection) -> None:
        _write_section(db, handle, section, analyze, analyser, ids, advance)

    try:
        if workers <= 1:
            for section in new:
                write(section)
        else:
            _write_concurrently(write, new, workers)
    finally:
        analyser.close()


def _write_concurrently(
    write: Callable[[ScopeSection], None], sections: list[ScopeSection], workers: int
) -> None:
    """The largest scopes first (a large one started last would finish alone), ``workers``
    at a time. After a failure no further scope starts; the ones under way finish (each is
    whole or absent either way), and the failure of the earliest scope in the file is raised.
    """
    failed = threading.Event()

    def attempt(section: ScopeSection) -> None:
        if failed.is_set():
            return
        try:
            write(section)
        except BaseException:
            failed.set()
            raise

    order = sorted(sections, key=lambda s: (-_size(s), s.index))
    errors: list[tuple[int, BaseException]] = []
    with ThreadPoolExecutor(workers, thread_name_prefix="powercontext-import") as pool:
        futures = {pool.submit(attempt, section): section for section in order}
        for future, section in futures.items():
            error = future.exception()
            if error is not None:
                errors.append((section.index, error))
    if errors:
        raise min(errors, key=operator.itemgetter(0))[1]


def _size(section: ScopeSection) -> int:
    return sum(section.counts[key] for key in PROGRESS_KEYS)


def import_file(
    db: Database,
    handle: IO[bytes],
    analyze: Analyze,
    *,
    dry_run: bool = False,
    check_progress: Progress | None = None,
    write_progress: Progress | None = None,
    jobs: int | None = None,
) -> ImportSummary:
    """Check ``handle`` (a seekable binary file), then import its new scopes."""
    plan = plan_import(handle, check_progress)
    check_against(db, handle, plan)
    if not dry_run:
        write_plan(db, handle, plan, analyze, write_progress, jobs=jobs)
    return summarize(plan, dry_run=dry_run)
