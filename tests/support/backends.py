"""Database backends for the parametrised contract suite.

SQLite always runs. OceanBase runs against a seekdb server this test session starts itself
(``tools/seekdb.py``), or against ``POWERCONTEXT_TEST_OCEANBASE_URL`` when that is set. It is
never skipped silently: if the server cannot start, the OceanBase tests fail.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

BACKENDS = ["sqlite", "oceanbase"]


@pytest.fixture(scope="session")
def oceanbase_server_url() -> Iterator[str]:
    external = os.environ.get("POWERCONTEXT_TEST_OCEANBASE_URL")
    if external:
        yield external
        return
    from tools.seekdb import SeekdbServer

    with SeekdbServer(database="powercontext_bootstrap") as server:
        yield server.url


def fresh_database(server_url: str, name: str) -> str:
    """Create (or recreate) an empty database on the server and return its URL."""
    return _fresh_database(server_url, name)


def _fresh_database(server_url: str, name: str) -> str:
    from sqlalchemy.engine import make_url

    with _server_connection(server_url) as cur:
        cur.execute(f"DROP DATABASE IF EXISTS `{name}`")
        cur.execute(f"CREATE DATABASE `{name}`")  # server default collation on purpose
    return make_url(server_url).set(database=name).render_as_string(hide_password=False)


@contextmanager
def _server_connection(server_url: str) -> Iterator[Any]:
    """A cursor on the server itself (no database selected)."""
    import pymysql
    from sqlalchemy.engine import make_url

    url = make_url(server_url)
    conn = pymysql.connect(
        host=url.host, port=url.port or 3306, user=url.username, password=url.password or ""
    )
    try:
        with conn.cursor() as cur:
            yield cur
    finally:
        conn.close()


_counter = [0]


def database_url_for(backend: str, request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if backend == "sqlite":
        return f"sqlite:///{tmp_path / 'contract.db'}"
    server_url: str = request.getfixturevalue("oceanbase_server_url")
    _counter[0] += 1
    slug = re.sub(r"[^a-z0-9]", "", request.node.name.lower())[:40]
    name = f"t{os.getpid()}_{_counter[0]}_{slug}"
    url = _fresh_database(server_url, name)
    # Dropped when the requesting fixture or test is torn down (after a fixture's own teardown
    # has closed its runtime): a long-lived test server (POWERCONTEXT_TEST_OCEANBASE_URL) would
    # otherwise collect a database per test until it runs out of partitions.
    request.addfinalizer(lambda: _drop_database(server_url, name))
    return url


def _drop_database(server_url: str, name: str) -> None:
    with _server_connection(server_url) as cur:
        cur.execute(f"DROP DATABASE IF EXISTS `{name}`")


def mark_backend_items(items: list[Any]) -> None:
    for item in items:
        callspec = getattr(item, "callspec", None)
        if callspec is not None and callspec.params.get("backend") == "oceanbase":
            item.add_marker(pytest.mark.oceanbase)
