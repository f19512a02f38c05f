"""Derived vector storage for the semantic recall channel (only when it is configured).

Vectors are derived data, like the full-text index: the immutable entry versions stay the
source of truth, every vector row is keyed by the version row's id *and* the embedder's model
id, and anything here can be dropped and rebuilt (``powercontext reindex --embeddings``). A
version's vector never changes (versions are immutable), so an index only ever appends; a
superseded or retired version's vector is skipped at search time (the version row says it is
no longer current in the searched snapshot) and pruned by the embedding worker.

* SQLite: ``memory_vectors`` holds each vector as int8 (512 B at 512 dimensions) with its scale.
  Searching is in-process (numpy): a per-(scope, model) index loaded on first use and topped
  up with the rows appended since (one indexed range read per search). Up to
  ``EXACT_MAX`` vectors it rescores all of them; above, a Hamming prefilter over mean-centred
  sign bits keeps ``PREFILTER`` candidates that int8 then rescores (recall@10 0.992 at 89.5k
  real vectors, docs/decisions/semantic-channel.md).
* OceanBase: ``memory_vectors_d<dim>`` with a native ``VECTOR(dim)`` column and an HNSW index
  (``distance=cosine, lib=vsag``), searched on the query thread's own connection, alongside
  the caller's lexical search. A scope of up to ``OCEANBASE_EXACT_MAX`` vectors is scored
  exactly (``ORDER BY cosine_distance(…) LIMIT k`` over its rows); a larger one through the
  index (``… APPROXIMATE LIMIT k``). One table per dimension: a column's dimension is fixed
  and it may carry one vector index.

numpy is imported lazily: a runtime with the channel off never loads it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from sqlalchemy import Connection, text

from ._heap import release_free_heap
from ._sqlite import sqlite_driver

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = ["PendingVersion", "Prior", "VectorHit", "VectorStore", "for_backend"]

EXACT_MAX = 4096  # up to this many vectors in a scope, score every one
PREFILTER = 1000  # Hamming candidates rescored in int8 above EXACT_MAX
_BLOCK = 8192  # rows upcast to float32 at a time (bounds the temporary to ~16 MiB)
_TAIL_CHUNK = 4096  # rows read from the table at a time when topping an index up
#: OceanBase: the share of an HNSW index's rows in its incremental part from which a rebuild
#: is worth it (the server's own default for ``DBMS_VECTOR.REBUILD_INDEX``).
REBUILD_SHARE = 0.2
#: OceanBase: up to this many vectors in a scope, score every one instead of asking the HNSW
#: index. With several scopes in the table the index is searched with the scope as a filter,
#: and ``bench/oceanbase_scopes.py`` measured that filtered search returning about half of a
#: 20,000-row scope's true 64 nearest (a quarter of the table), slower than scoring all of its
#: rows (33 vs 18 ms p50); at 50,000 rows the index was faster (15 vs 47 ms). docs/oceanbase.md
OCEANBASE_EXACT_MAX = 20_000
#: Seconds a scope's counted size is trusted before it is counted again (a bounded count: at
#: most ``OCEANBASE_EXACT_MAX + 1`` index entries are read).
SCOPE_SIZE_TTL = 60.0


class PendingVersion(NamedTuple):
    """A current, active entry version that has no vector for the model yet."""

    rowid: int
    scope_id: str
    text: str
    tags: str  # canonical JSON list


class VectorHit(NamedTuple):
    rowid: int
    similarity: float  # cosine, -1..1


class VectorStore(Protocol):
    def create(self, conn: Connection) -> None: ...
    def put(
        self,
        conn: Connection,
        model: str,
        rows: Sequence[PendingVersion],
        vectors: npt.NDArray[np.float32],
    ) -> None: ...
    def nearest(
        self,
        conn: Connection,
        scope_id: str,
        model: str,
        query: npt.NDArray[np.float32],
        k: int,
        prior: Prior | None = None,
    ) -> list[VectorHit]: ...
    def search_ahead(
        self,
        scope_id: str,
        model: str,
        query: npt.NDArray[np.float32],
        k: int,
        read: Callable[[Callable[[Connection], Any]], Any],
    ) -> Prior | None: ...
    def forget(self, rowids: Sequence[int]) -> None: ...
    def pending(
        self, conn: Connection, model: str, after: int, limit: int
    ) -> list[PendingVersion]: ...
    def pending_count(self, conn: Connection, model: str) -> int: ...
    def pending_estimate(self, conn: Connection, model: str, cap: int) -> int: ...
    def prune(self, conn: Connection, model: str) -> int: ...
    def count(self, conn: Connection, model: str) -> int: ...
    def clear(self, conn: Connection) -> None: ...

    #: Whether the index lives in the database server and wants :meth:`rebuild_index` after
    #: a large backfill (SQLite's index is this process's own, exact up to its prefilter).
    rebuilds_index: bool

    def rebuild_index(self, conn: Connection) -> None: ...


def for_backend(backend: str, dimension: int) -> VectorStore:
    return _SqliteVectors() if backend == "sqlite" else _OceanBaseVectors(dimension)


# -- shared SQL over the authoritative version rows ----------------------------------------

_CURRENT = "v.valid_to IS NULL AND v.state = 'active'"


def _pending_sql(vector_table: str) -> str:
    # The anti-join is the queue: a current active version without a vector for this model.
    # ``after`` bounds the scan to versions newer than the last one seen (a PK range); a full
    # sweep passes 0.
    return (
        f"SELECT v.id, v.scope_id, v.text, v.tags FROM memory_versions v"
        f" LEFT JOIN {vector_table} x ON x.version_id = v.id AND x.model = :model"
        f" WHERE v.id > :after AND {_CURRENT} AND x.version_id IS NULL"
        " ORDER BY v.id LIMIT :limit"
    )


def _pending_count_sql(vector_table: str) -> str:
    return (
        f"SELECT count(*) FROM memory_versions v"
        f" LEFT JOIN {vector_table} x ON x.version_id = v.id AND x.model = :model"
        f" WHERE {_CURRENT} AND x.version_id IS NULL"
    )


def _pending_bounded(conn: Connection, vector_table: str, model: str, cap: int) -> int:
    """How many versions wait for a vector, counted from the newest version that has one, and
    at most ``cap``: the progress gauges' count (``SemanticChannel.pending_estimate``).

    The worker embeds in id order and a version row never becomes current after its insert,
    so the queue is what lies past the newest embedded version: one step down the
    ``(version_id, model)`` key, then a primary-key range with the anti-join, stopping at
    ``cap``. It reads the versions written since the worker last embedded anything (all of
    them pending, or few), never the whole table; :func:`_pending_count_sql` reads every
    current version (0.1 s at 100k). What it does not see: a version committed out of id
    order by a concurrent writer (OceanBase) until the worker's next sweep embeds it."""
    newest = conn.execute(
        text(
            f"SELECT version_id FROM {vector_table} WHERE model = :model"
            " ORDER BY version_id DESC LIMIT 1"
        ),
        {"model": model},
    ).scalar()
    return int(
        conn.execute(
            text(
                f"SELECT count(*) FROM (SELECT 1 FROM memory_versions v LEFT JOIN {vector_table}"
                " x ON x.version_id = v.id AND x.model = :model"
                f" WHERE v.id > :after AND {_CURRENT} AND x.version_id IS NULL"
                " LIMIT :cap) AS counted"
            ),
            {"model": model, "after": int(newest or 0), "cap": cap},
        ).scalar_one()
    )


def _prune_sql(vector_table: str) -> str:
    return (
        f"DELETE FROM {vector_table} WHERE model <> :model OR version_id IN"
        f" (SELECT v.id FROM memory_versions v WHERE NOT ({_CURRENT}))"
    )


def _int8(vectors: npt.NDArray[np.float32]) -> tuple[npt.NDArray[np.int8], npt.NDArray[Any]]:
    """Per-row symmetric int8 quantisation: ``row ≈ q * scale``."""
    import numpy as np

    peak = np.max(np.abs(vectors), axis=1)
    scale = np.maximum(peak, 1e-12) / 127.0
    q = np.clip(np.rint(vectors / scale[:, None]), -127, 127).astype(np.int8)
    return q, scale.astype(np.float32)


# -- SQLite: int8 rows, searched in-process -------------------------------------------------


class Prior(NamedTuple):
    """A search of a scope's loaded index made off the caller's snapshot (on the query
    thread, alongside the lexical search): its hits and how many rows it covered. The caller
    then tops the index up in its snapshot and scores only the rows past ``covered``."""

    hits: list[VectorHit]
    covered: int
    source: Any  # the index searched (a cleared or rebuilt index invalidates the prior)


@dataclass
class _ScopeIndex:
    """The vectors of one (scope, model), append-only, in preallocated numpy buffers.

    Above ``EXACT_MAX`` rows a search is a Hamming prefilter over sign codes of the
    mean-centred vectors (one bit per dimension, column-major ``(dim/64, capacity)`` uint64 so
    each 64-bit word is one vectorised xor + popcount over all rows), keeping the
    ``PREFILTER`` nearest (and the ties at the cut), then an int8 rescoring of those. The
    codes depend on the centre, so they live here, not in the table: the centre is the mean of
    the rows when codes are first needed and is recomputed (all codes with it) whenever the
    index has doubled since, so a scope that grew from a handful of rows is not coded against
    their mean."""

    dimension: int
    last_seq: int = 0
    size: int = 0
    rowids: Any = None  # int64 (capacity,)
    q: Any = None  # int8 (capacity, dim)
    scale: Any = None  # float32 (capacity,)
    alive: Any = None  # bool (capacity,)
    dead: int = 0  # rows forgotten (``alive`` False)
    centre: Any = None  # float32 (dim,), once codes are needed
    centred_at: int = 0  # rows when the centre was computed
    coded: int = 0  # rows [0, coded) have codes
    codes: Any = None  # uint64 (dim/64, capacity)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def reserve(self, rows: int) -> None:
        """Room for ``rows`` in all (the first load knows its count: one allocation)."""
        if self.q is None or rows > len(self.q):
            self._grow(rows)

    def _grow(self, rows: int) -> None:
        import numpy as np

        # A quarter of headroom, not double: the first load is the whole scope (100k rows =
        # 51 MiB of int8), and later appends are a few rows per write.
        capacity = max(64, rows * 5 // 4)
        self.rowids = _grown(self.rowids, (capacity,), np.int64, self.size)
        self.q = _grown(self.q, (capacity, self.dimension), np.int8, self.size)
        self.scale = _grown(self.scale, (capacity,), np.float32, self.size)
        self.alive = _grown(self.alive, (capacity,), np.bool_, self.size)
        if self.codes is not None:
            codes = np.zeros((self.codes.shape[0], capacity), dtype=np.uint64)
            codes[:, : self.coded] = self.codes[:, : self.coded]
            self.codes = codes

    def append(self, rowids: list[int], q: Any, scale: Any) -> None:
        n = len(rowids)
        if not n:
            return
        if self.q is None or self.size + n > len(self.q):
            self._grow(self.size + n)
        end = self.size + n
        self.rowids[self.size : end] = rowids
        self.q[self.size : end] = q
        self.scale[self.size : end] = scale
        self.alive[self.size : end] = True
        self.size = end

    def _ensure_codes(self) -> None:
        """Codes for every row, against a centre no older than half the index."""
        import numpy as np

        n = self.size
        if self.centre is None or n >= 2 * self.centred_at:
            total = np.zeros(self.dimension, dtype=np.float64)
            for start in range(0, n, _BLOCK):
                stop = min(n, start + _BLOCK)
                total += self.scale[start:stop] @ self.q[start:stop].astype(np.float32)
            self.centre = (total / n).astype(np.float32)
            self.centred_at, self.coded = n, 0
            self.codes = np.zeros(((self.dimension + 63) // 64, len(self.q)), dtype=np.uint64)
        for start in range(self.coded, n, _BLOCK):
            stop = min(n, start + _BLOCK)
            rows = self.q[start:stop].astype(np.float32) * self.scale[start:stop, None]
            self.codes[:, start:stop] = _packed(rows > self.centre).T
        self.coded = n

    def nearest(self, query: Any, k: int, start: int = 0) -> list[VectorHit]:
        """The ``k`` best rows from position ``start`` on (exact up to ``EXACT_MAX`` rows)."""
        import numpy as np

        n = self.size - start
        if n <= 0 or k <= 0:
            return []
        if n <= EXACT_MAX:
            pool = np.arange(start, self.size)
        else:
            self._ensure_codes()
            pool = start + self._prefilter(query, start)
        sims = np.empty(len(pool), dtype=np.float32)
        for at in range(0, len(pool), _BLOCK):
            rows = pool[at : at + _BLOCK]
            sims[at : at + len(rows)] = (self.q[rows].astype(np.float32) @ query) * self.scale[rows]
        sims[~self.alive[pool]] = -np.inf
        take = min(k, len(pool))
        best = np.argpartition(-sims, take - 1)[:take]
        # Similarity, then row id: the same answer for the same state.
        order = sorted(best.tolist(), key=lambda i: (-float(sims[i]), int(self.rowids[pool[i]])))
        return [
            VectorHit(int(self.rowids[pool[i]]), float(sims[i]))
            for i in order
            if np.isfinite(sims[i])
        ]

    def _prefilter(self, query: Any, start: int) -> Any:
        """Positions (relative to ``start``) of the ``PREFILTER`` live rows nearest in Hamming
        distance, plus the ties at the cut; sorted (a deterministic rescoring order)."""
        import numpy as np

        stop = self.size
        code = _packed((query > self.centre)[None, :])[0]
        words = self.codes[:, start:stop]
        distance = np.zeros(stop - start, dtype=np.uint16)
        scratch = np.empty(stop - start, dtype=np.uint64)
        counts = np.empty(stop - start, dtype=np.uint8)
        for j in range(len(code)):
            np.bitwise_xor(words[j], code[j], out=scratch)
            np.bitwise_count(scratch, out=counts)
            distance += counts
        far = self.dimension + 1
        if self.dead:
            distance[~self.alive[start:stop]] = far
        histogram = np.bincount(distance, minlength=far + 1)
        cut = int(np.searchsorted(np.cumsum(histogram), min(PREFILTER, stop - start)))
        return np.flatnonzero(distance <= min(cut, far - 1))

    def forget(self, rowids: Sequence[int]) -> None:
        import numpy as np

        if not self.size or not rowids:
            return
        found = np.isin(self.rowids[: self.size], np.asarray(rowids, dtype=np.int64))
        found &= self.alive[: self.size]
        self.alive[: self.size][found] = False
        self.dead += int(found.sum())


def _packed(bits: Any) -> Any:
    """Rows of booleans → rows of uint64 words (big-endian bit order within each byte, the
    same for the query and the rows, which is all a Hamming distance needs)."""
    import numpy as np

    packed = np.packbits(bits, axis=1)
    pad = (-packed.shape[1]) % 8
    if pad:
        packed = np.pad(packed, ((0, 0), (0, pad)))
    return np.ascontiguousarray(packed).view(np.uint64)


def _grown(old: Any, shape: tuple[int, ...], dtype: Any, used: int) -> Any:
    import numpy as np

    new = np.zeros(shape, dtype=dtype)
    if old is not None and used:
        new[:used] = old[:used]
    return new


_SQLITE_TABLE = (
    "CREATE TABLE IF NOT EXISTS memory_vectors ("
    " seq INTEGER PRIMARY KEY AUTOINCREMENT,"
    " version_id INTEGER NOT NULL,"
    " scope_id TEXT NOT NULL,"
    " model TEXT NOT NULL,"
    " scale REAL NOT NULL,"
    " vector BLOB NOT NULL,"
    " UNIQUE (version_id, model))"
)
_SQLITE_SCOPE_INDEX = (
    "CREATE INDEX IF NOT EXISTS ix_memory_vectors_scope ON memory_vectors (scope_id, model, seq)"
)
_SQLITE_COUNT = "SELECT count(*) FROM memory_vectors WHERE scope_id = ? AND model = ?"
_SQLITE_TAIL = (
    "SELECT seq, version_id, scale, vector FROM memory_vectors"
    " WHERE scope_id = ? AND model = ? AND seq > ? ORDER BY seq"
)


class _SqliteVectors:
    def __init__(self) -> None:
        self._indexes: dict[tuple[str, str], _ScopeIndex] = {}
        self._lock = threading.Lock()

    def create(self, conn: Connection) -> None:
        conn.exec_driver_sql(_SQLITE_TABLE)
        conn.exec_driver_sql(_SQLITE_SCOPE_INDEX)

    def put(
        self,
        conn: Connection,
        model: str,
        rows: Sequence[PendingVersion],
        vectors: npt.NDArray[np.float32],
    ) -> None:
        q, scale = _int8(vectors)
        sqlite_driver(conn).executemany(
            "INSERT OR IGNORE INTO memory_vectors (version_id, scope_id, model, scale, vector)"
            " VALUES (?, ?, ?, ?, ?)",
            [
                (row.rowid, row.scope_id, model, float(scale[i]), q[i].tobytes())
                for i, row in enumerate(rows)
            ],
        )

    def _index(self, scope_id: str, model: str, dimension: int) -> _ScopeIndex:
        key = (scope_id, model)
        with self._lock:
            index = self._indexes.get(key)
            if index is None or index.dimension != dimension:
                index = self._indexes[key] = _ScopeIndex(dimension)
            return index

    def nearest(
        self,
        conn: Connection,
        scope_id: str,
        model: str,
        query: npt.NDArray[np.float32],
        k: int,
        prior: Prior | None = None,
    ) -> list[VectorHit]:
        """The ``k`` nearest rows. With ``prior`` (:meth:`search_ahead` on the query thread),
        only the rows appended since it ran are scored here (exactly, when they are few) and
        merged with its hits: usually none, so the caller's share is the tail read."""
        import numpy as np

        index = self._index(scope_id, model, len(query))
        with index.lock:
            # Top up with the rows committed since the last search. This runs in the caller's
            # snapshot, so rows it cannot see yet are picked up by a later search.
            # In chunks: the first load is every row of the scope, and 100k rows as one list
            # of tuples would cost ≈ 150 MiB of transient (and fragmented) memory.
            driver = sqlite_driver(conn)
            if not index.last_seq:  # the first load: size the buffers once
                (rows,) = driver.execute(_SQLITE_COUNT, (scope_id, model)).fetchone()
                index.reserve(int(rows))
            cursor = driver.execute(_SQLITE_TAIL, (scope_id, model, index.last_seq))
            loaded = 0
            while tail := cursor.fetchmany(_TAIL_CHUNK):
                loaded += len(tail)
                width = len(query)
                blob = b"".join(row[3] for row in tail)
                q = np.frombuffer(blob, dtype=np.int8).reshape(len(tail), width)
                scale = np.array([row[2] for row in tail], dtype=np.float32)
                index.append([row[1] for row in tail], q, scale)
                index.last_seq = tail[-1][0]
            if loaded > EXACT_MAX:
                # A large load read every vector page through this connection's page cache
                # (the prompt connection's is 64 MiB): give those pages back, they are in the
                # index now. Its search pages refill as prompts read them.
                driver.execute("PRAGMA shrink_memory")
                release_free_heap()
            if (
                prior is None
                or prior.source is not index
                or not 0 < prior.covered <= index.size
                or index.size - prior.covered > EXACT_MAX
            ):
                return index.nearest(query, k)
            if prior.covered == index.size:
                return prior.hits[:k]
            merged = {h.rowid: h for h in prior.hits}
            for hit in index.nearest(query, k, start=prior.covered):
                merged.setdefault(hit.rowid, hit)
            return sorted(merged.values(), key=lambda h: (-h.similarity, h.rowid))[:k]

    def search_ahead(
        self,
        scope_id: str,
        model: str,
        query: npt.NDArray[np.float32],
        k: int,
        read: Callable[[Callable[[Connection], Any]], Any],
    ) -> Prior | None:
        """Search the scope's index as loaded, without the database (``read`` is not used):
        no snapshot is needed, so this runs on the query thread while the caller's lexical
        search runs (SQLite and numpy both release the interpreter lock). ``None`` when the
        scope is not loaded yet."""
        del read
        with self._lock:
            index = self._indexes.get((scope_id, model))
        if index is None or index.dimension != len(query):
            return None
        with index.lock:
            if not index.size:
                return None
            return Prior(index.nearest(query, k), index.size, index)

    def forget(self, rowids: Sequence[int]) -> None:
        """Mark versions found no longer current: a version row's ``valid_to`` never clears,
        so once superseded its vector can never be a hit again."""
        with self._lock:
            indexes = list(self._indexes.values())
        for index in indexes:
            with index.lock:
                index.forget(rowids)

    def pending(self, conn: Connection, model: str, after: int, limit: int) -> list[PendingVersion]:
        rows = conn.execute(
            text(_pending_sql("memory_vectors")), {"model": model, "after": after, "limit": limit}
        ).all()
        return [PendingVersion(*row) for row in rows]

    def pending_count(self, conn: Connection, model: str) -> int:
        return conn.execute(
            text(_pending_count_sql("memory_vectors")), {"model": model}
        ).scalar_one()

    def pending_estimate(self, conn: Connection, model: str, cap: int) -> int:
        return _pending_bounded(conn, "memory_vectors", model, cap)

    def prune(self, conn: Connection, model: str) -> int:
        return conn.execute(text(_prune_sql("memory_vectors")), {"model": model}).rowcount

    def count(self, conn: Connection, model: str) -> int:
        return conn.execute(
            text("SELECT count(*) FROM memory_vectors WHERE model = :model"), {"model": model}
        ).scalar_one()

    def clear(self, conn: Connection) -> None:
        conn.exec_driver_sql("DELETE FROM memory_vectors")
        with self._lock:
            self._indexes.clear()

    rebuilds_index = False

    def rebuild_index(self, conn: Connection) -> None:
        return None  # loaded per scope and topped up by this process: nothing to rebuild


# -- OceanBase: VECTOR(n) with an HNSW index -----------------------------------------------


class _OceanBaseVectors:
    def __init__(
        self,
        dimension: int,
        exact_max: int = OCEANBASE_EXACT_MAX,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._dimension = dimension
        self._table = f"memory_vectors_d{dimension}"
        self._exact_max = exact_max
        self._clock = clock
        self._sizes: dict[tuple[str, str], tuple[bool, float]] = {}  # (small, counted at)
        self._sizes_lock = threading.Lock()

    def create(self, conn: Connection) -> None:
        t = self._table
        conn.exec_driver_sql(
            f"CREATE TABLE IF NOT EXISTS {t} ("
            " version_id BIGINT NOT NULL,"
            " model VARCHAR(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,"
            " scope_id VARCHAR(256) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,"
            f" embedding VECTOR({self._dimension}) NOT NULL,"
            " PRIMARY KEY (version_id, model),"
            f" KEY ix_{t}_scope (scope_id, model),"
            f" VECTOR INDEX vx_{t} (embedding) WITH (distance=cosine, type=hnsw, lib=vsag)"
            ") DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin"
        )

    def put(
        self,
        conn: Connection,
        model: str,
        rows: Sequence[PendingVersion],
        vectors: npt.NDArray[np.float32],
    ) -> None:
        if not rows:
            return
        conn.execute(
            text(
                f"INSERT IGNORE INTO {self._table} (version_id, model, scope_id, embedding)"
                " VALUES (:rowid, :model, :scope_id, :embedding)"
            ),
            [
                {
                    "rowid": row.rowid,
                    "model": model,
                    "scope_id": row.scope_id,
                    "embedding": _literal(vectors[i]),
                }
                for i, row in enumerate(rows)
            ],
        )

    def nearest(
        self,
        conn: Connection,
        scope_id: str,
        model: str,
        query: npt.NDArray[np.float32],
        k: int,
        prior: Prior | None = None,
    ) -> list[VectorHit]:
        if prior is not None and prior.source is self:  # searched already, on the query thread
            return prior.hits[:k]
        exact = self._is_small(conn, scope_id, model)
        found = conn.execute(
            text(
                f"SELECT version_id, cosine_distance(embedding, :q) AS d FROM {self._table}"
                " WHERE scope_id = :scope_id AND model = :model"
                " ORDER BY cosine_distance(embedding, :q)"
                + ("" if exact else " APPROXIMATE")
                + " LIMIT :k"
            ),
            {"q": _literal(query), "scope_id": scope_id, "model": model, "k": k},
        ).all()
        hits = [VectorHit(int(rowid), 1.0 - float(d)) for rowid, d in found]
        hits.sort(key=lambda h: (-h.similarity, h.rowid))
        return hits

    def _is_small(self, conn: Connection, scope_id: str, model: str) -> bool:
        """Whether the scope holds at most ``exact_max`` vectors, counted at most once per
        ``SCOPE_SIZE_TTL`` (a scope grows by a few rows per write, and a search near the
        threshold is fast either way). The count reads at most ``exact_max + 1`` entries of
        the ``(scope_id, model)`` index, however large the scope. Also why the two searches
        are two statements: the server caches one plan per statement text, and a plan
        compiled for a small scope's filter is a slow one for a large scope's."""
        key = (scope_id, model)
        now = self._clock()
        with self._sizes_lock:
            known = self._sizes.get(key)
        if known is not None and now - known[1] < SCOPE_SIZE_TTL:
            return known[0]
        rows = conn.execute(
            text(
                f"SELECT count(*) FROM (SELECT 1 FROM {self._table}"
                " WHERE scope_id = :scope_id AND model = :model LIMIT :cap) AS counted"
            ),
            {"scope_id": scope_id, "model": model, "cap": self._exact_max + 1},
        ).scalar_one()
        small = int(rows) <= self._exact_max
        with self._sizes_lock:
            self._sizes[key] = (small, now)
        return small

    def search_ahead(
        self,
        scope_id: str,
        model: str,
        query: npt.NDArray[np.float32],
        k: int,
        read: Callable[[Callable[[Connection], Any]], Any],
    ) -> Prior:
        """The server's search on a connection of its own (``read``), on the query thread, so
        it overlaps with the caller's lexical search instead of following it (at 100k on
        seekdb each takes ≈ 20 ms). Its snapshot may be newer than the caller's: the caller
        keeps only hits whose version rows its own snapshot holds as current
        (``SemanticChannel.candidates``), as with SQLite's loaded index."""
        hits = read(lambda conn: self.nearest(conn, scope_id, model, query, k))
        return Prior(hits, len(hits), self)

    def forget(self, rowids: Sequence[int]) -> None:
        return None  # the server's index is authoritative; the worker prunes

    def pending(self, conn: Connection, model: str, after: int, limit: int) -> list[PendingVersion]:
        rows = conn.execute(
            text(_pending_sql(self._table)), {"model": model, "after": after, "limit": limit}
        ).all()
        return [PendingVersion(*row) for row in rows]

    def pending_count(self, conn: Connection, model: str) -> int:
        return conn.execute(text(_pending_count_sql(self._table)), {"model": model}).scalar_one()

    def pending_estimate(self, conn: Connection, model: str, cap: int) -> int:
        return _pending_bounded(conn, self._table, model, cap)

    def prune(self, conn: Connection, model: str) -> int:
        return conn.execute(text(_prune_sql(self._table)), {"model": model}).rowcount

    def count(self, conn: Connection, model: str) -> int:
        return conn.execute(
            text(f"SELECT count(*) FROM {self._table} WHERE model = :model"), {"model": model}
        ).scalar_one()

    def clear(self, conn: Connection) -> None:
        conn.exec_driver_sql(f"DELETE FROM {self._table}")

    rebuilds_index = True

    def rebuild_index(self, conn: Connection) -> None:
        """Refresh the table's optimizer statistics, then ask the server to rebuild the HNSW
        index when at least ``REBUILD_SHARE`` of its rows sit in the incremental part.

        The statistics first (≈ 0.2 s at 100k): with those of a table that was empty or
        small, the optimizer plans the scope-filtered search as a pre-filter over every
        row of the scope (seekdb at 100k: 44 ms p50) instead of the index search with an
        iterative post-filter (2.3 ms), and the server refreshes them only at its own
        schedule. The rebuild (the procedure's ``delta_rate_threshold``: the server
        decides, so a call after a small batch costs nothing): vectors written after the
        index was built, all of them after a backfill, are searched more slowly until then
        (docs/oceanbase.md), and the server's own check runs once a day. Online: the old
        index serves until the new one replaces it."""
        t = self._table  # a name of ours (the dimension is an int): nothing of a caller's
        conn.exec_driver_sql(f"CALL DBMS_STATS.GATHER_TABLE_STATS(database(), '{t}')")
        conn.exec_driver_sql(
            f"CALL DBMS_VECTOR.REBUILD_INDEX('vx_{t}', '{t}', 'embedding', {REBUILD_SHARE})"
        )


def _literal(vector: Any) -> str:
    """A vector as OceanBase's text literal ``[x,y,…]`` (bound as a parameter, never spliced)."""
    return "[" + ",".join(f"{float(x):.7g}" for x in vector) + "]"
