"""Smoke test of ``bench/fulltext_scopes.py`` (full-text search with many scopes in one
OceanBase database), so the script never rots: its smoke mode as a subprocess against a fresh
database on the test session's seekdb, nothing written to RESULTS.md.

Like the other bench smoke tests it checks that the report is complete and consistent (every
measured scope has its latencies and plan), never how fast: and that the pre-#32 statement on
the old layout returned exactly the runtime's rows, and that a second run reuses the load.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.backends import database_url_for

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "bench" / "fulltext_scopes.py"

pytestmark = [pytest.mark.e2e, pytest.mark.oceanbase, pytest.mark.timeout(600)]


def _run(url: str, *extra: str) -> dict:
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--smoke", "--json", "--database-url", url, *extra],
        capture_output=True, text=True, timeout=540, cwd=REPO,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-5000:]
    return json.loads(proc.stdout)


def test_the_fulltext_bench_measures_every_scope_size(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    url = database_url_for("oceanbase", request, tmp_path)
    first = _run(url, "--legacy", "--no-compact")
    cfg = first["config"]
    assert first["load"]["reused"] is False and first["load"]["entries_per_second"] > 0
    assert first["index_table"] == "memory_scoped_search"
    sizes = [s["rows"] for s in first["scopes"]]
    assert sizes == sorted(sizes) and set(cfg["large"]) <= set(sizes) and len(sizes) >= 3
    for scope in first["scopes"]:
        for kind in ("short", "long"):
            measured = scope[kind]
            assert measured["prompts"] == cfg["queries"] and measured["errors_503"] == 0
            for key in ("search_ms", "prepare_ms"):
                lat = measured[key]
                assert 0 < lat["min"] <= lat["p50"] <= lat["p95"] <= lat["max"]
            assert 0 <= measured["packs_ready"] <= measured["prompts"]
        assert scope["short"]["candidate_queries"] + scope["long"]["candidate_queries"] > 0
        assert "TEXT RETRIEVAL SCAN" in " ".join(scope["plan"])
        legacy = scope["legacy"]
        assert legacy["statements"] > 0 and legacy["compared"] == legacy["statements"]
        assert legacy["same_rows"] == legacy["statements"]  # the old layout's rows, exactly
        assert {"as cached", "scope index", "FULLTEXT index"} <= set(legacy)
        assert "ix_bench_legacy_search_scope" in " ".join(legacy["scope index"]["plan"])
    again = _run(url, "--reuse", "--no-compact")
    assert again["load"] == {"reused": True}
    assert [s["rows"] for s in again["scopes"]] == sizes
