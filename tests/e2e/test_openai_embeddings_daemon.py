"""A stronger local model through the OpenAI-compatible embeddings path, in a real daemon
configured as docs/embeddings.md tells a user to configure one for Ollama's bge-m3.

The stand-in is tests/support/embedding_server.py: a real local HTTP server speaking
``POST /v1/embeddings`` with deterministic topic vectors zero-padded to bge-m3's 1024
dimensions, so an English entry and a Chinese question meet with no shared word. The daemon
gets the documented settings verbatim: a base URL ending in ``/v1/`` (the form Ollama's own
examples use), the model name, the dimension and no API key (local servers need none). Checked
from outside the daemon: entries get embedded, hybrid search and packs find across languages,
a server that does not answer in time costs a prompt at most the query timeout (it falls back
to lexical and says so), and a wrong dimension is named in ``/health/ready`` and ``doctor``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest

from tests.e2e.helpers import PREPARE, SEARCH, new_scope, remember, run_cli
from tests.support.daemon import Daemon, start_daemon
from tests.support.embedding_server import EmbeddingServer, embedding_server

pytestmark = pytest.mark.e2e

DEADLINE = 60.0  # seconds for the worker to catch up on a loaded machine (it polls every 0.2 s)
BGE_M3_DIMENSION = 1024
QUERY_TIMEOUT = 0.5  # the documented order of magnitude for a local server on the prompt path
CI = "CI pipeline: GitHub Actions runs pytest on every pull request"
CI_IN_CHINESE = "持续集成流水线坏了怎么办"

T = TypeVar("T")


def documented_env(server: EmbeddingServer, dimension: int = BGE_M3_DIMENSION) -> dict[str, str]:
    """docs/embeddings.md's Ollama settings, pointed at the stand-in's port."""
    return {
        "POWERCONTEXT_EMBEDDINGS": "openai",
        "POWERCONTEXT_EMBEDDINGS_BASE_URL": server.url + "/",
        "POWERCONTEXT_EMBEDDINGS_MODEL": "bge-m3",
        "POWERCONTEXT_EMBEDDINGS_DIMENSION": str(dimension),
        "POWERCONTEXT_EMBEDDINGS_QUERY_TIMEOUT": str(QUERY_TIMEOUT),
        "POWERCONTEXT_EMBEDDINGS_INTERVAL": "0.2",
    }


@pytest.fixture(scope="module")
def server() -> Iterator[EmbeddingServer]:
    with embedding_server() as running:
        running.dimension = BGE_M3_DIMENSION
        yield running


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory, server: EmbeddingServer) -> Iterator[Daemon]:
    home: Path = tmp_path_factory.mktemp("openai-embeddings") / "home"
    with start_daemon(home, extra_env=documented_env(server)) as running:
        yield running


def _until(condition: Callable[[], T | None], what: str) -> T:
    """Poll ``condition`` (the daemon's own progress surfaces) until it holds."""
    deadline = time.monotonic() + DEADLINE
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {DEADLINE:.0f} s: {what}")
        time.sleep(0.1)


def _embeddings(client: httpx.Client) -> dict[str, Any]:
    ready = client.get("/health/ready")
    assert ready.status_code == 200, ready.text
    embeddings: dict[str, Any] = ready.json()["embeddings"]
    return embeddings


def test_entries_are_embedded_and_hybrid_search_crosses_languages(
    daemon: Daemon, server: EmbeddingServer
) -> None:
    scope = new_scope("openai-embeddings")
    with daemon.client() as client:
        entry_id = remember(client, scope, CI)["entry"]["citation"]["entry_id"]
        embeddings = _until(
            lambda: (e := _embeddings(client))["pending"] == 0 and e["vectors"] >= 1 and e,
            "the worker embedded the entry",
        )
        assert embeddings["state"] == "idle" and embeddings["error"] is None
        assert embeddings["model"] == f"openai-compatible:bge-m3:{BGE_M3_DIMENSION}"

        search = client.post(SEARCH, json={"scope_id": scope, "query": CI_IN_CHINESE})
        assert search.status_code == 200, search.text
        assert search.json()["mode"] == "hybrid"
        hits = search.json()["hits"]
        assert [(h["citation"]["entry_id"], h["matched_by"]) for h in hits] == [
            (entry_id, "vector")
        ]
        pack = client.post(PREPARE, json={"scope_id": scope, "query": CI_IN_CHINESE})
        assert pack.status_code == 200, pack.text
        assert pack.headers["x-powercontext-search-mode"] == "hybrid"
        assert "x-powercontext-search-fallback" not in pack.headers
        assert pack.json()["status"] == "ready"
    # The documented form reached the endpoint: the model by name, and no key was sent.
    assert server.last_model == "bge-m3"
    assert "authorization" not in server.last_headers


def test_a_server_that_does_not_answer_costs_a_prompt_the_query_timeout_only(
    daemon: Daemon, server: EmbeddingServer
) -> None:
    scope = new_scope("openai-embeddings-slow")
    with daemon.client() as client:
        remember(client, scope, CI)
        _until(lambda: _embeddings(client)["pending"] == 0, "the worker embedded the entry")
        server.gate.clear()  # from here on the server holds every answer
        try:
            started = time.monotonic()
            pack = client.post(PREPARE, json={"scope_id": scope, "query": "GitHub Actions pytest"})
            took = time.monotonic() - started
            search = client.post(SEARCH, json={"scope_id": scope, "query": "GitHub Actions pytest"})
        finally:
            server.gate.set()
    assert pack.status_code == 200, pack.text
    assert pack.headers["x-powercontext-search-mode"] == "fts"
    assert pack.headers["x-powercontext-search-fallback"] == "embedding_timeout"
    assert pack.json()["status"] == "ready"  # the lexical channel still found it
    # The server never answered: only the daemon's deadline can have ended the wait.
    assert QUERY_TIMEOUT <= took < QUERY_TIMEOUT + 5.0
    assert search.status_code == 200 and search.json()["mode"] == "fts"
    log = daemon.log_text_with("semantic_fallback")
    assert "embedding_timeout" in log and "GitHub Actions pytest" not in log


def test_a_wrong_dimension_is_named_in_readiness_and_doctor(
    tmp_path: Path, server: EmbeddingServer
) -> None:
    """The endpoint answers 1024 dimensions, the settings say 768 (another model's size)."""
    with start_daemon(tmp_path / "home", extra_env=documented_env(server, 768)) as daemon:
        scope = new_scope("openai-embeddings-dimension")
        with daemon.client() as client:
            remember(client, scope, CI)
            embeddings = _until(
                lambda: (e := _embeddings(client))["state"] == "failing" and e,
                "the worker reported the failing round",
            )
            assert embeddings["error"] == "EmbeddingDimensionError"
            assert embeddings["pending"] == 1 and embeddings["vectors"] == 0
            # Prompts go on, lexically, and say why.
            pack = client.post(PREPARE, json={"scope_id": scope, "query": "GitHub Actions"})
            assert pack.headers["x-powercontext-search-fallback"] == "embedding_unavailable"
            assert pack.json()["status"] == "ready"
        doctor = run_cli(daemon, "doctor", "--json")
        assert doctor.returncode != 0, doctor.stdout + doctor.stderr
        checks = {c["check"]: c for c in json.loads(doctor.stdout)["checks"]}
        assert checks["embeddings"]["ok"] is False
        detail = str(checks["embeddings"]["detail"])
        assert detail.startswith("failing (EmbeddingDimensionError: ")
        assert "POWERCONTEXT_EMBEDDINGS_DIMENSION" in detail
        assert "GitHub Actions" not in daemon.log_text()
