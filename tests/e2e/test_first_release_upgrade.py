"""Upgrading from the first release keeps every token working (issue 30 #4), on both backends.

The first release (commit ``e16e814``) had no capabilities: its one local token,
``auth/token``, was the operator's and the hooks' alike and could do everything, and a
``POWERCONTEXT_TOKEN``, a script or an MCP client may hold it. Today's daemon, started on that
data dir, keeps the secret and gives the row the operator's capabilities in place; a narrowed
token made with ``token create`` keeps working with an agent's share (``read``, ``write``,
``propose``). Nothing the first release stored is lost.

The fixture in ``tests/support/first_release/`` is what the first release's own code wrote
(its ``Runtime.open``, ``ensure_local_token``, remember, revise, ``token create``, two
proposals and an approval) on SQLite (the ``sqlite3`` shell's ``.dump``) and on seekdb (its
tables' ``SHOW CREATE TABLE`` and rows), with its random ids, secrets and clock fixed;
``tools/first_release_fixture.py`` rebuilds it. Its tokens are the fixture's, not secrets.
"""

from __future__ import annotations

import json
import os
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine

from tests.e2e.helpers import (
    CANDIDATES_APPROVE,
    CANDIDATES_GET,
    CANDIDATES_LIST,
    GET,
    REFS_SET,
    assert_envelope,
    list_all,
)
from tests.support.backends import database_url_for
from tests.support.daemon import start_daemon

FIXTURE = Path(__file__).resolve().parents[1] / "support" / "first_release"


def _manifest() -> dict[str, Any]:
    manifest: dict[str, Any] = json.loads((FIXTURE / "manifest.json").read_text("utf-8"))
    return manifest


def _statements(path: Path) -> list[str]:
    """The dump's statements: each ends with ``;`` at the end of a line (values are escaped,
    so no line inside a statement does)."""
    statements, current = [], []
    for line in path.read_text("utf-8").splitlines():
        current.append(line)
        if line.endswith(";"):
            statements.append("\n".join(current))
            current = []
    return statements


def _first_release_data_dir(home: Path, backend: str, url: str) -> str | None:
    """The data dir the first release left: its token file and its database on ``backend``;
    returns the ``--database-url`` to serve it with (None: the data dir's SQLite file)."""
    (home / "auth").mkdir(parents=True, mode=0o700)
    token_file = home / "auth" / "token"
    token_file.write_text(_manifest()["operator_token"] + "\n", encoding="utf-8")
    os.chmod(token_file, 0o600)
    if backend == "sqlite":
        with closing(sqlite3.connect(home / "powercontext.db")) as db:
            db.executescript((FIXTURE / "sqlite.sql").read_text("utf-8"))
        return None
    engine = create_engine(url)
    try:
        with engine.begin() as conn:
            for statement in _statements(FIXTURE / "oceanbase.sql"):
                conn.exec_driver_sql(statement)
    finally:
        engine.dispose()
    return url


def test_the_first_releases_tokens_keep_working_after_the_upgrade(
    backend: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    manifest = _manifest()
    scope = manifest["scope_id"]
    home = tmp_path / "home"
    url = _first_release_data_dir(home, backend, database_url_for(backend, request, tmp_path))
    with start_daemon(home, database_url=url) as daemon:
        # The token file keeps the first release's secret: nothing was re-issued.
        assert daemon.token == manifest["operator_token"]
        log = daemon.log_text_with("local_token_upgraded")
        assert "local_token_upgraded" in log and "local_token_reissued" not in log
        with daemon.client(manifest["operator_token"]) as old:
            # Every entry, at every citation the first release handed out.
            texts = sorted(entry["text"] for entry in list_all(old, scope))
            assert texts == sorted(entry["text"] for entry in manifest["entries"])
            for entry in manifest["entries"]:
                got = old.post(GET, json={"scope_id": scope, "citation": entry["citation"]})
                assert got.status_code == 200, got.text
                assert got.json()["text"] == entry["text"]
            superseded = old.post(GET, json={"scope_id": scope, "citation": manifest["superseded"]})
            assert superseded.status_code == 200, superseded.text
            inbox = old.post(CANDIDATES_LIST, json={"scope_id": scope}).json()["candidates"]
            assert [c["candidate_id"] for c in inbox] == [manifest["pending_candidate"]]
            decided = {"scope_id": scope, "candidate_id": manifest["approved_candidate"]}
            assert old.post(CANDIDATES_GET, json=decided).json()["status"] == "approved"
            approve = {
                "scope_id": scope,
                "candidate_id": manifest["pending_candidate"],
                "expected_version": manifest["pending_version"],
            }
            with daemon.client(manifest["ci_token"]) as ci:  # made by `token create`
                assert [e["text"] for e in list_all(ci, scope)]  # an agent's share: reads
                assert_envelope(ci.post(CANDIDATES_APPROVE, json=approve), 403)  # never reviews
            # The operator's token of old: it may review and administer, as it always could.
            approved = old.post(CANDIDATES_APPROVE, json=approve)
            assert approved.status_code == 200, approved.text
            assert approved.json()["status"] == "approved"
            references = {"scope_id": scope, "references": ["git:example.com/acme/web"]}
            assert old.post(REFS_SET, json=references).status_code == 200
        with daemon.client(daemon.agent_token) as agent:  # the new agent file: no review
            assert_envelope(agent.post(CANDIDATES_APPROVE, json=approve), 403)
    # A second start finds nothing to upgrade and keeps the same secret.
    with start_daemon(home, database_url=url) as again:
        assert again.token == manifest["operator_token"]
        with again.client(manifest["operator_token"]) as old:
            assert old.post(REFS_SET, json=references).status_code == 200
        assert "local_token_upgraded" not in again.log_text()
