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
        assert _segments(database) == 1
        assert _postings(database) == before[1]
        assert runtime.memory.search(query).hits == before[2]
        assert runtime.compact_search_index() == 0  # nothing left to merge: a no-op round
    finally:
        runtime.close()
