"""SQLite and OceanBase admit the same hits in the same order with the same scores (spec 02)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from powercontext_runtime.composition import Runtime
from powercontext_runtime.contract.memory import RememberMemoryRequest, SearchMemoryRequest
from powercontext_runtime.settings import Settings
from tests.support.backends import fresh_database

SCOPE = "git:example.com/acme/parity"
FIXTURES = [
    "Run the backend contract tests after changing persistence behavior.",
    "修改数据库持久化逻辑之前先备份生产数据",
    "在 user_id 字段上加唯一索引",
    "Always reuse one HttpClient per process; creating one per request leaks sockets",
    "The entry point is src/app/main.py and it reads settings from env",
    "Use uv for Python dependencies; never pip install into the system interpreter",
    "Database migrations live in migrations/ and run with make migrate",
    "テストを実行する前にデータベースを初期化する",
    "배포 전에 통합 테스트를 실행하세요",
    "The CI pipeline runs lint, unit tests and the OceanBase contract suite",
    "API keys are rotated every 90 days by the platform team",
    "Prefer composition over inheritance in the store layer",
    "Serve assets from the www host; see hat and ith mirrors as a fallback",
]
QUERIES = [
    "test persistence",
    "数据库",
    "user_id",
    "HttpClient sockets",
    "src/app/main.py",
    "python dependencies uv",
    "database migrations",
    "データベース",
    "통합 테스트",
    "what does CI run?",
    "rotate api keys",
    "bake sourdough bread",
    "contract tests for the database store layer in CI",
    "www hat ith mirrors",
]


@pytest.fixture
def both(tmp_path: Path, oceanbase_server_url: str) -> Iterator[tuple[Runtime, Runtime]]:
    sqlite = Runtime.open(Settings.load(env={}, home=tmp_path / "a"))
    url = fresh_database(oceanbase_server_url, "parity_fixture")
    oceanbase = Runtime.open(Settings.load(env={}, home=tmp_path / "b", database_url=url))
    try:
        yield sqlite, oceanbase
    finally:
        sqlite.close()
        oceanbase.close()


def _results(runtime: Runtime, query: str) -> list[tuple[str, float]]:
    response = runtime.memory.search(SearchMemoryRequest(scope_id=SCOPE, query=query, limit=20))
    return [(hit.text, hit.score) for hit in response.hits]


@pytest.mark.oceanbase
def test_both_backends_rank_identically(both: tuple[Runtime, Runtime]) -> None:
    for runtime in both:
        for text in FIXTURES:
            runtime.memory.remember(RememberMemoryRequest(scope_id=SCOPE, kind="fact", text=text))
    sqlite, oceanbase = both
    found_something = 0
    for query in QUERIES:
        expected = _results(sqlite, query)
        assert _results(oceanbase, query) == expected, query
        found_something += bool(expected)
    # The comparison is only meaningful if most queries actually hit something.
    assert found_something >= len(QUERIES) - 2
    assert _results(sqlite, "bake sourdough bread") == []
