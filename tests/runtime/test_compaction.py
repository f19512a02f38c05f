"""`powercontext compact` after a bulk load, and the hint the loads print (store/compaction.py)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine

from powercontext_runtime.cli.main import main as cli_main
from powercontext_runtime.composition import Runtime
from powercontext_runtime.contract.memory import RememberMemoryRequest
from powercontext_runtime.settings import Settings
from powercontext_runtime.store import compaction
from tests.runtime.test_portability_cli import run
from tests.support.backends import _server_connection, database_url_for
from tests.support.realistic_scope import packs, populate

SHOP = "git:example.com/acme/shop"
_HINT = "`powercontext compact` starts one now"


@pytest.fixture
def export_file(tmp_path: Path) -> Iterator[Path]:
    """A realistic scope written to an export file from an SQLite data dir."""
    home = tmp_path / "source"
    rt = Runtime.open(Settings.load(env={}, home=home))
    try:
        populate(rt, SHOP)
    finally:
        rt.close()
    out = tmp_path / "shop.jsonl"
    assert cli_main(["export", "--data-dir", str(home), "-o", str(out), "--json"]) == 0
    yield out


def _last_compaction(url: str) -> int:
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            return int(
                conn.exec_driver_sql(
                    "SELECT last_scn FROM oceanbase.DBA_OB_MAJOR_COMPACTION"
                ).scalar_one()
            )
    finally:
        engine.dispose()


def test_import_says_a_compaction_is_pending_and_compact_runs_it(
    backend: str,
    export_file: Path,
    tmp_path: Path,
    request: pytest.FixtureRequest,
    capsys: pytest.CaptureFixture[str],
) -> None:
    url = database_url_for(backend, request, tmp_path)
    db = ["--data-dir", str(tmp_path / "home"), "--database-url", url]
    code, stdout, stderr = run(capsys, "import", str(export_file), *db)
    assert code == 0, stderr
    on_oceanbase = backend == "oceanbase"
    assert (_HINT in stdout) is on_oceanbase  # SQLite's daemon merges its own segments
    rt = Runtime.open(Settings.load(env={}, home=tmp_path / "home", database_url=url))
    try:
        for n in range(20):  # one FTS5 segment per committed write on SQLite
            text = f"Service number{n} listens on port 80{n:02d}"
            rt.memory.remember(RememberMemoryRequest(scope_id=SHOP, kind="fact", text=text))
        before = packs(rt, SHOP)
    finally:
        rt.close()
    last = _last_compaction(url) if on_oceanbase else 0

    code, stdout, stderr = run(capsys, "compact", *db, "--json")
    assert code == 0, stderr
    done = json.loads(stdout)
    assert (done["backend"], done["finished"]) == (backend, True)
    if on_oceanbase:
        assert done["merge_steps"] == 0
        assert _last_compaction(url) > last  # the server finished a compaction we started
    else:
        assert done["merge_steps"] > 0
        code, stdout, _ = run(capsys, "compact", *db)
        assert (code, stdout.strip()) == (0, "the full-text index was already merged")
    rt = Runtime.open(Settings.load(env={}, home=tmp_path / "home", database_url=url))
    try:
        assert packs(rt, SHOP) == before  # compacted, not changed
    finally:
        rt.close()


def test_migrate_says_so_too(
    backend: str,
    export_file: Path,
    tmp_path: Path,
    request: pytest.FixtureRequest,
    capsys: pytest.CaptureFixture[str],
) -> None:
    url = database_url_for(backend, request, tmp_path)
    code, stdout, stderr = run(
        capsys, "migrate", "--data-dir", str(tmp_path / "source"), "--to", url
    )
    assert code == 0, stderr
    assert (_HINT in stdout) is (backend == "oceanbase")
    code, stdout, _ = run(capsys, "migrate", "--data-dir", str(tmp_path / "source"), "--to", url)
    assert code == 0 and _HINT not in stdout  # nothing written this time


@pytest.mark.oceanbase
def test_compact_without_the_privilege_is_a_typed_error(
    tmp_path: Path, request: pytest.FixtureRequest, capsys: pytest.CaptureFixture[str]
) -> None:
    """A team's application user usually may not compact the tenant: it is told whom to ask,
    without the driver's message."""
    from sqlalchemy.engine import make_url

    url = database_url_for("oceanbase", request, tmp_path)
    server = request.getfixturevalue("oceanbase_server_url")
    name = make_url(url).database
    user = f"pc{abs(hash(name)) % 10**8}"
    with _server_connection(server) as cur:
        cur.execute(f"DROP USER IF EXISTS '{user}'@'%'")
        cur.execute(f"CREATE USER '{user}'@'%' IDENTIFIED BY 'pw'")
        cur.execute(f"GRANT ALL PRIVILEGES ON `{name}`.* TO '{user}'@'%'")
    try:
        limited = make_url(url).set(username=user, password="pw")
        db = ["--data-dir", str(tmp_path / "home"), "--database-url"]
        db.append(limited.render_as_string(hide_password=False))
        code, stdout, stderr = run(capsys, "compact", *db, "--json")
        assert (code, stdout) == (1, "")
        error = json.loads(stderr.splitlines()[-1])["error"]
        assert error["code"] == "compaction_not_permitted"
        assert "ALTER SYSTEM MAJOR FREEZE" in error["message"]
        assert "1227" not in stderr and "1142" not in stderr and "Traceback" not in stderr
    finally:
        with _server_connection(server) as cur:
            cur.execute(f"DROP USER IF EXISTS '{user}'@'%'")


# -- the wait, against server states that cannot be produced on demand -----------------------


class _Server:
    """The compaction view as a scripted sequence of (last_scn, status, is_error) rows."""

    def __init__(self, states: list[tuple[int, str, str]]) -> None:
        self.states = states
        self.read = 0
        self.frozen_at: int | None = None

    def exec_driver_sql(self, statement: str) -> Any:
        if statement.startswith("ALTER SYSTEM"):
            self.frozen_at = self.read
            return None
        state = self.states[min(self.read, len(self.states) - 1)]
        self.read += 1
        return _Row(state)


class _Row:
    def __init__(self, state: tuple[int, str, str]) -> None:
        self.state = state

    def one(self) -> tuple[int, str, str]:
        return self.state


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def pause(self, seconds: float) -> None:
        self.now += seconds


def _compact(server: _Server, wait: float) -> bool:
    clock = _Clock()
    return compaction.major_compaction(
        server,  # type: ignore[arg-type]
        wait,
        clock=clock,
        pause=clock.pause,
    )


def test_a_running_compaction_is_waited_for_before_ours_is_started() -> None:
    server = _Server([(1, "COMPACTING", "NO"), (2, "IDLE", "NO"), (2, "COMPACTING", "NO")])
    server.states += [(2, "COMPACTING", "NO"), (3, "IDLE", "NO")]
    assert _compact(server, wait=60) is True
    # Frozen only once the other one had ended, and done only when ours ended (3, not 2).
    assert server.frozen_at == 2 and server.read == 5


def test_a_wait_that_runs_out_leaves_the_compaction_to_the_server() -> None:
    server = _Server([(1, "IDLE", "NO"), (1, "COMPACTING", "NO")])
    assert _compact(server, wait=5) is False
    assert server.frozen_at == 1
    busy = _Server([(1, "COMPACTING", "NO")])
    assert _compact(busy, wait=0) is False and busy.frozen_at is None  # never frozen


def test_an_error_the_server_reports_is_a_typed_error() -> None:
    server = _Server([(1, "IDLE", "NO"), (1, "COMPACTING", "YES")])
    with pytest.raises(compaction.CompactionFailedError) as caught:
        _compact(server, wait=60)
    assert caught.value.code == "compaction_failed" and caught.value.status == 503
