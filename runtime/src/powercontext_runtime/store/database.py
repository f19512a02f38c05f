"""Engine construction and the two transaction shapes every repository uses.

``write()`` serialises writers: on SQLite with ``BEGIN IMMEDIATE`` (so a reader never has to
upgrade to a writer mid-transaction, which SQLite cannot wait for), on OceanBase with row
locks taken by the repositories. ``read()`` gives one consistent snapshot, which is what lets
a search cite exactly the revision it searched.

Every storage failure leaves this module as a typed :class:`UnavailableError` (503), whether
SQLAlchemy wrapped it or the driver raised it directly (the ``BEGIN`` of the SQLite ``begin``
hook, the prompt path's driver-cursor reads), and never with the driver's message, which can
carry SQL and stored content. A connection that hit a fault is not used again: it and every
connection opened before it are replaced, so a transient fault (a read-only file, an I/O
error) ends when its cause does, without a restart (docs/decisions/storage-faults.md).
"""

from __future__ import annotations

import enum
import logging
import os
import shutil
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Literal, TypeVar

from sqlalchemy import (
    BigInteger,
    Column,
    Connection,
    Engine,
    Integer,
    MetaData,
    Table,
    create_engine,
    event,
    insert,
    text,
    update,
)
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError, DisconnectionError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from sqlalchemy.pool import StaticPool
from sqlalchemy.schema import CreateTable

from ..errors import UnavailableError
from . import compaction, fulltext
from ._sqlite import sqlite_driver
from .schema import add_missing_columns, add_missing_indexes, metadata

__all__ = ["Backend", "Database", "NotWritableError", "RetryableConflict"]

Backend = Literal["sqlite", "oceanbase"]
T = TypeVar("T")

_log = logging.getLogger("powercontext.store")

BUSY_TIMEOUT_SECONDS = 5.0
"""How long a request waits for SQLite's write lock, and for a pooled connection, before it is
answered ``503`` busy. Writes hold the lock for milliseconds; a wait this long means another
process holds it (a long ``reindex``), and the caller is better told to retry."""
PROMPT_BUSY_TIMEOUT_SECONDS = 1.0
"""The same for the prompt connection: it runs on the event loop, where a wait stalls every
request, and the hook that asked gives up after 2 s anyway."""
PROMPT_STATEMENT_TIMEOUT_SECONDS = 1.0
"""How long one statement of the prompt path and of a search may run on OceanBase before the
server cancels it (``ob_query_timeout`` of those connections; the server's default is 10 s).
The hook that asked gives up after 2 s: a statement still running at 1 s answers nothing in
time, so the caller gets a typed ``503`` at once and the server stops spending CPU on it."""
PROMPT_POOL_CONNECTIONS = 40
"""Connections the OceanBase prompt pool may open: as many as the server's worker threads
(AnyIO's default 40), so a prompt never waits for a connection another one holds."""
_MIN_FREE_BYTES = 1 << 20  # below this the disk of an SQLite file counts as full

# MySQL-protocol errors worth one more attempt of an idempotent transaction: deadlock,
# lock wait timeout, and OceanBase's "transaction needs to be retried" family.
_TRANSIENT_MYSQL_CODES = {1205, 1213, 4012, 6002, 6005, 6213, 6224, 6226}


class RetryableConflict(Exception):
    """Raised inside a write transaction when a concurrent first write won a race.

    The transaction is rolled back and run again from the start; nothing was committed.
    """


class NotWritableError(UnavailableError):
    """:meth:`Database.check_writes` found that a write cannot be committed now (503)."""


class _Fault(enum.Enum):
    """What a storage failure means for the caller, and for the connection it happened on."""

    CONFLICT = "conflict"  # a race on a first write: rolled back, nothing committed
    TRANSIENT = "transient"  # OceanBase deadlock, lock wait or retry code: rolled back
    BUSY = "busy"  # SQLite: the wait for another connection's lock ran out
    READ_ONLY = "read_only"
    CANNOT_OPEN = "cannot_open"  # SQLite: the file, or the WAL files beside it
    FULL = "full"
    DAMAGED = "damaged"  # SQLite: a corrupt page or a corrupt full-text index
    BROKEN = "broken"  # an I/O error, a server gone: anything else

    @property
    def message(self) -> str:
        """What the caller is told: the kind of failure and what to do, nothing of the driver's."""
        return _MESSAGES[self]


_MESSAGES = {
    _Fault.CONFLICT: "the write kept racing with concurrent writers; retry it",
    _Fault.TRANSIENT: "the database is busy; retry the request",
    _Fault.BUSY: "the database is busy; retry the request",
    _Fault.READ_ONLY: (
        "the database is read-only: check the permissions of its file and folder"
        " (or the server's read-only mode)"
    ),
    _Fault.CANNOT_OPEN: (
        "the database file cannot be opened: check the permissions of its folder and files"
        " (SQLite keeps -wal and -shm files beside it) and that its disk is mounted read-write"
    ),
    _Fault.FULL: "the database is full: no space is left on its disk",
    _Fault.DAMAGED: (
        "the database file is damaged: restart the runtime, which rebuilds a damaged search"
        " index, or restore a backup (powercontext backup)"
    ),
    _Fault.BROKEN: "the database is unavailable",
}
# Failures of concurrency, not of storage: they say nothing about the connection or the file.
_CONTENTION = {_Fault.CONFLICT, _Fault.TRANSIENT, _Fault.BUSY}
# Faults after which the connection is replaced: what it holds of the file (opened read-only,
# a failed I/O) may be what failed.
_REPLACES_CONNECTION = set(_Fault) - _CONTENTION
# Faults a write transaction may run again after, because nothing was committed; a read-only
# refusal writes nothing, and the retry runs on a fresh connection.
_RETRIED_WRITES = {_Fault.CONFLICT, _Fault.TRANSIENT, _Fault.READ_ONLY}
# Faults that say writes cannot be committed now (what readiness reports).
_WRITE_HEALTH = _REPLACES_CONNECTION | {_Fault.BUSY}

_SQLITE_FAULTS = {  # by primary result code
    3: _Fault.READ_ONLY,  # SQLITE_PERM
    5: _Fault.BUSY,  # SQLITE_BUSY
    6: _Fault.BUSY,  # SQLITE_LOCKED
    8: _Fault.READ_ONLY,  # SQLITE_READONLY, and the file moved, cannot lock, recovery…
    11: _Fault.DAMAGED,  # SQLITE_CORRUPT, and FTS5's SQLITE_CORRUPT_VTAB
    13: _Fault.FULL,  # SQLITE_FULL
    14: _Fault.CANNOT_OPEN,  # SQLITE_CANTOPEN
}
_MYSQL_FAULTS = {
    **dict.fromkeys(_TRANSIENT_MYSQL_CODES, _Fault.TRANSIENT),
    **dict.fromkeys((1290, 1792, 1836), _Fault.READ_ONLY),  # --read-only, read-only txn/mode
    **dict.fromkeys((1021, 1114), _Fault.FULL),  # disk full, table full
}

# One row that the write check rewrites; created by the check itself (``IF NOT EXISTS``), so it
# works before :meth:`Database.create_schema` and needs nothing from the schema module.
_health = Table(
    "storage_health",
    MetaData(),
    Column("id", Integer, primary_key=True, autoincrement=False),
    Column("checked_at", BigInteger, nullable=False),
)
_GENERATION = "powercontext_fault_generation"


class _StorageError(Exception):
    """A classified storage failure on its way to this module's boundary (never leaves it)."""

    def __init__(self, fault: _Fault, error_type: str) -> None:
        super().__init__(fault.name)
        self.fault = fault
        self.error_type = error_type


class Database:
    """Owns the engine and knows the backend; the only place that creates connections."""

    def __init__(
        self, url: str, *, echo: bool = False, prompt_cache_kib: int | None = None
    ) -> None:
        """``prompt_cache_kib``: page cache of the SQLite connection that serves prompts
        (:meth:`prompt_read`); ``None`` keeps SQLite's default (2 MiB)."""
        parsed = make_url(url)
        self.url = parsed
        if parsed.get_backend_name() == "sqlite":
            self.backend: Backend = "sqlite"
            self.engine = _sqlite_engine(url, echo=echo)
            self._read_engine = self.engine
            self._prompt_engine = (
                _sqlite_engine(url, echo=echo, prompt_reader=True, cache_kib=prompt_cache_kib)
                if _sqlite_file(url)
                else self.engine
            )
            # Searches keep the pooled connections: the prompt connection stays the event
            # loop's (a search runs on a worker thread and would take it from a prompt).
            self._search_engine = self._read_engine
        elif parsed.get_backend_name() == "mysql":
            self.backend = "oceanbase"
            # Pools whose connections keep their isolation level for life: switching one
            # connection per transaction (SET … and a reset when it returns to the pool) cost
            # a prepare on OceanBase several extra round trips.
            self.engine = _mysql_engine(url, "READ COMMITTED", echo=echo)
            self._read_engine = _mysql_engine(url, "REPEATABLE READ", echo=echo)
            # The prompt path's and the searches' own pool: the server cancels its statements
            # after PROMPT_STATEMENT_TIMEOUT_SECONDS, and a wait for one of its connections is
            # as short as for SQLite's prompt connection.
            self._prompt_engine = _mysql_engine(
                url,
                "REPEATABLE READ",
                echo=echo,
                statement_timeout=PROMPT_STATEMENT_TIMEOUT_SECONDS,
                pool_timeout=PROMPT_BUSY_TIMEOUT_SECONDS,
                connections=PROMPT_POOL_CONNECTIONS,
            )
            self._search_engine = self._prompt_engine
        else:
            raise ValueError("database URL must be sqlite:/// or mysql+pymysql://")
        self.fulltext = fulltext.for_backend(self.backend)
        self._open_read: ContextVar[Connection | None] = ContextVar(
            f"powercontext_read_{id(self)}", default=None
        )
        # The driver's own exception classes: the ``begin`` hook and driver-cursor reads raise
        # them unwrapped, and they must be classified like SQLAlchemy's.
        self._dbapi = self.engine.dialect.loaded_dbapi
        self._storage_errors: tuple[type[Exception], ...] = (DBAPIError, self._dbapi.Error)
        # An in-memory database lives in its one connection: replacing it would lose the data.
        self._replaces_connections = self.backend == "oceanbase" or _sqlite_file(url)
        self._fault_generation = 0
        # SQLite admits one writer at a time. Left to SQLite, waiting writers poll with its
        # busy handler's growing sleeps, and under contention on a loaded machine one can miss
        # every release for the whole busy timeout (measured: 8 writers in one process, load
        # 10-17, a write refused as busy after 5 s). Queued on a lock in this process, the
        # next writer starts the moment the last one commits; other processes still meet
        # SQLite's own timeout.
        self._writer = threading.Lock() if self.backend == "sqlite" else None
        if self._replaces_connections:
            for engine in {self.engine, self._read_engine, self._prompt_engine}:
                self._replace_stale_connections(engine)
        # (monotonic time, failure message or None) of the last write check or real write.
        self._last_write: tuple[float, str | None] | None = None
        self._checking = threading.Lock()  # one write check at a time
        self._health_table_ready = False

    # -- lifecycle -------------------------------------------------------------------------

    def create_schema(self) -> None:
        """Create tables and derived indexes idempotently."""
        with self._guard(), self._connect(self.engine) as conn, conn.begin():
            metadata.create_all(conn)
            for column in add_missing_columns(conn):
                _log.info("schema_column_added", extra={"operation": column})
            for index in add_missing_indexes(conn):
                _log.info("schema_index_added", extra={"operation": index})
            self.fulltext.create(conn)

    def check_server(self) -> None:
        """Refuse to run on a server that is not what the URL promises."""
        with self._guard(), self._connect(self.engine) as conn:
            if self.backend == "sqlite":
                options = {row[0] for row in conn.exec_driver_sql("PRAGMA compile_options")}
                if "ENABLE_FTS5" not in options:
                    raise UnavailableError("this SQLite build has no FTS5 full-text support")
                return
            version = str(conn.exec_driver_sql("SELECT version()").scalar() or "")
        if "oceanbase" not in version.lower():
            raise UnavailableError(
                "the MySQL-protocol server is not OceanBase/seekdb (MySQL mode); "
                "PowerContext needs its FULLTEXT space parser"
            )

    def check_writes(self, *, max_age: float = 0.0) -> None:
        """Raise :class:`NotWritableError` unless a write can be committed now.

        Reads can work while writes fail (a read-only file, folder or server, a full disk, a
        lock held elsewhere), so this commits a real write: it rewrites one row of a table of
        its own. On an SQLite file it also wants 1 MiB free on the disk, because a small write
        that fits in pages SQLite already has (or in a WAL it is reusing) does not notice a
        full disk.

        With ``max_age`` (readiness polls), the outcome of the last check or real write, when
        at most that old, answers instead, and a caller that finds a check running (it may
        wait up to the busy timeout) gets the last outcome rather than a second wait beside
        it: a poll loop adds at most one small write a second and one waiting connection.
        """
        if self._known_write_outcome(max_age) is None and self._checking.acquire(
            blocking=max_age <= 0
        ):
            try:
                if self._known_write_outcome(max_age) is None:
                    self._check_writes_now()
            finally:
                self._checking.release()
        if self._last_write is None:
            raise NotWritableError("the first write check has not finished; retry")
        failure = self._last_write[1]
        if failure is not None:
            raise NotWritableError(f"a write failed: {failure}")

    def _known_write_outcome(self, max_age: float) -> tuple[float, str | None] | None:
        last = self._last_write
        return last if last is not None and time.monotonic() - last[0] <= max_age else None

    def _check_writes_now(self) -> None:
        try:
            self.write(self._write_check)
        except UnavailableError as exc:
            self._last_write = (time.monotonic(), exc.message)
        else:
            self._health_table_ready = True

    def dispose(self) -> None:
        for engine in {self.engine, self._read_engine, self._prompt_engine}:
            engine.dispose()

    def ping(self) -> None:
        with self._guard(), self._connect(self.engine) as conn:
            conn.execute(text("SELECT 1"))

    def repair_search_indexes(self) -> list[fulltext.IndexedFamily]:
        """Empty every full-text index whose structure is damaged; the families emptied, which
        the caller rebuilds from the version rows. Run at start-up: a damaged FTS5 index fails
        every write and search of its family until it is rebuilt."""

        def work(conn: Connection, family: fulltext.IndexedFamily) -> bool:
            if not self.fulltext.damaged(conn, family):
                return False
            self.fulltext.reset(conn, family)
            return True

        return [
            family
            for family in fulltext.INDEXED_FAMILIES
            if self.write(lambda conn, family=family: work(conn, family))
        ]

    def compact_search_index(self, max_steps: int = 200) -> int:
        """Merge the full-text index's segments, one short write transaction per step, so
        writers wait at most one step. Returns the number of steps that did work."""
        steps = 0
        for family in fulltext.INDEXED_FAMILIES:
            while steps < max_steps and self.write(
                lambda conn, family=family: self.fulltext.compact(conn, family)
            ):
                steps += 1
        return steps

    def compact_storage(self, wait: float) -> compaction.Compaction:
        """Merge what a bulk load left behind (``powercontext compact``, see
        :mod:`.compaction`): SQLite's FTS5 segments, all of them, one short write per step;
        OceanBase: a major compaction of the tenant, waited for up to ``wait`` seconds."""
        started = time.monotonic()
        if self.backend == "sqlite":
            steps = self.compact_search_index(max_steps=sys.maxsize)
            return compaction.Compaction(self.backend, time.monotonic() - started, True, steps)
        finished = self.maintain(lambda conn: compaction.major_compaction(conn, wait))
        return compaction.Compaction(self.backend, time.monotonic() - started, finished)

    # -- transactions ----------------------------------------------------------------------

    @contextmanager
    def read(self) -> Iterator[Connection]:
        """One read snapshot (SQLite: a deferred transaction; MySQL: repeatable read).

        Reads nested in an open one (same thread or task) share its snapshot and connection:
        ``prepare_context`` wraps its Memory and Experience searches in one read, so both see
        the same state and a prompt pays for one transaction, not two.
        """
        with self._snapshot(self._read_engine) as conn:
            yield conn

    @contextmanager
    def prompt_read(self) -> Iterator[Connection]:
        """:meth:`read` for work that runs on every prompt (``prepare_context``).

        On an SQLite file it uses a connection of its own, kept for that path only, that
        refuses writes (``query_only``: preparing a pack writes nothing) and has a page cache
        large enough for the search index's hot pages. A prompt reads a few hundred scattered
        pages (candidate documents, postings, term frequencies); with SQLite's default 2 MiB
        cache each one missing was a ``pread`` system call, about a fifth of a prepare's CPU
        at 100k entries, and a pooled connection's cache was cooled by whatever else used it.
        On OceanBase it uses a pool of its own whose statements the server cancels after
        :data:`PROMPT_STATEMENT_TIMEOUT_SECONDS` (a typed 503 instead of a wait of up to the
        server's 10 s). An in-memory SQLite database has one connection: there it is
        :meth:`read`.
        """
        with self._snapshot(self._prompt_engine) as conn:
            yield conn

    @contextmanager
    def search_read(self) -> Iterator[Connection]:
        """:meth:`read` for a search an agent waits for (``search_memory`` and its semantic
        candidates, ``search_experience``). On OceanBase it runs on the prompt path's
        connections, whose statements the server cancels after
        :data:`PROMPT_STATEMENT_TIMEOUT_SECONDS` (a typed 503); on SQLite it is :meth:`read`.
        Nested in :meth:`prompt_read` (a prepare's searches), it shares that snapshot."""
        with self._snapshot(self._search_engine) as conn:
            yield conn

    @contextmanager
    def _snapshot(self, engine: Engine) -> Iterator[Connection]:
        current = self._open_read.get()
        if current is not None:
            yield current
            return
        with self._guard(), self._connect(engine) as conn, conn.begin():
            token = self._open_read.set(conn)
            try:
                yield conn
            finally:
                self._open_read.reset(token)

    def write(self, work: Callable[[Connection], T], *, attempts: int = 3) -> T:
        """Run ``work`` in one write transaction, retrying only failures that committed
        nothing: a race on a first write, a deadlock or lock timeout, and a connection that
        turned out read-only (the retry runs on a fresh one, see :meth:`_connect`)."""
        for attempt in range(1, attempts + 1):
            try:
                with self._writer_turn(), self._connect(self.engine) as conn:
                    if self.backend == "sqlite":
                        conn = conn.execution_options(powercontext_begin="IMMEDIATE")
                    with conn.begin():
                        result = work(conn)
            except RetryableConflict:
                failure = _StorageError(_Fault.CONFLICT, RetryableConflict.__name__)
            except _StorageError as exc:
                failure = exc
            else:
                self._last_write = (time.monotonic(), None)
                return result
            if failure.fault not in _RETRIED_WRITES or attempt == attempts:
                if failure.fault in _WRITE_HEALTH:
                    self._last_write = (time.monotonic(), failure.fault.message)
                raise _unavailable(failure) from None
        raise AssertionError("unreachable")

    def maintain(self, work: Callable[[Connection], T]) -> T:
        """Run a long server-side maintenance call (OceanBase: a vector index rebuild, which
        may take many minutes) on a pooled connection of its own, outside any transaction:
        it holds no snapshot and no lock of ours meanwhile, and is never retried."""
        with self._guard(), self._connect(self.engine) as conn:
            return work(conn.execution_options(isolation_level="AUTOCOMMIT"))

    @contextmanager
    def _writer_turn(self) -> Iterator[None]:
        """This process's turn to write (SQLite; see ``_writer``), waited for as long as
        SQLite's own busy timeout would have been."""
        if self._writer is None:
            yield
            return
        if not self._writer.acquire(timeout=BUSY_TIMEOUT_SECONDS):
            raise _StorageError(_Fault.BUSY, "WriterQueueTimeout")
        try:
            yield
        finally:
            self._writer.release()

    # -- storage faults --------------------------------------------------------------------

    @contextmanager
    def _guard(self) -> Iterator[None]:
        """The boundary of the read paths: a classified storage failure leaves as a 503."""
        try:
            yield
        except _StorageError as exc:
            raise _unavailable(exc) from None

    @contextmanager
    def _connect(self, engine: Engine) -> Iterator[Connection]:
        """A pooled connection whose storage failures come out as :class:`_StorageError`.

        Driver exceptions are caught as well as SQLAlchemy's: the ``begin`` hook and the
        driver-cursor reads raise them unwrapped. A connection that hit a fault is closed, not
        returned to the pool, and every connection opened before it is replaced at its next
        checkout: the same cause (the file was read-only when they opened it) fails them too.
        """
        try:
            with engine.connect() as conn:
                try:
                    yield conn
                except Exception as exc:
                    fault = self._fault_of(exc)
                    if fault in _REPLACES_CONNECTION and self._replaces_connections:
                        self._fault_generation += 1
                        conn.invalidate()
                    raise
        except PoolTimeout:
            # Every pooled connection stayed busy past the pool's timeout: overload, not a bug.
            raise _StorageError(_Fault.BUSY, "PoolTimeout") from None
        except self._storage_errors as exc:
            orig = exc.orig if isinstance(exc, DBAPIError) else exc
            raise _StorageError(self._fault_of(exc) or _Fault.BROKEN, type(orig).__name__) from None

    def _fault_of(self, exc: BaseException) -> _Fault | None:
        """What a storage exception means (``None`` for one that is not a storage failure).

        Decided by result code, never by parsing the message."""
        if not isinstance(exc, self._storage_errors):
            return None
        orig = exc.orig if isinstance(exc, DBAPIError) else exc
        if isinstance(orig, self._dbapi.IntegrityError):
            # Repositories map the integrity errors they expect; one reaching here is a race
            # on a first write, which is safe to retry because nothing was committed.
            return _Fault.CONFLICT
        if self.backend == "sqlite":
            code = getattr(orig, "sqlite_errorcode", None)
            return _SQLITE_FAULTS.get(code & 0xFF, _Fault.BROKEN) if code else _Fault.BROKEN
        return _MYSQL_FAULTS.get(_mysql_code(orig), _Fault.BROKEN)

    def _replace_stale_connections(self, engine: Engine) -> None:
        """Stamp each connection with the fault generation it was opened in; at checkout, one
        older than the latest fault is replaced by a new connection (the pool reconnects when
        a checkout listener raises ``DisconnectionError``) instead of failing again."""

        @event.listens_for(engine, "connect")
        def _stamp(_dbapi_connection, record) -> None:  # type: ignore[no-untyped-def]
            record.info[_GENERATION] = self._fault_generation

        @event.listens_for(engine, "checkout")
        def _check(_dbapi_connection, record, _proxy) -> None:  # type: ignore[no-untyped-def]
            if record.info.get(_GENERATION) != self._fault_generation:
                raise DisconnectionError()

    def _write_check(self, conn: Connection) -> None:
        """The work of :meth:`check_writes`: free space (SQLite), then one committed write."""
        if self.backend == "sqlite":
            _check_free_space(conn)
        if not self._health_table_ready:
            conn.execute(CreateTable(_health, if_not_exists=True))
        now = now_ms()
        touched = conn.execute(update(_health).where(_health.c.id == 1).values(checked_at=now))
        if not touched.rowcount:
            # A concurrent first check's insert raises IntegrityError; write() retries.
            conn.execute(insert(_health).values(id=1, checked_at=now))


def _unavailable(failure: _StorageError) -> UnavailableError:
    """The caller's typed error, logged by exception type only: a driver's message can carry
    SQL and stored content."""
    _log.warning("database_error", extra={"error_type": failure.error_type})
    return UnavailableError(failure.fault.message)


def _check_free_space(conn: Connection) -> None:
    """Refuse a write check when the SQLite file's disk has (next to) no space left."""
    files = {row[1]: row[2] for row in conn.exec_driver_sql("PRAGMA database_list")}
    path = files.get("main")  # "" for an in-memory database
    if not path:
        return
    try:
        free = shutil.disk_usage(os.path.dirname(path)).free
    except OSError as exc:
        raise _StorageError(_Fault.BROKEN, type(exc).__name__) from None
    if free < _MIN_FREE_BYTES:
        raise _StorageError(_Fault.FULL, "DiskFull")


def _mysql_code(exc: BaseException) -> int | None:
    args = getattr(exc, "args", ())
    return args[0] if args and isinstance(args[0], int) else None


def _mysql_engine(
    url: str,
    isolation_level: str,
    *,
    echo: bool,
    statement_timeout: float | None = None,
    pool_timeout: float = BUSY_TIMEOUT_SECONDS,
    connections: int = 16,
) -> Engine:
    """A pool of OceanBase connections; with ``statement_timeout`` (seconds) the server
    cancels any of their statements that runs longer (``ob_query_timeout``; error 4012, a 503
    like every storage failure: docs/decisions/oceanbase-fulltext.md)."""
    engine = create_engine(
        url,
        echo=echo,
        pool_pre_ping=True,
        pool_size=8,
        max_overflow=connections - 8,
        pool_timeout=pool_timeout,
        pool_recycle=3600,
        isolation_level=isolation_level,
        # Every use ends its own transaction (``with conn.begin()``; a Connection that closes
        # inside one rolls it back), so the pool's extra ROLLBACK on return is a wasted trip.
        pool_reset_on_return=None,
    )
    if statement_timeout is not None:
        microseconds = max(1, round(statement_timeout * 1_000_000))

        @event.listens_for(engine, "connect")
        def _on_connect(dbapi_connection, _record) -> None:  # type: ignore[no-untyped-def]
            # Once per connection, not per statement: a ``QUERY_TIMEOUT`` hint would change
            # every statement's text, and a SET at each checkout would cost a round trip.
            with dbapi_connection.cursor() as cursor:
                cursor.execute(f"SET SESSION ob_query_timeout = {microseconds}")

    return engine


def _sqlite_file(url: str) -> bool:
    return (make_url(url).database or "") not in ("", ":memory:")


def _sqlite_engine(
    url: str, *, echo: bool, prompt_reader: bool = False, cache_kib: int | None = None
) -> Engine:
    """The SQLite engine; with ``prompt_reader``, the prompt path's own (see
    :meth:`Database.prompt_read`)."""
    in_memory = not _sqlite_file(url)
    # The driver's ``timeout`` is SQLite's busy timeout: how long a statement waits for a lock.
    busy_timeout = PROMPT_BUSY_TIMEOUT_SECONDS if prompt_reader else BUSY_TIMEOUT_SECONDS
    kwargs: dict[str, object] = {
        "connect_args": {"check_same_thread": False, "timeout": busy_timeout}
    }
    if in_memory:
        # One shared connection, or each pooled connection would see its own empty database.
        kwargs["poolclass"] = StaticPool
    else:
        # Every use ends its own transaction (``with conn.begin()``; a Connection that closes
        # inside one rolls it back), so the pool's extra ROLLBACK on return is a wasted call.
        # Most recently used first, so the connection that just served keeps its warm cache.
        kwargs.update(
            pool_reset_on_return=None, pool_use_lifo=True, pool_timeout=BUSY_TIMEOUT_SECONDS
        )
        if prompt_reader:
            # Prompts are prepared one at a time on the event loop, so one connection (and one
            # warm cache) serves them all; a concurrent caller (a test, an embedding program)
            # gets a short-lived extra connection instead of waiting.
            kwargs.update(pool_size=1, max_overflow=16)
    engine = create_engine(url, echo=echo, **kwargs)

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection, _record) -> None:  # type: ignore[no-untyped-def]
        # We issue BEGIN ourselves (below) so that writers can ask for BEGIN IMMEDIATE.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        if not in_memory:
            cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.execute("PRAGMA foreign_keys=ON")
        if prompt_reader:
            cursor.execute("PRAGMA query_only=ON")
        if cache_kib is not None:
            cursor.execute(f"PRAGMA cache_size=-{int(cache_kib)}")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        mode = conn.get_execution_options().get("powercontext_begin", "DEFERRED")
        # On the driver: SQLAlchemy's statement machinery costs more than the BEGIN itself,
        # and every prompt pays for one. Its errors are the driver's own, unwrapped;
        # ``Database._connect`` classifies them (a busy ``BEGIN IMMEDIATE`` is a 503).
        sqlite_driver(conn).execute(f"BEGIN {mode}")

    return engine


def now_ms() -> int:
    return int(time.time() * 1000)
