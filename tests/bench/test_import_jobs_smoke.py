"""Smoke test of ``bench/import_jobs.py`` (``powercontext import --jobs N`` on OceanBase), so
the script never rots: its smoke mode as a subprocess on the test session's seekdb (each run
into a database of its own, dropped afterwards), nothing written to RESULTS.md.

It checks that the report is complete and consistent, never how fast: one run per ``--jobs``
value, each with every scope and entry imported (the bench refuses otherwise), its wall time
and importer CPU, and the databases it made gone again.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pymysql
import pytest
from sqlalchemy.engine import make_url

from tests.support.backends import database_url_for

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "bench" / "import_jobs.py"

pytestmark = [pytest.mark.e2e, pytest.mark.oceanbase, pytest.mark.timeout(600)]


def test_the_import_bench_runs_each_jobs_value(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    url = database_url_for("oceanbase", request, tmp_path)
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--smoke", "--json", "--database-url", url, "--jobs", "1,3"],
        capture_output=True, text=True, timeout=540, cwd=REPO,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-5000:]
    report = json.loads(proc.stdout)
    cfg = report["config"]
    assert cfg["smoke"] and cfg["memory_budget"] == ["given"] and cfg["entries"] > cfg["scopes"]
    assert [r["jobs"] for r in report["runs"]] == [1, 3]
    for run in report["runs"]:
        assert run["memory_budget"] == "given" and run["server_cpu_seconds"] is None
        assert run["wall_seconds"] > 0 and run["importer_cpu_seconds"] > 0
        assert run["entries_per_second"] == round(cfg["entries"] / run["wall_seconds"])
    given = make_url(url)
    server = pymysql.connect(host=given.host, port=given.port, user=given.username or "root")
    with server, server.cursor() as cur:
        cur.execute("SHOW DATABASES")
        names = {row[0] for row in cur.fetchall()}
    assert not {name for name in names if name.startswith(f"{given.database}_imp")}
