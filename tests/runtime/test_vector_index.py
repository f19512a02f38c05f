"""The SQLite backend's in-process vector index (``store/vectors.py``) at 100k vectors.

Above ``EXACT_MAX`` rows a search is a Hamming prefilter over sign codes of the mean-centred
vectors, then an int8 rescoring of ``PREFILTER`` of them. These tests hold it to recall@10 ≥
0.99 against an exact scan of the same int8 rows at 100k, on synthetic vectors shaped like
sentence embeddings (a large shared component, clusters, noise), including a scope that grew
from a few rows (the centre must follow it), and check the query thread's prior search merges
with rows appended after it. The store runs on a real SQLite file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from sqlalchemy import create_engine

from powercontext_runtime.store.vectors import (
    EXACT_MAX,
    PendingVersion,
    _int8,
    _ScopeIndex,
    _SqliteVectors,
)

DIM = 512
N = 100_000
SCOPE, MODEL = "git:example.com/acme/vectors", "synthetic-v1"


def _unit(rows: Any) -> Any:
    return (rows / np.linalg.norm(rows, axis=-1, keepdims=True)).astype(np.float32)


def _vectors(n: int, seed: int, common_weight: float = 0.32) -> Any:
    """Unit rows shaped like USE-multilingual's on real text (the 100k texts of the speed
    study: a random pair's cosine 0.10, the mean vector's norm 0.32, a row's nearest
    neighbour at cosine ≈ 0.67): a shared direction (raw sign codes then collide, which the
    centring removes), one of 2,000 topic directions, and noise."""
    rng = np.random.default_rng(seed)
    common = _unit(np.random.default_rng(99).standard_normal(DIM))
    topics = _unit(rng.standard_normal((2000, DIM)))
    topic_weight = 0.75
    noise_weight = np.sqrt(1 - common_weight**2 - topic_weight**2)
    rows = common_weight * common + topic_weight * topics[rng.integers(0, 2000, n)]
    return _unit(rows + noise_weight * _unit(rng.standard_normal((n, DIM))))


def _queries(data: Any, count: int, seed: int) -> Any:
    """Near some rows, as a prompt is near the entries it is about (top-10 cosine ≈ 0.55, as
    for real prompts)."""
    rng = np.random.default_rng(seed)
    picked = data[rng.integers(0, len(data), count)]
    return _unit(picked + 0.6 / np.sqrt(DIM) * rng.standard_normal(picked.shape))


def _index(data: Any, chunks: int = 1) -> _ScopeIndex:
    index = _ScopeIndex(DIM)
    for part in np.array_split(np.arange(len(data)), chunks):
        q, scale = _int8(data[part])
        index.append((part + 1).tolist(), q, scale)
    return index


def _recall(index: _ScopeIndex, queries: Any, k: int = 10) -> float:
    n = index.size
    dequantised = index.q[:n].astype(np.float32) * index.scale[:n, None]
    found = 0
    for query in queries:
        exact = np.argsort(-(dequantised @ query), kind="stable")[:k]
        truth = {int(index.rowids[i]) for i in exact}
        got = {hit.rowid for hit in index.nearest(query, k)}
        found += len(truth & got)
    return found / (k * len(queries))


@pytest.fixture(scope="module")
def data() -> Any:
    return _vectors(N, seed=1)


def test_recall_at_10_is_at_least_099_at_100k(data: Any) -> None:
    index = _index(data)
    recall = _recall(index, _queries(data, 200, seed=2))
    assert index.codes is not None  # the prefilter ran, not an exact scan
    assert recall >= 0.99, recall


def test_the_centre_follows_a_scope_that_grew(data: Any) -> None:
    # The first 5,000 rows come from elsewhere in the space; searching them fixes a centre.
    early = _vectors(EXACT_MAX + 904, seed=3, common_weight=0.5)
    index = _index(early)
    index.nearest(early[0], 10)
    assert index.centred_at == len(early)
    q, scale = _int8(data)
    index.append(list(range(len(early) + 1, len(early) + N + 1)), q, scale)
    assert _recall(index, _queries(data, 200, seed=4)) >= 0.99
    assert index.centred_at == index.size  # recomputed once it had doubled


def test_forgotten_rows_are_never_hits(data: Any) -> None:
    index = _index(data[:20_000])
    query = data[7]
    best = index.nearest(query, 5)
    assert best[0].rowid == 8
    index.forget([8, best[1].rowid])
    again = [hit.rowid for hit in index.nearest(query, 5)]
    assert 8 not in again and best[1].rowid not in again
    assert index.dead == 2
    index.forget([8])  # already dead: counted once
    assert index.dead == 2


def test_the_query_threads_search_merges_with_rows_appended_since(
    tmp_path: Path, data: Any
) -> None:
    engine = create_engine(f"sqlite:///{tmp_path / 'v.db'}")
    store = _SqliteVectors()
    rows = [PendingVersion(i + 1, SCOPE, "", "[]") for i in range(20_000)]
    with engine.begin() as conn:
        store.create(conn)
        store.put(conn, MODEL, rows, data[:20_000])
    query = data[20_001]
    assert store.search_ahead(SCOPE, MODEL, query, 10, _no_database) is None  # not loaded yet
    with engine.connect() as conn:
        first = store.nearest(conn, SCOPE, MODEL, query, 10)
    prior = store.search_ahead(SCOPE, MODEL, query, 10, _no_database)
    assert prior is not None and prior.covered == 20_000
    assert prior.hits == first
    # A row committed after the prior search, nearer than anything: the caller finds it.
    with engine.begin() as conn:
        store.put(conn, MODEL, [PendingVersion(30_000, SCOPE, "", "[]")], query[None, :])
    with engine.connect() as conn:
        merged = store.nearest(conn, SCOPE, MODEL, query, 10, prior)
        assert merged[0].rowid == 30_000
        assert [h.rowid for h in merged[1:]] == [h.rowid for h in first[:9]]
        # The same as a search without the prior (to float rounding: one row is scored
        # alone here, in a block there).
        whole = store.nearest(conn, SCOPE, MODEL, query, 10)
        assert [h.rowid for h in whole] == [h.rowid for h in merged]
        assert [h.similarity for h in whole] == pytest.approx([h.similarity for h in merged])
    # A prior of a cleared index is ignored, not merged.
    with engine.begin() as conn:
        store.clear(conn)
    with engine.connect() as conn:
        assert store.nearest(conn, SCOPE, MODEL, query, 10, prior) == []
    engine.dispose()


def _no_database(work: object) -> object:
    raise AssertionError("the loaded index is searched without the database")
