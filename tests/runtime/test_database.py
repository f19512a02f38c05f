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


_EARLIER_LAYOUTS = {
    # One FTS5 table per family holding a scope token and the terms.
    "unscoped": ("fts", "'sdeadbeef qdeploy'"),
    # One FTS5 table per family whose content holds scope-prefixed tokens.
    "scoped": ("scoped_fts", "'0123456789abcdefqdeploy'"),
}


@pytest.mark.parametrize("layout", sorted(_EARLIER_LAYOUTS))
def test_a_search_index_of_an_earlier_layout_is_replaced_and_rebuilt(
    tmp_path: Path, layout: str
) -> None:
    """Databases written with an earlier search-index layout upgrade themselves on start-up."""
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
    # Turn the file into what an earlier build left: its tables, none of the current ones.
    suffix, stale_document = _EARLIER_LAYOUTS[layout]
    with sqlite3.connect(tmp_path / "home" / "powercontext.db") as conn:
        for family in ("memory", "experience"):
            conn.execute(f"DROP TABLE {family}_search_index")
            conn.execute(f"DROP TABLE {family}_search_docs")
            conn.execute(f"CREATE VIRTUAL TABLE {family}_{suffix} USING fts5(terms)")
        conn.execute(f"INSERT INTO memory_{suffix}(rowid, terms) VALUES (1, {stale_document})")

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
    assert not {f"memory_{suffix}", f"experience_{suffix}"} & tables
    assert {
        "memory_search_index",
        "memory_search_docs",
        "experience_search_index",
        "experience_search_docs",
    } <= tables


def _postings(database: Path) -> list[tuple[str, int]]:
    """Every (token, rowid) pair of the contentless Memory index, read through its vocabulary."""
    with sqlite3.connect(database) as conn:
        conn.execute(
            "CREATE VIRTUAL TABLE temp.postings"
            " USING fts5vocab(main, memory_search_index, 'instance')"
        )
        return sorted(conn.execute("SELECT term, doc FROM temp.postings"))


def test_the_contentless_index_forgets_revised_and_retired_versions(tmp_path: Path) -> None:
    """FTS5 keeps no copy of what it indexed, so removal must replay the exact tokens: a wrong
    replay would leave stale postings (or drop live ones) without any error."""
    from powercontext_runtime.composition import Runtime
    from powercontext_runtime.contract.memory import (
        RememberMemoryRequest,
        RetireMemoryEntryRequest,
        ReviseMemoryEntryRequest,
        SearchMemoryRequest,
    )
    from powercontext_runtime.settings import Settings

    settings = Settings.load(env={}, home=tmp_path / "home")
    database = tmp_path / "home" / "powercontext.db"
    runtime = Runtime.open(settings)
    try:
        _kept, revised, retired = (
            runtime.memory.remember(RememberMemoryRequest(scope_id="s", kind="fact", text=text))
            for text in (
                "Deploy with blue green switches",
                "Rotate the signing keys monthly",
                "Vacuum the analytics warehouse nightly",
            )
        )
        runtime.memory.revise(
            ReviseMemoryEntryRequest(
                scope_id="s", citation=revised.entry.citation, text="Rotate the signing keys weekly"
            )
        )
        runtime.memory.retire(
            RetireMemoryEntryRequest(scope_id="s", citation=retired.entry.citation)
        )
        live = _postings(database)
        assert runtime.reindex()["memory"] == 2
        rebuilt = _postings(database)

        def search(query: str) -> list[str]:
            found = runtime.memory.search(SearchMemoryRequest(scope_id="s", query=query))
            return [hit.text for hit in found.hits]

        assert search("monthly") == []
        assert search("warehouse") == []
        assert search("signing weekly") == ["Rotate the signing keys weekly"]
    finally:
        runtime.close()
    assert live == rebuilt
    assert len({rowid for _, rowid in live}) == 2  # two live documents, nothing else


def _segments(database: Path) -> int:
    with sqlite3.connect(database) as conn:
        found = conn.execute("SELECT count(DISTINCT segid) FROM memory_search_index_idx")
        return int(found.fetchone()[0])


def test_compaction_merges_the_index_into_one_segment_without_changing_it(tmp_path: Path) -> None:
    """Each committed write leaves FTS5 a segment; compaction merges them in short steps and
    keeps every posting, so searches answer exactly as before."""
    from powercontext_runtime.composition import Runtime
    from powercontext_runtime.contract.memory import RememberMemoryRequest, SearchMemoryRequest
    from powercontext_runtime.settings import Settings
    from powercontext_runtime.store import fulltext

    database = tmp_path / "home" / "powercontext.db"
    runtime = Runtime.open(Settings.load(env={}, home=tmp_path / "home"))
    try:
        for n in range(40):
            text = f"Service number{n} uses port {n}"
            runtime.memory.remember(RememberMemoryRequest(scope_id="s", kind="fact", text=text))
        query = SearchMemoryRequest(scope_id="s", query="service number7 port")
        before = (_segments(database), _postings(database), runtime.memory.search(query).hits)
        assert before[0] > 1

        steps = runtime.compact_search_index()

        assert steps > 0
        if fulltext._MERGE_ACROSS_LEVELS:
            assert _segments(database) == 1
        else:  # an older SQLite merges within levels only (store/fulltext.py)
            assert _segments(database) < before[0]
        assert _postings(database) == before[1]
        assert runtime.memory.search(query).hits == before[2]
        assert runtime.compact_search_index() == 0  # nothing left to merge: a no-op round
    finally:
        runtime.close()


def test_prompt_reads_have_their_own_warm_write_refusing_connection(tmp_path: Path) -> None:
    """``prepare_context`` reads through one dedicated SQLite connection: it keeps its large
    page cache between prompts, refuses writes, and still sees every committed write."""
    from sqlalchemy.exc import OperationalError

    from powercontext_runtime.store._sqlite import sqlite_driver

    db = Database(f"sqlite:///{tmp_path / 'prompt.db'}", prompt_cache_kib=4096)
    try:
        db.create_schema()
        db.write(lambda conn: conn.exec_driver_sql("CREATE TABLE notes (body TEXT)"))
        with db.prompt_read() as conn:
            first = sqlite_driver(conn)
            assert conn.exec_driver_sql("PRAGMA cache_size").scalar() == -4096
            with db.read() as nested:  # a read nested in it shares its snapshot
                assert nested is conn
            with pytest.raises(OperationalError, match="readonly"):
                conn.exec_driver_sql("INSERT INTO notes VALUES ('lost')")
        with db.read() as conn:  # the shared pool's connections keep the default cache
            assert sqlite_driver(conn) is not first
            assert conn.exec_driver_sql("PRAGMA cache_size").scalar() == -2000
            assert conn.exec_driver_sql("SELECT count(*) FROM notes").scalar() == 0
        db.write(lambda conn: conn.exec_driver_sql("INSERT INTO notes VALUES ('kept')"))
        with db.prompt_read() as conn:  # the same connection, and no stale snapshot
            assert sqlite_driver(conn) is first
            assert conn.exec_driver_sql("SELECT body FROM notes").scalar() == "kept"
    finally:
        db.dispose()


def test_concurrent_prompt_reads_do_not_wait_for_each_other(tmp_path: Path) -> None:
    """Prompts normally run one at a time on the event loop; any other caller that prepares
    concurrently gets an extra connection rather than queueing behind the warm one."""
    import threading

    db = Database(f"sqlite:///{tmp_path / 'concurrent.db'}")
    try:
        db.create_schema()
        everyone_inside = threading.Barrier(4, timeout=10)
        seen: list[int] = []

        def prepare() -> None:
            with db.prompt_read() as conn:
                everyone_inside.wait()  # all four hold a prompt read at the same moment
                seen.append(conn.exec_driver_sql("SELECT 1").scalar_one())

        threads = [threading.Thread(target=prepare) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert seen == [1, 1, 1, 1]
        assert not everyone_inside.broken
    finally:
        db.dispose()


def test_an_in_memory_database_serves_prompt_reads_from_its_one_connection() -> None:
    db = Database("sqlite:///:memory:")
    try:
        db.create_schema()
        db.write(lambda conn: conn.exec_driver_sql("CREATE TABLE notes (body TEXT)"))
        db.write(lambda conn: conn.exec_driver_sql("INSERT INTO notes VALUES ('kept')"))
        with db.prompt_read() as conn:
            assert conn.exec_driver_sql("SELECT body FROM notes").scalar() == "kept"
    finally:
        db.dispose()
