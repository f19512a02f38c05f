"""OceanBase's vector search (``store/vectors.py``): a small scope is scored exactly, a large
one is searched through the HNSW index, on a real seekdb.

Why it matters: every scope of a team database shares one vector table and one index, so a
scope's search is the index searched with the scope as a filter, and ``bench/oceanbase_scopes.py``
measured that filter losing about half of the true nearest neighbours of a scope a quarter of
the table's size, while scoring all of that scope's rows was both exact and faster. The tests
run with a small ``exact_max`` so the switch is reached with a handful of rows; they watch the
statements the store sends and check the answers against numpy.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from sqlalchemy import Engine, create_engine, event

from powercontext_runtime.store.vectors import (
    SCOPE_SIZE_TTL,
    PendingVersion,
    _OceanBaseVectors,
)
from tests.support.backends import database_url_for

pytestmark = pytest.mark.oceanbase

DIM, MODEL = 8, "synthetic-v1"
SMALL, LARGE = "git:example.com/acme/small", "git:example.com/acme/large"


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def engine(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Engine]:
    made = create_engine(database_url_for("oceanbase", request, tmp_path))
    try:
        yield made
    finally:
        made.dispose()


@pytest.fixture
def sent(engine: Engine) -> list[str]:
    """Every statement the engine sends, in order."""
    statements: list[str] = []

    def before(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        statements.append(statement)

    event.listen(engine, "before_cursor_execute", before)
    return statements


def _rows(rng: np.random.Generator, count: int) -> Any:
    rows = rng.normal(size=(count, DIM))
    return (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)


def _put(engine: Engine, store: _OceanBaseVectors, scope: str, first: int, vectors: Any) -> None:
    pending = [PendingVersion(first + i, scope, "", "[]") for i in range(len(vectors))]
    with engine.begin() as conn:
        store.put(conn, MODEL, pending, vectors)


def _nearest(engine: Engine, store: _OceanBaseVectors, scope: str, query: Any) -> list[int]:
    with engine.connect() as conn:
        return [hit.rowid for hit in store.nearest(conn, scope, MODEL, query, 4)]


def _searches(sent: list[str]) -> list[str]:
    return [s for s in sent if "cosine_distance" in s]


def _counts(sent: list[str]) -> list[str]:
    return [s for s in sent if s.startswith("SELECT count(*)")]


def test_a_small_scope_is_scored_exactly_and_a_large_one_through_the_index(
    engine: Engine, sent: list[str]
) -> None:
    clock = _Clock()
    store = _OceanBaseVectors(DIM, exact_max=5, clock=clock)
    with engine.begin() as conn:
        store.create(conn)
    rng = np.random.default_rng(7)
    small, large = _rows(rng, 5), _rows(rng, 9)
    _put(engine, store, SMALL, 100, small)
    _put(engine, store, LARGE, 200, large)
    query = _rows(rng, 1)[0]
    sent.clear()

    found = _nearest(engine, store, SMALL, query)
    # Exact: the scope's own rows in numpy's order, and no index search was asked for.
    assert found == [100 + int(i) for i in np.argsort(-(small @ query), kind="stable")[:4]]
    assert len(_counts(sent)) == 1
    assert [s for s in _searches(sent) if "APPROXIMATE" in s] == []

    sent.clear()
    assert set(_nearest(engine, store, LARGE, query)) <= set(range(200, 209))
    assert len(_counts(sent)) == 1
    assert all("APPROXIMATE" in s for s in _searches(sent)) and _searches(sent)


def test_a_scope_size_is_counted_again_only_after_its_ttl(engine: Engine, sent: list[str]) -> None:
    clock = _Clock()
    store = _OceanBaseVectors(DIM, exact_max=5, clock=clock)
    with engine.begin() as conn:
        store.create(conn)
    rng = np.random.default_rng(11)
    _put(engine, store, SMALL, 300, _rows(rng, 4))
    query = _rows(rng, 1)[0]
    _nearest(engine, store, SMALL, query)
    # The scope grows past the threshold: within the TTL the known size still holds.
    _put(engine, store, SMALL, 304, _rows(rng, 3))
    sent.clear()
    clock.now += SCOPE_SIZE_TTL / 2
    _nearest(engine, store, SMALL, query)
    assert _counts(sent) == [] and not any("APPROXIMATE" in s for s in _searches(sent))
    # Past it the scope is counted once more, and is searched through the index from then on.
    sent.clear()
    clock.now += SCOPE_SIZE_TTL
    _nearest(engine, store, SMALL, query)
    _nearest(engine, store, SMALL, query)
    assert len(_counts(sent)) == 1
    assert [("APPROXIMATE" in s) for s in _searches(sent)] == [True, True]
