"""Derived full-text indexes, one adapter per backend, over analyser-encoded terms.

Documents arrive already analysed (see :mod:`powercontext_runtime.search.analyzer`): lists of
``[a-z0-9]+`` terms, so both engines tokenise them identically and no query text is ever
spliced into SQL or full-text syntax. The engines only *retrieve* candidates (every document
containing any of the given terms, newest first up to a limit); ranking and the relevance
floor happen in application code over the document frequencies kept in
``search_terms``, which is why both backends return the same hits in the same order.

Everything here is derived from the authoritative version tables and can be rebuilt.
"""

from __future__ import annotations

import hashlib
import json
import re
import sqlite3
from collections import Counter
from collections.abc import Iterable, Sequence
from functools import lru_cache
from typing import Any, Literal, Protocol

from sqlalchemy import Connection, bindparam, delete, select, text, update

from ..search.scoring import Document, document, split_repeats
from ._records import adding_upserts, json_listed
from ._sqlite import sqlite_driver
from .schema import search_terms

__all__ = ["DOCS_TERM", "FulltextIndex", "IndexedFamily", "for_backend"]

IndexedFamily = Literal["memory", "experience"]
INDEXED_FAMILIES: tuple[IndexedFamily, ...] = ("memory", "experience")
DOCS_TERM = "#docs"
_TERMS = re.compile(r"[a-z0-9]{1,64}(?: [a-z0-9]{1,64})*")
_BATCH = 200  # OceanBase rejects very large multi-row statements (error 11049)
_MERGE_PAGES = 64  # FTS5 pages merged per compaction step: a write transaction of ≤ 10 ms
# A negative page count merges across levels, into one segment. SQLite before 3.42 corrupts
# the index when such an incremental merge is interleaved with inserts (measured: 3.39.4,
# 3.40.0 and 3.40.1 — Debian 12's — within ~3,000 inserts with a step after every third;
# 3.42.0, 3.43.1, 3.46 and 3.51 stay sound; docs/decisions/search-index-repair.md). There a
# positive count merges within a level only: fewer segments, never a damaged index.
_MERGE_ACROSS_LEVELS = sqlite3.sqlite_version_info >= (3, 42, 0)
_SQLITE_CORRUPT = 11  # primary result code; FTS5 reports SQLITE_CORRUPT_VTAB (267)


class FulltextIndex(Protocol):
    def create(self, conn: Connection) -> None: ...
    def add(
        self,
        conn: Connection,
        family: IndexedFamily,
        scope_id: str,
        rowid: int,
        terms: Sequence[str],
    ) -> None: ...
    def add_many(
        self,
        conn: Connection,
        family: IndexedFamily,
        scope_id: str,
        documents: Sequence[tuple[int, Sequence[str]]],
        counts: Counter[str] | None = None,
    ) -> None: ...
    def add_frequencies(
        self,
        conn: Connection,
        family: IndexedFamily,
        scope_id: str,
        counts: Counter[str],
        documents: int,
    ) -> None: ...
    def remove(
        self, conn: Connection, family: IndexedFamily, scope_id: str, rowid: int
    ) -> None: ...
    def match(
        self,
        conn: Connection,
        family: IndexedFamily,
        scope_id: str,
        terms: Sequence[str],
        limit: int,
    ) -> list[Document]: ...
    def document_count(self, conn: Connection, family: IndexedFamily) -> int: ...
    def clear(self, conn: Connection, family: IndexedFamily) -> None: ...
    def compact(self, conn: Connection, family: IndexedFamily) -> bool: ...
    def damaged(self, conn: Connection, family: IndexedFamily) -> bool: ...
    def reset(self, conn: Connection, family: IndexedFamily) -> None: ...


def for_backend(backend: str) -> FulltextIndex:
    return _SqliteFulltext() if backend == "sqlite" else _OceanBaseFulltext()


def _checked(terms: Iterable[str]) -> list[str]:
    checked = list(terms)
    # One match over the joined terms: a match per term cost a bulk import a tenth of its time.
    if checked and not _TERMS.fullmatch(" ".join(checked)):
        raise ValueError("full-text terms must be analyser output ([a-z0-9]{1,64})")
    return checked


# -- document frequencies (shared) ---------------------------------------------------------


def read_frequencies(
    conn: Connection, family: IndexedFamily, scope_id: str, terms: Sequence[str]
) -> tuple[int, dict[str, int]]:
    """Number of indexed documents in the scope and the document frequency of each term.

    The document count is read first, by primary key: a family the scope has never used (most
    scopes have no Experience) then costs one point lookup instead of a lookup per query term.
    """
    if conn.dialect.name == "sqlite":
        driver = sqlite_driver(conn)
        found = driver.execute(_SQLITE_DOC_COUNT, (scope_id, family, DOCS_TERM)).fetchone()
        if not found or not found[0]:
            return 0, {}
        # One fixed statement whatever the prompt's length: an expanding IN is re-rendered
        # and re-prepared for every term count (≈ 0.25 ms for a 2,000-character prompt).
        rows = driver.execute(_SQLITE_FREQUENCIES, (scope_id, family, json.dumps(terms)))
        return int(found[0]), dict(rows.fetchall())
    key = {"scope_id": scope_id, "family": family}
    doc_count = conn.execute(_DOC_COUNT, key).scalar()
    if not doc_count:
        return 0, {}
    rows = conn.execute(_FREQUENCIES, {**key, "terms": json.dumps(list(terms))}).all()
    return int(doc_count), {term: df for term, df in rows}


_SQLITE_DOC_COUNT = "SELECT df FROM search_terms WHERE scope_id = ? AND family = ? AND term = ?"
_SQLITE_FREQUENCIES = (
    "SELECT term, df FROM search_terms WHERE scope_id = ? AND family = ?"
    " AND term IN (SELECT value FROM json_each(?))"
)
_DOC_COUNT = select(search_terms.c.df).where(
    search_terms.c.scope_id == bindparam("scope_id"),
    search_terms.c.family == bindparam("family"),
    search_terms.c.term == DOCS_TERM,
)
_FREQUENCIES = text(
    "SELECT t.term, t.df FROM " + json_listed("terms", "VARCHAR(255)") + " JOIN search_terms t"
    " ON t.scope_id = :scope_id AND t.family = :family AND t.term = listed.value"
)


def _adjust_frequencies(
    conn: Connection, family: IndexedFamily, scope_id: str, terms: Iterable[str], delta: int
) -> None:
    keys = [*sorted(set(terms)), DOCS_TERM]
    if delta > 0:
        rows = [{"scope_id": scope_id, "family": family, "term": t, "df": delta} for t in keys]
        for start in range(0, len(rows), _BATCH):
            # One fixed statement executed for many rows: SQLAlchemy compiles it once and
            # caches it (a multi-row VALUES clause is a new statement for every row count).
            conn.execute(_UPSERT[conn.dialect.name], rows[start : start + _BATCH])
        return
    params = [{"s": scope_id, "f": family, "t": t, "d": -delta} for t in keys]
    conn.execute(
        update(search_terms)
        .where(
            search_terms.c.scope_id == bindparam("s"),
            search_terms.c.family == bindparam("f"),
            search_terms.c.term == bindparam("t"),
        )
        .values(df=search_terms.c.df - bindparam("d")),
        params,
    )
    conn.execute(
        delete(search_terms).where(
            search_terms.c.scope_id == scope_id,
            search_terms.c.family == family,
            search_terms.c.df <= 0,
            search_terms.c.term.in_(bindparam("terms", expanding=True)),
        ),
        {"terms": keys},
    )


def _add_frequencies(
    conn: Connection, family: IndexedFamily, scope_id: str, counts: Counter[str], documents: int
) -> None:
    """Add many documents' distinct terms to the frequencies at once (bulk loads): one
    upsert per distinct term instead of one per term of every document."""
    if conn.dialect.name == "sqlite":
        rows = [(scope_id, family, term, df) for term, df in sorted(counts.items())]
        rows.append((scope_id, family, DOCS_TERM, documents))
        sqlite_driver(conn).executemany(_SQLITE_ADD_FREQUENCY, rows)
        return
    rows = [(scope_id, family, term, df) for term, df in sorted(counts.items())]
    rows.append((scope_id, family, DOCS_TERM, documents))
    # Through the driver, as one multi-row upsert per batch (PyMySQL rewrites the statement):
    # SQLAlchemy's per-row parameter handling was most of the importing process's CPU here.
    with _mysql_driver(conn).cursor() as cursor:
        for start in range(0, len(rows), _FREQUENCY_BATCH):
            cursor.executemany(_MYSQL_ADD_FREQUENCY, rows[start : start + _FREQUENCY_BATCH])


_SQLITE_ADD_FREQUENCY = (
    "INSERT INTO search_terms (scope_id, family, term, df) VALUES (?, ?, ?, ?)"
    " ON CONFLICT (scope_id, family, term) DO UPDATE SET df = df + excluded.df"
)


_MYSQL_ADD_FREQUENCY = (
    "INSERT INTO search_terms (scope_id, family, term, df) VALUES (%s, %s, %s, %s)"
    " ON DUPLICATE KEY UPDATE df = df + VALUES(df)"
)
_FREQUENCY_BATCH = 1000  # rows of four short columns: far below the statement memory limit

_UPSERT = adding_upserts(search_terms, ("scope_id", "family", "term"), "df")


def _mysql_driver(conn: Connection) -> Any:
    """The PyMySQL connection under ``conn`` (inside its transaction), for bulk inserts of
    fixed statements; its errors are classified by ``Database`` like SQLAlchemy's."""
    return conn.connection.driver_connection


def _clear_frequencies(conn: Connection, family: IndexedFamily) -> None:
    conn.execute(delete(search_terms).where(search_terms.c.family == family))


# -- scope-prefixed tokens (shared) ---------------------------------------------------------


@lru_cache(maxsize=1024)
def _scope_prefix(scope_id: str) -> str:
    """16 hex digits naming the scope inside every indexed token (64 bits of its SHA-256).

    Both engines index ``<prefix><term>``, so a lookup touches only the scope's own posting
    lists and its cost follows the scope, not the table. (SQLite: matching ``scope AND (t1 OR
    t2 …)`` instead made FTS5 walk the scope token's posting list — every document of the
    scope — on each query. OceanBase: a ``scope_id = ?`` filter applied after the FULLTEXT
    lookup made a 50-entry scope's query read the postings of every scope; see
    docs/decisions/oceanbase-fulltext.md.) A prefix collision between two scopes would only
    add candidates: SQLite's rows are kept only when ``scope_id`` matches, and OceanBase's
    statement filters on it. 16 + 64 characters fit OceanBase's ``max_token_size`` of 84.
    """
    return hashlib.sha256(scope_id.encode("utf-8")).hexdigest()[:16]


def _prefixed_body(prefix: str, terms: Sequence[str]) -> str:
    return prefix + f" {prefix}".join(terms) if terms else ""


class _ScopedFrequencies:
    """The per-scope document frequencies both backends keep the same way (``search_terms``)."""

    def add_frequencies(
        self,
        conn: Connection,
        family: IndexedFamily,
        scope_id: str,
        counts: Counter[str],
        documents: int,
    ) -> None:
        """Add ``documents`` documents whose distinct terms ``counts`` sums to the frequencies
        (after ``add_many`` calls that were given ``counts``: an import sums a scope's chunks
        and writes them once)."""
        if documents:
            _add_frequencies(conn, family, scope_id, counts, documents)


# -- SQLite: FTS5 --------------------------------------------------------------------------


class _SqliteFulltext(_ScopedFrequencies):
    """Per family, an inverted index of scoped tokens and a table of each document's terms.

    ``<family>_search_index`` is a contentless FTS5 table (``content=''``, ``detail=none``,
    ``columnsize=0``): it only answers "which rowids contain any of these tokens", so it keeps
    neither positions nor a copy of the text. Tokens carry the scope (see :func:`_scope_prefix`).
    ``<family>_search_docs`` holds each document's plain analyser terms as ranking reads them
    (distinct terms, then the extra occurrences of repeated ones: see
    :data:`~powercontext_runtime.search.scoring.Document`). The earlier layout stored prefixed
    tokens as FTS5 content: three times the bytes to read and split for every candidate
    (≈ 0.5-0.8 ms of a 100k prepare).

    A contentless table forgets what it indexed, so removing a document replays its exact
    tokens (FTS5's ``'delete'`` command), rebuilt from the docs table.
    """

    #: Tables of earlier layouts, dropped on start-up; the runtime then finds the new index
    #: empty and rebuilds it from the version rows.
    _LEGACY_TABLES = (
        "memory_fts",
        "experience_fts",
        "memory_scoped_fts",
        "experience_scoped_fts",
    )

    def __init__(self) -> None:
        self._sql = {family: _SqliteStatements(family) for family in INDEXED_FAMILIES}

    def create(self, conn: Connection) -> None:
        for legacy in self._LEGACY_TABLES:
            conn.exec_driver_sql(f"DROP TABLE IF EXISTS {legacy}")
        for family in INDEXED_FAMILIES:
            sql = self._sql[family]
            conn.exec_driver_sql(
                f"CREATE VIRTUAL TABLE IF NOT EXISTS {sql.index} USING {sql.definition}"
            )
            conn.exec_driver_sql(
                f"CREATE TABLE IF NOT EXISTS {sql.docs}"
                " (id INTEGER PRIMARY KEY, terms TEXT NOT NULL, repeats TEXT NOT NULL)"
            )

    def add(
        self,
        conn: Connection,
        family: IndexedFamily,
        scope_id: str,
        rowid: int,
        terms: Sequence[str],
    ) -> None:
        distinct, repeats = split_repeats(_checked(terms))
        sql = self._sql[family]
        conn.exec_driver_sql(sql.add_doc, (rowid, " ".join(distinct), " ".join(repeats)))
        conn.exec_driver_sql(
            sql.add_tokens, (rowid, _prefixed_body(_scope_prefix(scope_id), distinct))
        )
        _adjust_frequencies(conn, family, scope_id, distinct, +1)

    def add_many(
        self,
        conn: Connection,
        family: IndexedFamily,
        scope_id: str,
        documents: Sequence[tuple[int, Sequence[str]]],
        counts: Counter[str] | None = None,
    ) -> None:
        """:meth:`add` for many documents of one scope (an import): executemany, and the
        frequencies summed first. With ``counts``, the documents' distinct terms are added to
        it instead and the caller writes them once (:meth:`add_frequencies`)."""
        if not documents:
            return
        prefix = _scope_prefix(scope_id)
        summed: Counter[str] = Counter() if counts is None else counts
        docs, tokens = [], []
        for rowid, terms in documents:
            distinct, repeats = split_repeats(_checked(terms))
            summed.update(distinct)
            docs.append((rowid, " ".join(distinct), " ".join(repeats)))
            tokens.append((rowid, _prefixed_body(prefix, distinct)))
        sql = self._sql[family]
        driver = sqlite_driver(conn)
        driver.executemany(sql.add_doc, docs)
        driver.executemany(sql.add_tokens, tokens)
        if counts is None:
            _add_frequencies(conn, family, scope_id, summed, len(documents))

    def remove(self, conn: Connection, family: IndexedFamily, scope_id: str, rowid: int) -> None:
        sql = self._sql[family]
        body = conn.exec_driver_sql(sql.doc_terms, (rowid,)).scalar()
        if body is None:
            return
        terms = body.split(" ") if body else []
        conn.exec_driver_sql(sql.remove_doc, (rowid,))
        conn.exec_driver_sql(
            sql.remove_tokens, (rowid, _prefixed_body(_scope_prefix(scope_id), terms))
        )
        _adjust_frequencies(conn, family, scope_id, terms, -1)

    def match(
        self,
        conn: Connection,
        family: IndexedFamily,
        scope_id: str,
        terms: Sequence[str],
        limit: int,
    ) -> list[Document]:
        checked = _checked(terms)
        if not checked:
            return []
        prefix = _scope_prefix(scope_id)
        query = " OR ".join(f'"{prefix}{t}"' for t in checked)
        rows = sqlite_driver(conn).execute(self._sql[family].match, (query, limit)).fetchall()
        return [
            (rowid, body.split(" ") if body else [], repeats.split(" ") if repeats else [])
            for rowid, body, repeats in rows
        ]

    def document_count(self, conn: Connection, family: IndexedFamily) -> int:
        return conn.exec_driver_sql(self._sql[family].count).scalar_one()

    def clear(self, conn: Connection, family: IndexedFamily) -> None:
        sql = self._sql[family]
        conn.exec_driver_sql(sql.clear_tokens)
        conn.exec_driver_sql(sql.clear_docs)
        _clear_frequencies(conn, family)

    def compact(self, conn: Connection, family: IndexedFamily) -> bool:
        """Merge index segments for a bounded number of pages; ``True`` while work remains.

        Every committed write leaves FTS5 a small segment, and its automatic merging keeps
        several levels of them; a lookup probes each segment for each term. Merged into one,
        a long prompt's lookup (≈ 16 terms) over 100k entries took 0.12 instead of 0.29 ms. A
        negative page count merges across levels; FTS5 reports work done as two or more changes.
        """
        driver = sqlite_driver(conn)
        before = driver.total_changes
        pages = -_MERGE_PAGES if _MERGE_ACROSS_LEVELS else _MERGE_PAGES
        driver.execute(self._sql[family].merge, (pages,))
        return driver.total_changes - before >= 2

    def damaged(self, conn: Connection, family: IndexedFamily) -> bool:
        """FTS5's own integrity check (0.17 s at 100k entries): ``True`` when the index's
        structure is corrupt, which no query or write on it survives (``PRAGMA
        integrity_check`` does not look inside it)."""
        try:
            sqlite_driver(conn).execute(self._sql[family].integrity_check)
        except sqlite3.DatabaseError as exc:
            if (getattr(exc, "sqlite_errorcode", 0) or 0) & 0xFF == _SQLITE_CORRUPT:
                return True
            raise
        return False

    def reset(self, conn: Connection, family: IndexedFamily) -> None:
        """Make a damaged index empty again, for a rebuild from the version rows.

        Neither ``'delete-all'`` nor ``DROP TABLE`` works on it: both need the table's
        constructor, which fails on a corrupt structure record. Its shadow tables are plain
        tables, so they are given the rows of a fresh index of the same definition, made here
        in the connection's temp schema (so the bytes are this SQLite's own)."""
        sql = self._sql[family]
        driver = sqlite_driver(conn)
        driver.execute(f"DROP TABLE IF EXISTS temp.{sql.index}_fresh")
        driver.execute(f"CREATE VIRTUAL TABLE temp.{sql.index}_fresh USING {sql.definition}")
        fresh = driver.execute(f"SELECT id, block FROM temp.{sql.index}_fresh_data").fetchall()
        driver.execute(f"DROP TABLE temp.{sql.index}_fresh")
        driver.execute(f"DELETE FROM {sql.index}_data")
        driver.execute(f"DELETE FROM {sql.index}_idx")
        driver.executemany(f"INSERT INTO {sql.index}_data(id, block) VALUES (?, ?)", fresh)
        driver.execute(sql.clear_docs)
        _clear_frequencies(conn, family)


class _SqliteStatements:
    """The fixed SQL of one family (qmark style, sent as is: no compilation per call)."""

    def __init__(self, family: IndexedFamily) -> None:
        index = self.index = f"{family}_search_index"
        docs = self.docs = f"{family}_search_docs"
        self.add_doc = f"INSERT INTO {docs}(id, terms, repeats) VALUES (?, ?, ?)"
        self.add_tokens = f"INSERT INTO {index}(rowid, tokens) VALUES (?, ?)"
        self.doc_terms = f"SELECT terms FROM {docs} WHERE id = ?"
        self.remove_doc = f"DELETE FROM {docs} WHERE id = ?"
        self.remove_tokens = f"INSERT INTO {index}({index}, rowid, tokens) VALUES ('delete', ?, ?)"
        # Newest first: FTS5 yields rowids in descending order and the LIMIT stops it before
        # more documents are read (a join: ~8 % faster than ``id IN (subquery)``).
        self.match = (
            f"SELECT d.id, d.terms, d.repeats FROM {index} JOIN {docs} AS d ON d.id = {index}.rowid"
            f" WHERE {index} MATCH ? ORDER BY {index}.rowid DESC LIMIT ?"
        )
        self.count = f"SELECT count(*) FROM {docs}"
        self.clear_tokens = f"INSERT INTO {index}({index}) VALUES ('delete-all')"
        self.clear_docs = f"DELETE FROM {docs}"
        self.merge = f"INSERT INTO {index}({index}, rank) VALUES ('merge', ?)"
        self.integrity_check = f"INSERT INTO {index}({index}) VALUES ('integrity-check')"
        self.definition = (
            "fts5(tokens, tokenize='unicode61 remove_diacritics 0',"
            " content='', detail=none, columnsize=0)"
        )


# -- OceanBase: FULLTEXT with the space parser ---------------------------------------------


class _OceanBaseFulltext(_ScopedFrequencies):
    """A plain table per family with a FULLTEXT index (whitespace parser) on scoped tokens.

    ``<family>_scoped_search`` holds, per document, its plain analyser terms (``terms``: what
    ranking and removal read) and its distinct terms as scope-prefixed tokens (``tokens``, see
    :func:`_scope_prefix`), which alone are indexed. The candidate query matches the scope's
    tokens only, so the index lookup reads the scope's postings, never another scope's; the
    earlier layout (``<family>_search``: plain terms indexed, ``scope_id = ?`` filtered after
    the lookup) read every scope's postings of the query's terms, or, planned through the
    scope index, every document of the scope (docs/decisions/oceanbase-fulltext.md).

    ``min_token_size=1`` matters: the parser's default of 3 silently drops short terms;
    ``max_token_size=84`` (its default, stated) keeps a 16-character prefix plus a 64-character
    term in one token: a longer token is silently not indexed.
    """

    #: Tables of the earlier layout, dropped on start-up; the runtime then finds the new index
    #: empty and rebuilds it from the version rows (``Runtime.prepare``).
    _LEGACY_TABLES = ("memory_search", "experience_search")

    def __init__(self) -> None:
        self._sql = {family: _OceanBaseStatements(family) for family in INDEXED_FAMILIES}

    def create(self, conn: Connection) -> None:
        for legacy in self._LEGACY_TABLES:
            conn.exec_driver_sql(f"DROP TABLE IF EXISTS {legacy}")
        for family in INDEXED_FAMILIES:
            sql = self._sql[family]
            conn.exec_driver_sql(
                f"CREATE TABLE IF NOT EXISTS {sql.table} ("
                " id BIGINT NOT NULL PRIMARY KEY,"
                " scope_id VARCHAR(256) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,"
                " terms LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,"
                " tokens LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,"
                f" FULLTEXT INDEX {sql.index} (tokens) WITH PARSER space"
                " PARSER_PROPERTIES=(min_token_size=1, max_token_size=84)"
                ") DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin"
            )

    @staticmethod
    def _row(rowid: int, scope_id: str, prefix: str, checked: list[str]) -> dict[str, object]:
        """A document's row: all its terms in order, its distinct terms as scoped tokens."""
        rowid, scope_id, terms, tokens = _OceanBaseFulltext._values(
            rowid, scope_id, prefix, checked
        )
        return {"rowid": rowid, "scope_id": scope_id, "terms": terms, "tokens": tokens}

    @staticmethod
    def _values(rowid: int, scope_id: str, prefix: str, checked: list[str]) -> tuple[Any, ...]:
        return (
            rowid,
            scope_id,
            " ".join(checked),
            _prefixed_body(prefix, list(dict.fromkeys(checked))),
        )

    def add(
        self,
        conn: Connection,
        family: IndexedFamily,
        scope_id: str,
        rowid: int,
        terms: Sequence[str],
    ) -> None:
        checked = _checked(terms)
        conn.execute(
            self._sql[family].insert, self._row(rowid, scope_id, _scope_prefix(scope_id), checked)
        )
        _adjust_frequencies(conn, family, scope_id, checked, +1)

    def add_many(
        self,
        conn: Connection,
        family: IndexedFamily,
        scope_id: str,
        documents: Sequence[tuple[int, Sequence[str]]],
        counts: Counter[str] | None = None,
    ) -> None:
        """:meth:`add` for many documents of one scope (an import, a rebuild): multi-row
        inserts through the driver of at most ``_BATCH`` rows (larger ones hit the server's
        memory limit, which follows the tokens a statement indexes), frequencies summed.
        With ``counts``, the documents' distinct terms are added to it instead and the caller
        writes them once (:meth:`add_frequencies`): a 100k-entry scope imported in chunks
        upserted 126,628 rows for its 27,004 frequencies, a seventh of the server's work."""
        if not documents:
            return
        prefix = _scope_prefix(scope_id)
        summed: Counter[str] = Counter() if counts is None else counts
        rows = []
        for rowid, terms in documents:
            checked = _checked(terms)
            summed.update(set(checked))
            rows.append(self._values(rowid, scope_id, prefix, checked))
        statement = self._sql[family].insert_many
        with _mysql_driver(conn).cursor() as cursor:
            for start in range(0, len(rows), _BATCH):
                cursor.executemany(statement, rows[start : start + _BATCH])
        if counts is None:
            _add_frequencies(conn, family, scope_id, summed, len(documents))

    def remove(self, conn: Connection, family: IndexedFamily, scope_id: str, rowid: int) -> None:
        sql = self._sql[family]
        body = conn.execute(sql.doc_terms, {"rowid": rowid}).scalar()
        if body is None:
            return
        conn.execute(sql.remove, {"rowid": rowid})
        _adjust_frequencies(conn, family, scope_id, body.split(), -1)

    def match(
        self,
        conn: Connection,
        family: IndexedFamily,
        scope_id: str,
        terms: Sequence[str],
        limit: int,
    ) -> list[Document]:
        checked = _checked(terms)
        if not checked:
            return []
        rows = conn.execute(
            self._sql[family].match,
            {
                "q": _prefixed_body(_scope_prefix(scope_id), checked),
                "scope_id": scope_id,
                "limit": limit,
            },
        ).all()
        return [document(rowid, body.split()) for rowid, body in rows]

    def document_count(self, conn: Connection, family: IndexedFamily) -> int:
        return conn.execute(self._sql[family].count).scalar_one()

    def clear(self, conn: Connection, family: IndexedFamily) -> None:
        """Empty the family's index, ``_CLEAR_BATCH`` rows a statement (in the caller's
        transaction): one ``DELETE`` of a 10k-entry index ran into the server's 10 s
        statement timeout on a loaded machine, which failed every ``reindex`` there."""
        sql = self._sql[family]
        while conn.execute(sql.clear, {"n": _CLEAR_BATCH}).rowcount:
            pass
        while conn.execute(_CLEAR_FREQUENCIES, {"family": family, "n": _CLEAR_BATCH}).rowcount:
            pass

    def compact(self, conn: Connection, family: IndexedFamily) -> bool:
        return False  # the server merges its own FULLTEXT index

    def damaged(self, conn: Connection, family: IndexedFamily) -> bool:
        return False  # the server checks its own indexes; a plain table has no structure of ours

    def reset(self, conn: Connection, family: IndexedFamily) -> None:
        self.clear(conn, family)


_CLEAR_BATCH = 500  # rows a statement when an OceanBase index is emptied (≈ 3 s at load 20)
_CLEAR_FREQUENCIES = text("DELETE FROM search_terms WHERE family = :family LIMIT :n")


class _OceanBaseStatements:
    """The fixed SQL of one family, compiled once."""

    def __init__(self, family: IndexedFamily) -> None:
        table = self.table = f"{family}_scoped_search"
        index = self.index = f"ft_{table}"
        self.insert = text(
            f"INSERT INTO {table} (id, scope_id, terms, tokens)"
            " VALUES (:rowid, :scope_id, :terms, :tokens)"
        )
        self.insert_many = (
            f"INSERT INTO {table} (id, scope_id, terms, tokens) VALUES (%s, %s, %s, %s)"
        )
        self.doc_terms = text(f"SELECT terms FROM {table} WHERE id = :rowid")
        self.remove = text(f"DELETE FROM {table} WHERE id = :rowid")
        # Newest first, through the FULLTEXT index whatever the optimizer would guess: it is
        # the only access path that reads no more than the scope's postings of the query's
        # tokens (a scan of the table evaluating MATCH per row is what the hint rules out).
        # ``scope_id`` is checked on the few rows found: a prefix collision adds nothing.
        self.match = text(
            f"SELECT /*+ INDEX({table} {index}) */ id, terms FROM {table}"
            " WHERE MATCH(tokens) AGAINST(:q IN NATURAL LANGUAGE MODE) AND scope_id = :scope_id"
            " ORDER BY id DESC LIMIT :limit"
        )
        self.count = text(f"SELECT count(*) FROM {table}")
        self.clear = text(f"DELETE FROM {table} LIMIT :n")
