"""Fixtures shared by the whole suite.

``runtime`` is parametrised over the storage backends: every contract test that takes it runs
on SQLite and on a real OceanBase-kernel server (seekdb) started once per test session. Each
test gets its own fresh database on either backend.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from powercontext_runtime.composition import Runtime
from powercontext_runtime.http import create_app
from powercontext_runtime.settings import Settings
from tests.support.backends import (  # noqa: F401  (re-exported fixture)
    BACKENDS,
    database_url_for,
    mark_backend_items,
    oceanbase_server_url,
)
from tests.support.daemon import Daemon, start_daemon
from tests.support.user_dirs import isolate, snapshot

_ISOLATION = isolate()  # before any test module is imported: subprocesses inherit it


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    mark_backend_items(items)
    for item in items:
        item.add_marker(pytest.mark.xdist_group(_worker_group(item)))


def _worker_group(item: pytest.Item) -> str:
    """Which tests run on one worker under ``make test`` (``-n 2 --dist loadgroup``).

    A file's tests stay together, so its module fixtures (daemons, browsers, host users) are
    set up once; every test that reaches the seekdb server, whatever its file, joins one
    group, so the run starts one server and fixed database names never meet on two workers.
    """
    if item.get_closest_marker("oceanbase") or "oceanbase_server_url" in getattr(
        item, "fixturenames", ()
    ):
        return "oceanbase"
    return item.nodeid.split("::", 1)[0]


@pytest.fixture(scope="session", autouse=True)
def _real_user_dirs_stay_untouched() -> Iterator[None]:
    """Fails the session if anything wrote to the real user's PowerContext, Codex or Claude
    directories (tests/support/user_dirs.py)."""
    yield
    _root, real, before = _ISOLATION
    changed = sorted(set(snapshot(real).items()) ^ set(before.items()))
    assert not changed, f"tests wrote to the real user's directories: {changed[:5]}"


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def runtime(backend: str, request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Runtime]:
    url = database_url_for(backend, request, tmp_path)
    settings = Settings.load(env={}, home=tmp_path / "home", database_url=url)
    rt = Runtime.open(settings)
    try:
        yield rt
    finally:
        rt.close()


@pytest.fixture
def sqlite_runtime(tmp_path: Path) -> Iterator[Runtime]:
    settings = Settings.load(env={}, home=tmp_path / "home")
    rt = Runtime.open(settings)
    try:
        yield rt
    finally:
        rt.close()


@pytest.fixture
def api(sqlite_runtime: Runtime) -> Iterator[TestClient]:
    """In-process HTTP client with auth on and the local token configured."""
    sqlite_runtime.ensure_local_token()
    token = sqlite_runtime.settings.token_file.read_text().strip()
    with TestClient(create_app(sqlite_runtime), base_url="http://localhost") as client:
        client.headers["Authorization"] = f"Bearer {token}"
        yield client


@pytest.fixture
def daemon(tmp_path: Path) -> Iterator[Daemon]:
    """A real ``powercontext serve`` process on a free port with its own data dir."""
    with start_daemon(tmp_path / "daemon-home") as running:
        yield running
