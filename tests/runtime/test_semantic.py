"""The semantic recall channel (#17 item 2), on both backends, against a real HTTP embedder.

The embedder is the OpenAI-compatible client talking to a stdlib server started here
(tests/support/embedding_server.py) whose deterministic topic vectors let an English entry and
a Chinese query meet with no shared word. The local USE-multilingual model has its own tests
at the end (cross-language recall, no network access).
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import cast

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import create_engine

from powercontext_runtime.cli.main import main as cli_main
from powercontext_runtime.composition import Runtime
from powercontext_runtime.contract.common import MemoryCitation
from powercontext_runtime.contract.context import PrepareContextRequest
from powercontext_runtime.contract.memory import (
    RememberMemoryRequest,
    RetireMemoryEntryRequest,
    ReviseMemoryEntryRequest,
    SearchMemoryRequest,
)
from powercontext_runtime.embeddings import EmbeddingTimeoutError, EmbeddingUnavailableError
from powercontext_runtime.embeddings.openai_compatible import OpenAICompatibleEmbedder
from powercontext_runtime.errors import InvalidRequestError
from powercontext_runtime.http import create_app
from powercontext_runtime.search import fusion
from powercontext_runtime.services import semantic as semantic_module
from powercontext_runtime.services.auth import Principal
from powercontext_runtime.services.semantic import BATCH, EmbeddingWorker, SemanticChannel
from powercontext_runtime.settings import ConfigError, Settings
from tests.support.backends import database_url_for
from tests.support.embedding_server import DIMENSION, EmbeddingServer, embedding_server

SCOPE = "git:example.com/acme/semantic"
CI = "CI pipeline: GitHub Actions runs pytest on every pull request"
PAYMENTS = "Make payment requests idempotent so a retry never charges twice"
LOGIN = "The login flow uses OAuth and redirects to /auth/callback"


@pytest.fixture
def server() -> Iterator[EmbeddingServer]:
    with embedding_server() as running:
        yield running


def _env(server: EmbeddingServer, **extra: str) -> dict[str, str]:
    return {
        "POWERCONTEXT_EMBEDDINGS": "openai",
        "POWERCONTEXT_EMBEDDINGS_BASE_URL": server.url,
        "POWERCONTEXT_EMBEDDINGS_MODEL": "topics-v1",
        "POWERCONTEXT_EMBEDDINGS_DIMENSION": str(DIMENSION),
        "POWERCONTEXT_EMBEDDINGS_API_KEY": "sk-test-secret",
        "POWERCONTEXT_EMBEDDINGS_QUERY_TIMEOUT": "2",
        "POWERCONTEXT_EMBEDDINGS_MIN_SIMILARITY": "0.5",
        **extra,
    }


@pytest.fixture
def semantic(
    backend: str, request: pytest.FixtureRequest, tmp_path: Path, server: EmbeddingServer
) -> Iterator[Runtime]:
    url = database_url_for(backend, request, tmp_path)
    settings = Settings.load(env=_env(server), home=tmp_path / "home", database_url=url)
    rt = Runtime.open(settings)
    try:
        yield rt
    finally:
        rt.close()


def _remember(rt: Runtime, text: str) -> MemoryCitation:
    result = rt.memory.remember(RememberMemoryRequest(scope_id=SCOPE, kind="fact", text=text))
    return result.entry.citation


def _search(rt: Runtime, query: str, mode: str = "auto"):  # type: ignore[no-untyped-def]
    return rt.memory.search(SearchMemoryRequest(scope_id=SCOPE, query=query, mode=mode))


# -- storage, queue and hybrid search (both backends) ---------------------------------------


def test_vectors_round_trip_and_hybrid_finds_across_languages(semantic: Runtime) -> None:
    for text in (CI, PAYMENTS, LOGIN):
        _remember(semantic, text)
    channel = semantic.semantic
    assert channel is not None
    assert channel.pending_count() == 3 and channel.vector_count() == 0
    # Writes only queue: nothing was embedded on the request path.
    assert _search(semantic, "持续集成流水线").hits == []
    assert channel.embed_pending() == 3
    assert channel.pending_count() == 0 and channel.vector_count() == 3

    found = _search(semantic, "持续集成流水线")  # no word shared with the CI entry
    assert found.mode == "hybrid"
    assert [(h.text, h.matched_by) for h in found.hits] == [(CI, "vector")]
    assert found.hits[0].citation.memory_ref == found.memory
    assert 0 < found.hits[0].score <= 1

    both = _search(semantic, "idempotent payment retries")
    assert [(h.text, h.matched_by) for h in both.hits] == [(PAYMENTS, "fts+vector")]
    assert both.hits[0].score <= 1.0

    vector = _search(semantic, "客户被重复扣款 支付", mode="vector")
    assert vector.mode == "vector" and [h.text for h in vector.hits] == [PAYMENTS]

    lexical = _search(semantic, "idempotent payment retries", mode="fts")
    assert lexical.mode == "fts" and [h.matched_by for h in lexical.hits] == ["fts"]
    # Fusion by score: the cosine adds to the lexical score, on the lexical scale.
    assert lexical.hits[0].score < both.hits[0].score < lexical.hits[0].score + 0.25

    # The similarity floor keeps an unrelated query empty on the vector side too.
    assert _search(semantic, "banana bread recipe").hits == []


def test_the_query_thread_searches_the_scope_and_the_caller_checks_its_hits(
    semantic: Runtime,
) -> None:
    """Both backends search a scope's vectors on the query thread, alongside the lexical
    search (SQLite: the loaded index; OceanBase: the server, on a connection of its own, whose
    snapshot may be newer), and the caller keeps a hit only if its own snapshot holds the
    version as current."""
    channel = semantic.semantic
    assert channel is not None
    citation = _remember(semantic, CI)
    _remember(semantic, LOGIN)
    channel.embed_pending()
    _search(semantic, "持续集成", mode="vector")  # SQLite loads the scope's index here
    pending = channel.start_query("持续集成流水线", SCOPE, 4)
    vector = pending.result()
    assert pending.prior is not None and len(pending.prior.hits) == 2
    with channel.snapshot():
        found = channel.candidates(SCOPE, vector, 2, prior=pending.prior)
    assert found[0].entry_version_id == citation.entry_version_id
    # Superseded after the search ran: the caller's snapshot no longer holds it as current.
    semantic.memory.revise(
        ReviseMemoryEntryRequest(scope_id=SCOPE, citation=citation, text="No CI here any more")
    )
    with channel.snapshot():
        again = channel.candidates(SCOPE, vector, 2, prior=pending.prior)
    assert citation.entry_version_id not in {c.entry_version_id for c in again}


def test_superseded_and_retired_versions_are_never_vector_hits(semantic: Runtime) -> None:
    citation = _remember(semantic, CI)
    login = _remember(semantic, LOGIN)
    assert semantic.semantic is not None
    semantic.semantic.embed_pending()
    revised = semantic.memory.revise(
        ReviseMemoryEntryRequest(
            scope_id=SCOPE, citation=citation, text="Release checklist lives in CHANGELOG.md"
        )
    )
    # The old version's vector is still stored, but it is no longer current: skipped.
    assert _search(semantic, "持续集成流水线", mode="vector").hits == []
    semantic.memory.retire(RetireMemoryEntryRequest(scope_id=SCOPE, citation=login))
    assert _search(semantic, "登录 认证", mode="vector").hits == []
    # The worker's sweep embeds the new version and prunes the dead ones.
    semantic.semantic._next_sweep = 0.0  # the next round is a full sweep
    assert semantic.semantic.embed_pending() == 1
    assert semantic.semantic.vector_count() == 1
    hits = _search(semantic, "发布 版本", mode="vector").hits
    assert [h.citation.entry_version_id for h in hits] == [revised.entry.citation.entry_version_id]


def test_the_full_sweep_runs_at_most_once_a_minute_however_many_writes(
    semantic: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A round runs per remember; the sweep reads every version (≈ 0.1–0.5 s at 100k), so it
    is bounded by time: 30 writes and rounds in a row sweep once (the first round)."""
    from powercontext_runtime.services.semantic import FULL_SWEEP_SECONDS

    channel = semantic.semantic
    assert channel is not None
    sweeps: list[int] = []
    prune = channel._vectors.prune
    monkeypatch.setattr(
        channel._vectors, "prune", lambda conn, model: sweeps.append(1) or prune(conn, model)
    )
    channel._next_sweep = 0.0
    for n in range(30):
        _remember(semantic, f"{PAYMENTS} (variant {n})")
        assert channel.embed_pending() == 1  # every write is embedded by its own round
    assert sweeps == [1]
    assert 0 < channel._next_sweep - time.monotonic() <= FULL_SWEEP_SECONDS
    channel._next_sweep = time.monotonic()  # a minute later
    assert channel.embed_pending() == 0 and sweeps == [1, 1]


def test_a_round_with_nothing_pending_starts_the_next_one_past_every_version(
    semantic: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With every version embedded, the queue read comes back empty; the next round (one a
    second, one per write) must not scan the whole table again from where the last vector
    was written, only what is newer than everything already seen."""
    channel = semantic.semantic
    assert channel is not None
    for n in range(3):
        _remember(semantic, f"{PAYMENTS} (variant {n})")
    assert channel.embed_pending() == 3
    starts: list[int] = []
    pending = channel._vectors.pending
    monkeypatch.setattr(
        channel._vectors,
        "pending",
        lambda conn, model, after, limit: (
            starts.append(after) or pending(conn, model, after, limit)
        ),
    )
    _remember(semantic, "A version embedded by a round of its own.")
    # A retired entry's version is never pending, yet the round has seen it.
    semantic.memory.retire(
        RetireMemoryEntryRequest(scope_id=SCOPE, citation=_remember(semantic, LOGIN))
    )
    assert channel.embed_pending() == 1
    assert channel.embed_pending() == 0
    with semantic.db.read() as conn:
        top = conn.exec_driver_sql("SELECT max(id) FROM memory_versions").scalar_one()
    assert starts[0] < top and starts[-1] == top


def test_backfill_reports_progress_and_a_model_change_reembeds(
    semantic: Runtime, server: EmbeddingServer, tmp_path: Path
) -> None:
    for n in range(40):  # more than one batch
        _remember(semantic, f"{PAYMENTS} (variant {n})")
    seen: list[tuple[int, int]] = []
    assert semantic.backfill_embeddings(lambda done, total: seen.append((done, total))) == 40
    assert seen[0] == (0, 40) and seen[-1] == (40, 40) and len(seen) >= 3
    assert semantic.backfill_embeddings() == 0  # idempotent

    other = Runtime.open(semantic.settings.with_changes(embeddings_model="topics-v2"), prepare=True)
    try:
        assert other.semantic is not None
        assert other.semantic.pending_count() == 40  # another model: every vector is missing
        assert other.backfill_embeddings() == 40
        # The backfill pruned the old model's rows; the new model's serve the search.
        assert other.semantic.vector_count() == 40
        hits = other.memory.search(
            SearchMemoryRequest(scope_id=SCOPE, query="重复扣款", mode="vector")
        ).hits
        assert len(hits) == 10
    finally:
        other.close()


def test_prepare_context_is_hybrid_and_respects_bootstrap_dedup_path(semantic: Runtime) -> None:
    _remember(semantic, CI)
    _remember(semantic, PAYMENTS)
    assert semantic.semantic is not None
    semantic.semantic.embed_pending()
    principal = Principal.unrestricted()
    prepared, mode, fallback, _ = semantic.context.prepare_reporting(
        PrepareContextRequest(scope_id=SCOPE, query="我们的持续集成流水线坏了"), principal
    )
    assert mode == "hybrid" and fallback is None and prepared.status == "ready"
    assert CI in (prepared.content or "") and PAYMENTS not in (prepared.content or "")


def test_a_pack_admits_one_vector_only_item_where_a_search_admits_all(
    semantic: Runtime, tmp_path: Path, server: EmbeddingServer
) -> None:
    """A pack reaches every prompt, so vector-only candidates join it by a stricter rule (its
    own floor, at most one); ``search_memory`` is asked for, so it admits every candidate
    above the search floor."""
    cache = "Pipeline caches live in .cache/ci; the pipeline restores them before tests"
    _remember(semantic, CI)
    _remember(semantic, cache)
    assert semantic.semantic is not None
    semantic.semantic.embed_pending()
    question = "持续集成流水线"  # shares no word with either entry
    found = _search(semantic, question)
    assert sorted(h.text for h in found.hits) == sorted([CI, cache])
    assert {h.matched_by for h in found.hits} == {"vector"}
    principal = Principal.unrestricted()
    prepared, mode, _, _ = semantic.context.prepare_reporting(
        PrepareContextRequest(scope_id=SCOPE, query=question), principal
    )
    content = prepared.content or ""
    assert mode == "hybrid" and prepared.status == "ready"
    assert (CI in content) != (cache in content)  # exactly one of the two
    # The pack's floor is its own setting: above every candidate, the pack is empty while
    # the search still answers (a second topic keeps the question's cosine below 1).
    strict = semantic.settings.with_changes(embeddings_prepare_min_similarity=0.99)
    other = Runtime.open(strict)
    mixed = "持续集成流水线，还有支付"
    try:
        empty = other.context.prepare_reporting(
            PrepareContextRequest(scope_id=SCOPE, query=mixed), principal
        )
        assert empty.pack.status == "empty" and empty.empty_reason == "no_match"
        assert len(_search(other, mixed).hits) == 2
    finally:
        other.close()


def test_a_hybrid_search_fuses_lexical_hits_ranked_past_its_limit(semantic: Runtime) -> None:
    """Issue 33: the lexical channel offers the fusion twice the limit, like the vector channel,
    so a lexical hit ranked just past the limit whose cosine is strong can make it. With only
    the lexical top ``limit`` fused, the checklist (ranked 3rd by the lexical channel: it is
    the longest) came back as a vector-only candidate scoring only its cosine's share."""
    for text in ("Kubernetes node pools autoscale", "Kubernetes ingress rules"):
        _remember(semantic, text)
    checklist = "Kubernetes upgrade checklist: read the changelog, then bump the chart"
    _remember(semantic, checklist)
    assert semantic.semantic is not None
    semantic.semantic.embed_pending()
    query = "kubernetes release"  # the release topic: only the checklist's changelog has it

    def search(mode: str, limit: int):  # type: ignore[no-untyped-def]
        request = SearchMemoryRequest(scope_id=SCOPE, query=query, mode=mode, limit=limit)
        return semantic.memory.search(request)

    lexical = search("fts", 3).hits
    assert [h.text for h in lexical][2] == checklist
    assert checklist not in [h.text for h in search("fts", 2).hits]
    fused = search("hybrid", 2)
    assert fused.mode == "hybrid"
    assert len(fused.hits) == 2
    assert (fused.hits[0].text, fused.hits[0].matched_by) == (checklist, "fts+vector")
    # Its lexical score plus at most 0.25 × (1 − the 0.5 floor): found by both channels.
    assert lexical[2].score < fused.hits[0].score <= lexical[2].score + 0.125


# -- fallback: the embedder down or slow ----------------------------------------------------


def test_slow_or_failing_embedder_falls_back_to_fts(
    semantic: Runtime, server: EmbeddingServer
) -> None:
    _remember(semantic, PAYMENTS)
    assert semantic.semantic is not None
    semantic.semantic.embed_pending()
    fast = semantic.settings.with_changes(embeddings_query_timeout=0.2)
    rt = Runtime.open(fast)
    try:
        server.delay = 1.0
        started = time.monotonic()
        result = rt.memory.search(SearchMemoryRequest(scope_id=SCOPE, query="idempotent payment"))
        assert time.monotonic() - started < 0.9  # the deadline, not the server, decided
        assert result.mode == "fts" and [h.matched_by for h in result.hits] == ["fts"]
        assert rt.semantic is not None and rt.semantic.fallbacks == {"embedding_timeout": 1}
        server.delay = 0.0
        server.status = 500
        result = rt.memory.search(SearchMemoryRequest(scope_id=SCOPE, query="idempotent payment"))
        assert result.mode == "fts" and len(result.hits) == 1
        assert rt.semantic.fallbacks["embedding_unavailable"] == 1
        # An explicit vector search has nothing to fall back to.
        with pytest.raises(EmbeddingUnavailableError):
            rt.memory.search(
                SearchMemoryRequest(scope_id=SCOPE, query="idempotent payment", mode="vector")
            )
        # Writes never wait for the embedder: remember succeeds while it is down.
        _remember(rt, LOGIN)
        with pytest.raises(EmbeddingUnavailableError):
            rt.semantic.embed_pending()
        assert rt.semantic.pending_count() == 1  # still queued, retried by the next round
    finally:
        rt.close()


def test_http_reports_modes_truthfully(tmp_path: Path, server: EmbeddingServer) -> None:
    settings = Settings.load(env=_env(server), home=tmp_path / "home")
    rt = Runtime.open(settings)
    try:
        rt.ensure_local_token()
        token = settings.token_file.read_text().strip()
        with TestClient(create_app(rt), base_url="http://localhost") as api:
            api.headers["Authorization"] = f"Bearer {token}"
            caps = api.get("/v1/capabilities").json()
            assert caps["search_modes"] == ["auto", "fts", "vector", "hybrid"]
            _remember(rt, CI)
            assert rt.semantic is not None
            rt.semantic.embed_pending()
            body = {"scope_id": SCOPE, "query": "持续集成流水线"}
            response = api.post("/v1/context/prepare", json=body)
            assert response.status_code == 200
            assert response.headers["x-powercontext-search-mode"] == "hybrid"
            assert response.json()["status"] == "ready"
            search = api.post("/v1/memory/search", json=body).json()
            assert search["mode"] == "hybrid" and search["hits"][0]["matched_by"] == "vector"
            server.status = 503
            response = api.post("/v1/context/prepare", json=body)
            assert response.headers["x-powercontext-search-mode"] == "fts"
            assert response.headers["x-powercontext-search-fallback"] == "embedding_unavailable"
            assert response.json()["status"] == "empty"
            failed = api.post("/v1/memory/search", json={**body, "mode": "vector"})
            assert failed.status_code == 503
            assert failed.json()["error"]["code"] == "embedding_unavailable"
    finally:
        rt.close()
    assert server.last_headers["authorization"] == "Bearer sk-test-secret"


def test_channel_off_is_unchanged(api: TestClient) -> None:
    assert api.get("/v1/capabilities").json()["search_modes"] == ["auto", "fts"]
    body = {"scope_id": SCOPE, "query": "anything"}
    response = api.post("/v1/context/prepare", json=body)
    assert "x-powercontext-search-mode" not in response.headers
    for mode in ("vector", "hybrid"):
        failed = api.post("/v1/memory/search", json={**body, "mode": mode})
        assert failed.status_code == 422 and failed.json()["error"]["code"] == "invalid_request"
    assert api.post("/v1/memory/search", json=body).json()["mode"] == "fts"


def test_channel_off_loads_nothing(sqlite_runtime: Runtime) -> None:
    assert sqlite_runtime.semantic is None
    assert sqlite_runtime.embedding_worker() is None
    with pytest.raises(InvalidRequestError):
        sqlite_runtime.memory.resolve("q", "hybrid", "search_memory")
    with sqlite_runtime.db.read() as conn:
        tables = {row[0] for row in conn.exec_driver_sql("SELECT name FROM sqlite_master")}
    assert not any("vector" in name for name in tables)


# -- the worker and the CLI ----------------------------------------------------------------


def test_worker_embeds_after_a_write(tmp_path: Path, server: EmbeddingServer) -> None:
    settings = Settings.load(
        env=_env(server, POWERCONTEXT_EMBEDDINGS_INTERVAL="30"), home=tmp_path / "home"
    )
    rt = Runtime.open(settings)
    worker = rt.embedding_worker()
    assert worker is not None and rt.semantic is not None
    worker.start()
    try:
        _remember(rt, CI)  # wakes the worker long before its 30 s poll
        deadline = time.monotonic() + 10
        while rt.semantic.vector_count() < 1 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert rt.semantic.vector_count() == 1
    finally:
        worker.stop()
        rt.close()


def test_progress_counts_pending_down_to_zero_as_the_worker_catches_up(
    semantic: Runtime, server: EmbeddingServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """#33 item 5: the pending count (bounded, past the newest embedded version) agrees with
    the queue's full anti-join, goes N -> 0 as the worker embeds, and the worker's state,
    model and vectors are reported; a failing round says its kind, never its message."""
    channel = semantic.semantic
    assert channel is not None
    first = semantic.embedding_status()
    assert (first.state, first.pending, first.vectors) == ("idle", 0, 0)
    assert first.model == channel.model_id == f"openai-compatible:topics-v1:{DIMENSION}"
    for text in (CI, PAYMENTS, LOGIN, "Deploys go through Argo CD", "Backups run nightly"):
        _remember(semantic, text)
    assert channel.pending_estimate() == channel.pending_count() == 5
    assert channel.pending_estimate(cap=3) == 3
    monkeypatch.setattr(semantic_module, "STATUS_MAX_AGE", 0.0)  # no reuse: counted each time
    waiting = semantic.embedding_status()
    assert (waiting.state, waiting.pending, waiting.pending_capped) == ("embedding", 5, False)
    assert waiting.last_round is None  # no worker has run a round yet
    monkeypatch.setattr(semantic_module, "PENDING_COUNT_CAP", 3)
    assert semantic.embedding_status().pending_capped
    monkeypatch.undo()
    monkeypatch.setattr(semantic_module, "STATUS_MAX_AGE", 0.0)

    worker = semantic.embedding_worker()
    assert worker is not None
    worker.start()
    try:
        # The vectors are committed inside the round and its state is published after it, so
        # a status read in between shows pending 0 with no round yet: wait for both.
        _wait_for(
            lambda: (
                (status := semantic.embedding_status()).pending == 0
                and status.last_round is not None
            ),
            seconds=60,
        )
        done = semantic.embedding_status()
        assert (done.state, done.vectors, done.error) == ("idle", 5, None)
        assert done.last_round is not None
        assert channel.pending_count() == 0
        # A revision queues its new version (the old one's vector is pruned, not pending).
        entry = semantic.memory.remember(
            RememberMemoryRequest(scope_id=SCOPE, kind="fact", text="Release on Tuesdays")
        ).entry
        _wait_for(lambda: semantic.embedding_status().vectors == 6, seconds=60)
        server.status = 500  # the embedder fails from now on
        semantic.memory.revise(
            ReviseMemoryEntryRequest(
                scope_id=SCOPE, citation=entry.citation, text="Release on Thursdays"
            )
        )
        assert channel.pending_estimate() == channel.pending_count() == 1
        _wait_for(lambda: semantic.embedding_status().state == "failing", seconds=60)
        failing = semantic.embedding_status()
        assert (failing.pending, failing.error) == (1, "EmbeddingUnavailableError")
        # Under `serve --workers N` the answering processes read what the worker published.
        other = Runtime.open(semantic.settings)
        try:
            published = other.embedding_status()
            assert (published.state, published.error) == ("failing", "EmbeddingUnavailableError")
            assert published.pending == 1
        finally:
            other.close()
        server.status = 200
        worker.wake()  # not its backoff: the next round now
        _wait_for(lambda: semantic.embedding_status().state == "idle", seconds=120)
        assert semantic.embedding_status().pending == 0
    finally:
        worker.stop()
    state_file = semantic.settings.home / "embedding-worker.json"
    assert "Thursdays" not in state_file.read_text() and SCOPE not in state_file.read_text()


class _CountingChannel:
    """Stands in for the channel: counts the worker's rounds."""

    def __init__(self) -> None:
        self.rounds = 0

    def embed_pending(self) -> int:
        self.rounds += 1
        return 1


def _started_worker(quiet: float, max_defer: float) -> tuple[EmbeddingWorker, _CountingChannel]:
    channel = _CountingChannel()
    worker = EmbeddingWorker(
        cast(SemanticChannel, channel), interval=600, quiet=quiet, max_defer=max_defer
    )
    worker.start()
    _wait_for(lambda: channel.rounds == 1)  # the catch-up round at start
    return worker, channel


def _wait_for(done: Callable[[], bool], seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while not done() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert done()


def test_the_worker_embeds_a_burst_of_writes_once_the_writes_pause() -> None:
    worker, channel = _started_worker(quiet=2.0, max_defer=600)
    try:
        for _ in range(20):  # writes 50 ms apart: never a 2 s gap
            worker.wake()
            time.sleep(0.05)
        assert channel.rounds == 1  # nothing embedded while the burst went on
        _wait_for(lambda: channel.rounds == 2)  # the pause came: one round for the burst
    finally:
        worker.stop()
    assert channel.rounds == 2


def test_a_steady_stream_of_writes_still_gets_embedded() -> None:
    worker, channel = _started_worker(quiet=2.0, max_defer=0.3)
    try:
        deadline = time.monotonic() + 30
        while channel.rounds < 3 and time.monotonic() < deadline:
            worker.wake()  # never a 2 s pause
            time.sleep(0.05)
        assert channel.rounds >= 3  # a round at least every max_defer seconds meanwhile
    finally:
        worker.stop()


class _BackfillChannel:
    """Stands in for the channel during a backfill: rounds write the scripted counts, and
    rebuilds are recorded (the first ``failures`` raise, like a refused server call)."""

    def __init__(self, counts: list[int], *, rebuilds_index: bool, failures: int = 0) -> None:
        self.counts = counts
        self.rounds = 0
        self.rebuilds_index = rebuilds_index
        self.rebuilds = 0
        self.queries = 0  # no prompts: the worker trims the heap only after embedding
        self._failures = failures

    def embed_pending(self) -> int:
        self.rounds += 1
        return self.counts.pop(0) if self.counts else 0

    def rebuild_index(self) -> float:
        self.rebuilds += 1
        if self.rebuilds <= self._failures:
            raise TimeoutError("stand-in: the server refused")
        return 0.0


def _backfilling(channel: _BackfillChannel, rebuild_after: int) -> EmbeddingWorker:
    worker = EmbeddingWorker(
        cast(SemanticChannel, channel), interval=600, quiet=0, rebuild_after=rebuild_after
    )
    worker.start()
    return worker


def test_the_worker_asks_for_one_index_rebuild_once_a_large_backfill_drains() -> None:
    full = BATCH * 8  # a full round: more is queued, the worker goes again at once
    channel = _BackfillChannel([full, full, full, 5], rebuilds_index=True)
    worker = _backfilling(channel, rebuild_after=2 * full)
    try:
        _wait_for(lambda: channel.rebuilds == 1)
        assert channel.rounds == 4  # after the drained round, not between the full ones
        assert worker.wait_for_rebuild(30)
        for _ in range(3):  # small batches later: below the threshold, no new rebuild
            channel.counts.append(7)
            rounds = channel.rounds
            worker.wake()
            _wait_for(lambda rounds=rounds: channel.rounds == rounds + 1)
        assert worker.wait_for_rebuild(30)
        assert channel.rebuilds == 1
    finally:
        worker.stop()


def test_a_failed_rebuild_is_logged_by_type_and_the_worker_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    channel = _BackfillChannel([40], rebuilds_index=True, failures=1)
    with caplog.at_level("WARNING", logger="powercontext.semantic"):
        worker = _backfilling(channel, rebuild_after=30)
        try:
            _wait_for(lambda: channel.rebuilds == 1)
            assert worker.wait_for_rebuild(30)
            channel.counts.append(35)  # another batch over the threshold: asked again
            worker.wake()
            _wait_for(lambda: channel.rebuilds == 2)
            assert worker.wait_for_rebuild(30)
        finally:
            worker.stop()
    [failed] = [r for r in caplog.records if r.getMessage() == "vector_index_rebuild_failed"]
    assert failed.error_type == "TimeoutError"  # type: ignore[attr-defined]
    assert "stand-in" not in caplog.text


def test_a_backend_that_owns_its_index_is_never_asked_to_rebuild() -> None:
    channel = _BackfillChannel([BATCH * 8, 40], rebuilds_index=False)  # SQLite
    worker = _backfilling(channel, rebuild_after=1)
    try:
        _wait_for(lambda: channel.rounds == 2)
    finally:
        worker.stop()
    assert channel.rebuilds == 0


def test_reindex_embeddings_cli(
    backend: str,
    request: pytest.FixtureRequest,
    tmp_path: Path,
    server: EmbeddingServer,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    home = tmp_path / "home"
    for key, value in _env(server).items():
        monkeypatch.setenv(key, value)
    url = database_url_for(backend, request, tmp_path)
    db = ["--data-dir", str(home), "--database-url", url]
    rt = Runtime.open(Settings.load(home=home, database_url=url))
    try:
        for n in range(5):
            _remember(rt, f"{CI} #{n}")
    finally:
        rt.close()
    server_index = backend == "oceanbase"
    if server_index:  # a table analysed while empty, as after a fresh deployment
        _vector_table_stats(url, "CALL DBMS_STATS.DELETE_TABLE_STATS(database(), '{t}')")
    assert cli_main(["reindex", "--embeddings", *db]) == 0
    captured = capsys.readouterr()
    assert "embedded 5 entry versions" in captured.out
    assert "embedded 0/5" in captured.err and "embedded 5/5" in captured.err  # not a TTY
    # OceanBase: the server's HNSW index is asked for a rebuild after the backfill (it holds
    # every vector in its incremental part), and the optimizer's statistics are refreshed
    # (planned from an empty table, the scope filter is a scan); SQLite's index is its own.
    assert ("vector index checked and rebuilt if needed" in captured.out) is server_index
    assert ("rebuild its vector index" in captured.err) is server_index
    assert ("`powercontext compact` starts one now" in captured.out) is server_index
    if server_index:
        rows = _vector_table_stats(
            url,
            "SELECT num_rows FROM oceanbase.DBA_TAB_STATISTICS"
            " WHERE owner = database() AND table_name = '{t}'",
        )
        assert rows == [(5,)]  # NUM_ROWS counted, not the NULL of no statistics
    assert cli_main(["reindex", "--embeddings", *db, "--json"]) == 0
    second = json.loads(capsys.readouterr().out)
    assert second["embedded"] == 0 and "vector_index_seconds" not in second  # nothing new
    rt = Runtime.open(Settings.load(home=home, database_url=url))
    try:  # the vectors (and, on OceanBase, the rebuilt index) still answer
        hits = _search(rt, "持续集成", mode="vector").hits
        assert len(hits) == 5 and all(hit.text.startswith(CI) for hit in hits)
    finally:
        rt.close()
    monkeypatch.setenv("POWERCONTEXT_EMBEDDINGS", "off")
    assert cli_main(["reindex", "--embeddings", *db]) != 0


def _vector_table_stats(url: str, statement: str) -> list[tuple[object, ...]]:
    """Run ``statement`` (``{t}``: the vector table) on OceanBase, outside the runtime."""
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            found = conn.exec_driver_sql(statement.format(t=f"memory_vectors_d{DIMENSION}"))
            return [tuple(row) for row in found] if found.returns_rows else []
    finally:
        engine.dispose()


# -- settings, client and fusion (pure) ---------------------------------------------------


def test_settings_validate_the_channel() -> None:
    assert Settings.load(env={}, home="/tmp/x").embeddings == "off"
    with pytest.raises(ConfigError, match="POWERCONTEXT_EMBEDDINGS must be"):
        Settings.load(env={"POWERCONTEXT_EMBEDDINGS": "yes"}, home="/tmp/x")
    with pytest.raises(ConfigError, match="DIMENSION"):
        Settings.load(
            env={
                "POWERCONTEXT_EMBEDDINGS": "openai",
                "POWERCONTEXT_EMBEDDINGS_MODEL": "m",
                "POWERCONTEXT_EMBEDDINGS_BASE_URL": "http://127.0.0.1:1/v1",
            },
            home="/tmp/x",
        )
    with pytest.raises(ConfigError, match="MIN_SIMILARITY"):
        Settings.load(env={"POWERCONTEXT_EMBEDDINGS_MIN_SIMILARITY": "2"}, home="/tmp/x")
    with pytest.raises(ConfigError, match="PREPARE_MIN_SIMILARITY must be a number"):
        Settings.load(env={"POWERCONTEXT_EMBEDDINGS_PREPARE_MIN_SIMILARITY": "x"}, home="/tmp/x")
    settings = Settings.load(
        env={"POWERCONTEXT_EMBEDDINGS": "local", "POWERCONTEXT_EMBEDDINGS_API_KEY": "sk-x"},
        home="/tmp/x",
    )
    assert "sk-x" not in repr(settings)


def test_openai_client_errors_are_typed(server: EmbeddingServer) -> None:
    client = OpenAICompatibleEmbedder(server.url, "m", DIMENSION, None, timeout=0.3)
    try:
        vectors = client.embed(["payment", "login", "database"])
        assert vectors.shape == (3, DIMENSION)
        assert int(vectors[0].argmax()) == 1 and int(vectors[1].argmax()) == 2  # by index
        server.dimension = DIMENSION - 1
        with pytest.raises(EmbeddingUnavailableError, match="invalid answer"):
            client.embed(["payment"])
        server.dimension = DIMENSION
        server.delay = 1.0
        with pytest.raises(EmbeddingTimeoutError):
            client.embed(["payment"])
        server.delay = 0.0
    finally:
        client.close()
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    down = OpenAICompatibleEmbedder(f"http://127.0.0.1:{port}/v1", "m", DIMENSION, None, 1.0)
    with pytest.raises(EmbeddingUnavailableError, match="unreachable"):
        down.embed(["x"])


def _bytes(key: object) -> bytes:
    return str(key).encode()


def test_fusion_admits_lexical_hits_and_floors_vector_only() -> None:
    half = fusion.Admission(0.5)
    fused = fusion.fuse(
        [("a", 0.4), ("b", 0.3)],
        [("c", 0.9), ("a", 0.8), ("d", 0.1)],
        half,
        limit=10,
        tiebreak=_bytes,
    )
    assert [(f.key, f.matched_by) for f in fused] == [
        ("a", "fts+vector"),
        ("b", "fts"),
        ("c", "vector"),
    ]
    assert fused[0].score <= 1.0 and all(0 < f.score <= 1 for f in fused)
    # "d" is below the floor and not lexical: never admitted.
    assert "d" not in {f.key for f in fused}
    # Deterministic ties: equal scores order by the tiebreak (x: 0.25 × (0.9 − 0.5)).
    tied = fusion.fuse([("y", 0.1)], [("x", 0.9)], half, limit=10, tiebreak=_bytes)
    assert [f.key for f in tied] == ["x", "y"]
    assert fusion.fuse([], [], half, 10, _bytes) == []
    only = fusion.vector_only([("p", 0.7), ("q", 0.4)], half, 10, _bytes)
    assert [(f.key, f.score) for f in only] == [("p", 0.7)]


def test_fusion_caps_vector_only_admissions_but_never_lexical_hits() -> None:
    """A pack admits at most ``vector_only`` candidates the lexical channel did not find (the
    best ones); a lexical hit the vector channel also ranks is not counted against the cap."""
    one = fusion.Admission(0.5, vector_only=1)
    vector = [("a", 0.95), ("c", 0.9), ("d", 0.85), ("b", 0.8)]
    fused = fusion.fuse([("a", 0.5), ("b", 0.4)], vector, one, limit=10, tiebreak=_bytes)
    assert {f.key: f.matched_by for f in fused} == {
        "a": "fts+vector",
        "b": "fts+vector",
        "c": "vector",
    }
    none = fusion.Admission(0.5, vector_only=0)
    assert [f.key for f in fusion.fuse([("b", 0.4)], vector, none, 10, _bytes)] == ["b"]
    assert [f.key for f in fusion.vector_only(vector, one, 10, _bytes)] == ["a"]
    assert len(fusion.vector_only(vector, half := fusion.Admission(0.5), 2, _bytes)) == 2
    assert half.vector_only is None


def test_fusion_adds_the_cosine_to_the_lexical_score_and_never_reorders_by_rank_alone() -> None:
    """Issue 33: reciprocal rank fusion let a weak vector rank push a better lexical hit down
    (LoCoMo MRR 0.479 -> 0.381). Fused scores are lexical scores plus ``weight`` × the cosine
    above the offset, so a lexical hit keeps its score, a weak cosine barely moves it, and a
    strong one can lift a close lexical hit."""
    search = fusion.Admission(0.25, offset=0.25, weight=0.25)
    # "b" is the vector channel's first candidate, but with a weak cosine: "a" stays first.
    weak = fusion.fuse([("a", 0.6), ("b", 0.3)], [("b", 0.4)], search, 10, _bytes)
    assert [(f.key, f.score) for f in weak] == [("a", 0.6), ("b", 0.3375)]
    # A strong cosine lifts a lexical hit that was close behind.
    strong = fusion.fuse([("a", 0.3), ("b", 0.28)], [("b", 0.9)], search, 10, _bytes)
    assert [(f.key, f.score) for f in strong] == [("b", 0.4425), ("a", 0.3)]
    # A vector-only candidate scores only its cosine's share: it leads no lexical hit here, and
    # a cosine under the offset adds nothing to a lexical hit.
    only = fusion.fuse([("a", 0.2)], [("a", 0.1), ("v", 0.65)], search, 10, _bytes)
    assert [(f.key, f.score, f.matched_by) for f in only] == [
        ("a", 0.2, "fts+vector"),
        ("v", 0.1, "vector"),
    ]
    # Capped at 1; the offset defaults to the floor (the pack's admission keeps the search's).
    assert fusion.fuse([("a", 0.95)], [("a", 1.0)], search, 10, _bytes)[0].score == 1.0
    assert fusion.Admission(0.5).bonus(0.7) == fusion.Admission(0.46, 1, 0.5).bonus(0.7)
    assert fusion.Admission(0.5).bonus(0.4) == 0.0


# -- the local model (SQLite; USE-multilingual from the wheel) ------------------------------


@pytest.fixture(scope="module")
def local_embedder():  # type: ignore[no-untyped-def]
    from powercontext_runtime.embeddings.local import LocalUSEEmbedder

    return LocalUSEEmbedder()


def test_local_model_never_touches_the_network(
    local_embedder,
    monkeypatch: pytest.MonkeyPatch,  # type: ignore[no-untyped-def]
) -> None:
    def refuse(*_: object, **__: object) -> None:
        raise AssertionError("the local embedder tried to use the network")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    vectors = local_embedder.embed(["持续集成", "continuous integration"])
    assert vectors.shape == (2, 512)
    assert abs(float((vectors**2).sum(axis=1).max()) - 1.0) < 1e-5
    assert local_embedder.model_id.startswith("use-multilingual-v3:")


def test_local_model_recalls_across_languages(tmp_path: Path, local_embedder) -> None:  # type: ignore[no-untyped-def]
    # A generous deadline: this asserts recall, not latency, on a shared machine (5 s once ran
    # out on a loaded CI box, and the search fell back to full-text alone).
    env = {"POWERCONTEXT_EMBEDDINGS": "local", "POWERCONTEXT_EMBEDDINGS_QUERY_TIMEOUT": "60"}
    settings = Settings.load(env=env, home=tmp_path / "home")
    rt = Runtime.open(settings)
    try:
        assert rt.semantic is not None
        rt.semantic.embedder = local_embedder  # the module's loaded model: one load per run
        entries = [
            "Continuous integration (CI) runs pytest and ruff on every push to main",
            "Make payment requests idempotent so that retries never charge a customer twice",
            "Release notes are written in CHANGELOG.md before tagging",
            "The login flow redirects to /auth/callback after OAuth",
        ]
        for text in entries:
            _remember(rt, text)
        assert rt.semantic.embed_pending() == 4
        for query, expected in (
            ("持续集成", entries[0]),
            ("duplicate charges", entries[1]),
            ("客户被重复扣款", entries[1]),
        ):
            found = _search(rt, query)
            assert found.mode == "hybrid"
            assert found.hits and found.hits[0].text == expected, query
        assert _search(rt, "banana bread recipe").hits == []
    finally:
        rt.close()


def test_explain_names_the_vector_channel_and_the_one_vector_only_place(
    semantic: Runtime,
) -> None:
    """``explain_context`` with the semantic channel: the same pack as prepare, each candidate
    with its vector rank and cosine, and the candidate the pack's one vector-only place left
    out said to be exactly that."""
    from powercontext_runtime.services.explain import explain

    cache = "Pipeline caches live in .cache/ci; the pipeline restores them before tests"
    _remember(semantic, CI)
    _remember(semantic, cache)
    assert semantic.semantic is not None
    semantic.semantic.embed_pending()
    request = PrepareContextRequest(scope_id=SCOPE, query="持续集成流水线")
    principal = Principal.unrestricted()
    answer = explain(semantic.context, request, principal)
    assert answer.mode == "hybrid"
    pack = semantic.context.prepare(request, principal)
    assert answer.pack.model_dump(by_alias=True) == pack.to_wire()
    by_outcome = {c.outcome: c for c in answer.candidates}
    assert set(by_outcome) == {"taken", "vector_only_cap"}
    taken, capped = by_outcome["taken"], by_outcome["vector_only_cap"]
    assert taken.matched_by == "vector" and taken.vector is not None
    assert taken.vector.decision == "admitted" and taken.lexical is None
    assert capped.vector is not None and capped.vector.decision == "over_cap"
    assert capped.floor == "below" and capped.pack_position is None
