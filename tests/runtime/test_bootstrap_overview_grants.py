"""The Bootstrap overview shows a receipt's items only to tokens granted their scopes (issue 30 A).

The leak: scope ``team-a`` references ``team-b``; a broad token's SessionStart pack delivered a
``team-b`` entry. A token granted only ``team-a`` then read ``team-a``'s overview and got that
item's scope, entry id and a bare sha256 of its text (a guess is confirmed offline) — while the
same answer marked ``team-b`` forbidden. Over HTTP against the runtime, on both backends.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from powercontext_runtime.composition import Runtime
from powercontext_runtime.http.app import create_app

TEAM_A = "git:example.com/acme/team-a"
TEAM_B = "git:example.com/acme/team-b-secret"
OWN = "team-a runs the smoke tests before every deploy"
SECRET = "team-b rotates the signing key on the first Monday"
TAG = ["bootstrap-context"]
BOOTSTRAP = {
    "enabled": True,
    "profile": "powercontext.scope-bootstrap.v1",
    "lifecycle": "startup",
    "integration": "codex",
}


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _remember(client: TestClient, scope: str, text: str) -> dict[str, Any]:
    body = {"scope_id": scope, "kind": "convention", "text": text, "tags": TAG}
    answer = client.post("/v1/memory/remember", json=body)
    assert answer.status_code == 200, answer.text
    return answer.json()["entry"]["citation"]


def _overview(client: TestClient) -> dict[str, Any]:
    answer = client.post("/v1/context/bootstrap/overview", json={"scope_id": TEAM_A})
    assert answer.status_code == 200, answer.text
    return answer.json()


@pytest.fixture
def clients(runtime: Runtime) -> Iterator[tuple[TestClient, TestClient, dict[str, Any]]]:
    """A broad token and one granted only team-a (read); team-a references team-b, and the
    broad token's claimed SessionStart pack delivered one entry of each."""
    broad = runtime.tokens.create("broad", ["*"], ["read", "write", "admin"])
    narrow = runtime.tokens.create("team-a-reader", [TEAM_A], ["read"])
    with (
        TestClient(create_app(runtime), base_url="http://localhost") as wide,
        TestClient(create_app(runtime), base_url="http://localhost") as reader,
    ):
        wide.headers["Authorization"] = f"Bearer {broad}"
        reader.headers["Authorization"] = f"Bearer {narrow}"
        own = _remember(wide, TEAM_A, OWN)
        secret = _remember(wide, TEAM_B, SECRET)
        refs = {"scope_id": TEAM_A, "references": [TEAM_B]}
        assert wide.post("/v1/scopes/references/set", json=refs).status_code == 200
        pack = wide.post("/v1/context/bootstrap", json={"scope_id": TEAM_A, **BOOTSTRAP}).json()
        assert [item["scope_id"] for item in pack["items"]] == [TEAM_A, TEAM_B]
        claim = {"scope_id": TEAM_A, "receipt_id": pack["receipt"]["receipt_id"]}
        claimed = wide.post("/v1/context/bootstrap/receipts", json={**claim, "state": "injected"})
        assert claimed.status_code == 200, claimed.text
        yield wide, reader, {"own": own, "secret": secret, "pack": pack}


def test_a_token_granted_one_scope_sees_only_its_items_of_a_receipt(
    clients: tuple[TestClient, TestClient, dict[str, Any]],
) -> None:
    _, reader, made = clients
    seen = _overview(reader)
    # The overview itself says the reference is forbidden to this token …
    assert [(s["scope_id"], s["status"]) for s in seen["scopes"]] == [
        (TEAM_A, "read"),
        (TEAM_B, "forbidden"),
    ]
    # … and its receipts now agree: team-b's item is counted, never named.
    [receipt] = seen["receipts"]
    assert receipt["mine"] is False and receipt["state"] == "injected"
    assert [item["citation"] for item in receipt["items"]] == [made["own"]]
    assert receipt["withheld"] == 1
    assert receipt["content_bytes"] is None  # the pack's size would measure team-b's text
    receipts = json.dumps(seen["receipts"])
    assert TEAM_B not in receipts
    whole = json.dumps(seen)
    for leaked in (made["secret"]["entry_id"], made["secret"]["entry_version_id"], SECRET):
        assert leaked not in whole
    # Nothing a guess could be checked against: no digest of either text, nor of the pack.
    for text in (SECRET, OWN, made["pack"]["content"]):
        assert _sha256(text) not in whole
    assert "digest" not in receipts


def test_a_token_granted_every_scope_still_sees_the_whole_receipt(
    clients: tuple[TestClient, TestClient, dict[str, Any]],
) -> None:
    wide, _, made = clients
    [receipt] = _overview(wide)["receipts"]
    assert receipt["mine"] is True and receipt["withheld"] == 0
    assert [item["citation"] for item in receipt["items"]] == [made["own"], made["secret"]]
    assert receipt["content_bytes"] == made["pack"]["content_bytes"]
    assert [item["truncated"] for item in receipt["items"]] == [False, False]
