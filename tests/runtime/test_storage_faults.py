"""Storage faults are typed 503s, end when their cause does, and show in readiness.

Every fault here is produced by SQLite (or OceanBase) itself, not by a fake exception, in ways
that also work for root, which ignores file modes:

* busy: a second connection holds the write lock;
* read-only: connections open the file read-only (``mode=ro``), which is exactly what SQLite
  does, silently, when its process may not write the file; they keep refusing writes after the
  permissions come back, which is why such connections must be replaced;
* full: ``PRAGMA max_page_count`` caps the file, so a write that needs a page gets SQLITE_FULL;
* driver-level errors on the prompt path: an authorizer refuses the ``BEGIN`` or a table read
  that the prompt connection issues on the driver cursor, which raises ``sqlite3`` errors that
  SQLAlchemy never wraps;
* OceanBase: the runtime's own user loses its write privileges, then gets them back.

Only the disk I/O error and the nearly full disk are injected, because neither can be made
real here.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, event

from powercontext_runtime.composition import Runtime
from powercontext_runtime.errors import UnavailableError
from powercontext_runtime.http import create_app
from powercontext_runtime.settings import Settings
from powercontext_runtime.store import database
from powercontext_runtime.store.database import Database, NotWritableError
from tests.support.backends import database_url_for
from tests.support.daemon import free_port

SCOPE = "git:example.com/acme/storage-faults"
SECRET = "zq-storage-fault-sentinel"  # stored content that must never show in an error


@pytest.fixture(autouse=True)
def short_lock_waits(monkeypatch: pytest.MonkeyPatch) -> None:
    """The lock is held until the test releases it, so a short wait changes no outcome, only
    how long a busy answer takes to arrive."""
    monkeypatch.setattr(database, "BUSY_TIMEOUT_SECONDS", 0.05)
    monkeypatch.setattr(database, "PROMPT_BUSY_TIMEOUT_SECONDS", 0.05)


def _settings(tmp_path: Path, database_url: str | None = None) -> Settings:
    # Auth off (loopback): these tests are about storage, not tokens.
    env = {"POWERCONTEXT_AUTH": "none"}
    return Settings.load(env=env, home=tmp_path / "home", database_url=database_url)


@pytest.fixture
def sqlite_rt(tmp_path: Path) -> Iterator[Runtime]:
    runtime = Runtime.open(_settings(tmp_path))
    try:
        yield runtime
    finally:
        runtime.close()


@pytest.fixture
def http(sqlite_rt: Runtime) -> Iterator[TestClient]:
    with TestClient(create_app(sqlite_rt), base_url="http://localhost") as client:
        yield client


def _db_file(runtime: Runtime) -> Path:
    return runtime.settings.home / "powercontext.db"


def _remember(client: TestClient, text: str = f"Deploy with blue green {SECRET}") -> Any:
    return client.post(
        "/v1/memory/remember", json={"scope_id": SCOPE, "kind": "fact", "text": text}
    )


def _prepare(client: TestClient) -> Any:
    return client.post("/v1/context/prepare", json={"scope_id": SCOPE, "query": "deploy green"})


def _assert_503(response: Any, code: str = "database_unavailable", says: str = "") -> str:
    """A typed 503 whose message names the fault and nothing of the driver's."""
    assert response.status_code == 503, response.text
    error = response.json()["error"]
    assert error["code"] == code
    assert says in error["message"]
    for leak in (SECRET, SCOPE, "sqlite", "SELECT", "INSERT", "memory_heads", "prohibited"):
        assert leak not in response.text
    return str(error["message"])


def _assert_ready(client: TestClient) -> None:
    response = client.get("/health/ready")
    assert response.status_code == 200, response.text


@contextmanager
def _new_connections(
    engine: Engine, on_connect: Callable[[sqlite3.Connection], Any]
) -> Iterator[None]:
    """While active, every connection ``engine`` opens is first passed to ``on_connect``.

    The pool is emptied on entry, so connections open during the fault, as they do whenever
    the pool grows under concurrent requests or after a restart."""

    def listener(dbapi_connection: sqlite3.Connection, _record: object) -> None:
        on_connect(dbapi_connection)

    event.listen(engine, "connect", listener)
    engine.dispose()
    try:
        yield
    finally:
        event.remove(engine, "connect", listener)


@contextmanager
def _opened_read_only(db: Database, path: Path) -> Iterator[None]:
    """While active, connections open the file read-only, as SQLite opens a file its process
    may not write; the pool is emptied on entry so connections open during the fault."""

    def connect(_dialect: object, _record: object, _cargs: object, cparams: dict[str, Any]) -> Any:
        return sqlite3.connect(f"file:{path}?mode=ro", uri=True, **cparams)

    event.listen(db.engine, "do_connect", connect)
    db.engine.dispose()
    try:
        yield
    finally:
        event.remove(db.engine, "do_connect", connect)


def _open_several(db: Database, count: int = 3) -> None:
    """Open ``count`` pooled connections at once (as concurrent requests would) and return
    them to the pool, where they wait for the next request."""
    with ExitStack() as held:
        for _ in range(count):
            held.enter_context(db.engine.connect())


# -- busy ----------------------------------------------------------------------------------------


def test_a_write_lock_held_elsewhere_is_a_503_busy_and_reads_go_on(
    http: TestClient, sqlite_rt: Runtime
) -> None:
    """Before: the BEGIN IMMEDIATE of the ``begin`` hook raised a raw ``sqlite3`` error, a 500
    after 30 s, and readiness said ready."""
    assert _remember(http).status_code == 200
    locker = sqlite3.connect(_db_file(sqlite_rt), isolation_level=None)
    try:
        locker.execute("BEGIN IMMEDIATE")
        message = _assert_503(_remember(http, "Rotate the keys"), says="busy")
        assert "retry" in message
        _assert_503(http.get("/health/ready"), code="runtime_not_ready", says="busy")
        with pytest.raises(UnavailableError, match="busy"):
            sqlite_rt.compact_search_index()
        # WAL readers never wait for the writer.
        assert _prepare(http).json()["status"] == "ready"
    finally:
        locker.close()
    assert _remember(http, "Rotate the keys").status_code == 200
    _assert_ready(http)


# -- read-only -----------------------------------------------------------------------------------


def test_connections_opened_while_the_file_was_read_only_are_replaced(
    http: TestClient, sqlite_rt: Runtime
) -> None:
    """Before: readiness said ready while every write failed, and after the permissions came
    back the read-only connections stayed in the pool and kept failing until a restart."""
    db = sqlite_rt.db
    assert _remember(http).status_code == 200
    with _opened_read_only(db, _db_file(sqlite_rt)):
        _open_several(db)
        _assert_503(_remember(http, "Rotate the keys"), says="read-only")
        _assert_503(http.get("/health/ready"), code="runtime_not_ready", says="read-only")
        with pytest.raises(NotWritableError, match="read-only"):
            db.check_writes()
        # The compaction's merge runs on the driver cursor: a raw sqlite3 error before.
        with pytest.raises(UnavailableError, match="read-only"):
            sqlite_rt.compact_search_index()
        assert http.post("/v1/memory/search", json={"scope_id": SCOPE, "query": "deploy"}).json()[
            "hits"
        ]
        # Read-only connections that served only reads go back to the pool unnoticed.
        _open_several(db)
    # The permissions are back: the very next write succeeds, without a restart.
    assert _remember(http, "Rotate the keys").status_code == 200
    _assert_ready(http)
    db.check_writes()


def test_the_runtime_refuses_to_start_on_a_database_it_cannot_write(tmp_path: Path) -> None:
    """Before: start-up only read, so the daemon came up on a read-only file and failed every
    write."""
    Runtime.open(_settings(tmp_path)).close()  # an existing database
    runtime = Runtime.open(_settings(tmp_path), prepare=False)
    try:
        read_only = _opened_read_only(runtime.db, tmp_path / "home" / "powercontext.db")
        with read_only, pytest.raises(NotWritableError) as refused:
            runtime.prepare()
        assert (refused.value.status, refused.value.code) == (503, "database_unavailable")
        assert "read-only" in refused.value.message
        runtime.prepare()  # writable again: starts
    finally:
        runtime.close()


def test_doctor_fails_the_writes_check_on_a_database_it_can_only_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: doctor read, found everything well, and said so."""
    from powercontext_runtime.cli.main import main

    for name in [n for n in os.environ if n.startswith("POWERCONTEXT_")]:
        monkeypatch.delenv(name)
    Runtime.open(_settings(tmp_path)).close()
    path = tmp_path / "home" / "powercontext.db"

    def connect(_dialect: object, _rec: object, cargs: list[Any], cparams: dict[str, Any]) -> Any:
        if cargs == [str(path)]:  # only the engines doctor opens on this file
            return sqlite3.connect(f"file:{path}?mode=ro", uri=True, **cparams)
        return None

    event.listen(Engine, "do_connect", connect)
    try:
        unreachable = f"http://127.0.0.1:{free_port()}"
        code = main(["doctor", "--json", "--data-dir", str(path.parent), "--url", unreachable])
    finally:
        event.remove(Engine, "do_connect", connect)
    checks = {c["check"]: c for c in json.loads(capsys.readouterr().out)["checks"]}
    assert code == 1
    assert checks["database"]["ok"]
    assert not checks["writes"]["ok"] and "read-only" in checks["writes"]["detail"]


# -- full ----------------------------------------------------------------------------------------


def test_a_full_database_is_a_503_and_the_next_write_after_it_succeeds(
    http: TestClient, sqlite_rt: Runtime
) -> None:
    """``max_page_count`` at the current size: a write that needs a page gets SQLITE_FULL.
    Before: a generic 503, and the capped connections stayed in the pool."""
    big = "Deploy with blue green switches " + "x" * 7000

    def capped(connection: sqlite3.Connection) -> None:
        pages = connection.execute("PRAGMA page_count").fetchone()[0]
        connection.execute(f"PRAGMA max_page_count = {pages}")

    with _new_connections(sqlite_rt.db.engine, capped):
        _open_several(sqlite_rt.db)
        _assert_503(_remember(http, big), says="full")
    assert _remember(http, big).status_code == 200


def test_a_disk_without_free_space_fails_the_write_check(
    sqlite_rt: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A small write that fits in pages SQLite already has does not notice a full disk, so the
    check also asks the file system (injected: a real full disk cannot be made here)."""
    real = database.shutil.disk_usage

    def full(path: str) -> Any:
        return real(path)._replace(free=4096)

    monkeypatch.setattr(database.shutil, "disk_usage", full)
    with pytest.raises(NotWritableError, match="full"):
        sqlite_rt.db.check_writes()
    monkeypatch.setattr(database.shutil, "disk_usage", real)
    sqlite_rt.db.check_writes()


# -- driver-level errors -------------------------------------------------------------------------


def _deny(action: int, table: str | None = None) -> Callable[[sqlite3.Connection], None]:
    def install(connection: sqlite3.Connection) -> None:
        def authorizer(code: int, arg1: str | None, *_: object) -> int:
            if code == action and (table is None or arg1 == table):
                return sqlite3.SQLITE_DENY
            return sqlite3.SQLITE_OK

        connection.set_authorizer(authorizer)

    return install


@pytest.mark.parametrize(
    "refused",
    [
        pytest.param(_deny(sqlite3.SQLITE_TRANSACTION), id="begin"),
        pytest.param(_deny(sqlite3.SQLITE_READ, "memory_heads"), id="driver-cursor-read"),
    ],
)
def test_a_driver_error_on_the_prompt_path_is_a_503_and_the_connection_is_replaced(
    http: TestClient, sqlite_rt: Runtime, refused: Callable[[sqlite3.Connection], None]
) -> None:
    """The prompt connection issues its BEGIN and its hottest reads on the driver cursor, so
    their errors are ``sqlite3`` ones SQLAlchemy never wraps. Before: a 500 with a traceback."""
    assert _remember(http).status_code == 200
    prompt_engine = sqlite_rt.db._prompt_engine  # the prompt path's own connection pool
    with _new_connections(prompt_engine, refused):
        _assert_503(_prepare(http))
    # The refusing connection was discarded, not pooled: the next prompt gets a fresh one.
    assert _prepare(http).json()["status"] == "ready"


def test_a_disk_io_error_from_the_driver_is_a_503_and_shows_in_readiness(
    http: TestClient, sqlite_rt: Runtime
) -> None:
    """Injected (a real I/O error cannot be made here), at the driver level where the ``begin``
    hook raises it: an unwrapped ``sqlite3.OperationalError``."""
    engine = sqlite_rt.db.engine

    def failing_begin(_conn: object) -> None:
        raise sqlite3.OperationalError(f"disk I/O error near {SECRET}")

    event.listen(engine, "begin", failing_begin, insert=True)  # instead of the BEGIN
    try:
        _assert_503(_remember(http), says="unavailable")
        _assert_503(http.get("/health/ready"), code="runtime_not_ready")
    finally:
        event.remove(engine, "begin", failing_begin)
    assert _remember(http).status_code == 200
    _assert_ready(http)


def test_faults_are_logged_by_type_only(
    http: TestClient, sqlite_rt: Runtime, caplog: pytest.LogCaptureFixture
) -> None:
    with _opened_read_only(sqlite_rt.db, _db_file(sqlite_rt)), caplog.at_level("WARNING"):
        _assert_503(_remember(http))
    logged = [r for r in caplog.records if r.getMessage() == "database_error"]
    assert logged and {r.__dict__["error_type"] for r in logged} == {"OperationalError"}
    for record in caplog.records:
        assert SECRET not in record.getMessage() and "readonly" not in record.getMessage()


# -- both backends -------------------------------------------------------------------------------


@pytest.fixture
def any_rt(backend: str, request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Runtime]:
    runtime = Runtime.open(_settings(tmp_path, database_url_for(backend, request, tmp_path)))
    try:
        yield runtime
    finally:
        runtime.close()


def test_readiness_commits_a_real_write(any_rt: Runtime) -> None:
    with TestClient(create_app(any_rt), base_url="http://localhost") as client:
        _assert_ready(client)
    with any_rt.db.read() as conn:
        checked = conn.exec_driver_sql("SELECT id, checked_at FROM storage_health").all()
    assert [row[0] for row in checked] == [1] and checked[0][1] > 0
    any_rt.db.check_writes()  # again: rewrites the same row


def _admin(root_url: str, statement: str) -> None:
    """Run one statement as the server's root user (not through the runtime under test)."""
    import pymysql
    from sqlalchemy.engine import make_url

    url = make_url(root_url)
    conn = pymysql.connect(host=url.host, port=url.port, user=url.username,
                           password=url.password or "", autocommit=True)  # fmt: skip
    try:
        with conn.cursor() as cur:
            cur.execute(statement)
    finally:
        conn.close()


def test_a_readiness_poll_does_not_wait_beside_a_running_write_check(
    sqlite_rt: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A check can wait up to the busy timeout; polls meanwhile get the last outcome instead of
    each taking a connection and waiting too (which would starve the requests)."""
    db = sqlite_rt.db
    stale = time.monotonic() - 60  # older than any max_age: a poll would start a check
    db._last_write = (stale, None)
    entered, release = threading.Event(), threading.Event()
    checks = []
    real = db._write_check

    def held(conn: Any) -> None:
        checks.append(conn)
        entered.set()
        release.wait()
        real(conn)

    monkeypatch.setattr(db, "_write_check", held)
    running = threading.Thread(target=db.check_writes, kwargs={"max_age": 1.0})
    running.start()
    try:
        entered.wait()
        db.check_writes(max_age=1.0)  # answered from the last outcome (would hang if it waited)
        assert len(checks) == 1
    finally:
        release.set()
        running.join()
    assert db._last_write[0] > stale  # the running check finished and recorded its outcome


@contextmanager
def _ordinary_user(root_url: str) -> Iterator[str]:
    """A user with every privilege on the test database but none on the server, like a
    deployment's: the server's read-only mode applies to it (root is exempt)."""
    from sqlalchemy.engine import make_url

    url = make_url(root_url)
    name = f"pc_faults_{os.getpid()}"
    _admin(root_url, f"DROP USER IF EXISTS '{name}'@'%'")
    _admin(root_url, f"CREATE USER '{name}'@'%' IDENTIFIED BY 'faults'")
    _admin(root_url, f"GRANT ALL PRIVILEGES ON `{url.database}`.* TO '{name}'@'%'")
    try:
        yield url.set(username=name, password="faults").render_as_string(hide_password=False)
    finally:
        _admin(root_url, f"DROP USER IF EXISTS '{name}'@'%'")


@contextmanager
def _server_read_only(root_url: str) -> Iterator[None]:
    """OceanBase's read-only mode for the block (the whole tenant of the test server, which this
    test session started for itself unless POWERCONTEXT_TEST_OCEANBASE_URL names another)."""
    _admin(root_url, "SET GLOBAL read_only = ON")
    try:
        yield
    finally:
        _admin(root_url, "SET GLOBAL read_only = OFF")


@pytest.mark.oceanbase
def test_a_read_only_oceanbase_is_a_503_and_writes_resume_without_a_restart(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """Before: readiness said ready while the server refused every write, and a daemon started
    on it without complaint."""
    root_url = database_url_for("oceanbase", request, tmp_path)
    with _ordinary_user(root_url) as user_url:
        settings = _settings(tmp_path, user_url)
        runtime = Runtime.open(settings)
        try:
            with TestClient(create_app(runtime), base_url="http://localhost") as client:
                assert _remember(client).status_code == 200
                with _server_read_only(root_url):
                    _assert_503(_remember(client, "Rotate the keys"), says="read-only")
                    _assert_503(client.get("/health/ready"), code="runtime_not_ready")
                    search = {"scope_id": SCOPE, "query": "deploy"}
                    assert client.post("/v1/memory/search", json=search).json()["hits"]
                    with pytest.raises(NotWritableError, match="read-only"):
                        Runtime.open(settings)
                assert _remember(client, "Rotate the keys").status_code == 200
                _assert_ready(client)
        finally:
            runtime.close()
