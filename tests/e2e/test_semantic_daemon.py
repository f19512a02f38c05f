"""The semantic channel in a real daemon with the local model: warmed before the first prompt."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import cast

import pytest

from tests.e2e.helpers import PREPARE, SEARCH, new_scope, remember, run_cli
from tests.support.daemon import Daemon, start_daemon

pytestmark = pytest.mark.e2e

DEADLINE = 180.0  # seconds: loading the model on a loaded machine


@pytest.fixture(scope="module")
def semantic_daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    home: Path = tmp_path_factory.mktemp("semantic") / "home"
    env = {
        "POWERCONTEXT_EMBEDDINGS": "local",
        # Generous for a loaded machine, far below the ≈ 0.3 s+ a cold model load takes.
        "POWERCONTEXT_EMBEDDINGS_QUERY_TIMEOUT": "0.25",
    }
    with start_daemon(home, extra_env=env) as daemon:
        yield daemon


def _until(condition, what: str):  # type: ignore[no-untyped-def]
    """Poll ``condition`` (a readiness check, not a timing assumption) until it holds."""
    deadline = time.monotonic() + DEADLINE
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {DEADLINE:.0f} s: {what}")
        time.sleep(0.1)


def test_the_model_is_loaded_before_the_first_prompt(semantic_daemon: Daemon) -> None:
    """The daemon warms the model in the background at start; the first prompt it answers
    afterwards runs hybrid within its deadline instead of falling back to fts."""
    _until(lambda: "embedder_warmed" in semantic_daemon.log_text(), "the embedder warmed up")
    scope = new_scope("semantic-daemon")
    with semantic_daemon.client() as client:
        text = "CI pipeline: GitHub Actions runs pytest on every PR"
        entry_id = remember(client, scope, text)["entry"]["citation"]["entry_id"]

        def embedded() -> bool:  # the worker embeds it in the background
            body = {"scope_id": scope, "query": text, "mode": "vector"}
            found = client.post(SEARCH, json=body)
            assert found.status_code in (200, 503), found.text  # 503: the embedder is busy
            hits = found.json().get("hits", [])
            return any(h["citation"]["entry_id"] == entry_id for h in hits)

        _until(embedded, "the worker embedded the entry")
        answer = client.post(PREPARE, json={"scope_id": scope, "query": "我们的持续集成流水线坏了"})
        assert answer.status_code == 200
        assert answer.headers["x-powercontext-search-mode"] == "hybrid"
        assert "x-powercontext-search-fallback" not in answer.headers
        metrics = client.get("/metrics").text
    assert 'mode="hybrid",operation="prepare_context"' in metrics
    assert "semantic_fallback" not in semantic_daemon.log_text()


def test_progress_shows_in_readiness_metrics_and_doctor(semantic_daemon: Daemon) -> None:
    """#33 item 5: what waits to be embedded, and the worker's state, from outside the
    daemon: `/health/ready`, `/metrics` and `powercontext doctor` agree once it caught up."""
    scope = new_scope("semantic-progress")
    with semantic_daemon.client() as client:
        for n in range(5):
            remember(client, scope, f"Release checklist step {n}: tag, build, publish")

        def caught_up() -> dict[str, object] | None:
            ready = client.get("/health/ready")
            assert ready.status_code == 200, ready.text
            embeddings: dict[str, object] = ready.json()["embeddings"]
            assert embeddings["state"] in ("idle", "embedding"), embeddings
            # `vectors` may lag by a second (its count is reused); `pending` never does.
            done = embeddings["pending"] == 0 and cast(int, embeddings["vectors"]) >= 5
            return embeddings if done else None

        embeddings = _until(caught_up, "the worker embedded every entry")
        assert embeddings["state"] == "idle" and embeddings["error"] is None
        assert embeddings["last_round"]
        assert "use" in str(embeddings["model"]).lower()
        metrics = client.get("/metrics").text
    assert "powercontext_embeddings_pending 0.0" in metrics
    assert 'powercontext_embedding_worker_state{state="idle"} 1.0' in metrics
    assert scope not in metrics
    doctor = run_cli(semantic_daemon, "doctor", "--json")
    assert doctor.returncode == 0, doctor.stdout + doctor.stderr
    checks = {c["check"]: c for c in json.loads(doctor.stdout)["checks"]}
    assert checks["embeddings"]["ok"] is True
    assert str(checks["embeddings"]["detail"]).startswith("idle: 0 pending, ")
