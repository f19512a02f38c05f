"""``get_source``: a captured source read back by its ``source_id`` (docs/api.md § Memory).

What a candidate's evidence cites: the content exactly as captured, its position in the capture
journal, when it was captured and whether a flush processed it; ``404 source_not_found``; the
capability and the scope of the token checked like every other read; never its content logged.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest
from fastapi.testclient import TestClient

from powercontext_runtime.composition import Runtime
from powercontext_runtime.contract.memory import GetSourceRequest
from powercontext_runtime.http import create_app
from tests.runtime.test_memory_browse import assert_indexed, statements

SCOPE = "git:example.com/acme/api"
OTHER = "git:example.com/other/api"
GET_SOURCE = "/v1/sources/get"
CAPTURE = "/v1/sources/content"
SECRET_TEXT = "SENTINEL-prompt the reviewer should read, never a log"


def envelope(response: Any, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error"} and body["error"]["code"] == code, body
    return body["error"]


def capture(api: TestClient, source_id: str, content: str, scope: str = SCOPE, **extra: Any) -> int:
    body = {"scope_id": scope, "source_id": source_id, "content": content, **extra}
    response = api.post(CAPTURE, json=body)
    assert response.status_code == 202, response.text
    return int(response.json()["position"])


def test_a_captured_source_reads_back_exactly(
    api: TestClient, caplog: pytest.LogCaptureFixture
) -> None:
    capture(api, "src-first", "an earlier prompt")
    position = capture(api, "src-cited", SECRET_TEXT + "\n  with its spacing ", metadata={"k": 1})
    with caplog.at_level(logging.DEBUG):
        response = api.post(GET_SOURCE, json={"scope_id": SCOPE, "source_id": "src-cited"})
    assert response.status_code == 200, response.text
    body = response.json()
    assert set(body) == {"source", "position", "content", "metadata", "created_at", "flushed"}
    assert body["source"] == {"name": "content", "source_id": "src-cited"}
    assert body["position"] == position == 2
    assert body["content"] == SECRET_TEXT + "\n  with its spacing "
    assert body["metadata"] == {"k": 1}
    assert body["created_at"].endswith("Z") and body["flushed"] is False
    logged = "\n".join(r.getMessage() + repr(r.__dict__) for r in caplog.records)
    assert "SENTINEL" not in logged and SCOPE not in logged and "src-cited" not in logged


def test_a_flushed_source_says_so(api: TestClient) -> None:
    capture(api, "src-flushed", "remember: the CI runs on both backends")
    assert api.post("/v1/memory/flush", json={"scope_id": SCOPE}).json()["status"] == "processed"
    capture(api, "src-after", "a later prompt")
    flushed = api.post(GET_SOURCE, json={"scope_id": SCOPE, "source_id": "src-flushed"}).json()
    waiting = api.post(GET_SOURCE, json={"scope_id": SCOPE, "source_id": "src-after"}).json()
    assert (flushed["flushed"], waiting["flushed"]) == (True, False)


def test_an_unknown_source_is_source_not_found(api: TestClient) -> None:
    envelope(api.post(GET_SOURCE, json={"scope_id": SCOPE, "source_id": "nope"}), 404,
             "source_not_found")  # fmt: skip
    # Another scope's source is not this scope's: the same 404, nothing about the other scope.
    capture(api, "src-elsewhere", "another scope's prompt", scope=OTHER)
    error = envelope(
        api.post(GET_SOURCE, json={"scope_id": SCOPE, "source_id": "src-elsewhere"}),
        404,
        "source_not_found",
    )
    assert "another scope" not in error["message"] and error["details"] is None


def test_a_token_not_granted_the_scope_is_refused(sqlite_runtime: Runtime) -> None:
    token = sqlite_runtime.tokens.create("other-reader", [OTHER], ["read"])
    writer = sqlite_runtime.tokens.create("writer-only", ["*"], ["write"])
    sqlite_runtime.ensure_local_token()
    operator = sqlite_runtime.settings.token_file.read_text().strip()
    with TestClient(create_app(sqlite_runtime), base_url="http://localhost") as client:
        client.headers["Authorization"] = f"Bearer {operator}"
        capture(client, "src-private", SECRET_TEXT)
        body = {"scope_id": SCOPE, "source_id": "src-private"}
        refused = client.post(GET_SOURCE, json=body, headers={"Authorization": f"Bearer {token}"})
        error = envelope(refused, 403, "scope_forbidden")
        assert "SENTINEL" not in refused.text and error["details"] is None
        # Its own scope it may read (an unknown id there is a 404, not a 403).
        mine = client.post(GET_SOURCE, json={"scope_id": OTHER, "source_id": "src-private"},
                           headers={"Authorization": f"Bearer {token}"})  # fmt: skip
        envelope(mine, 404, "source_not_found")
        # Reading needs `read`: a write-only token is refused before the body is looked at.
        no_read = client.post(GET_SOURCE, json=body, headers={"Authorization": f"Bearer {writer}"})
        assert envelope(no_read, 403, "capability_forbidden")["details"] == {"required": "read"}
        anonymous = client.post(GET_SOURCE, json=body, headers={"Authorization": "Bearer nope"})
        assert anonymous.status_code == 401


@pytest.mark.parametrize(
    "body",
    [
        {"scope_id": SCOPE},
        {"source_id": "src-1"},
        {"scope_id": SCOPE, "source_id": ""},
        {"scope_id": SCOPE, "source_id": "x" * 1000},
        {"scope_id": SCOPE, "source_id": 7},
        {"scope_id": SCOPE, "source_id": "src-1", "content": "no such field"},
        {"scope_id": " padded", "source_id": "src-1"},
    ],
)
def test_bad_input_is_422(api: TestClient, body: dict[str, Any]) -> None:
    envelope(api.post(GET_SOURCE, json=body), 422, "invalid_request")


def test_the_read_is_one_index_lookup(sqlite_runtime: Runtime, api: TestClient) -> None:
    capture(api, "src-indexed", "a prompt")
    with statements(sqlite_runtime) as seen:
        found = sqlite_runtime.sources.get(
            GetSourceRequest(scope_id=SCOPE, source_id="src-indexed")
        )
    assert found.content == "a prompt"
    assert_indexed(sqlite_runtime, seen)


def test_both_backends_read_a_source(runtime: Runtime) -> None:
    from powercontext_runtime.contract.memory import CaptureSourceRequest
    from powercontext_runtime.errors import NotFoundError

    runtime.sources.capture(
        CaptureSourceRequest(scope_id=SCOPE, source_id="src-b", content="日本語 and ünïcode")
    )
    found = runtime.sources.get(GetSourceRequest(scope_id=SCOPE, source_id="src-b"))
    assert (found.position, found.content, found.metadata) == (1, "日本語 and ünïcode", None)
    with pytest.raises(NotFoundError) as missing:
        runtime.sources.get(GetSourceRequest(scope_id=OTHER, source_id="src-b"))
    assert missing.value.code == "source_not_found"
