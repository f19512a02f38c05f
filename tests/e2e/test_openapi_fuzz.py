"""Schemathesis over the OpenAPI document, against a real ``powercontext serve`` process.

Spec 08 § Bad input: beyond the hand-written hostile bodies of ``test_daemon_security.py``,
generated requests — schema-valid ones, and ones that break the schema on purpose (wrong types,
missing and unknown fields, out-of-range values, undeclared methods) — must never get a 5xx,
every error must be the envelope of spec 03, and every answer must match the document.

Random requests rarely name things that exist (a citation, a candidate, a receipt), so the
fuzzing alone would seldom see the success answers of reads and updates; a walk through every
operation with requests that succeed checks those answers against the document too.

The document is the committed ``runtime/openapi/powercontext.json``: schemathesis's pytest
integration builds one test per operation at import time, before any daemon exists (its lazy,
fixture-based loader needs a pytest internal that pytest 9.2 no longer has). The first test
proves it is the very document the daemon serves at ``/openapi.json``, so what is fuzzed is
the served contract.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
import schemathesis
from schemathesis import Case, CheckContext, Response

from tests.e2e.helpers import (
    ACTIVITY,
    BOOTSTRAP,
    CANDIDATES_APPROVE,
    CANDIDATES_GET,
    CANDIDATES_LIST,
    CANDIDATES_REJECT,
    CANDIDATES_REVISE,
    CHANGES,
    EXPLAIN,
    FLUSH,
    GET,
    GET_EXPERIENCE,
    GET_SKILL,
    HANDOFF_COMMIT,
    HANDOFF_GET,
    HANDOFF_NEXT,
    HANDOFF_WITHDRAW,
    LIST,
    LIST_EXPERIENCES,
    LIST_SKILLS,
    OVERVIEW,
    PREPARE,
    PROPOSE_EXPERIENCE,
    PROPOSE_SKILL,
    RECEIPTS,
    REFS_GET,
    REFS_SET,
    REMEMBER,
    RETIRE,
    REVISE,
    SEARCH,
    SOURCE_GET,
    SOURCES,
    TASK_GET,
    TASK_LIST,
    TASK_RECORD,
    VERSIONS,
    new_scope,
    valid_bodies,
)
from tests.support.daemon import Daemon

pytestmark = pytest.mark.e2e

COMMITTED = Path(__file__).resolve().parents[2] / "runtime" / "openapi" / "powercontext.json"

# Examples per operation in the random (fuzzing) phase. Schemathesis adds its deterministic
# coverage cases (boundaries, each constraint broken one at a time, undeclared methods) on top,
# so the whole module stays well under 90 s on a loaded 2-core machine.
MAX_EXAMPLES = 25

CONFIG = schemathesis.Config.from_dict(
    {
        "generation": {
            # Both schema-valid and schema-violating requests.
            "mode": "all",
            "max-examples": MAX_EXAMPLES,
            # Nothing written under the working tree; every run explores afresh.
            "database": "none",
        },
        "checks": {
            # The JSON Schema cannot say everything the validators enforce (no outer
            # whitespace or control characters in keys, printable-ASCII ids, non-blank text,
            # 1..32 evidence references across two lists, byte limits after NFC, integers
            # sent as 1.0 under strict typing, cursors only this server issued), so a
            # schema-valid body may still be a 422. Every other built-in check stays on.
            "positive_data_acceptance": {"enabled": False},
            # A generated body over the server's 1 MiB limit is rightly refused with 413
            # (documented on every POST operation) before it is parsed.
            "negative_data_rejection": {
                "expected-statuses": [400, 401, 403, 404, 405, 409, 413, 415, 422]
            },
        },
    }
)

schema = schemathesis.openapi.from_path(COMMITTED, config=CONFIG)


def _header(response: Response, name: str) -> str | None:
    values = response.headers.get(name.lower())
    return values[0] if values else None


def error_envelope(ctx: CheckContext, response: Response, case: Case) -> bool | None:
    """Every error is exactly ``{"error": {code, message, details}}`` (spec 03), as JSON."""
    assert _header(response, "x-request-id"), "every response carries X-Request-ID"
    if response.status_code < 400:
        return None
    content_type = _header(response, "content-type") or ""
    assert content_type.startswith("application/json"), content_type
    body = json.loads(response.content)
    assert isinstance(body, dict) and set(body) == {"error"}, body
    error = body["error"]
    assert isinstance(error, dict) and set(error) == {"code", "message", "details"}, error
    assert isinstance(error["code"], str) and error["code"], error
    assert isinstance(error["message"], str) and error["message"], error
    assert error["details"] is None or isinstance(error["details"], dict), error
    if response.status_code == 401:
        assert error["code"] == "unauthorized" and _header(response, "www-authenticate")
    if response.status_code == 422:
        assert error["code"] == "invalid_request", error
    return None


def _auth(daemon: Daemon) -> dict[str, Any]:
    return {"Authorization": f"Bearer {daemon.token}"}


def test_the_fuzzed_document_is_the_served_one(module_daemon: Daemon) -> None:
    served = httpx.get(module_daemon.url + "/openapi.json", timeout=30)
    assert served.status_code == 200
    assert served.json() == json.loads(COMMITTED.read_text(encoding="utf-8"))


@schema.parametrize()
def test_generated_requests_get_documented_answers(case: Case, module_daemon: Daemon) -> None:
    case.call_and_validate(
        base_url=module_daemon.url,
        headers=_auth(module_daemon),
        additional_checks=[error_envelope],
        timeout=30,
    )


class _Walk:
    """Sends known-good requests through schemathesis, so every answer meets the same checks."""

    def __init__(self, daemon: Daemon) -> None:
        self.daemon = daemon
        self.done: set[tuple[str, str]] = set()

    def __call__(self, path: str, body: dict[str, Any] | None = None) -> Any:
        method = "GET" if body is None else "POST"
        operation = schema[path][method]
        case = operation.Case() if body is None else operation.Case(body=body)
        response = case.call_and_validate(
            base_url=self.daemon.url,
            headers=_auth(self.daemon),
            additional_checks=[error_envelope],
            timeout=30,
        )
        assert 200 <= response.status_code < 300, (path, response.text[:500])
        self.done.add((method, path))
        if (_header(response, "content-type") or "").startswith("text/plain"):
            return response.text  # /metrics: the Prometheus exposition format
        return response.json()


def test_successful_answers_of_every_operation_match_the_document(module_daemon: Daemon) -> None:
    call = _Walk(module_daemon)
    scope = new_scope("openapi-walk")
    valid = valid_bodies(scope)
    for path in ("/health", "/health/live", "/health/ready", "/v1/capabilities"):
        call(path)
    assert "powercontext_http_requests_total" in call("/metrics")

    # Memory: write, read back every way, change, and finally retire.
    entry = call(
        REMEMBER,
        {
            "scope_id": scope,
            "kind": "fact",
            "text": "Lint before pushing",
            "tags": ["bootstrap-context"],
            "reason": "team rule",
        },
    )["entry"]
    hits = call(SEARCH, {"scope_id": scope, "query": "lint pushing"})["hits"]
    assert [hit["citation"] for hit in hits] == [entry["citation"]]
    call(GET, {"scope_id": scope, "citation": entry["citation"]})
    call(LIST, {"scope_id": scope, "include_inactive": True})
    call(LIST, {"scope_id": scope, "kind": "fact", "tag": "bootstrap-context", "state": "any"})
    revised = call(
        REVISE,
        {"scope_id": scope, "citation": entry["citation"], "text": "Run make lint before pushing"},
    )["entry"]
    call(CHANGES, {"scope_id": scope})
    history = call(VERSIONS, {"scope_id": scope, "entry_id": entry["citation"]["entry_id"]})
    assert [v["version"] for v in history["versions"]] == [2, 1], history
    call(SOURCES, {**valid[SOURCES], "metadata": {"host": "codex", "turn": 1}})
    call(SOURCE_GET, valid[SOURCE_GET])  # the source just captured
    call(TASK_RECORD, valid[TASK_RECORD])
    call(TASK_LIST, valid[TASK_LIST])
    call(TASK_GET, valid[TASK_GET])  # the task result just recorded
    call(FLUSH, {"scope_id": scope})
    call(PREPARE, {"scope_id": scope, "query": "what do I run before pushing?"})
    explained = call(EXPLAIN, {"scope_id": scope, "query": "what do I run before pushing?"})
    assert explained["pack"]["status"] == "ready", explained

    # Review inbox: revise and approve an experience, reject one skill and approve another.
    experience = call(PROPOSE_EXPERIENCE, valid[PROPOSE_EXPERIENCE])
    ids = {"scope_id": scope, "candidate_id": experience["candidate_id"]}
    call(CANDIDATES_GET, ids)
    call(CANDIDATES_LIST, {"scope_id": scope})
    call(
        CANDIDATES_REVISE,
        {
            **ids,
            "expected_version": 1,
            "proposal": {**experience["proposal"], "lesson": "lint first"},
        },
    )
    approved = call(CANDIDATES_APPROVE, {**ids, "expected_version": 2})
    call(GET_EXPERIENCE, {"scope_id": scope, "artifact": approved["result_artifact"]})
    call(LIST_EXPERIENCES, {"scope_id": scope})
    rejected = call(PROPOSE_SKILL, valid[PROPOSE_SKILL])
    call(
        CANDIDATES_REJECT,
        {
            "scope_id": scope,
            "candidate_id": rejected["candidate_id"],
            "expected_version": 1,
            "decision_reason": "too vague",
        },
    )
    skill = call(PROPOSE_SKILL, valid[PROPOSE_SKILL])
    approved = call(
        CANDIDATES_APPROVE,
        {"scope_id": scope, "candidate_id": skill["candidate_id"], "expected_version": 1},
    )
    call(GET_SKILL, {"scope_id": scope, "artifact": approved["result_artifact"]})
    call(LIST_SKILLS, {"scope_id": scope, "limit": 1})

    # Handoff, references and a bootstrap pack whose receipt is then claimed.
    handoff = call(HANDOFF_COMMIT, valid[HANDOFF_COMMIT])
    call(HANDOFF_GET, {"scope_id": scope, "artifact": handoff["reference"]})
    assert call(HANDOFF_WITHDRAW, valid[HANDOFF_WITHDRAW])["handoff_ref"] == handoff["reference"]
    call(HANDOFF_COMMIT, {**valid[HANDOFF_COMMIT], "base": handoff["reference"]})
    queued = call(HANDOFF_NEXT, valid[HANDOFF_NEXT])["handoff_ref"]
    call(REFS_SET, valid[REFS_SET])
    call(REFS_GET, {"scope_id": scope})
    pack = call(BOOTSTRAP, {**valid[BOOTSTRAP], "event_id": "walk-1", "handoff_ref": queued})
    assert pack["status"] == "ready", pack
    call(
        RECEIPTS,
        {"scope_id": scope, "receipt_id": pack["receipt"]["receipt_id"], "state": "injected"},
    )
    shown = call(OVERVIEW, {"scope_id": scope, "receipts": 5})
    assert [r["state"] for r in shown["receipts"]] == ["injected"], shown
    counted = call(ACTIVITY, {"scope_id": scope, "days": 2, "utc_offset_minutes": 60})
    assert counted["totals"]["flush_runs"] == 1, counted
    call(RETIRE, {"scope_id": scope, "citation": revised["citation"], "reason": "obsolete"})

    # A new operation fails here until the walk covers it.
    document = json.loads(COMMITTED.read_text(encoding="utf-8"))
    every = {(m.upper(), p) for p, methods in document["paths"].items() for m in methods}
    assert call.done == every
