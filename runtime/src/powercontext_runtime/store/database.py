"""Engine construction and the two transaction shapes every repository uses.

``write()`` serialises writers: on SQLite with ``BEGIN IMMEDIATE`` (so a reader never has to
upgrade to a writer mid-transaction, which SQLite cannot wait for), on OceanBase with row
locks taken by the repositories. ``read()`` gives one consistent snapshot, which is what lets
a search cite exactly the revision it searched.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Literal, TypeVar

from sqlalchemy import Connection, Engine, create_engine, event, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError, IntegrityError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from sqlalchemy.pool import StaticPool

from ..errors import UnavailableError
from . import fulltext
from ._sqlite import sqlite_driver
from .schema import metadata

__all__ = ["Backend", "Database", "RetryableConflict"]

Backend = Literal["sqlite", "oceanbase"]
T = TypeVar("T")

_log = logging.getLogger("powercontext.store")

# MySQL-protocol errors worth one more attempt of an idempotent transaction: deadlock,
# lock wait timeout, and OceanBase's "transaction needs to be retried" family.
_TRANSIENT_MYSQL_CODES = {1205, 1213, 4012, 6002, 6005, 6213, 6224, 6226}


class RetryableConflict(Exception):
    """Raised inside a write transaction when a concurrent first write won a race.

    The transaction is rolled back and run again from the start; nothing was committed.
    """


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
        elif parsed.get_backend_name() == "mysql":
            self.backend = "oceanbase"
            # Two pools whose connections keep their isolation level for life: switching one
            # connection per transaction (SET … and a reset when it returns to the pool) cost
            # a prepare on OceanBase several extra round trips.
            self.engine = _mysql_engine(url, "READ COMMITTED", echo=echo)
            self._read_engine = _mysql_engine(url, "REPEATABLE READ", echo=echo)
            self._prompt_engine = self._read_engine
        else:
            raise ValueError("database URL must be sqlite:/// or mysql+pymysql://")
        self.fulltext = fulltext.for_backend(self.backend)
        self._open_read: ContextVar[Connection | None] = ContextVar(
            f"powercontext_read_{id(self)}", default=None
        )

    # -- lifecycle -------------------------------------------------------------------------

    def create_schema(self) -> None:
        """Create tables and derived indexes idempotently."""
        with self.engine.begin() as conn:
            metadata.create_all(conn)
            self.fulltext.create(conn)

    def check_server(self) -> None:
        """Refuse to run on a server that is not what the URL promises."""
        with self._guard(), self.engine.connect() as conn:
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

    def dispose(self) -> None:
        for engine in {self.engine, self._read_engine, self._prompt_engine}:
            engine.dispose()

    def ping(self) -> None:
        with self._guard(), self.engine.connect() as conn:
            conn.execute(text("SELECT 1"))

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
        Elsewhere it is :meth:`read`.
        """
        with self._snapshot(self._prompt_engine) as conn:
            yield conn

    @contextmanager
    def _snapshot(self, engine: Engine) -> Iterator[Connection]:
        current = self._open_read.get()
        if current is not None:
            yield current
            return
        with self._guard(), engine.connect() as conn, conn.begin():
            token = self._open_read.set(conn)
            try:
                yield conn
            finally:
                self._open_read.reset(token)

    def write(self, work: Callable[[Connection], T], *, attempts: int = 3) -> T:
        """Run ``work`` in one write transaction, retrying only races that committed nothing."""
        for attempt in range(1, attempts + 1):
            try:
                with self._guard(), self.engine.connect() as conn:
                    if self.backend == "sqlite":
                        conn = conn.execution_options(powercontext_begin="IMMEDIATE")
                    with conn.begin():
                        return work(conn)
            except RetryableConflict:
                if attempt == attempts:
                    raise UnavailableError(
                        "the write kept racing with concurrent writers; retry it"
                    ) from None
            except _Transient:
                if attempt == attempts:
                    raise UnavailableError("the database is busy; retry the request") from None
        raise AssertionError("unreachable")

    @contextmanager
    def _guard(self) -> Iterator[None]:
        """Turn driver-level failures into typed errors without leaking SQL or parameters."""
        try:
            yield
        except IntegrityError as exc:
            # Repositories map the integrity errors they expect; one reaching here is a race
            # on a first write, which is safe to retry because nothing was committed.
            raise RetryableConflict() from exc
        except OperationalError as exc:
            if self.backend == "oceanbase" and _mysql_code(exc) in _TRANSIENT_MYSQL_CODES:
                raise _Transient() from exc
            if self.backend == "sqlite" and "locked" in str(exc.orig).lower():
                raise UnavailableError("the database is busy; retry the request") from None
            _log.warning("database_error", extra={"error_type": type(exc.orig).__name__})
            raise UnavailableError("the database is unavailable") from None
        except DBAPIError as exc:
            _log.warning("database_error", extra={"error_type": type(exc.orig).__name__})
            raise UnavailableError("the database is unavailable") from None
        except PoolTimeout:
            # Every pooled connection stayed busy past the pool's timeout: overload, not a bug.
            _log.warning("database_error", extra={"error_type": "PoolTimeout"})
            raise UnavailableError("the database is busy; retry the request") from None


class _Transient(Exception):
    """A deadlock or lock timeout: the transaction was rolled back and may be retried."""


def _mysql_code(exc: DBAPIError) -> int | None:
    args = getattr(exc.orig, "args", ())
    return args[0] if args and isinstance(args[0], int) else None


def _mysql_engine(url: str, isolation_level: str, *, echo: bool) -> Engine:
    return create_engine(
        url,
        echo=echo,
        pool_pre_ping=True,
        pool_size=8,
        max_overflow=8,
        pool_recycle=3600,
        isolation_level=isolation_level,
        # Every use ends its own transaction (``with conn.begin()``; a Connection that closes
        # inside one rolls it back), so the pool's extra ROLLBACK on return is a wasted trip.
        pool_reset_on_return=None,
    )


def _sqlite_file(url: str) -> bool:
    return (make_url(url).database or "") not in ("", ":memory:")


def _sqlite_engine(
    url: str, *, echo: bool, prompt_reader: bool = False, cache_kib: int | None = None
) -> Engine:
    """The SQLite engine; with ``prompt_reader``, the prompt path's own (see
    :meth:`Database.prompt_read`)."""
    in_memory = not _sqlite_file(url)
    kwargs: dict[str, object] = {"connect_args": {"check_same_thread": False, "timeout": 30}}
    if in_memory:
        # One shared connection, or each pooled connection would see its own empty database.
        kwargs["poolclass"] = StaticPool
    else:
        # Every use ends its own transaction (``with conn.begin()``; a Connection that closes
        # inside one rolls it back), so the pool's extra ROLLBACK on return is a wasted call.
        # Most recently used first, so the connection that just served keeps its warm cache.
        kwargs.update(pool_reset_on_return=None, pool_use_lifo=True)
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
        cursor.execute("PRAGMA busy_timeout=30000")
        if prompt_reader:
            cursor.execute("PRAGMA query_only=ON")
        if cache_kib is not None:
            cursor.execute(f"PRAGMA cache_size=-{int(cache_kib)}")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        mode = conn.get_execution_options().get("powercontext_begin", "DEFERRED")
        # On the driver: SQLAlchemy's statement machinery costs more than the BEGIN itself,
        # and every prompt pays for one.
        sqlite_driver(conn).execute(f"BEGIN {mode}")

    return engine


def now_ms() -> int:
    return int(time.time() * 1000)
