"""The full-text index keeps scopes apart inside its tokens, on both backends (issue 32), and
the prompt path's reads on OceanBase answer within the hooks' deadline.

Why: on OceanBase every scope shares one FULLTEXT index. With plain terms indexed and
``scope_id = ?`` applied after the lookup, a 50-entry scope's candidate query read the
postings of every scope (hundreds of ms to seconds at 100k entries,
docs/decisions/oceanbase-fulltext.md); tokens now carry a scope prefix, as SQLite's do. And a
statement the server kept running for its default 10 s made a prompt wait far past the 2 s
the hook waits.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import create_engine, event, text
from sqlalchemy.pool import NullPool

from powercontext_runtime.composition import Runtime
from powercontext_runtime.contract.memory import RememberMemoryRequest, SearchMemoryRequest
from powercontext_runtime.errors import UnavailableError
from powercontext_runtime.http import create_app
from powercontext_runtime.settings import Settings
from powercontext_runtime.store import database as database_module
from powercontext_runtime.store.database import PROMPT_STATEMENT_TIMEOUT_SECONDS, Database
from powercontext_runtime.store.fulltext import read_frequencies
from tests.support.backends import database_url_for

SMALL, LARGE = "git:example.com/acme/small", "git:example.com/acme/large"


@pytest.fixture
def db(backend: str, request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Database]:
    made = Database(database_url_for(backend, request, tmp_path))
    try:
        made.create_schema()
        yield made
    finally:
        made.dispose()


def _add(db: Database, scope_id: str, first: int, count: int, terms: list[str]) -> None:
    documents = [(first + i, terms) for i in range(count)]
    db.write(lambda conn: db.fulltext.add_many(conn, "memory", scope_id, documents))


def test_a_scope_gets_its_own_candidates_below_many_newer_ones_of_another(db: Database) -> None:
    """A larger scope's newer documents with the same terms, more than the limit, take none of
    the small scope's places, and a term only the other scope holds finds nothing here."""
    _add(db, SMALL, 1, 3, ["qshared", "qsmall"])
    _add(db, LARGE, 100, 300, ["qshared", "qlarge"])
    db.write(lambda conn: db.fulltext.add(conn, "memory", SMALL, 50, ["qshared"]))
    with db.read() as conn:
        small = db.fulltext.match(conn, "memory", SMALL, ["qshared"], 256)
        large = db.fulltext.match(conn, "memory", LARGE, ["qshared", "qsmall"], 256)
        foreign = db.fulltext.match(conn, "memory", SMALL, ["qlarge"], 256)
    assert [doc[0] for doc in small] == [50, 3, 2, 1]  # newest first
    assert [doc[0] for doc in large] == list(range(399, 143, -1))  # the newest 256
    assert foreign == []
    db.write(lambda conn: db.fulltext.remove(conn, "memory", SMALL, 2))
    with db.read() as conn:
        assert [d[0] for d in db.fulltext.match(conn, "memory", SMALL, ["qsmall"], 256)] == [3, 1]


def test_a_term_of_the_longest_length_is_found(db: Database) -> None:
    """A 64-character term plus the 16-character scope prefix is an 80-character token:
    OceanBase's parser silently leaves tokens over its ``max_token_size`` (84) unindexed."""
    longest = "q" + "7" * 63
    db.write(lambda conn: db.fulltext.add(conn, "memory", SMALL, 1, [longest, "qshort"]))
    with db.read() as conn:
        found = db.fulltext.match(conn, "memory", SMALL, [longest], 10)
    assert [(doc[0], doc[1]) for doc in found] == [(1, [longest, "qshort"])]


def test_clearing_an_index_larger_than_one_delete_empties_it(db: Database) -> None:
    """OceanBase empties an index a batch of rows per statement (one DELETE of 10k rows ran
    past the server's statement timeout): every batch goes, with the term frequencies."""
    _add(db, SMALL, 1, 1_200, ["qshared", "qsmall"])
    _add(db, LARGE, 2_000, 30, ["qshared"])
    with db.read() as conn:
        assert db.fulltext.document_count(conn, "memory") == 1_230
    db.write(lambda conn: db.fulltext.clear(conn, "memory"))
    with db.read() as conn:
        assert db.fulltext.document_count(conn, "memory") == 0
        assert read_frequencies(conn, "memory", SMALL, ["qshared"]) == (0, {})
        assert db.fulltext.match(conn, "memory", LARGE, ["qshared"], 256) == []


# -- OceanBase only ------------------------------------------------------------------------


@pytest.mark.oceanbase
def test_the_candidate_query_reads_the_fulltext_index_for_small_and_large_scopes(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """The plan the server makes for the statement the store sends: the FULLTEXT lookup of
    the scope's tokens, for a scope of 2 documents as for one of 400 (the earlier statement
    was planned through the scope index for small scopes: every document of the scope)."""
    db = Database(database_url_for("oceanbase", request, tmp_path))
    try:
        db.create_schema()
        _add(db, SMALL, 1, 2, ["qdeploy", "qkeys"])
        _add(db, LARGE, 10, 400, ["qdeploy", "qrotate"])
        sent: list[tuple[str, object]] = []

        def before(_c: object, _cur: object, statement: str, params: object, *_: object) -> None:
            if "AGAINST" in statement:
                sent.append((statement, params))

        event.listen(db._read_engine, "before_cursor_execute", before)
        for scope_id in (SMALL, LARGE):
            with db.read() as conn:
                db.fulltext.match(conn, "memory", scope_id, ["qdeploy"], 256)
        event.remove(db._read_engine, "before_cursor_execute", before)
        with db.read() as conn:
            plans = [
                "\n".join(str(row[0]) for row in conn.exec_driver_sql("EXPLAIN " + sql, params))
                for sql, params in sent
            ]
    finally:
        db.dispose()
    assert len(plans) == 2
    for plan in plans:
        assert "TEXT RETRIEVAL SCAN" in plan and "ft_memory_scoped_search" in plan, plan


_LEGACY_TABLE = (
    "CREATE TABLE {family}_search (id BIGINT NOT NULL PRIMARY KEY,"
    " scope_id VARCHAR(256) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,"
    " terms LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,"
    " KEY ix_{family}_search_scope (scope_id),"
    " FULLTEXT INDEX ft_{family}_search (terms) WITH PARSER space"
    " PARSER_PROPERTIES=(min_token_size=1)) DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin"
)


@pytest.mark.oceanbase
def test_an_oceanbase_index_of_the_unscoped_layout_is_replaced_and_rebuilt(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """A database written before issue 32 (plain terms indexed in ``<family>_search``)
    upgrades itself when a runtime opens it: the old tables are dropped, the scoped index is
    rebuilt from the version rows, and searches find what they found before."""
    url = database_url_for("oceanbase", request, tmp_path)
    settings = Settings.load(env={}, home=tmp_path / "home", database_url=url)
    texts = {
        SMALL: ["Deploy with blue green switches", "Rotate the signing keys monthly"],
        LARGE: ["Rotate the database passwords weekly", "Deploy on Tuesdays only"],
    }
    runtime = Runtime.open(settings)
    try:
        for scope_id, scope_texts in texts.items():
            for body in scope_texts:
                runtime.memory.remember(
                    RememberMemoryRequest(scope_id=scope_id, kind="fact", text=body)
                )
    finally:
        runtime.close()
    # What an earlier build left: its tables (one stale row), none of the current ones.
    engine = create_engine(url, poolclass=NullPool)
    try:
        with engine.begin() as conn:
            for family in ("memory", "experience"):
                conn.execute(text(f"DROP TABLE {family}_scoped_search"))
                conn.execute(text(_LEGACY_TABLE.format(family=family)))
            conn.execute(
                text("INSERT INTO memory_search VALUES (1, :s, 'qrotate qsigning')"), {"s": SMALL}
            )
    finally:
        engine.dispose()

    runtime = Runtime.open(settings)
    try:
        assert runtime.stale_indexes() == []
        for scope_id, query, expected in (
            (SMALL, "rotate keys", ["Rotate the signing keys monthly"]),
            (LARGE, "rotate", ["Rotate the database passwords weekly"]),
            (LARGE, "deploy", ["Deploy on Tuesdays only"]),
        ):
            found = runtime.memory.search(SearchMemoryRequest(scope_id=scope_id, query=query))
            assert [hit.text for hit in found.hits] == expected, query
    finally:
        runtime.close()
    engine = create_engine(url, poolclass=NullPool)
    try:
        with engine.connect() as conn:
            tables = {str(row[0]).lower() for row in conn.execute(text("SHOW TABLES"))}
    finally:
        engine.dispose()
    assert not {"memory_search", "experience_search"} & tables
    assert {"memory_scoped_search", "experience_scoped_search"} <= tables


@pytest.mark.oceanbase
def test_a_prompt_read_past_its_deadline_is_a_503_at_once(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """Before: a prompt-path statement ran until the server's 10 s ``ob_query_timeout``. Now
    the server cancels it after PROMPT_STATEMENT_TIMEOUT_SECONDS, the caller gets a typed 503,
    the pool's next prompt read works, and ordinary reads keep the server's own timeout."""
    db = Database(database_url_for("oceanbase", request, tmp_path))
    try:
        db.create_schema()
        started = time.monotonic()
        with pytest.raises(UnavailableError) as caught, db.prompt_read() as conn:
            conn.execute(text("SELECT SLEEP(8)"))
        took = time.monotonic() - started
        assert (caught.value.status, caught.value.code) == (503, "database_unavailable")
        assert PROMPT_STATEMENT_TIMEOUT_SECONDS <= 1 and took < 5.0, took  # not 8 s, nor 10
        with db.prompt_read() as conn:
            assert conn.execute(text("SELECT count(*) FROM memory_heads")).scalar() == 0
        started = time.monotonic()
        with pytest.raises(UnavailableError), db.search_read() as conn:  # the same deadline
            conn.execute(text("SELECT SLEEP(8)"))
        assert time.monotonic() - started < 5.0
        with db.read() as conn:  # not the prompt path: the server's own timeout applies
            assert conn.execute(text("SELECT SLEEP(1.5)")).scalar() == 0
    finally:
        db.dispose()


@pytest.mark.oceanbase
def test_searches_and_prepares_whose_statements_time_out_are_503s_over_http(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same through the API with a deadline no table read meets (1 µs): prepare and
    search answer ``503 database_unavailable`` at once, never a 500 or a hang, while writes
    (another pool) still work."""
    url = database_url_for("oceanbase", request, tmp_path)
    monkeypatch.setattr(database_module, "PROMPT_STATEMENT_TIMEOUT_SECONDS", 1e-6)
    settings = Settings.load(
        env={"POWERCONTEXT_AUTH": "none"}, home=tmp_path / "home", database_url=url
    )
    runtime = Runtime.open(settings)
    try:
        with TestClient(create_app(runtime), base_url="http://localhost") as client:
            remembered = client.post(
                "/v1/memory/remember",
                json={"scope_id": SMALL, "kind": "fact", "text": "Deploy with blue green"},
            )
            assert remembered.status_code == 200, remembered.text
            for path in ("/v1/context/prepare", "/v1/memory/search"):
                started = time.monotonic()
                answer = client.post(path, json={"scope_id": SMALL, "query": "deploy blue"})
                took = time.monotonic() - started
                assert answer.status_code == 503, (path, answer.text)
                error = answer.json()["error"]
                assert error["code"] == "database_unavailable", path
                assert "SELECT" not in error["message"] and "timeout" not in error["message"]
                assert took < 5.0, (path, took)
    finally:
        runtime.close()


@pytest.mark.oceanbase
def test_concurrent_prompts_never_wait_for_a_pooled_connection(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """Twice the 12 clients of issue 32's load, each holding its prompt-path connection at
    the same moment: all of them get one (the pool was 16 connections, and the 17th prompt
    waited 5 s for one, then was refused as busy)."""
    db = Database(database_url_for("oceanbase", request, tmp_path))
    clients = 24
    together = threading.Barrier(clients, timeout=60)

    def prompt(_: int) -> int:
        with db.prompt_read() as conn:
            heads = int(conn.execute(text("SELECT count(*) FROM memory_heads")).scalar_one())
            together.wait()  # every prompt holds its connection at once
        return heads

    try:
        db.create_schema()
        with ThreadPoolExecutor(clients) as pool:
            assert list(pool.map(prompt, range(clients))) == [0] * clients
    finally:
        db.dispose()
