"""``GET /metrics`` and the access log: what the daemon did, never what it was told (RFC 0028)."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from powercontext_runtime.composition import Runtime
from powercontext_runtime.contract.review import ProposeExperienceRequest
from powercontext_runtime.http import create_app
from powercontext_runtime.logs import configure_logging
from powercontext_runtime.settings import Settings
from tests.support.embedding_server import DIMENSION, EmbeddingServer, embedding_server

ROOT = Path(__file__).resolve().parents[2]
METRIC = re.compile(r"\bpowercontext_\w+")
SCOPE = "git:example.com/acme/metrics-scope-7f3a"
SECRET_TEXT = "the deploy script lives in tools/zebracorn-deploy.sh"
SECRET_QUERY = "where does zebracorn-deploy live"


def _samples(text: str, name: str) -> dict[frozenset[tuple[str, str]], float]:
    """``name``'s samples in an exposition: label set → value."""
    found = {}
    for line in text.splitlines():
        match = re.fullmatch(rf"{name}(?:\{{(.*)\}})? (\S+)", line)
        if match:
            labels = frozenset(re.findall(r'(\w+)="([^"]*)"', match.group(1) or ""))
            found[labels] = float(match.group(2))
    return found


def _value(text: str, name: str, **labels: str) -> float:
    """The sum of ``name``'s samples whose labels include ``labels``."""
    wanted = set(labels.items())
    return sum(v for k, v in _samples(text, name).items() if wanted <= k)


def test_packs_are_counted_by_status_and_empty_reason_with_their_bytes(
    api: TestClient,
) -> None:
    prepare = "/v1/context/prepare"
    empty_scope = api.post(prepare, json={"scope_id": SCOPE, "query": SECRET_QUERY}).json()
    assert empty_scope["status"] == "empty"
    api.post("/v1/memory/remember", json={"scope_id": SCOPE, "kind": "fact", "text": SECRET_TEXT})
    ready = api.post(prepare, json={"scope_id": SCOPE, "query": SECRET_QUERY}).json()
    assert ready["status"] == "ready"
    unrelated = api.post(prepare, json={"scope_id": SCOPE, "query": "banana bread"}).json()
    assert unrelated["status"] == "empty"

    text = api.get("/metrics").text
    packs = "powercontext_context_packs_total"
    assert _value(text, packs, status="empty", reason="no_memory", mode="fts") == 1
    assert _value(text, packs, status="empty", reason="no_match", mode="fts") == 1
    assert _value(text, packs, status="ready", reason="") == 1
    assert _value(text, "powercontext_context_pack_bytes_sum") == ready["content_bytes"]
    assert _value(text, "powercontext_context_pack_bytes_count") == 1
    requests = "powercontext_http_requests_total"
    assert _value(text, requests, operation="prepare_context", status="200", code="") == 3
    assert _value(text, "powercontext_http_request_duration_seconds_count") >= 4
    assert _value(text, "powercontext_build_info", backend="sqlite") == 1
    # Nothing of the scope, the prompts or the stored text is in the exposition.
    for secret in (SCOPE, "zebracorn", "banana", "deploy"):
        assert secret not in text


def test_error_codes_are_counted_whoever_answered(api: TestClient) -> None:
    # The route's validation (FastAPI), a typed service error, the middleware's own answers.
    assert api.post("/v1/memory/search", json={"scope_id": SCOPE}).status_code == 422
    citation = {"entry_id": "01J0000000000000000000000A", "entry_version_id": "v", "revision": 1}
    missing = api.post(
        "/v1/memory/entries/get", json={"scope_id": SCOPE, "citation": citation}
    ).status_code
    assert missing in (404, 422)
    assert api.post("/v1/nowhere", json={}).status_code == 404
    assert api.get("/metrics", headers={"Authorization": "Bearer nope"}).status_code == 401
    text = api.get("/metrics").text
    requests = "powercontext_http_requests_total"
    assert _value(text, requests, operation="search_memory", code="invalid_request") == 1
    assert _value(text, requests, operation="unmatched", status="404", code="not_found") == 1
    assert _value(text, requests, operation="get_metrics", status="401", code="unauthorized") == 1


def test_metrics_need_a_token_with_read(api: TestClient, sqlite_runtime: Runtime) -> None:
    no_token = api.get("/metrics", headers={"Authorization": ""})
    assert no_token.status_code == 401
    writer = sqlite_runtime.tokens.create("writer-only", ["*"], ["write"])
    refused = api.get("/metrics", headers={"Authorization": f"Bearer {writer}"})
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "capability_forbidden"
    reader = sqlite_runtime.tokens.create("scraper", ["*"], ["read"])
    scraped = api.get("/metrics", headers={"Authorization": f"Bearer {reader}"})
    assert scraped.status_code == 200
    assert scraped.headers["content-type"].startswith("text/plain")
    assert writer not in scraped.text and reader not in scraped.text


def test_the_access_log_says_the_pack_outcome_and_error_code_and_nothing_else(
    api: TestClient, capfd: pytest.CaptureFixture[str]
) -> None:
    configure_logging("INFO", "json")
    try:
        api.post("/v1/context/prepare", json={"scope_id": SCOPE, "query": SECRET_QUERY})
        api.post("/v1/memory/search", json={"scope_id": SCOPE})
    finally:
        logging.getLogger().handlers.clear()
    lines = [json.loads(line) for line in capfd.readouterr().err.splitlines() if line.strip()]
    access = [line for line in lines if line["event"] == "http_request"]
    prepared = next(line for line in access if line["path"] == "/v1/context/prepare")
    assert prepared["operation"] == "prepare_context"
    assert prepared["pack_status"] == "empty" and prepared["pack_bytes"] == 0
    assert prepared["empty_reason"] == "no_memory" and prepared["search_mode"] == "fts"
    invalid = next(line for line in access if line["path"] == "/v1/memory/search")
    assert invalid["status"] == 422 and invalid["code"] == "invalid_request"
    everything = json.dumps(lines)
    assert SCOPE not in everything and "zebracorn" not in everything


@pytest.fixture
def failing_embedder() -> Iterator[EmbeddingServer]:
    with embedding_server() as server:
        server.status = 500
        yield server


def test_a_hybrid_pack_that_fell_back_is_counted_with_its_code(
    tmp_path: Path, failing_embedder: EmbeddingServer
) -> None:
    env = {
        "POWERCONTEXT_EMBEDDINGS": "openai",
        "POWERCONTEXT_EMBEDDINGS_BASE_URL": failing_embedder.url,
        "POWERCONTEXT_EMBEDDINGS_MODEL": "topics-v1",
        "POWERCONTEXT_EMBEDDINGS_DIMENSION": str(DIMENSION),
    }
    runtime = Runtime.open(Settings.load(env=env, home=tmp_path / "home", auth="none"))
    try:
        with TestClient(create_app(runtime), base_url="http://localhost") as client:
            answer = client.post("/v1/context/prepare", json={"scope_id": SCOPE, "query": "ci"})
            fallback = answer.headers["X-PowerContext-Search-Fallback"]
            text = client.get("/metrics").text
    finally:
        runtime.close()
    assert answer.headers["X-PowerContext-Search-Mode"] == "fts"
    fallbacks = "powercontext_search_fallbacks_total"
    assert _value(text, fallbacks, operation="prepare_context", code=fallback) == 1
    assert _value(text, "powercontext_context_packs_total", mode="fts", reason="no_memory") == 1


def test_the_grafana_dashboard_queries_only_metrics_the_runtime_exports(api: TestClient) -> None:
    dashboard = json.loads((ROOT / "docs" / "grafana" / "powercontext.json").read_text("utf-8"))
    exprs = [t["expr"] for panel in dashboard["panels"] for t in panel["targets"]]
    queried = {re.sub(r"_(bucket|sum|count)$", "", m) for e in exprs for m in METRIC.findall(e)}
    exported = set(re.findall(r"^# TYPE (\w+) ", api.get("/metrics").text, flags=re.M))
    counters = {name + "_total" for name in exported}
    assert queried and queried <= exported | counters, queried - exported - counters


def test_embedding_progress_is_exported_and_an_off_channel_says_off(
    api: TestClient, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    states = "powercontext_embedding_worker_state"
    off = api.get("/metrics").text
    every = ("off", "idle", "embedding", "failing")
    assert _samples(off, states) == {frozenset({("state", s)}): float(s == "off") for s in every}
    assert _value(off, "powercontext_embeddings_pending") == 0

    from powercontext_runtime.services import semantic

    monkeypatch.setattr(semantic, "STATUS_MAX_AGE", 0.0)  # counted at every scrape
    with embedding_server() as server:
        env = {
            "POWERCONTEXT_EMBEDDINGS": "openai",
            "POWERCONTEXT_EMBEDDINGS_BASE_URL": server.url,
            "POWERCONTEXT_EMBEDDINGS_MODEL": "topics-v1",
            "POWERCONTEXT_EMBEDDINGS_DIMENSION": str(DIMENSION),
        }
        runtime = Runtime.open(Settings.load(env=env, home=tmp_path / "home", auth="none"))
        try:
            with TestClient(create_app(runtime), base_url="http://localhost") as client:
                for n in range(3):
                    body = {"scope_id": SCOPE, "kind": "fact", "text": f"{SECRET_TEXT} {n}"}
                    assert client.post("/v1/memory/remember", json=body).status_code == 200
                waiting = client.get("/metrics").text
                assert runtime.semantic is not None and runtime.semantic.embed_pending() == 3
                done = client.get("/metrics").text
        finally:
            runtime.close()
    assert _value(waiting, "powercontext_embeddings_pending") == 3
    assert _value(waiting, states, state="embedding") == 1
    assert _value(waiting, states, state="off") == 0
    assert _value(done, "powercontext_embeddings_pending") == 0
    assert _value(done, "powercontext_embeddings_vectors") == 3
    assert _value(done, states, state="idle") == 1
    assert SCOPE not in waiting + done and "zebracorn" not in waiting + done


def test_review_decisions_are_counted_by_who_proposed_and_never_what(api: TestClient) -> None:
    runtime: Runtime = api.app.state.runtime  # type: ignore[attr-defined]
    decisions = "powercontext_candidate_decisions_total"
    before = api.get("/metrics").text
    # Every series exists from the start, at zero, with only closed label values.
    assert {dict(k)["proposed_by"] for k in _samples(before, decisions)} == {
        "agent", "offline", "openai-compatible"}  # fmt: skip
    assert sum(_samples(before, decisions).values()) == 0

    def candidate(source_id: str, proposed_by: str | None) -> str:
        captured = {"scope_id": SCOPE, "source_id": source_id, "content": SECRET_TEXT}
        assert api.post("/v1/sources/content", json=captured).status_code == 202
        body = {
            "scope_id": SCOPE,
            "proposal": {"situation": SECRET_TEXT, "action": "a", "outcome": "o",
                         "lesson": SECRET_QUERY},
            "source_refs": [{"name": "content", "source_id": source_id}],
        }  # fmt: skip
        if proposed_by is None:  # an agent's, over the API
            answer = api.post("/v1/experience/propose", json=body)
            assert answer.status_code == 201, answer.text
            return str(answer.json()["candidate_id"])
        request = ProposeExperienceRequest.model_validate(body)
        made = runtime.review._store.propose("experience", request, proposed_by=proposed_by)
        return made.candidate_id

    def decide(candidate_id: str, verb: str) -> None:
        body = {"scope_id": SCOPE, "candidate_id": candidate_id, "expected_version": 1}
        if verb == "reject":
            body["decision_reason"] = "not useful"
        answer = api.post(f"/v1/artifact-candidates/{verb}", json=body)
        assert answer.status_code == 200, answer.text

    decide(candidate("m-1", "offline"), "approve")
    decide(candidate("m-2", "offline"), "reject")
    decide(candidate("m-3", "offline"), "reject")
    decide(candidate("m-4", None), "approve")
    pending = candidate("m-5", "openai-compatible")
    # A refused decision (the version moved on) is not a decision.
    stale = {"scope_id": SCOPE, "candidate_id": pending, "expected_version": 7}
    assert api.post("/v1/artifact-candidates/approve", json=stale).status_code == 409

    text = api.get("/metrics").text
    assert _value(text, decisions, proposed_by="offline", decision="approved") == 1
    assert _value(text, decisions, proposed_by="offline", decision="rejected") == 2
    assert _value(text, decisions, proposed_by="agent", decision="approved") == 1
    assert _value(text, decisions, proposed_by="agent", decision="rejected") == 0
    assert _value(text, decisions, proposed_by="openai-compatible") == 0
    assert SECRET_TEXT not in text and SECRET_QUERY not in text and SCOPE not in text
