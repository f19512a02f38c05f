"""HTTP surface in-process: envelope, validation, auth, request ids, OpenAPI drift (spec 03)."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from powercontext_runtime.composition import Runtime
from powercontext_runtime.http.openapi_dump import render_openapi

ROOT = Path(__file__).resolve().parents[2]
SCOPE = "git:example.com/acme/api"
POST_OPERATIONS = {
    "/v1/memory/remember": {"scope_id": SCOPE, "kind": "fact", "text": "hello"},
    "/v1/memory/search": {"scope_id": SCOPE, "query": "hello"},
    "/v1/memory/entries/list": {"scope_id": SCOPE},
    "/v1/memory/changes": {"scope_id": SCOPE},
    "/v1/sources/content": {"scope_id": SCOPE, "source_id": "s1", "content": "hello"},
    "/v1/sources/get": {"scope_id": SCOPE, "source_id": "s1"},
    "/v1/memory/entries/get": {
        "scope_id": SCOPE,
        "citation": {
            "memory_ref": {"family": "memory", "artifact_id": "memory", "revision": 1},
            "entry_id": "mem_ent_x",
            "entry_version_id": "mem_ver_x",
        },
    },
}


def assert_envelope(response, status: int, code: str) -> dict:  # type: ignore[no-untyped-def]
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error"}
    assert set(body["error"]) == {"code", "message", "details"}
    assert body["error"]["code"] == code
    return body["error"]


def test_committed_openapi_matches_the_app() -> None:
    committed = (ROOT / "runtime" / "openapi" / "powercontext.json").read_text(encoding="utf-8")
    assert committed == render_openapi(), "run `make openapi` and commit the result"


def test_openapi_is_served_and_strict(api: TestClient) -> None:
    document = api.get("/openapi.json").json()
    operation_ids = {
        op["operationId"] for path in document["paths"].values() for op in path.values()
    }
    assert {
        "remember_memory",
        "search_memory",
        "get_memory_entry",
        "list_memory_entries",
        "list_memory_entry_versions",
        "revise_memory_entry",
        "retire_memory_entry",
        "list_memory_changes",
        "capture_content_source",
        "get_source",
        "get_capabilities",
        "get_metrics",
        "get_liveness",
        "get_readiness",
        "get_health",
        "prepare_context",
        "explain_context",
        "propose_experience",
        "get_experience",
        "list_experiences",
        "propose_skill",
        "get_skill",
        "list_skills",
        "list_artifact_candidates",
        "get_artifact_candidate",
        "approve_artifact_candidate",
        "reject_artifact_candidate",
        "revise_artifact_candidate",
        "flush_memory",
        "bootstrap_context",
        "record_bootstrap_receipt",
        "get_bootstrap_overview",
        "get_activity",
        "commit_handoff",
        "get_handoff",
        "next_handoff",
        "withdraw_handoff",
        "set_context_references",
        "get_context_references",
        "record_task_result",
        "list_task_results",
        "get_task_result",
    } == operation_ids
    for name, schema in document["components"]["schemas"].items():
        if schema.get("type") == "object" and name.endswith("Request"):
            assert schema.get("additionalProperties") is False, name


def test_capabilities_report_what_this_build_serves(api: TestClient) -> None:
    body = api.get("/v1/capabilities").json()
    assert body["artifact_families"] == ["memory", "experience", "skill", "handoff"]
    assert body["bootstrap_versions"] == ["powercontext.bootstrap-context.v1"]
    assert body["bootstrap_profiles"] == ["powercontext.scope-bootstrap.v1"]
    assert body["search_modes"] == ["auto", "fts"]
    assert body["source_types"] == ["content", "task-result"]
    assert body["memory_extraction"] is True


@pytest.mark.parametrize("path", sorted(POST_OPERATIONS))
def test_unknown_fields_and_wrong_types_are_422(api: TestClient, path: str) -> None:
    valid = POST_OPERATIONS[path]
    error = assert_envelope(api.post(path, json={**valid, "surprise": 1}), 422, "invalid_request")
    assert any(e["loc"][-1] == "surprise" for e in error["details"]["errors"])
    assert_envelope(api.post(path, json={**valid, "scope_id": 7}), 422, "invalid_request")
    assert_envelope(api.post(path, json=[valid]), 422, "invalid_request")
    assert_envelope(
        api.post(path, content=b'{"scope_id": ', headers={"content-type": "application/json"}),
        422,
        "invalid_request",
    )
    assert_envelope(
        api.post(
            path, content=b'{"scope_id": "\xff\xfe"}', headers={"content-type": "application/json"}
        ),
        422,
        "invalid_request",
    )


@pytest.mark.parametrize(
    "scope_id", ["", " ", " leading", "trailing ", "tab\there", "x" * 257, "nul\x00"]
)
def test_invalid_scope_ids_are_rejected(api: TestClient, scope_id: str) -> None:
    response = api.post("/v1/memory/search", json={"scope_id": scope_id, "query": "q"})
    assert_envelope(response, 422, "invalid_request")


def test_an_unexpected_failure_is_a_generic_500_that_keeps_its_request_id(
    api: TestClient,
    sqlite_runtime: Runtime,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Starlette answers an unhandled exception outside every middleware, so without the
    request id; the request middleware answers it instead (logged by type only)."""

    def explode(_req: object) -> None:
        raise RuntimeError("SELECT secret FROM memory -- SENTINEL")

    monkeypatch.setattr(sqlite_runtime.memory, "search", explode)
    with caplog.at_level(logging.INFO, logger="powercontext.http"):
        response = api.post(
            "/v1/memory/search",
            json={"scope_id": SCOPE, "query": "q"},
            headers={"X-Request-ID": "trace-500"},
        )
    error = assert_envelope(response, 500, "internal_error")
    assert error == {"code": "internal_error", "message": "internal error", "details": None}
    assert response.headers["x-request-id"] == "trace-500"
    records = [r for r in caplog.records if r.name == "powercontext.http"]
    assert [(r.getMessage(), getattr(r, "error_type", None)) for r in records] == [
        ("internal_error", "RuntimeError"),
        ("http_request", None),
    ]
    assert records[1].status == 500  # type: ignore[attr-defined]
    assert "SENTINEL" not in caplog.text and "SENTINEL" not in response.text


def test_validation_errors_never_echo_the_input(api: TestClient) -> None:
    secret = "SENTINEL-echo-check " * 500
    response = api.post(
        "/v1/memory/remember",
        json={"scope_id": SCOPE, "kind": "fact", "text": secret, "tags": ["Bad Tag"]},
    )
    assert_envelope(response, 422, "invalid_request")
    assert "SENTINEL" not in response.text
    assert "Bad Tag" not in response.text


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("text", "x" * 8193),
        ("text", "é" * 4097),  # 8194 UTF-8 bytes
        ("text", "   "),
        ("kind", "k" * 129),
        ("tags", ["UPPER"]),
        ("tags", [f"t{i}" for i in range(17)]),
        ("reason", "r" * 513),
        ("expected_revision", -1),
    ],
)
def test_remember_limits(api: TestClient, field: str, value: object) -> None:
    body = {"scope_id": SCOPE, "kind": "fact", "text": "ok", field: value}
    assert_envelope(api.post("/v1/memory/remember", json=body), 422, "invalid_request")


def test_search_limits(api: TestClient) -> None:
    for body in (
        {"scope_id": SCOPE, "query": "x" * 8193},
        {"scope_id": SCOPE, "query": " \n "},
        {"scope_id": SCOPE, "query": "q", "limit": 0},
        {"scope_id": SCOPE, "query": "q", "limit": 51},
        {"scope_id": SCOPE, "query": "q", "mode": "vector"},
    ):
        assert_envelope(api.post("/v1/memory/search", json=body), 422, "invalid_request")


def test_oversized_bodies_are_413(api: TestClient) -> None:
    big = json.dumps({"scope_id": SCOPE, "kind": "fact", "text": "x" * (1024 * 1024)})
    response = api.post(
        "/v1/memory/remember", content=big, headers={"content-type": "application/json"}
    )
    assert_envelope(response, 413, "payload_too_large")

    def chunks():  # type: ignore[no-untyped-def]
        for _ in range(300):
            yield b"x" * 4096

    response = api.post(
        "/v1/memory/remember", content=chunks(), headers={"content-type": "application/json"}
    )
    assert_envelope(response, 413, "payload_too_large")


def test_missing_or_wrong_token_is_401(api: TestClient) -> None:
    for headers in (
        {"Authorization": ""},
        {"Authorization": "Bearer pc_nope_nope"},
        {"Authorization": "Basic abc"},
    ):
        response = api.post(
            "/v1/memory/search", json={"scope_id": SCOPE, "query": "q"}, headers=headers
        )
        assert_envelope(response, 401, "unauthorized")
        assert response.headers["www-authenticate"] == "Bearer"
    assert api.get("/v1/capabilities", headers={"Authorization": ""}).status_code == 401
    # Health stays public.
    assert api.get("/health/live", headers={"Authorization": ""}).json() == {"status": "ok"}
    ready = api.get("/health/ready", headers={"Authorization": ""}).json()
    assert ready["status"] == "ready" and ready["database"] == "sqlite"
    assert ready["embeddings"]["state"] == "off"  # said, not hidden, with the channel off


def test_a_token_without_the_scope_is_403(api: TestClient) -> None:
    runtime = api.app.state.runtime  # type: ignore[attr-defined]
    token = runtime.tokens.create("limited", ["git:example.com/acme/*"], ["read"])
    headers = {"Authorization": f"Bearer {token}"}
    allowed = api.post("/v1/memory/search", json={"scope_id": SCOPE, "query": "q"}, headers=headers)
    assert allowed.status_code == 200
    denied = api.post(
        "/v1/memory/search",
        json={"scope_id": "git:example.com/other/x", "query": "q"},
        headers=headers,
    )
    assert_envelope(denied, 403, "scope_forbidden")


def test_request_ids_are_echoed_or_generated(api: TestClient) -> None:
    echoed = api.get("/health/live", headers={"X-Request-ID": "abc-123"})
    assert echoed.headers["x-request-id"] == "abc-123"
    generated = api.get("/health/live", headers={"X-Request-ID": "bad id\twith spaces"})
    assert generated.headers["x-request-id"] != "bad id\twith spaces"
    assert len(generated.headers["x-request-id"]) == 32
    error = api.post("/v1/memory/search", json={})
    assert error.headers["x-request-id"]


def test_unknown_routes_and_methods_use_the_envelope(api: TestClient) -> None:
    assert_envelope(api.post("/v1/nope", json={}), 404, "not_found")
    assert_envelope(api.get("/v1/memory/remember"), 405, "method_not_allowed")


def test_capture_answers_202(api: TestClient) -> None:
    body = POST_OPERATIONS["/v1/sources/content"]
    first = api.post("/v1/sources/content", json=body)
    assert first.status_code == 202
    assert first.json() == {
        "status": "accepted",
        "source": {"name": "content", "source_id": "s1"},
        "position": 1,
    }
    assert api.post("/v1/sources/content", json=body).json()["position"] == 1
    conflict = api.post("/v1/sources/content", json={**body, "content": "changed"})
    assert_envelope(conflict, 409, "source_conflict")
