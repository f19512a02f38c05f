"""The store's transaction helpers turn overload into typed errors, never a raw exception."""

from __future__ import annotations

import sqlite3
from contextlib import ExitStack
from pathlib import Path

import pytest

from powercontext_runtime.errors import UnavailableError
from powercontext_runtime.store.database import Database


def test_an_exhausted_connection_pool_is_a_typed_503(tmp_path: Path) -> None:
    db = Database(f"sqlite:///{tmp_path / 'pool.db'}")
    try:
        db.create_schema()
        pool = db.engine.pool
        pool._timeout = 0.05  # type: ignore[attr-defined]  # the default 30 s, shortened
        with ExitStack() as held:
            for _ in range(pool.size() + pool._max_overflow):  # type: ignore[attr-defined]
                held.enter_context(db.engine.connect())
            with pytest.raises(UnavailableError) as caught, db.read():
                pass
        assert (caught.value.status, caught.value.code) == (503, "database_unavailable")
        with db.read() as conn:  # connections returned: usable again
            assert conn.exec_driver_sql("SELECT 1").scalar() == 1
    finally:
        db.dispose()


def test_a_search_index_of_the_earlier_layout_is_replaced_and_rebuilt(tmp_path: Path) -> None:
    """Databases written before the scoped FTS layout upgrade themselves on start-up."""
    from powercontext_runtime.composition import Runtime
    from powercontext_runtime.contract.memory import RememberMemoryRequest, SearchMemoryRequest
    from powercontext_runtime.settings import Settings

    settings = Settings.load(env={}, home=tmp_path / "home")
    runtime = Runtime.open(settings)
    try:
        for text in ("Deploy with blue green switches", "Rotate the signing keys monthly"):
            runtime.memory.remember(
                RememberMemoryRequest(scope_id="upgrade:scope", kind="fact", text=text)
            )
    finally:
        runtime.close()
    # Turn the file into what an earlier build left: the old tables, no scoped index.
    with sqlite3.connect(tmp_path / "home" / "powercontext.db") as conn:
        for family in ("memory", "experience"):
            conn.execute(f"DROP TABLE {family}_scoped_fts")
            conn.execute(f"CREATE VIRTUAL TABLE {family}_fts USING fts5(terms)")
        conn.execute("INSERT INTO memory_fts(rowid, terms) VALUES (1, 'sdeadbeef qdeploy')")

    runtime = Runtime.open(settings)
    try:
        assert runtime.stale_indexes() == []
        found = runtime.memory.search(
            SearchMemoryRequest(scope_id="upgrade:scope", query="signing keys")
        )
        assert [hit.text for hit in found.hits] == ["Rotate the signing keys monthly"]
    finally:
        runtime.close()
    with sqlite3.connect(tmp_path / "home" / "powercontext.db") as conn:
        tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master")}
    assert not {"memory_fts", "experience_fts"} & tables
    assert {"memory_scoped_fts", "experience_scoped_fts"} <= tables
