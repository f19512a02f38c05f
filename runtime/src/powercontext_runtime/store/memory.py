"""Memory: revisions, entries and immutable entry versions (spec 02 § Memory).

Write cost is independent of the number of entries: a write inserts one version row, closes at
most one predecessor (``valid_to``), inserts one revision row, moves the head and updates the
derived search rows of that one entry. Version V of entry E was in revision R exactly when
``valid_from <= R < coalesce(valid_to, ∞)``, which is what makes exact re-reads possible
after the head has moved on.

Retiring writes a new (inactive) version so that "the state as it was in revision R" is always
one version row.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from pydantic import TypeAdapter
from sqlalchemy import (
    Connection,
    Row,
    and_,
    bindparam,
    delete,
    exists,
    func,
    insert,
    or_,
    select,
    text,
    update,
)

from ..contract.common import ArtifactRef, MemoryCitation, MemoryRef, SourceRef
from ..contract.limits import MAX_EVIDENCE_REFS
from ..contract.memory import (
    ListMemoryChangesRequest,
    ListMemoryEntriesRequest,
    ListMemoryEntryVersionsRequest,
    MemoryChange,
    MemoryChanges,
    MemoryEntry,
    MemoryEntryHistory,
    MemoryEntryList,
    MemoryEntryVersion,
    MemoryWriteResult,
    RememberMemoryRequest,
    RetireMemoryEntryRequest,
    ReviseMemoryEntryRequest,
    SearchHit,
)
from ..errors import ConflictError, InvalidRequestError, NotFoundError
from ..search import scoring
from ._records import (
    ARTIFACT_REFS,
    MAX_STORED_INT,
    SOURCE_REFS,
    canonical_json,
    decode_cursor,
    dump_refs,
    encode_cursor,
    iso_time,
    json_listed,
    new_id,
    sha256_hex,
)
from ._sqlite import sqlite_driver
from .database import Database, now_ms
from .fulltext import read_frequencies
from .schema import (
    memory_entries,
    memory_facets,
    memory_heads,
    memory_revisions,
    memory_versions,
)
from .tracing import LexicalTrace, trace_lexical

__all__ = ["MemoryStore", "SearchResult", "facet_rows"]

# Largest value a BIGINT/SQLite INTEGER column holds: a revision beyond it cannot exist, and
# binding a larger Python int fails in the driver (a 500 instead of an empty answer).
_v = memory_versions
_e = memory_entries
_f = memory_facets
_FACET_BATCH = 200  # rows per insert when rebuilding (OceanBase's statement size limit)
_REINDEX_PAGE = 2_000  # versions read and indexed at a time by :meth:`MemoryStore.reindex`

Analyze = Callable[[str], list[str]]

# Statements of the prompt-time read path, built once: constructing a ``select()`` costs more
# than running it (≈ 90 µs against ≈ 20 µs for a prebuilt statement).
_HEAD = select(memory_heads.c.revision).where(memory_heads.c.scope_id == bindparam("scope_id"))
_VERSIONS_BY_ID = text(
    "SELECT v.id, v.scope_id, v.entry_id, v.entry_version_id, v.text FROM "
    + json_listed("ids", "BIGINT")
    + " JOIN memory_versions v ON v.id = listed.value"
)
# The same two reads as fixed SQL for the SQLite driver cursor (see ``sqlite_driver``).
_SQLITE_HEAD = "SELECT revision FROM memory_heads WHERE scope_id = ?"
_SQLITE_VERSIONS_BY_ID = (
    "SELECT id, scope_id, entry_id, entry_version_id, text FROM memory_versions"
    " WHERE id IN (SELECT value FROM json_each(?))"
)
_VERSION_ROWIDS = select(_v.c.id).where(
    _v.c.scope_id == bindparam("scope_id"),
    _v.c.entry_version_id.in_(bindparam("version_ids", expanding=True)),
)


class _VersionRow(NamedTuple):
    """A version row just inserted, with the attributes of a ``memory_versions`` ``Row``."""

    id: int
    scope_id: str
    entry_id: str
    entry_version_id: str
    version: int
    kind: str
    text: str
    tags: str
    reason: str | None
    source_refs: str
    artifact_refs: str
    content_hash: str
    state: str
    valid_from: int
    valid_to: int | None
    created_at: int


assert _VersionRow._fields == tuple(column.name for column in _v.columns)


def content_hash(kind: str, text: str, tags: Sequence[str]) -> str:
    return sha256_hex("memory-entry-v1", kind, text, list(tags))


class FoundEntry(NamedTuple):
    """One admitted hit: the entry version current at the searched head, and its score."""

    entry_id: str
    entry_version_id: str
    text: str
    score: float
    #: Which channel found it: ``fts``, or with the semantic channel ``vector``/``fts+vector``.
    matched_by: str = "fts"
    #: How much of the query the entry answers to, which a pack's relative cutoff compares: the
    #: share of the query's term weight it contains (:class:`~..search.scoring.Ranked`), plus
    #: the cosine's bonus when the semantic channel found it too (0 + bonus: vector only).
    coverage: float = 0.0


class SearchResult(NamedTuple):
    """The head revision searched (0: the scope has no memory) and the admitted hits, best
    first. The store returns the revision once for all hits, so no hit can cite another.
    ``mode``: the search that ran (``fts``; ``hybrid``/``vector`` with the semantic channel)."""

    head: int
    hits: list[FoundEntry]
    mode: str = "fts"

    @property
    def memory(self) -> MemoryRef | None:
        return MemoryRef.at(self.head) if self.head else None

    def search_hits(self) -> list[SearchHit]:
        """The hits as the ``search_memory`` contract shapes them."""
        if not self.hits:
            return []
        ref = MemoryRef.at(self.head)
        return [
            SearchHit(
                citation=MemoryCitation(
                    memory_ref=ref,
                    entry_id=hit.entry_id,
                    entry_version_id=hit.entry_version_id,
                ),
                text=hit.text,
                score=hit.score,
                matched_by=hit.matched_by,  # type: ignore[arg-type]
            )
            for hit in self.hits
        ]


class MemoryStore:
    def __init__(self, db: Database, analyze: Analyze) -> None:
        self._db = db
        self._analyze = analyze

    # -- writes ----------------------------------------------------------------------------

    def remember(self, req: RememberMemoryRequest) -> MemoryWriteResult:
        return self._db.write(lambda conn: self.remember_in(conn, req))

    def remember_in(self, conn: Connection, req: RememberMemoryRequest) -> MemoryWriteResult:
        """``remember`` inside a caller's write transaction (flush commits it with its cursor)."""
        digest = content_hash(req.kind, req.text, req.tags)
        head = self._lock_head(conn, req.scope_id)
        if req.expected_revision is not None and req.expected_revision != head:
            raise ConflictError(
                "the memory head moved; re-read it and retry",
                code="revision_conflict",
                details={"current": _ref_json(head)},
            )
        duplicate = conn.execute(
            select(_e.c.current_version_id)
            .where(
                _e.c.scope_id == req.scope_id,
                _e.c.content_hash == digest,
                _e.c.state == "active",
            )
            .limit(1)
        ).first()
        if duplicate is not None:
            row = self._version_row(conn, req.scope_id, duplicate[0])
            return MemoryWriteResult(memory=MemoryRef.at(head), entry=_entry(row, head))
        revision = head + 1
        entry_id = new_id("mem_ent_")
        row = self._insert_version(
            conn,
            scope_id=req.scope_id,
            entry_id=entry_id,
            version=1,
            kind=req.kind,
            text=req.text,
            tags=req.tags,
            reason=req.reason,
            source_refs=req.source_refs,
            artifact_refs=req.artifact_refs,
            state="active",
            revision=revision,
        )
        conn.execute(
            insert(_e).values(
                scope_id=req.scope_id,
                entry_id=entry_id,
                created_revision=revision,
                current_version_id=row.entry_version_id,
                current_version=1,
                state="active",
                content_hash=digest,
            )
        )
        _add_facets(conn, req.scope_id, entry_id, revision, req.kind, req.tags, "active")
        self._commit_revision(conn, req.scope_id, revision, "remember", row)
        self._db.fulltext.add(
            conn, "memory", req.scope_id, row.id, self._analyze(_search_text(row))
        )
        return MemoryWriteResult(memory=MemoryRef.at(revision), entry=_entry(row, revision))

    def revise(self, req: ReviseMemoryEntryRequest) -> MemoryWriteResult:
        def work(conn: Connection) -> MemoryWriteResult:
            head, current = self._lock_current(conn, req.scope_id, req.citation)
            if current.state != "active":
                raise ConflictError(
                    "the entry is retired and can no longer be revised",
                    code="memory_entry_inactive",
                    details={"current": _citation_json(current, head)},
                )
            kind = req.kind if req.kind is not None else current.kind
            text = req.text if req.text is not None else current.text
            tags = req.tags if req.tags is not None else json.loads(current.tags)
            revision = head + 1
            row = self._insert_version(
                conn,
                scope_id=req.scope_id,
                entry_id=current.entry_id,
                version=current.version + 1,
                kind=kind,
                text=text,
                tags=tags,
                reason=req.reason,
                source_refs=_accumulate(SOURCE_REFS, current.source_refs, req.source_refs),
                artifact_refs=_accumulate(ARTIFACT_REFS, current.artifact_refs, req.artifact_refs),
                state="active",
                revision=revision,
            )
            created = self._supersede(conn, current, row, revision, content_hash(kind, text, tags))
            old_facets = _facet_values(current.kind, json.loads(current.tags))
            new_facets = _facet_values(kind, tags)
            _drop_facets(conn, req.scope_id, current.entry_id, created, old_facets - new_facets)
            _insert_facets(
                conn, req.scope_id, current.entry_id, created, new_facets - old_facets, "active"
            )
            self._commit_revision(conn, req.scope_id, revision, "revise", row)
            self._db.fulltext.remove(conn, "memory", req.scope_id, current.id)
            self._db.fulltext.add(
                conn, "memory", req.scope_id, row.id, self._analyze(_search_text(row))
            )
            return MemoryWriteResult(memory=MemoryRef.at(revision), entry=_entry(row, revision))

        return self._db.write(work)

    def retire(self, req: RetireMemoryEntryRequest) -> MemoryWriteResult:
        def work(conn: Connection) -> MemoryWriteResult:
            head, current = self._lock_current(
                conn, req.scope_id, req.citation, allow_inactive=True
            )
            if current.state != "active":
                return MemoryWriteResult(memory=MemoryRef.at(head), entry=_entry(current, head))
            revision = head + 1
            row = self._insert_version(
                conn,
                scope_id=req.scope_id,
                entry_id=current.entry_id,
                version=current.version + 1,
                kind=current.kind,
                text=current.text,
                tags=json.loads(current.tags),
                reason=req.reason,
                source_refs=SOURCE_REFS.validate_json(current.source_refs),
                artifact_refs=ARTIFACT_REFS.validate_json(current.artifact_refs),
                state="inactive",
                revision=revision,
            )
            created = self._supersede(conn, current, row, revision, current.content_hash)
            facets = _facet_values(current.kind, json.loads(current.tags))
            _set_facet_state(conn, req.scope_id, current.entry_id, created, facets, "inactive")
            self._commit_revision(conn, req.scope_id, revision, "retire", row)
            self._db.fulltext.remove(conn, "memory", req.scope_id, current.id)
            return MemoryWriteResult(memory=MemoryRef.at(revision), entry=_entry(row, revision))

        return self._db.write(work)

    # -- reads -----------------------------------------------------------------------------

    def get(self, scope_id: str, citation: MemoryCitation) -> MemoryEntry:
        revision = citation.memory_ref.revision
        with self._db.read() as conn:
            head = self._head(conn, scope_id)
            row = conn.execute(
                select(_v).where(
                    _v.c.scope_id == scope_id,
                    _v.c.entry_version_id == citation.entry_version_id,
                    _v.c.entry_id == citation.entry_id,
                )
            ).first()
        if (
            row is None
            or revision > head
            or row.valid_from > revision
            or (row.valid_to is not None and revision >= row.valid_to)
        ):
            raise NotFoundError(
                "no such entry version in that memory revision", code="memory_not_found"
            )
        return _entry(row, revision)

    def list(self, req: ListMemoryEntriesRequest) -> MemoryEntryList:
        """A page of the head's entries in creation order, optionally of one state, kind
        and/or tag. Every shape reads an index range in that order (no scan of the scope):
        the entries' order index for any state, else ``memory_facets`` (its key, or its state
        index; the ``all`` facet for a state alone)."""
        after = decode_cursor(req.cursor) if req.cursor else None
        state = req.wanted_state
        if req.tag is not None or req.kind is not None or state != "any":
            facet, value = (
                ("tag", req.tag)
                if req.tag is not None
                else ("kind", req.kind)
                if req.kind is not None
                else ("all", "")
            )
            order = (_f.c.created_revision, _f.c.entry_id)
            query = (
                select(_v, _f.c.created_revision)
                .select_from(_f)
                .join(_e, and_(_e.c.scope_id == _f.c.scope_id, _e.c.entry_id == _f.c.entry_id))
                .join(
                    _v,
                    and_(
                        _v.c.scope_id == _e.c.scope_id,
                        _v.c.entry_version_id == _e.c.current_version_id,
                    ),
                )
                .where(_f.c.scope_id == req.scope_id, _f.c.facet == facet, _f.c.value == value)
            )
            if state != "any":
                query = query.where(_f.c.state == state)
            if req.tag is not None and req.kind is not None:
                k = _f.alias("kind_facet")
                query = query.where(
                    exists().where(
                        k.c.scope_id == _f.c.scope_id,
                        k.c.facet == "kind",
                        k.c.value == req.kind,
                        k.c.created_revision == _f.c.created_revision,
                        k.c.entry_id == _f.c.entry_id,
                    )
                )
        else:
            order = (_e.c.created_revision, _e.c.entry_id)
            query = (
                select(_v, _e.c.created_revision)
                .join(
                    _e,
                    and_(
                        _e.c.scope_id == _v.c.scope_id,
                        _e.c.current_version_id == _v.c.entry_version_id,
                    ),
                )
                .where(_e.c.scope_id == req.scope_id)
            )
        if after is not None:
            # Keyset paging written as a range start plus a filter: `a > x OR (a = x AND b > y)`
            # alone lets SQLite walk the index from the scope's first entry (a deep page of
            # 100k cost 20 ms instead of 2).
            query = query.where(order[0] >= after[0], or_(order[0] > after[0], order[1] > after[1]))
        query = query.order_by(*order).limit(req.limit + 1)
        with self._db.read() as conn:
            head = self._head(conn, req.scope_id)
            rows = conn.execute(query).all() if head else []
        page = rows[: req.limit]
        next_cursor = (
            encode_cursor(page[-1].created_revision, page[-1].entry_id)
            if len(rows) > req.limit
            else None
        )
        return MemoryEntryList(
            memory=MemoryRef.at(head) if head else None,
            entries=[_entry(row, head) for row in page],
            next_cursor=next_cursor,
        )

    def versions(self, req: ListMemoryEntryVersionsRequest) -> MemoryEntryHistory:
        """An entry's versions, newest first, each with its exact citation (the revision it
        was written in). Reads the (scope, entry, version) key's range."""
        before = decode_cursor(req.cursor)[0] if req.cursor else None
        query = select(_v).where(_v.c.scope_id == req.scope_id, _v.c.entry_id == req.entry_id)
        if before is not None:
            query = query.where(_v.c.version < before)
        query = query.order_by(_v.c.version.desc()).limit(req.limit + 1)
        with self._db.read() as conn:
            head = self._head(conn, req.scope_id)
            rows = conn.execute(query).all() if head else []
        if not rows and before is None:
            raise NotFoundError("no such memory entry", code="memory_not_found")
        page = rows[: req.limit]
        return MemoryEntryHistory(
            memory=MemoryRef.at(head) if head else None,
            entry_id=req.entry_id,
            versions=[_version(row) for row in page],
            next_cursor=(
                encode_cursor(page[-1].version, req.entry_id) if len(rows) > req.limit else None
            ),
        )

    def changes(self, req: ListMemoryChangesRequest) -> MemoryChanges:
        r = memory_revisions
        with self._db.read() as conn:
            head = self._head(conn, req.scope_id)
            rows = conn.execute(
                select(r)
                .where(
                    r.c.scope_id == req.scope_id,
                    r.c.revision > min(req.since_revision, MAX_STORED_INT),
                )
                .order_by(r.c.revision)
                .limit(req.limit)
            ).all()
        return MemoryChanges(
            memory=MemoryRef.at(head) if head else None,
            changes=[
                MemoryChange(
                    revision=row.revision,
                    operation=row.operation,
                    entry_id=row.entry_id,
                    entry_version_id=row.entry_version_id,
                    created_at=iso_time(row.created_at),
                )
                for row in rows
            ],
        )

    def search(
        self,
        scope_id: str,
        terms: Sequence[str],
        limit: int,
        exclude_versions: frozenset[str] = frozenset(),
        trace: LexicalTrace | None = None,
    ) -> SearchResult:
        """Rank the head's active entries; head and index are read in one snapshot.

        ``exclude_versions`` (entry version ids) are removed before ranking and the limit, so
        they neither crowd out other candidates nor count as relevant (bootstrap de-dup).
        ``trace`` (``explain_context``) is filled with why candidates were or were not
        returned; the result is the same with or without it.
        """
        with self._db.search_read() as conn:
            head = self._head(conn, scope_id)
            if not head or not terms:
                return SearchResult(head, [])
            doc_count, frequencies = read_frequencies(conn, "memory", scope_id, terms)
            plan = scoring.plan_query(terms, doc_count, frequencies)
            if plan is None:
                return SearchResult(head, [])
            candidates = self._db.fulltext.match(
                conn, "memory", scope_id, plan.retrieval_terms, plan.candidate_limit
            )
            retrieved = len(candidates)
            delivered: list[scoring.Document] = []
            if exclude_versions:
                excluded = self._rowids(conn, scope_id, exclude_versions)
                if trace is not None:
                    delivered = [c for c in candidates if c[0] in excluded]
                candidates = [c for c in candidates if c[0] not in excluded]
            assessed: list[scoring.Assessed] | None = [] if trace is not None else None
            admitted = scoring.rank(plan, candidates, assessed)
            ranked = scoring.top(admitted, limit)
            if not ranked:
                if trace is not None:
                    self._trace(conn, trace, scope_id, plan, retrieved, assessed, [], [], delivered)
                return SearchResult(head, [])
            # By primary key only: adding ``scope_id`` to the statement lets SQLite pick the
            # (scope_id, entry_version_id) index and scan the whole scope.
            rows = {
                row[0]: row
                for row in self._versions_by_id(conn, [r.rowid for r in ranked])
                if row[1] == scope_id
            }
            # Final order: score, then entry id by byte order (ties at the cut were all kept).
            ordered = sorted(
                (r for r in ranked if r.rowid in rows),
                key=lambda r: (-r.score, rows[r.rowid][2].encode("utf-8")),
            )[:limit]
            if trace is not None:
                hits = [r.rowid for r in ordered]
                self._trace(
                    conn, trace, scope_id, plan, retrieved, assessed, admitted, hits, delivered
                )
        return SearchResult(
            head,
            [
                FoundEntry(
                    rows[r.rowid][2], rows[r.rowid][3], rows[r.rowid][4], r.score, "fts", r.coverage
                )
                for r in ordered
            ],
        )

    def _trace(
        self,
        conn: Connection,
        trace: LexicalTrace,
        scope_id: str,
        plan: scoring.QueryPlan,
        retrieved: int,
        assessed: list[scoring.Assessed] | None,
        admitted: list[scoring.Ranked],
        hits: list[int],
        delivered: list[scoring.Document],
    ) -> None:
        """Explain a search (``explain_context`` only): the delivered versions are ranked on
        their own to say whether they would have been admitted; rows come by primary key."""
        would: list[scoring.Assessed] = []
        if delivered:
            scoring.rank(plan, delivered, would)
        if admitted:  # final order for ties, as the search orders them
            scores = {r.rowid: r for r in admitted}
            admitted = [scores[rowid] for rowid in hits] + [
                r for r in admitted if r.rowid not in set(hits)
            ]

        def rows(ids: list[int]) -> dict[int, tuple[str, str, str]]:
            if not ids:
                return {}
            found = self._versions_by_id(conn, ids)
            return {row[0]: (row[2], row[3], row[4]) for row in found if row[1] == scope_id}

        trace_lexical(trace, plan, retrieved, assessed or [], admitted, hits, would, rows)

    @staticmethod
    def _rowids(conn: Connection, scope_id: str, version_ids: frozenset[str]) -> set[int]:
        found = conn.execute(
            _VERSION_ROWIDS, {"scope_id": scope_id, "version_ids": sorted(version_ids)}
        )
        return {row[0] for row in found}

    def head(self, scope_id: str) -> int:
        with self._db.read() as conn:
            return self._head(conn, scope_id)

    # -- maintenance -----------------------------------------------------------------------

    def reindex(self) -> int:
        """Rebuild the derived search index from the authoritative version rows.

        The active versions are read in pages by id (the whole table at once held every text
        in memory), and each page's documents are added per scope in one call: the bulk path
        an import takes, multi-row inserts and summed frequencies. One document at a time (an
        insert and an upsert per term each) rebuilt 10k entries on seekdb in 170 s, pages in
        45-60 s (2 cores, load ≈ 21; docs/decisions/oceanbase-fulltext.md)."""

        def work(conn: Connection) -> int:
            self._db.fulltext.clear(conn, "memory")
            done, after = 0, 0
            while rows := conn.execute(
                select(_v.c.id, _v.c.scope_id, _v.c.text, _v.c.tags)
                .where(_v.c.valid_to.is_(None), _v.c.state == "active", _v.c.id > after)
                .order_by(_v.c.id)
                .limit(_REINDEX_PAGE)
            ).all():
                by_scope: dict[str, list[tuple[int, list[str]]]] = {}
                for row in rows:
                    documents = by_scope.setdefault(row.scope_id, [])
                    documents.append((row.id, self._analyze(_search_text(row))))
                for scope_id, documents in by_scope.items():
                    self._db.fulltext.add_many(conn, "memory", scope_id, documents)
                done, after = done + len(rows), rows[-1].id
            return done

        return self._db.write(work)

    def facets_are_consistent(self) -> bool:
        """Every entry has its ``all`` and ``kind`` rows in ``memory_facets`` (a database
        from before the facets existed has none)."""
        with self._db.read() as conn:
            kinds = conn.execute(
                select(func.count()).select_from(_f).where(_f.c.facet == "kind")
            ).scalar_one()
            alls = conn.execute(
                select(func.count()).select_from(_f).where(_f.c.facet == "all")
            ).scalar_one()
            entries = conn.execute(select(func.count()).select_from(_e)).scalar_one()
        return kinds == alls == entries

    def rebuild_facets(self) -> int:
        """Rebuild ``memory_facets`` from the entries' current versions; the entries done."""

        def work(conn: Connection) -> int:
            conn.execute(delete(_f))
            rows = conn.execute(
                select(_e.c.scope_id, _e.c.entry_id, _e.c.created_revision, _e.c.state)
                .add_columns(_v.c.kind, _v.c.tags)
                .join(
                    _v,
                    and_(
                        _v.c.scope_id == _e.c.scope_id,
                        _v.c.entry_version_id == _e.c.current_version_id,
                    ),
                )
            ).all()
            batch: list[dict[str, Any]] = []
            for row in rows:
                for facet, value in _facet_values(row.kind, json.loads(row.tags)):
                    batch.append(
                        _facet_row(
                            row.scope_id, row.entry_id, row.created_revision, facet, value,
                            row.state,
                        )
                    )  # fmt: skip
                if len(batch) >= _FACET_BATCH:
                    conn.execute(insert(_f), batch)
                    batch = []
            if batch:
                conn.execute(insert(_f), batch)
            return len(rows)

        return self._db.write(work)

    def index_is_consistent(self) -> bool:
        with self._db.read() as conn:
            indexed = self._db.fulltext.document_count(conn, "memory")
            current = conn.execute(
                select(func.count())
                .select_from(_v)
                .where(_v.c.valid_to.is_(None), _v.c.state == "active")
            ).scalar_one()
        return indexed == current

    # -- internals -------------------------------------------------------------------------

    def _head(self, conn: Connection, scope_id: str) -> int:
        if self._db.backend == "sqlite":
            found = sqlite_driver(conn).execute(_SQLITE_HEAD, (scope_id,)).fetchone()
            return int(found[0]) if found else 0
        value = conn.execute(_HEAD, {"scope_id": scope_id}).scalar()
        return int(value or 0)

    def _versions_by_id(self, conn: Connection, ids: list[int]) -> Sequence[Sequence[Any]]:
        """(id, scope_id, entry_id, entry_version_id, text) of the given version rows."""
        if self._db.backend == "sqlite":
            found = sqlite_driver(conn).execute(_SQLITE_VERSIONS_BY_ID, (json.dumps(ids),))
            return found.fetchall()
        return conn.execute(_VERSIONS_BY_ID, {"ids": json.dumps(ids)}).all()

    def _lock_head(self, conn: Connection, scope_id: str) -> int:
        """The head revision, locked for this transaction (0 when the scope has no memory)."""
        query = select(memory_heads.c.revision).where(memory_heads.c.scope_id == scope_id)
        if self._db.backend != "sqlite":
            query = query.with_for_update()
        value = conn.execute(query).scalar()
        if value is None:
            # A concurrent first write raises IntegrityError here; Database.write retries.
            conn.execute(
                insert(memory_heads).values(scope_id=scope_id, revision=0, updated_at=now_ms())
            )
            return 0
        return int(value)

    def _lock_current(
        self,
        conn: Connection,
        scope_id: str,
        citation: MemoryCitation,
        *,
        allow_inactive: bool = False,
    ) -> tuple[int, Row[Any]]:
        """Lock the head and check the citation is the entry's current version (CAS)."""
        head = self._lock_head(conn, scope_id)
        pointer = conn.execute(
            select(_e.c.current_version_id).where(
                _e.c.scope_id == scope_id, _e.c.entry_id == citation.entry_id
            )
        ).scalar()
        if pointer is None:
            raise NotFoundError("no such memory entry", code="memory_not_found")
        current = self._version_row(conn, scope_id, pointer)
        if allow_inactive and current.state != "active":
            return head, current
        cited = citation.memory_ref.revision
        if citation.entry_version_id != pointer or cited > head or cited < current.valid_from:
            raise ConflictError(
                "the citation is not the entry's current version; re-read it and retry",
                code="revision_conflict",
                details={"current": _citation_json(current, head)},
            )
        return head, current

    def _version_row(self, conn: Connection, scope_id: str, version_id: str) -> Row[Any]:
        return conn.execute(
            select(_v).where(_v.c.scope_id == scope_id, _v.c.entry_version_id == version_id)
        ).one()

    def _insert_version(
        self,
        conn: Connection,
        *,
        scope_id: str,
        entry_id: str,
        version: int,
        kind: str,
        text: str,
        tags: list[str],
        reason: str | None,
        source_refs: list[SourceRef],
        artifact_refs: list[ArtifactRef],
        state: str,
        revision: int,
    ) -> Row[Any]:
        values = {
            "scope_id": scope_id,
            "entry_id": entry_id,
            "entry_version_id": new_id("mem_ver_"),
            "version": version,
            "kind": kind,
            "text": text,
            "tags": canonical_json(tags),
            "reason": reason,
            "source_refs": dump_refs(source_refs),
            "artifact_refs": dump_refs(artifact_refs),
            "content_hash": content_hash(kind, text, tags),
            "state": state,
            "valid_from": revision,
            "valid_to": None,
            "created_at": now_ms(),
        }
        result = conn.execute(insert(_v).values(**values))
        (row_id,) = result.inserted_primary_key or (None,)
        # The row as written, not read back: the columns are exactly these values and the new
        # id, and a read-back cost every write a round trip (≈ 0.4-1 ms on OceanBase).
        return _VersionRow(id=row_id, **values)  # type: ignore[return-value]

    def _supersede(
        self, conn: Connection, old: Row[Any], new: Row[Any], revision: int, digest: str
    ) -> int:
        """Close ``old``, point the entry at ``new``; the entry's ``created_revision`` (the
        facets' key)."""
        conn.execute(update(_v).where(_v.c.id == old.id).values(valid_to=revision))
        conn.execute(
            update(_e)
            .where(_e.c.scope_id == old.scope_id, _e.c.entry_id == old.entry_id)
            .values(
                current_version_id=new.entry_version_id,
                current_version=new.version,
                state=new.state,
                content_hash=digest,
            )
        )
        created = conn.execute(
            select(_e.c.created_revision).where(
                _e.c.scope_id == old.scope_id, _e.c.entry_id == old.entry_id
            )
        ).scalar_one()
        return int(created)

    def _commit_revision(
        self, conn: Connection, scope_id: str, revision: int, operation: str, row: Row[Any]
    ) -> None:
        conn.execute(
            insert(memory_revisions).values(
                scope_id=scope_id,
                revision=revision,
                operation=operation,
                entry_id=row.entry_id,
                entry_version_id=row.entry_version_id,
                created_at=now_ms(),
            )
        )
        conn.execute(
            update(memory_heads)
            .where(memory_heads.c.scope_id == scope_id)
            .values(revision=revision, updated_at=now_ms())
        )


Facet = tuple[str, str]


def _facet_values(kind: str, tags: Sequence[str]) -> set[Facet]:
    return {("all", ""), ("kind", kind), *(("tag", tag) for tag in tags)}


def _facet_row(
    scope_id: str, entry_id: str, created: int, facet: str, value: str, state: str
) -> dict[str, Any]:
    return {
        "scope_id": scope_id,
        "facet": facet,
        "value": value,
        "created_revision": created,
        "entry_id": entry_id,
        "state": state,
    }


def facet_rows(
    scope_id: str, entry_id: str, created: int, kind: str, tags: Sequence[str], state: str
) -> list[dict[str, Any]]:
    """The ``memory_facets`` rows of an entry whose current version has ``kind``/``tags``
    (also for writers outside this store: an import builds them with the entries)."""
    facets = sorted(_facet_values(kind, tags))
    return [_facet_row(scope_id, entry_id, created, f, v, state) for f, v in facets]


def _add_facets(
    conn: Connection,
    scope_id: str,
    entry_id: str,
    created: int,
    kind: str,
    tags: Sequence[str],
    state: str,
) -> None:
    conn.execute(insert(_f), facet_rows(scope_id, entry_id, created, kind, tags, state))


def _insert_facets(
    conn: Connection, scope_id: str, entry_id: str, created: int, facets: set[Facet], state: str
) -> None:
    if facets:
        rows = [_facet_row(scope_id, entry_id, created, f, v, state) for f, v in sorted(facets)]
        conn.execute(insert(_f), rows)


def _facet_key(scope_id: str, entry_id: str, created: int) -> Any:
    """The facet rows of one entry, each by its whole primary key (never a scope scan)."""
    return and_(
        _f.c.scope_id == scope_id,
        _f.c.facet == bindparam("b_facet"),
        _f.c.value == bindparam("b_value"),
        _f.c.created_revision == created,
        _f.c.entry_id == entry_id,
    )


def _drop_facets(
    conn: Connection, scope_id: str, entry_id: str, created: int, facets: set[Facet]
) -> None:
    if facets:
        conn.execute(
            delete(_f).where(_facet_key(scope_id, entry_id, created)),
            [{"b_facet": f, "b_value": v} for f, v in sorted(facets)],
        )


def _set_facet_state(
    conn: Connection, scope_id: str, entry_id: str, created: int, facets: set[Facet], state: str
) -> None:
    if facets:
        conn.execute(
            update(_f).where(_facet_key(scope_id, entry_id, created)).values(state=state),
            [{"b_facet": f, "b_value": v} for f, v in sorted(facets)],
        )


def _version(row: Row[Any]) -> MemoryEntryVersion:
    """A version row with its exact citation: the revision it was written in holds it."""
    if row.version == 1:
        operation = "remember"
    elif row.state == "inactive":
        operation = "retire"
    else:
        operation = "revise"
    return MemoryEntryVersion(
        citation=_citation(row, row.valid_from),
        version=row.version,
        kind=row.kind,
        text=row.text,
        tags=json.loads(row.tags),
        state=row.state,
        reason=row.reason,
        source_refs=SOURCE_REFS.validate_json(row.source_refs),
        artifact_refs=ARTIFACT_REFS.validate_json(row.artifact_refs),
        operation=operation,  # type: ignore[arg-type]
        valid_from_revision=row.valid_from,
        valid_to_revision=row.valid_to,
        created_at=iso_time(row.created_at),
    )


def _search_text(row: Row[Any]) -> str:
    tags = json.loads(row.tags)
    return row.text + ("\n" + " ".join(tags) if tags else "")


def _accumulate(adapter: TypeAdapter[Any], stored: str, added: Sequence[Any]) -> list[Any]:
    merged: list[Any] = []
    for ref in [*adapter.validate_json(stored), *added]:
        if ref not in merged:
            merged.append(ref)
    if len(merged) > MAX_EVIDENCE_REFS:
        raise InvalidRequestError(
            f"an entry version holds at most {MAX_EVIDENCE_REFS} references of each kind"
        )
    return merged


def _ref_json(revision: int) -> dict[str, Any] | None:
    return MemoryRef.at(revision).model_dump() if revision else None


def _citation(row: Row[Any], revision: int) -> MemoryCitation:
    return MemoryCitation(
        memory_ref=MemoryRef.at(revision),
        entry_id=row.entry_id,
        entry_version_id=row.entry_version_id,
    )


def _citation_json(row: Row[Any], revision: int) -> dict[str, Any]:
    return _citation(row, revision).model_dump()


def _entry(row: Row[Any], revision: int) -> MemoryEntry:
    return MemoryEntry(
        citation=_citation(row, revision),
        version=row.version,
        kind=row.kind,
        text=row.text,
        tags=json.loads(row.tags),
        state=row.state,
        reason=row.reason,
        source_refs=SOURCE_REFS.validate_json(row.source_refs),
        artifact_refs=ARTIFACT_REFS.validate_json(row.artifact_refs),
    )
