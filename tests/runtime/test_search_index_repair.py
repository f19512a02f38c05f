"""The SQLite full-text index stays sound under compaction, and a damaged one is rebuilt.

Found by `make bench` (2026-12-02): loading 100k entries over HTTP failed at ~20-90k with
``503 database_unavailable`` on every write, because the periodic compaction's incremental
FTS5 merges across levels, interleaved with inserts, corrupt the index on SQLite < 3.42
(Debian 12 ships 3.40.1). These tests run on whatever SQLite the interpreter links.
"""

from __future__ import annotations

import logging
import sqlite3
from pathlib import Path

import pytest

from powercontext_runtime.composition import Runtime
from powercontext_runtime.contract.memory import RememberMemoryRequest, SearchMemoryRequest
from powercontext_runtime.errors import UnavailableError
from powercontext_runtime.settings import Settings
from powercontext_runtime.store.database import Database

SCOPE = "git:example.com/acme/index-repair"


def _fts_sound(path: Path, table: str = "memory_search_index") -> bool:
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute(f"INSERT INTO {table}({table}) VALUES ('integrity-check')")
        return True
    except sqlite3.DatabaseError:
        return False
    finally:
        conn.close()


def test_compaction_steps_between_inserts_keep_the_index_sound(tmp_path: Path) -> None:
    """The pattern of a daemon under writes: one short compaction step after every third
    insert, each its own transaction (on SQLite 3.40.1 a merge across levels corrupted the
    index within ~3,000 such inserts)."""
    path = tmp_path / "index.db"
    db = Database(f"sqlite:///{path}")
    db.create_schema()
    words = [f"term{n}" for n in range(5000)]
    try:
        for rowid in range(1, 4001):
            terms = [words[(rowid * 7 + k * 131) % len(words)] for k in range(12)]
            db.write(lambda conn, r=rowid, t=terms: db.fulltext.add(conn, "memory", "s", r, t))
            if rowid % 3 == 0:
                db.write(lambda conn: db.fulltext.compact(conn, "memory"))
        with db.read() as conn:
            found = db.fulltext.match(conn, "memory", "s", ["term7"], 10_000)
    finally:
        db.dispose()
    assert _fts_sound(path)
    expected = {r for r in range(1, 4001) if any((r * 7 + k * 131) % 5000 == 7 for k in range(12))}
    assert {rowid for rowid, _, _ in found} == expected


def _remember(runtime: Runtime, text: str) -> None:
    runtime.memory.remember(RememberMemoryRequest(scope_id=SCOPE, kind="fact", text=text))


def _damage(path: Path) -> None:
    """What the SQLite bug left behind: an index whose structure record is garbage."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("UPDATE memory_search_index_data SET block = x'ffffffffffff' WHERE id = 10")
    finally:
        conn.close()


def test_a_damaged_index_fails_writes_with_a_clear_error_and_is_rebuilt_at_start(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    settings = Settings.load(env={}, home=tmp_path / "home")
    path = settings.sqlite_file
    assert path is not None
    runtime = Runtime.open(settings)
    try:
        _remember(runtime, "Payments retry with an idempotency key")
        _remember(runtime, "The staging cluster lives in eu-west-1")
    finally:
        runtime.close()
    _damage(path)
    assert not _fts_sound(path)

    runtime = Runtime.open(settings, prepare=False)  # as a daemon that was running
    try:
        with pytest.raises(UnavailableError) as refused:
            _remember(runtime, "Another entry")
        assert refused.value.status == 503
        assert "restart the runtime" in str(refused.value)
        assert "idempotency" not in str(refused.value)
    finally:
        runtime.close()

    with caplog.at_level(logging.INFO, logger="powercontext"):
        runtime = Runtime.open(settings)
    try:
        assert _fts_sound(path)
        damaged = [r for r in caplog.records if r.getMessage() == "search_index_damaged"]
        assert [getattr(r, "operation", None) for r in damaged] == ["memory"]
        hits = runtime.memory.search(SearchMemoryRequest(scope_id=SCOPE, query="idempotency"))
        assert [hit.text for hit in hits.hits] == ["Payments retry with an idempotency key"]
        _remember(runtime, "Writes work again after the rebuild")
        hits = runtime.memory.search(SearchMemoryRequest(scope_id=SCOPE, query="rebuild"))
        assert [hit.text for hit in hits.hits] == ["Writes work again after the rebuild"]
    finally:
        runtime.close()
    assert _fts_sound(path)


def test_a_sound_index_is_not_rebuilt_at_start(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    settings = Settings.load(env={}, home=tmp_path / "home")
    runtime = Runtime.open(settings)
    try:
        _remember(runtime, "Nothing is damaged here")
    finally:
        runtime.close()
    with caplog.at_level(logging.INFO, logger="powercontext"):
        Runtime.open(settings).close()
    events = {r.getMessage() for r in caplog.records}
    assert "search_index_damaged" not in events
    assert "search_index_rebuilt" not in events
