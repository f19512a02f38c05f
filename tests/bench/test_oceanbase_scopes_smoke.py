"""Smoke test of ``bench/oceanbase_scopes.py`` (filtered HNSW search with several scopes in one
OceanBase vector table), so the script never rots: its smoke mode as a subprocess against a
fresh database on the test session's seekdb, nothing written to RESULTS.md.

Like the other bench smoke tests it checks that the report is complete and consistent (every
phase measured every scope, with a plan, recall within 0…1 and latencies), never how fast or
how good: and that the bench's rows are gone afterwards, also when a run before left some.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import sqlalchemy as sa

from tests.support.backends import database_url_for

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "bench" / "oceanbase_scopes.py"

pytestmark = [pytest.mark.e2e, pytest.mark.oceanbase, pytest.mark.timeout(300)]


def _run(url: str, *extra: str) -> dict:
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--smoke", "--json", "--database-url", url, *extra],
        capture_output=True, text=True, timeout=240, cwd=REPO,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-5000:]
    return json.loads(proc.stdout)


def _bench_rows(url: str) -> int:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            return conn.exec_driver_sql(
                "SELECT count(*) FROM memory_vectors_d512 WHERE model = 'bench-scopes'"
            ).scalar_one()
    finally:
        engine.dispose()


def test_the_scopes_bench_measures_every_scope_and_cleans_up(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    url = database_url_for("oceanbase", request, tmp_path)
    kept = _run(url, "--keep")
    cfg = kept["config"]
    assert kept["rows"] == cfg["background"] + sum(cfg["sizes"])
    assert kept["cleanup"] == {"kept": True} and _bench_rows(url) == kept["rows"]
    assert kept["load"]["reused"] is False and kept["load"]["rows_per_second"] > 0
    assert kept["rebuild_index_seconds"] >= 0
    assert [p["phase"] for p in kept["phases"]] == ["after load", "after rebuild_index"]
    sizes = [cfg["background"], *cfg["sizes"]]
    for phase in kept["phases"]:
        assert [s["rows"] for s in phase["scopes"]] == sizes
        for scope in phase["scopes"]:
            # The runtime scores a scope within its threshold exactly, a larger one through
            # the index (the smoke's threshold sits between its scope sizes).
            small = scope["rows"] <= cfg["exact_max"]
            assert scope["mode"] == ("exact" if small else "approximate")
            assert ("VECTOR" in scope["plan"]["line"]) is not small
            assert "VECTOR" in scope["approximate"]["plan"]["line"]
            assert 0 <= scope["recall_min"] <= scope["recall_mean"] <= 1
            assert 0 <= scope["recall_share_perfect"] <= 1
            assert scope["foreign_rows"] == 0  # the filter never lets another scope's row in
            lat = scope["latency_ms"]
            assert 0 < lat["min"] <= lat["p50"] <= lat["p95"] <= lat["max"]
            assert scope["exact"]["recall_mean"] == 1.0  # the server's exact search, as numpy's
            if small:
                assert scope["recall_mean"] == 1.0  # the runtime's search is that one
            assert 0 <= scope["approximate"]["recall_mean"] <= 1
            assert scope["plan"]["plan_cache_flushed"] is True  # root on seekdb may
            assert scope["plan"]["executed"]  # the plan cache views are readable
        whole = phase["whole_table"]  # a fresh database: the bench's rows are the table's
        assert whole["rows"] == kept["rows"] and 0 <= whole["recall_mean"] <= 1
    # The next run finds the kept rows as a crashed run's leftovers, deletes them and loads
    # afresh; its own rows are deleted at the end, in batches.
    again = _run(url, "--ef-search", "80")
    assert again["load"]["leftovers_deleted"] == kept["rows"]
    assert again["ef_search_session"] == 80
    assert again["cleanup"]["deleted"] == again["rows"]
    assert _bench_rows(url) == 0
