"""The semantic recall channel: query embedding with a deadline, vector candidates, the
embedding queue and its worker, and the backfill (docs/decisions/semantic-channel.md).

Only built when ``POWERCONTEXT_EMBEDDINGS`` is ``local`` or ``openai``; with it off the
runtime has no :class:`SemanticChannel` and every search is exactly the lexical one.

Writes never wait for a model: remember/revise commit the version and its full-text row as
before and only *wake* the :class:`EmbeddingWorker`. The queue is the anti-join "current active
versions without a vector for this model", read from the authoritative rows, so nothing is lost
across restarts, a model change re-embeds everything, and a failed round is simply retried.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

from sqlalchemy import Connection, func, select, text

from ..contract.system import EmbeddingStatus
from ..embeddings import Embedder, EmbeddingTimeoutError, EmbeddingUnavailableError
from ..search.fusion import Admission
from ..store._heap import release_free_heap
from ..store._records import iso_time, json_listed
from ..store._sqlite import sqlite_driver
from ..store.database import Database
from ..store.schema import memory_versions
from ..store.vectors import PendingVersion, Prior, VectorStore
from .background import BackgroundWorker

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = [
    "EmbeddingWorker",
    "PendingQuery",
    "SemanticChannel",
    "VectorCandidate",
    "WorkerState",
    "read_worker_state",
]

_log = logging.getLogger("powercontext.semantic")

#: Characters of a query (a whole prompt, up to 8192) given to an embedder that has no query
#: pass of its own (``embed_query``; the local model cuts by tokens instead). The cost grows
#: with the text; the opening of a prompt is what it is about.
QUERY_CHARS = 256
BATCH = 32  # versions embedded per worker step (one write transaction each)
#: Seconds between the worker's sweeps from row 0 (see embed_pending). By time, not by rounds:
#: a sweep reads every version (measured at 100k: 0.12 s warm, 0.5 s cold), and a round runs
#: per remember, so "every 30th round" was a sweep every 30 writes under a steady stream.
FULL_SWEEP_SECONDS = 60.0
MAX_QUEUED_QUERIES = 4  # query embeddings waiting beyond this fail fast (fallback)
#: A woken worker waits for a gap this long between writes before it embeds, so a burst of
#: remembers is not slowed by the model (one interpreter lock; an entry costs ≈ 4 ms of CPU)
#: and its entries are embedded together, in batches, afterwards.
QUIET_SECONDS = 0.025
#: ...but never longer than this after the first wake: a steady stream of writes still gets
#: its vectors, a batch at a time.
MAX_DEFER_SECONDS = 2.0
#: Vectors the worker writes before it asks a database server whose index it does not own
#: (OceanBase) to rebuild that index, once the queue is drained. A backfill leaves every
#: vector in the index's slow incremental part; the server decides whether a rebuild is
#: worth it (a fifth of the index incremental), so a smaller batch only costs the call.
REBUILD_AFTER_VECTORS = 10_000
#: The progress gauges count pending versions up to this many (see ``pending_estimate``).
PENDING_COUNT_CAP = 10_000
#: Seconds between rewrites of the worker's state file when only the time of its last round
#: changed (a round runs per write); a change of state is written at once.
STATE_PUBLISH_SECONDS = 10.0
#: Seconds at least between two returns of the heap's free pages to the OS by the worker
#: (``EmbeddingWorker._round``), and only after queries were embedded meanwhile.
TRIM_SECONDS = 1.0
#: Seconds the count of stored vectors stands in ``SemanticChannel.status`` (3.7 ms on SQLite,
#: 14 ms on seekdb at 100k): ``/health/ready`` needs no token, so a poll loop, or a flood,
#: costs at most one such count a second. The pending count is cheap and always fresh.
STATUS_MAX_AGE = 1.0

_v = memory_versions
_CANDIDATE_ROWS = text(
    "SELECT v.id, v.scope_id, v.entry_id, v.entry_version_id, v.text, v.valid_to, v.state FROM "
    + json_listed("ids", "BIGINT")
    + " JOIN memory_versions v ON v.id = listed.value"
)


_NEWEST_VERSION = select(func.max(_v.c.id))

_SQLITE_CANDIDATE_ROWS = (
    "SELECT id, scope_id, entry_id, entry_version_id, text, valid_to, state"
    " FROM memory_versions WHERE id IN "
)


class _CandidateRow(NamedTuple):
    id: int
    scope_id: str
    entry_id: str
    entry_version_id: str
    text: str
    valid_to: Any
    state: str


class VectorCandidate(NamedTuple):
    """A current entry version the vector channel found, with its cosine similarity."""

    entry_id: str
    entry_version_id: str
    text: str
    similarity: float


def embedding_text(text: str, tags_json: str) -> str:
    """What is embedded for a version: its text and tags (as the lexical index sees it)."""
    tags = json.loads(tags_json)
    return text + ("\n" + " ".join(tags) if tags else "")


class PendingQuery:
    """A query embedding under way: :meth:`result` waits at most until the deadline that
    started with the request, so the lexical search can run meanwhile (issue 17's budget).
    Started for a scope, the query thread then also searches that scope's vectors (SQLite: the
    loaded index; OceanBase: the server, on a connection of its own), which overlaps with the
    lexical search too; :attr:`prior` is that search once :meth:`result` returned."""

    __slots__ = ("_deadline", "_embedded", "_searched", "k", "prior", "scope_id")

    def __init__(
        self,
        embedded: Future[npt.NDArray[np.float32]],
        searched: Future[Prior | None],
        deadline: float,
        scope_id: str | None = None,
        k: int = 0,
    ) -> None:
        self._embedded = embedded
        self._searched = searched
        self._deadline = deadline
        self.scope_id = scope_id
        self.k = k
        self.prior: Prior | None = None

    def result(self) -> npt.NDArray[np.float32]:
        """The vector, or :class:`EmbeddingUnavailableError` (a timeout included). A late
        answer is dropped, not waited for. The deadline is the embedding's: the search that
        follows it on the query thread is waited for, as the caller would otherwise run it."""
        try:
            vector = self._embedded.result(timeout=max(0.0, self._deadline - time.monotonic()))
        except FutureTimeout:
            raise EmbeddingTimeoutError("the embedder did not answer in time") from None
        try:
            self.prior = self._searched.result()
        except Exception:  # cancelled (shut down meanwhile): the caller searches itself
            self.prior = None
        return vector


class SemanticChannel:
    def __init__(
        self,
        db: Database,
        embedder: Embedder,
        vectors: VectorStore,
        *,
        query_timeout: float,
        search: Admission,
        prepare: Admission,
        waits_on_network: bool = False,
        inline_queries: bool = False,
    ) -> None:
        self.embedder = embedder
        self.model_id = embedder.model_id
        #: Which vector-only candidates join a ``search_memory`` answer (recall: the agent
        #: asked) and a prepared pack (precision: it reaches every prompt).
        self.search = search
        self.prepare = prepare
        #: True when a query embedding is a network call (the route then leaves the loop).
        self.waits_on_network = waits_on_network
        #: Embed a query (and search the loaded index) on the caller's thread when the
        #: embedder can do it at once (``embed_query_now``): set for the local model on SQLite,
        #: where both are CPU work in this process (see :meth:`start_query`).
        self._inline_queries = inline_queries
        self._db = db
        self._vectors = vectors
        self._query_timeout = query_timeout
        self._queries = ThreadPoolExecutor(max_workers=1, thread_name_prefix="powercontext-qembed")
        self._queued = 0
        self._queued_lock = threading.Lock()
        self._embedding = threading.Lock()  # one queue pass at a time in this process
        self._high_water = 0
        self._next_sweep = 0.0  # time.monotonic() from which the next round sweeps
        self.fallbacks: dict[str, int] = {}
        #: Query embeddings started (a plain counter: the worker compares it between rounds).
        self.queries = 0
        self._counted: tuple[float, int] | None = None  # (monotonic, vectors)
        self._counted_lock = threading.Lock()

    # -- schema ----------------------------------------------------------------------------

    def create_schema(self) -> None:
        self._db.write(self._vectors.create)

    # -- the query path --------------------------------------------------------------------

    def snapshot(self) -> AbstractContextManager[Connection]:
        """A search's read snapshot (joins the caller's open one, as every nested read
        does): :meth:`Database.search_read`, whose statements have the prompt path's
        deadline on OceanBase."""
        return self._db.search_read()

    def start_query(self, query: str, scope_id: str | None = None, k: int = 0) -> PendingQuery:
        """Start embedding the query (and, with ``scope_id``, searching that scope's loaded
        index for ``k`` candidates, see :meth:`candidates`); :class:`EmbeddingUnavailableError`
        at once when the embedder is busy (more than ``MAX_QUEUED_QUERIES`` waiting) or shut
        down.

        With ``inline_queries`` and a warm, idle embedder both run here, on the caller's
        thread, before it returns: the query thread bought no overlap for an in-process model.
        Its work is numpy calls that each release the interpreter lock and must take it back
        while the caller's lexical search (Python) holds it, so it progressed mostly once the
        caller waited, and each of the dozens of hand-offs per query cost a context switch
        (measured over HTTP at 100k: docs/decisions/semantic-channel.md, "The query embedding
        runs on the request's thread"). A cold or busy embedder still goes to the thread, with
        the deadline and the fallback."""
        self.queries += 1
        if self._inline_queries:
            pending = self._inline(query, scope_id, k)
            if pending is not None:
                return pending
        with self._queued_lock:
            if self._queued >= MAX_QUEUED_QUERIES:
                raise EmbeddingTimeoutError("the embedder is busy")
            self._queued += 1
        deadline = time.monotonic() + self._query_timeout
        embedded: Future[npt.NDArray[np.float32]] = Future()
        try:
            searched = self._queries.submit(self._embed_and_search, query, scope_id, k, embedded)
        except RuntimeError:  # shut down
            self._release()
            raise EmbeddingUnavailableError("the embedder is shut down") from None
        searched.add_done_callback(lambda done: self._finished(done, embedded))
        return PendingQuery(embedded, searched, deadline, scope_id, k)

    def _inline(self, query: str, scope_id: str | None, k: int) -> PendingQuery | None:
        """:meth:`start_query` done on this thread, or ``None`` when the embedder cannot
        answer at once (see ``LocalUSEEmbedder.embed_query_now``)."""
        embed_now = getattr(self.embedder, "embed_query_now", None)
        if embed_now is None:
            return None
        embedded: Future[npt.NDArray[np.float32]] = Future()
        searched: Future[Prior | None] = Future()
        try:
            vector = embed_now(query)
        except EmbeddingUnavailableError as exc:  # answered now: the caller falls back
            embedded.set_exception(exc)
            searched.set_result(None)
            return PendingQuery(embedded, searched, time.monotonic(), scope_id, k)
        if vector is None:
            return None
        embedded.set_result(vector)
        searched.set_result(self._search_ahead(vector, scope_id, k))
        return PendingQuery(embedded, searched, time.monotonic(), scope_id, k)

    def _finished(self, searched: Future[Any], embedded: Future[Any]) -> None:
        self._release()
        if searched.cancelled() and not embedded.done():  # shut down before it ran
            embedded.set_exception(EmbeddingUnavailableError("the embedder is shut down"))

    def _embed_and_search(
        self,
        query: str,
        scope_id: str | None,
        k: int,
        embedded: Future[npt.NDArray[np.float32]],
    ) -> Prior | None:
        try:
            vector = self._embed_one(query)
        except BaseException as exc:
            embedded.set_exception(exc)
            raise
        embedded.set_result(vector)
        return self._search_ahead(vector, scope_id, k)

    def _search_ahead(
        self, vector: npt.NDArray[np.float32], scope_id: str | None, k: int
    ) -> Prior | None:
        if scope_id is None or k <= 0:
            return None
        # Over-fetched like candidates(): superseded versions are dropped there. This search is
        # only a head start: if it fails, the caller searches in its snapshot as it would.
        try:
            return self._vectors.search_ahead(scope_id, self.model_id, vector, 2 * k, self._read)
        except Exception as exc:  # logged by type only, never the query
            _log.warning("vector_prior_failed", extra={"error_type": type(exc).__name__})
            return None

    def warm(self) -> None:
        """Load a local model on the query thread now, in the background, so a serving
        process's first prompts do not spend their deadline on the weights (≈ 0.3 s) and fall
        back. Queries meanwhile wait behind it and may still fall back; a network embedder is
        not called."""
        if self.waits_on_network:
            return
        samples = ["warm up", "如何运行集成测试？", "where does the deploy script live " * 8]

        def warm() -> None:
            try:
                for text in samples:  # short, Chinese and a long one: the shapes queries have
                    self.embedder.embed([text[:QUERY_CHARS]])  # the entries' pass
                    self._embed_one(text)  # the query pass, if the embedder has its own
            except EmbeddingUnavailableError as exc:
                _log.warning("embedder_warm_up_failed", extra={"code": exc.code})
            else:
                _log.info("embedder_warmed")

        self._queries.submit(warm)

    def embed_query(self, query: str) -> npt.NDArray[np.float32]:
        """The query's vector, waiting for it (see :meth:`start_query`)."""
        return self.start_query(query).result()

    def _embed_one(self, text: str) -> npt.NDArray[np.float32]:
        """A query's vector: the embedder's own query pass when it has one (the local model:
        a faster pass over the first tokens), else the first ``QUERY_CHARS`` characters."""
        embed_query = getattr(self.embedder, "embed_query", None)
        if embed_query is not None:
            vector: npt.NDArray[np.float32] = embed_query(text)
            return vector
        return self.embedder.embed([text[:QUERY_CHARS]], timeout=self._query_timeout)[0]

    def _read(self, work: Callable[[Connection], Any]) -> Any:
        with self._db.read() as conn:
            return work(conn)

    def _release(self) -> None:
        with self._queued_lock:
            self._queued -= 1

    def note_fallback(self, operation: str, error: EmbeddingUnavailableError) -> None:
        """Count and log (content-free) a search that fell back to the lexical channel."""
        self.fallbacks[error.code] = self.fallbacks.get(error.code, 0) + 1
        _log.warning("semantic_fallback", extra={"operation": operation, "code": error.code})

    def candidates(
        self,
        scope_id: str,
        query: npt.NDArray[np.float32],
        k: int,
        exclude_versions: frozenset[str] = frozenset(),
        prior: Prior | None = None,
    ) -> list[VectorCandidate]:
        """The nearest current, active versions of the scope, best first, in the caller's
        snapshot (nested in its :meth:`Database.read`). ``prior``: the query thread's search
        of the loaded index for this scope and ``k`` (:class:`PendingQuery`); the rows
        committed since are searched here."""
        with self._db.read() as conn:
            # Ask for more than k: superseded versions' vectors are dropped below.
            hits = self._vectors.nearest(conn, scope_id, self.model_id, query, 2 * k, prior)
            if not hits:
                return []
            rows = {row.id: row for row in self._rows(conn, [h.rowid for h in hits])}
        stale = [
            h.rowid
            for h in hits
            if h.rowid in rows
            and (rows[h.rowid].valid_to is not None or rows[h.rowid].state != "active")
        ]
        if stale:
            self._vectors.forget(stale)
        found: list[VectorCandidate] = []
        seen: set[int] = set()
        for hit in hits:
            row = rows.get(hit.rowid)
            if (
                row is None
                or hit.rowid in seen
                or row.scope_id != scope_id
                or row.valid_to is not None
                or row.state != "active"
                or row.entry_version_id in exclude_versions
            ):
                continue
            seen.add(hit.rowid)
            found.append(
                VectorCandidate(row.entry_id, row.entry_version_id, row.text, hit.similarity)
            )
            if len(found) == k:
                break
        return found

    def _rows(self, conn: Connection, ids: list[int]) -> Sequence[Any]:
        wanted = sorted(set(ids))
        if self._db.backend == "sqlite":
            # The driver cursor of the open transaction (same snapshot): SQLAlchemy's
            # expanding IN cost ≈ 1 ms of the ≈ 2.5 ms vector step at 100k. The ids are ints
            # bound as parameters; only the count of placeholders is built.
            marks = ",".join("?" * len(wanted))
            rows = sqlite_driver(conn).execute(_SQLITE_CANDIDATE_ROWS + f"({marks})", wanted)
            return [_CandidateRow(*row) for row in rows.fetchall()]
        return conn.execute(_CANDIDATE_ROWS, {"ids": json.dumps(wanted)}).all()

    # -- the write side --------------------------------------------------------------------

    def embed_pending(self, max_batches: int = 8) -> int:
        """One worker round: embed up to ``max_batches`` batches of queued versions.

        Most rounds read only versions newer than the newest one seen (a primary-key range);
        the first round, then one at most every ``FULL_SWEEP_SECONDS``, scans from row 0, which
        also catches versions committed out of id order (concurrent writers on OceanBase) and
        prunes the vectors of superseded versions and of other models."""
        with self._embedding:
            now = time.monotonic()
            sweep = now >= self._next_sweep
            if sweep:
                self._next_sweep = now + FULL_SWEEP_SECONDS
            after = 0 if sweep else self._high_water
            done = 0
            for _ in range(max_batches):
                rows, seen = self._read(lambda conn, after=after: self._pending(conn, after))
                if rows:
                    self._store(rows)
                    done += len(rows)
                after = seen
                self._high_water = max(self._high_water, seen)
                if len(rows) < BATCH:
                    break
            if sweep:
                self._db.write(lambda conn: self._vectors.prune(conn, self.model_id))
            return done

    def _pending(self, conn: Connection, after: int) -> tuple[list[PendingVersion], int]:
        """A batch of the queue after ``after``, and the id up to which this read has seen
        every version. A short batch saw them all, so the next round starts past the newest:
        the high-water must advance when nothing is pending, or every round (one a second,
        and one per write) re-reads the whole table (≈ 0.1 s at 100k)."""
        rows = self._vectors.pending(conn, self.model_id, after, BATCH)
        if len(rows) == BATCH:
            return rows, rows[-1].rowid
        newest = conn.execute(_NEWEST_VERSION).scalar()
        return rows, max(after, int(newest or 0))

    def _store(self, rows: Sequence[PendingVersion]) -> None:
        vectors = self.embedder.embed([embedding_text(r.text, r.tags) for r in rows])
        self._db.write(lambda conn: self._vectors.put(conn, self.model_id, rows, vectors))

    def pending_count(self) -> int:
        return self._read(lambda conn: self._vectors.pending_count(conn, self.model_id))

    def pending_estimate(self, cap: int = PENDING_COUNT_CAP) -> int:
        """Versions waiting for a vector, at most ``cap``: what ``doctor``, ``/health/ready``,
        ``/metrics`` and the console show (a readiness poll or a scrape may call it every
        second). Counted past the newest embedded version, so it reads only what was written
        since the worker last embedded (``VectorStore.pending_estimate``). Measured at 100k
        versions on one core of the shared dev box: SQLite 0.16 ms with none pending,
        0.21 ms with 50, 2.5 ms at the cap with all 100k pending, where :meth:`pending_count`
        (the full anti-join) takes 23-35 ms; seekdb (the test server) 1.1, 1.4 and 7.7 ms,
        where the full count takes 34-85 ms. The vectors' count beside it is 3.7 ms
        (SQLite) and 14 ms (seekdb) at 100k, hence :meth:`status`'s reuse."""
        return self._read(lambda conn: self._vectors.pending_estimate(conn, self.model_id, cap))

    def vector_count(self) -> int:
        return self._read(lambda conn: self._vectors.count(conn, self.model_id))

    def status(self, worker: WorkerState | None) -> EmbeddingStatus:
        """The progress surfaces' answer: :meth:`pending_estimate`, the vectors stored
        (reused for ``STATUS_MAX_AGE`` seconds) and the worker's last round. ``failing``
        while its last round raised; else ``embedding`` while anything is pending (a woken
        worker waits for writes to pause, so a write shows here first), ``idle`` when
        nothing is."""
        pending = self.pending_estimate()
        now = time.monotonic()
        with self._counted_lock:
            counted = self._counted
            if counted is None or now - counted[0] >= STATUS_MAX_AGE:
                counted = self._counted = (now, self.vector_count())
        vectors = counted[1]
        failing = worker is not None and worker.state == "failing"
        return EmbeddingStatus(
            state="failing" if failing else "embedding" if pending else "idle",
            model=self.model_id,
            pending=pending,
            pending_capped=pending >= PENDING_COUNT_CAP,
            vectors=vectors,
            error=worker.error if failing and worker is not None else None,
            last_round=None if worker is None else iso_time(int(worker.last_round * 1000)),
        )

    def backfill(self, progress: Callable[[int, int], None] | None = None) -> int:
        """Embed every current active version that has no vector for this model (and prune the
        rest); ``progress(done, total)`` after each batch. Returns how many were embedded."""
        with self._embedding:
            self._db.write(lambda conn: self._vectors.prune(conn, self.model_id))
            total = self.pending_count()
            done = 0
            after = 0
            if progress is not None:
                progress(0, total)
            while True:
                rows = self._read(
                    lambda conn, after=after: self._vectors.pending(
                        conn, self.model_id, after, BATCH
                    )
                )
                if not rows:
                    break
                self._store(rows)
                done += len(rows)
                after = rows[-1].rowid
                self._high_water = max(self._high_water, after)
                if progress is not None:
                    progress(done, max(total, done))
            return done

    @property
    def rebuilds_index(self) -> bool:
        """Whether the vectors' index is the database server's (OceanBase), to be rebuilt
        after a large backfill (:meth:`rebuild_index`)."""
        return self._vectors.rebuilds_index

    def rebuild_index(self) -> float:
        """Ask the database server to rebuild its vector index if enough of it is
        incremental (it decides; see ``VectorStore.rebuild_index``), waiting until it is
        done; the seconds it took. Online: searches go on meanwhile."""
        started = time.monotonic()
        self._db.maintain(self._vectors.rebuild_index)
        took = time.monotonic() - started
        _log.info("vector_index_rebuild_checked", extra={"duration_ms": round(took * 1000, 1)})
        return took

    def close(self) -> None:
        self._queries.shutdown(wait=False, cancel_futures=True)
        close = getattr(self.embedder, "close", None)
        if close is not None:
            close()


class WorkerState(NamedTuple):
    """What the embedding worker's last round did (the progress surfaces): never content,
    only the kind of a failure (the exception's type, as its log line has it)."""

    state: Literal["idle", "embedding", "failing"]  # drained / more queued / it raised
    error: str | None  # the failing round's exception type
    last_round: float  # epoch seconds


def read_worker_state(path: Path) -> WorkerState | None:
    """The state a serving process's worker published (``EmbeddingWorker(state_file=…)``):
    with ``serve --workers N`` the worker runs in the supervisor, and the workers that answer
    ``/health/ready`` and ``/metrics`` read it here. None when absent or unreadable."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        state = WorkerState(data["state"], data["error"], float(data["last_round"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if state.state not in ("idle", "embedding", "failing"):
        return None
    return state


class EmbeddingWorker(BackgroundWorker):
    """The background thread that drains the embedding queue.

    It runs in the serving process (the supervisor with several workers, like the other
    background jobs), wakes every ``interval`` seconds or when a local write calls
    :meth:`wake`, and backs off (doubling, up to a minute) while the embedder fails (the loop
    shared with the distill worker, :mod:`.background`). A failing round is logged by
    exception type only."""

    THREAD_NAME = "powercontext-embed"
    LOG = _log
    FAILED_EVENT = "memory_embedding_failed"
    UNWRITTEN_EVENT = "embedding_state_unwritten"
    PUBLISH_SECONDS = STATE_PUBLISH_SECONDS

    def __init__(
        self,
        channel: SemanticChannel,
        interval: float,
        *,
        quiet: float = QUIET_SECONDS,
        max_defer: float = MAX_DEFER_SECONDS,
        rebuild_after: int = REBUILD_AFTER_VECTORS,
        state_file: Path | None = None,
    ) -> None:
        self.event = "memory_embedded"
        #: The last round's outcome (None before the first one ends).
        self.state: WorkerState | None = None
        self._channel = channel
        self._quiet = quiet
        self._max_defer = max_defer
        self._rebuild_after = rebuild_after
        self._written = 0  # vectors written since the last rebuild was asked for
        self._rebuilding: threading.Thread | None = None
        self._trimmed = (time.monotonic(), 0)  # (when, channel.queries then)
        super().__init__(interval, state_file)

    def _woken(self) -> None:
        self._until_writes_pause()

    def _round(self) -> float:
        started = time.monotonic()
        count = self._channel.embed_pending()
        if count:
            _log.info(
                self.event,
                extra={
                    "count": count,
                    "duration_ms": round((time.monotonic() - started) * 1000, 1),
                },
            )
        # A full round means more is queued: go again at once.
        drained = count < BATCH * 8
        self._record("idle" if drained else "embedding", None)
        self._written += count
        self._trim_heap(count)  # first: a rebuild thread started now would wait on its locks
        if drained and self._written >= self._rebuild_after:
            self._start_rebuild()
        return self._interval if drained else 0.0

    def _trim_heap(self, embedded: int) -> None:
        """Give the heap's free pages back to the OS (``malloc_trim``) after this round
        embedded entries, or at most every ``TRIM_SECONDS`` once queries were embedded since.

        Why: prompts on the hybrid path allocate megabytes of numpy temporaries each (the
        query pass, the prefilter, the rescoring), and glibc keeps what they free in its
        heaps. Measured over HTTP at 100k (docs/decisions/semantic-channel.md, "The worker
        trims the heap"): 300 long prompts left ≈ 27 MiB of free pages resident, the daemon
        at 291 MiB against a 300 MiB budget; trimmed, 263 MiB. A trim costs ≈ 0.3-0.5 ms
        here, on this thread; the memory is reused by the next prompts either way."""
        queries = self._channel.queries
        now = time.monotonic()
        when, seen = self._trimmed
        if embedded or (queries != seen and now - when >= TRIM_SECONDS):
            release_free_heap()
            self._trimmed = (now, queries)

    def _failed(self, error_type: str) -> None:
        self._record("failing", error_type)

    def _record(self, state: Literal["idle", "embedding", "failing"], error: str | None) -> None:
        """Keep the round's outcome, and publish it to the state file on a change of state
        or error kind, else at most every ``STATE_PUBLISH_SECONDS`` (rounds run per write)."""
        self.state = WorkerState(state, error, time.time())
        self._publish(self.state)

    def _start_rebuild(self) -> None:
        """Rebuild the server's index in a thread of its own (it may take many minutes at
        100k: the worker keeps embedding new writes meanwhile); one at a time."""
        if not self._channel.rebuilds_index:
            return
        if self._rebuilding is not None and self._rebuilding.is_alive():
            return  # the next drained round asks again
        self._written = 0
        rebuilding = threading.Thread(
            target=self._rebuild, name="powercontext-vector-index", daemon=True
        )
        rebuilding.start()
        self._rebuilding = rebuilding  # started first: wait_for_rebuild may join it at once

    def _rebuild(self) -> None:
        try:
            self._channel.rebuild_index()
        except Exception as exc:  # the server rebuilds by itself too, only later
            _log.warning("vector_index_rebuild_failed", extra={"error_type": type(exc).__name__})

    def wait_for_rebuild(self, timeout: float) -> bool:
        """Wait for a rebuild under way, if any; False when it is still running."""
        rebuilding = self._rebuilding
        if rebuilding is not None:
            rebuilding.join(timeout)
            return not rebuilding.is_alive()
        return True

    def _until_writes_pause(self) -> None:
        """Wait until no write has woken the worker for ``quiet`` seconds (at most
        ``max_defer``, or until stopped)."""
        give_up = time.monotonic() + self._max_defer
        while not self._stop.is_set():
            left = give_up - time.monotonic()
            if left <= 0 or not self._wake.wait(min(self._quiet, left)):
                return
            self._wake.clear()
