"""The throwaway seekdb server (tools/seekdb.py) and the OceanBase facts the store relies on.

Starts a real seekdb, creates a utf8mb4_bin table with a FULLTEXT index using the space parser
with ``min_token_size=1`` (see docs/decisions/oceanbase-facts.md) and checks that 2-character
terms are found and that case/accent variants of identifiers stay distinct.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError

from tools.seekdb import SeekdbError, SeekdbServer

pytestmark = pytest.mark.oceanbase

# Case and accent variants, including NFC "café" (c3 a9) and NFD "café" (e + U+0301).
SCOPES = ["PC-x-Alpha", "pc-x-alpha", "café", "cafe", "cafe\u0301"]


@pytest.fixture(scope="module")
def server() -> Iterator[SeekdbServer]:
    with SeekdbServer(database="harness") as running:
        yield running


@pytest.fixture(scope="module")
def engine(server: SeekdbServer) -> Iterator[sa.Engine]:
    eng = sa.create_engine(server.url, pool_pre_ping=True)
    try:
        yield eng
    finally:
        eng.dispose()


@pytest.fixture(scope="module")
def entries(engine: sa.Engine) -> sa.Table:
    metadata = sa.MetaData()
    table = sa.Table(
        "harness_entries",
        metadata,
        sa.Column("scope_id", sa.String(256, collation="utf8mb4_bin"), primary_key=True),
        sa.Column("entry_id", sa.String(128, collation="utf8mb4_bin"), primary_key=True),
        sa.Column("terms", sa.Text, nullable=False),
        mysql_charset="utf8mb4",
    )
    sa.event.listen(
        table,
        "after_create",
        sa.DDL(
            "CREATE FULLTEXT INDEX ft_harness_entries_terms ON harness_entries (terms) "
            "WITH PARSER space PARSER_PROPERTIES=(min_token_size=1)"
        ),
    )
    metadata.create_all(engine)
    with engine.begin() as conn:
        conn.execute(
            table.insert(),
            [
                {"scope_id": scope, "entry_id": "e1", "terms": f"wtest s{index} wa"}
                for index, scope in enumerate(SCOPES)
            ]
            + [{"scope_id": "PC-x-Alpha", "entry_id": "e2", "terms": "wtest wrun x636166c3a9"}],
        )
    return table


def _match(conn: sa.Connection, scope_id: str, query: str) -> list[str]:
    rows = conn.execute(
        sa.text(
            "SELECT entry_id, MATCH(terms) AGAINST(:q IN NATURAL LANGUAGE MODE) AS score "
            "FROM harness_entries "
            "WHERE scope_id = :scope AND MATCH(terms) AGAINST(:q IN NATURAL LANGUAGE MODE) "
            "ORDER BY score DESC, entry_id"
        ),
        {"q": query, "scope": scope_id},
    )
    return [row.entry_id for row in rows]


def test_server_is_a_running_seekdb(server: SeekdbServer, engine: sa.Engine) -> None:
    assert server.process is not None and server.process.poll() is None
    assert server.url == f"mysql+pymysql://root@127.0.0.1:{server.port}/harness?charset=utf8mb4"
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT DATABASE()")).scalar() == "harness"
        comment = conn.execute(sa.text("SELECT @@version_comment")).scalar()
    assert str(comment).startswith("OceanBase")


def test_fulltext_index_finds_two_character_terms(engine: sa.Engine, entries: sa.Table) -> None:
    with engine.connect() as conn:
        assert _match(conn, "PC-x-Alpha", "wa") == ["e1"]
        assert _match(conn, "PC-x-Alpha", "wtest wrun") == ["e2", "e1"]  # OR, e2 has both
        assert _match(conn, "PC-x-Alpha", "x636166c3a9") == ["e2"]
        assert _match(conn, "PC-x-Alpha", "wnothere") == []
        ddl = conn.execute(sa.text("SHOW CREATE TABLE harness_entries")).one()[1]
    assert "WITH PARSER space PARSER_PROPERTIES=(min_token_size=1," in ddl


def test_identifier_variants_stay_distinct(engine: sa.Engine, entries: sa.Table) -> None:
    scope = entries.c.scope_id
    with engine.connect() as conn:
        collations = dict(
            conn.execute(
                sa.text(
                    "SELECT column_name, collation_name FROM information_schema.columns "
                    "WHERE table_schema = DATABASE() AND table_name = 'harness_entries'"
                )
            ).all()
        )
        assert collations["scope_id"] == "utf8mb4_bin"
        assert collations["entry_id"] == "utf8mb4_bin"
        stored = conn.execute(sa.select(scope).where(entries.c.entry_id == "e1")).scalars().all()
        assert sorted(stored) == sorted(SCOPES)
        for value in SCOPES:
            same = sa.select(scope).where(scope == value, entries.c.entry_id == "e1")
            assert conn.execute(same).scalars().all() == [value]
            # Every variant holds "wa"; a scoped MATCH sees only its own row.
            assert _match(conn, value, "wa") == ["e1"]
        in_rows = conn.execute(sa.select(scope).where(scope.in_(["cafe", "PC-x-Alpha"])))
        assert sorted(in_rows.scalars().all()) == ["PC-x-Alpha", "PC-x-Alpha", "cafe"]
    with pytest.raises(IntegrityError) as caught, engine.begin() as conn:
        conn.execute(entries.insert().values(scope_id="cafe", entry_id="e1", terms="wa"))
    assert caught.value.orig.args[0] == 1062


def test_stop_terminates_the_server_and_removes_its_directory() -> None:
    server = SeekdbServer()
    with server:
        base_dir = server.base_dir
        pid = server.pid
        assert base_dir is not None and (base_dir / "run" / "sql.sock").exists()
    assert server.process is None and server.stop_seconds is not None
    assert not base_dir.exists()
    assert not os.path.exists(f"/proc/{pid}") or _is_zombie_free(pid)


def _is_zombie_free(pid: int | None) -> bool:
    # The pid may already be reused by an unrelated process; it must not be our seekdb.
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            return b"seekdb" not in handle.read()
    except OSError:
        return True


def test_early_exit_reports_the_reason_from_the_log() -> None:
    # log_disk_size=1G makes seekdb exit at once with nothing useful on stdout. Its log is
    # written by a background thread that a loaded CI machine once saw lose every line at exit;
    # synchronous logging makes the reason's presence in the log a fact the test can rely on.
    failing = SeekdbServer(log_disk_size="1G", parameters={"enable_async_syslog": "false"})
    with pytest.raises(SeekdbError) as caught, failing:
        pass
    message = str(caught.value)
    assert "exited during start-up" in message
    assert "OB_RESOURCE_UNIT_VALUE_INVALID" in message


def test_an_exit_that_left_no_error_in_the_log_says_so_at_once(tmp_path: Path) -> None:
    # What a loaded CI machine once produced: seekdb exited and its asynchronous log writer had
    # written no ERROR line. The message must say where the reason went, without waiting for a
    # log that an exited process can no longer write.
    (tmp_path / "log").mkdir()
    (tmp_path / "log" / "seekdb.log").write_text("[2026-12-02] INFO  starting\n")
    server = SeekdbServer(base_dir=tmp_path)
    server.base_dir = tmp_path
    server.process = subprocess.Popen(["false"])
    server.process.wait()
    started = time.monotonic()
    message = server._exit_message("seekdb exited during start-up (status 1)")
    assert time.monotonic() - started < 1.0  # the 5 s settle wait is for a running server only
    assert "holds no ERROR line" in message
    assert "enable_async_syslog=false" in message
    assert "--- last errors" not in message
