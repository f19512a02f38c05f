"""Task results as exact evidence (issue #31 item 1; docs/api.md § Task results), every backend.

``record_task_result`` stores a bounded, redacted task result as the immutable source
``task-result/<task_id>``: 201 new, 200 the same again, 409 ``task_result_conflict`` for
another task under the id; every cap a 422 that never echoes the input; ``write`` needed,
``read`` for ``list_task_results`` / ``get_task_result``. A proposal cites it, the flush never
extracts it (its cursor passes over it), the Activity page does not count it as a prompt, and
no secret of any kind the contract names reaches the database, an export or a log.
"""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import insert, select

from powercontext_runtime.composition import Runtime
from powercontext_runtime.contract.flush import FlushMemoryRequest
from powercontext_runtime.contract.memory import CaptureSourceRequest, GetSourceRequest
from powercontext_runtime.contract.review import ApproveCandidateRequest, ProposeExperienceRequest
from powercontext_runtime.contract.task_results import (
    ListTaskResultsRequest,
    RecordTaskResultRequest,
)
from powercontext_runtime.errors import NotFoundError
from powercontext_runtime.extraction import ExtractedEntry
from powercontext_runtime.http import create_app
from powercontext_runtime.portability.exporter import export
from powercontext_runtime.store.activity import DAY_MS, ActivityStore
from powercontext_runtime.store.database import now_ms
from powercontext_runtime.store.schema import source_heads, sources
from tests.runtime.test_redaction import CASES, SENTINELS

SCOPE = "git:example.com/acme/tasks"
RECORD, LIST, GET = "/v1/task-results/record", "/v1/task-results/list", "/v1/task-results/get"
PROPOSAL = {"situation": "s", "action": "a", "outcome": "o", "lesson": "l"}


def task(**overrides: Any) -> dict[str, Any]:
    return {
        "goal": "Add a route for order refunds",
        "outcome": "succeeded",
        "changes": [{"path": "shop/routes/refunds.py", "added": 48, "removed": 0}],
        "checks": [
            {"command": "make lint", "exit_status": 0},
            {"command": "make test", "exit_status": 1, "output_tail": "1 failed, 211 passed"},
        ],
        "host": "codex",
        "session_ref": "session-7",
        **overrides,
    }


@pytest.fixture
def http(runtime: Runtime) -> Iterator[TestClient]:
    """The HTTP API on this backend's runtime, authenticated as the operator."""
    runtime.ensure_local_token()
    token = runtime.settings.token_file.read_text().strip()
    with TestClient(create_app(runtime), base_url="http://localhost") as client:
        client.headers["Authorization"] = f"Bearer {token}"
        yield client


def envelope(response: Any, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error"} and body["error"]["code"] == code, body
    return dict(body["error"])


def test_record_repeat_conflict_list_and_get(http: TestClient, runtime: Runtime) -> None:
    http.post("/v1/sources/content", json={"scope_id": SCOPE, "source_id": "p1", "content": "c"})
    body = {"scope_id": SCOPE, "task_id": "run-42", "task": task()}
    first = http.post(RECORD, json=body)
    assert first.status_code == 201, first.text
    ref = {"name": "task-result", "source_id": "task-result/run-42"}
    assert first.json() == {"status": "recorded", "source": ref, "position": 2, "redactions": 0}
    again = http.post(RECORD, json=body)  # a retried hook: nothing new
    assert (again.status_code, again.json()) == (200, first.json())
    error = envelope(
        http.post(RECORD, json={**body, "task": task(outcome="failed")}), 409,
        "task_result_conflict",
    )  # fmt: skip
    assert "refunds" not in error["message"] and error["details"] is None
    # The journal stays gap-free: the next capture takes position 3.
    captured = http.post(
        "/v1/sources/content", json={"scope_id": SCOPE, "source_id": "p2", "content": "c"}
    )
    assert captured.json()["position"] == 3
    found = http.post(GET, json={"scope_id": SCOPE, "task_id": "run-42"}).json()
    assert found["source"] == ref and found["position"] == 2
    assert found["task"] == {**task(), "checks": [{**task()["checks"][0], "output_tail": ""},
                                                  task()["checks"][1]]}  # fmt: skip
    listed = http.post(LIST, json={"scope_id": SCOPE}).json()
    assert listed == {
        "task_results": [
            {
                "source": ref, "position": 2, "created_at": found["created_at"],
                "outcome": "succeeded", "goal": "Add a route for order refunds", "host": "codex",
                "session_ref": "session-7", "changes": 1, "checks": 2, "failed_checks": 1,
            }
        ],
        "next_cursor": None,
    }  # fmt: skip
    # get_source reads the same row: the evidence a candidate cites.
    source = runtime.sources.get(GetSourceRequest(scope_id=SCOPE, source_id="task-result/run-42"))
    assert source.source.name == "task-result" and source.metadata is None
    envelope(http.post(GET, json={"scope_id": SCOPE, "task_id": "run-43"}), 404,
             "task_result_not_found")  # fmt: skip


def test_without_a_task_id_the_runtime_makes_one(runtime: Runtime) -> None:
    request = RecordTaskResultRequest.model_validate({"scope_id": SCOPE, "task": task()})
    made = runtime.task_results.record(request).response.source.source_id
    other = runtime.task_results.record(request).response.source.source_id
    assert made != other and made.startswith("task-result/tr_") and len(made) == 31


def test_listing_is_newest_first_and_paged(runtime: Runtime) -> None:
    for number in range(5):
        runtime.task_results.record(
            RecordTaskResultRequest.model_validate(
                {"scope_id": SCOPE, "task_id": f"run-{number}", "task": task(goal=f"goal {number}")}
            )
        )
    seen, cursor = [], None
    while True:
        page = runtime.task_results.list(
            ListTaskResultsRequest(scope_id=SCOPE, limit=2, cursor=cursor)
        )
        seen += [item.goal for item in page.task_results]
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    assert seen == [f"goal {n}" for n in (4, 3, 2, 1, 0)]
    empty = runtime.task_results.list(ListTaskResultsRequest(scope_id="git:example.com/none"))
    assert (empty.task_results, empty.next_cursor) == ([], None)


SECRET_GOAL = "SENTINEL-goal-text-never-echoed"


@pytest.mark.parametrize(
    "body",
    [
        {"task": task(goal="x" * 2001)},
        {"task": task(goal="   ")},
        {"task": task(goal=SECRET_GOAL, outcome="done")},
        {"task": task(goal=SECRET_GOAL, changes=[{"path": "p" * 513, "added": 1, "removed": 0}])},
        {"task": task(goal=SECRET_GOAL,
                      changes=[{"path": "p", "added": 10_000_001, "removed": 0}])},
        {"task": task(goal=SECRET_GOAL, changes=[{"path": "p", "added": -1, "removed": 0}])},
        {"task": task(goal=SECRET_GOAL, changes=[{"path": "p", "added": 1, "removed": 0}] * 101)},
        {"task": task(goal=SECRET_GOAL, checks=[{"command": "c" * 1001, "exit_status": 0}])},
        {"task": task(goal=SECRET_GOAL, checks=[{"command": "c", "exit_status": 256}])},
        {"task": task(goal=SECRET_GOAL, checks=[{"command": "c", "exit_status": -2}])},
        {"task": task(goal=SECRET_GOAL, checks=[{"command": "c", "exit_status": 0,
                                                 "output_tail": "o" * 2001}])},
        {"task": task(goal=SECRET_GOAL, checks=[{"command": "c", "exit_status": 0}] * 51)},
        {"task": task(goal=SECRET_GOAL, host="Codex")},
        {"task": task(goal=SECRET_GOAL, host="h" * 65)},
        {"task": task(goal=SECRET_GOAL, session_ref="s" * 257)},
        {"task": task(goal=SECRET_GOAL, surprise=True)},
        {"task": task(goal="lone \ud800 surrogate")},
        {"task_id": "", "task": task(goal=SECRET_GOAL)},
        {"task_id": "t" * 129, "task": task(goal=SECRET_GOAL)},
        {"task_id": "has/slash", "task": task(goal=SECRET_GOAL)},
        {"task_id": "-leading", "task": task(goal=SECRET_GOAL)},
        {"task_id": 7, "task": task(goal=SECRET_GOAL)},
        {"task": task(goal=SECRET_GOAL), "surprise": 1},
        {},
    ],
)  # fmt: skip
def test_every_cap_is_a_422_that_never_echoes(http: TestClient, body: dict[str, Any]) -> None:
    # Sent as ASCII JSON, so a lone surrogate travels as the escape a client would send.
    response = http.post(
        RECORD,
        content=json.dumps({"scope_id": SCOPE, **body}),
        headers={"Content-Type": "application/json"},
    )
    envelope(response, 422, "invalid_request")
    for echoed in (SECRET_GOAL, "xxxxxxxxxx", "pppppppppp", "cccccccccc", "oooooooooo", "ssss"):
        assert echoed not in response.text
    assert http.post(LIST, json={"scope_id": SCOPE}).json()["task_results"] == []


def test_content_captures_may_not_use_the_reserved_prefix(
    http: TestClient, runtime: Runtime
) -> None:
    """New captures under ``task-result/`` are refused; a row an earlier release captured there
    as content keeps working as the content source it is."""
    refused = http.post(
        "/v1/sources/content",
        json={"scope_id": SCOPE, "source_id": "task-result/run-1", "content": "SENTINEL-c"},
    )
    envelope(refused, 422, "invalid_request")
    assert "SENTINEL" not in refused.text
    with runtime.db.engine.begin() as conn:  # as an earlier release stored it
        from powercontext_runtime.store._records import sha256_hex

        conn.execute(insert(sources).values(
            scope_id=SCOPE, position=1, source_id="task-result/legacy", name="content",
            payload_hash=sha256_hex("content-source-v1", "old result", None),
            content="old result", metadata=None, created_at=now_ms(),
        ))  # fmt: skip
        conn.execute(insert(source_heads).values(scope_id=SCOPE, last_position=1, flush_cursor=0))
    runtime.sources.capture(CaptureSourceRequest(scope_id=SCOPE, source_id="p", content="c"))
    legacy = runtime.sources.get(GetSourceRequest(scope_id=SCOPE, source_id="task-result/legacy"))
    assert (legacy.source.name, legacy.content) == ("content", "old result")
    cited = {"name": "content", "source_id": "task-result/legacy"}
    candidate = runtime.review.propose_experience(ProposeExperienceRequest.model_validate(
        {"scope_id": SCOPE, "proposal": PROPOSAL, "source_refs": [cited]}
    ))  # fmt: skip
    assert candidate.source_refs[0].name == "content"
    envelope(http.post(GET, json={"scope_id": SCOPE, "task_id": "legacy"}), 404,
             "task_result_not_found")  # fmt: skip
    # Recording that id is a conflict with the content row, never an overwrite.
    again = http.post(RECORD, json={"scope_id": SCOPE, "task_id": "legacy", "task": task()})
    envelope(again, 409, "task_result_conflict")


def test_a_task_result_is_cited_proposed_and_approved(runtime: Runtime) -> None:
    recorded = runtime.task_results.record(
        RecordTaskResultRequest.model_validate(
            {"scope_id": SCOPE, "task_id": "run-9", "task": task()}
        )
    ).response
    ref = recorded.source.model_dump()
    candidate = runtime.review.propose_experience(ProposeExperienceRequest.model_validate(
        {"scope_id": SCOPE, "proposal": PROPOSAL, "source_refs": [ref]}
    ))  # fmt: skip
    approved = runtime.review.approve(ApproveCandidateRequest(
        scope_id=SCOPE, candidate_id=candidate.candidate_id, expected_version=1
    ))  # fmt: skip
    assert approved.status == "approved" and approved.source_refs == [recorded.source]
    # The same id named as a prompt, or a task result never recorded, is not evidence.
    for wrong in ({**ref, "name": "content"}, {**ref, "source_id": "task-result/run-10"}):
        with pytest.raises(NotFoundError) as caught:
            runtime.review.propose_experience(ProposeExperienceRequest.model_validate(
                {"scope_id": SCOPE, "proposal": PROPOSAL, "source_refs": [wrong]}
            ))  # fmt: skip
        assert caught.value.code == "evidence_not_found"


def test_a_read_only_token_may_read_but_not_record(http: TestClient, runtime: Runtime) -> None:
    reader = runtime.tokens.create("reader", ["*"], ["read"])
    writer = runtime.tokens.create("writer", ["*"], ["write"])
    as_reader = {"Authorization": f"Bearer {reader}"}
    body = {"scope_id": SCOPE, "task_id": "run-1", "task": task(goal=SECRET_GOAL)}
    refused = http.post(RECORD, json=body, headers=as_reader)
    assert envelope(refused, 403, "capability_forbidden")["details"] == {"required": "write"}
    assert SECRET_GOAL not in refused.text
    assert (
        http.post(RECORD, json=body, headers={"Authorization": f"Bearer {writer}"}).status_code
        == 201
    )
    assert http.post(LIST, json={"scope_id": SCOPE}, headers=as_reader).status_code == 200
    read = http.post(GET, json={"scope_id": SCOPE, "task_id": "run-1"}, headers=as_reader)
    assert read.status_code == 200
    for path in (LIST, GET):  # reading needs `read`
        no_read = http.post(path, json={"scope_id": SCOPE, "task_id": "run-1"},
                            headers={"Authorization": f"Bearer {writer}"})  # fmt: skip
        assert envelope(no_read, 403, "capability_forbidden")["details"] == {"required": "read"}


def test_no_secret_reaches_storage_an_export_or_a_log(
    http: TestClient, runtime: Runtime, caplog: pytest.LogCaptureFixture
) -> None:
    """Sentinel secrets of every kind the contract names, in every free-text field: none is
    in the answer, the stored row, get_source, an export or the log; what names them is."""
    texts = [text for text, _, _ in CASES]
    checks = [
        {"command": text[:1000], "exit_status": 1, "output_tail": text} for text in texts[:25]
    ]
    body = {
        "scope_id": SCOPE,
        "task_id": "secrets-1",
        "task": task(
            goal="deploy with GITHUB_TOKEN=SENTINEL-goal-token",
            changes=[{"path": "config/postgres://app:SENTINEL-path-pw@db/x", "added": 1,
                      "removed": 0}],
            checks=checks,
            session_ref="session token=SENTINEL-session",
        ),
    }  # fmt: skip
    rest = [{"command": text, "exit_status": 0} for text in texts[25:]]
    more = {"scope_id": SCOPE, "task_id": "secrets-2", "task": task(checks=rest)}
    with caplog.at_level(logging.DEBUG):
        first = http.post(RECORD, json=body)
        second = http.post(RECORD, json=more)
        got = http.post(GET, json={"scope_id": SCOPE, "task_id": "secrets-1"})
    assert first.status_code == second.status_code == 201
    assert first.json()["redactions"] == 3 + 2 * 25
    assert second.json()["redactions"] == len(texts) - 25
    stored = got.json()["task"]
    assert stored["goal"] == "deploy with GITHUB_TOKEN=[REDACTED]"
    assert stored["changes"][0]["path"] == "config/postgres://app:[REDACTED]@db/x"
    assert stored["session_ref"] == "session token=[REDACTED]"
    assert stored["checks"][0]["output_tail"] == CASES[0][2]
    with runtime.db.engine.connect() as conn:
        rows = "\n".join(r.content for r in conn.execute(select(sources.c.content)))
    out = io.BytesIO()
    export(runtime.db, out, None)
    source = runtime.sources.get(
        GetSourceRequest(scope_id=SCOPE, source_id="task-result/secrets-1")
    )
    logged = "\n".join(r.getMessage() + repr(r.__dict__) for r in caplog.records)
    for where in (got.text, rows, out.getvalue().decode(), source.content, logged):
        assert "SENTINEL" not in where
        assert not any(secret in where for secret in SENTINELS)
    assert "GITHUB_TOKEN=[REDACTED]" in rows and "[REDACTED]" in out.getvalue().decode()
    assert SCOPE not in logged and "secrets-1" not in logged


def test_flush_never_extracts_task_results_but_passes_them(runtime: Runtime) -> None:
    seen: list[list[str]] = []

    def extractor(window: Any) -> list[ExtractedEntry]:
        seen.append([source.source_id for source in window])
        return []

    runtime.flush._extractor = extractor  # type: ignore[assignment]
    record = RecordTaskResultRequest.model_validate
    runtime.sources.capture(CaptureSourceRequest(scope_id=SCOPE, source_id="p1", content="one"))
    runtime.task_results.record(record({"scope_id": SCOPE, "task_id": "a", "task": task()}))
    runtime.sources.capture(CaptureSourceRequest(scope_id=SCOPE, source_id="p2", content="two"))
    first = runtime.flush.flush(FlushMemoryRequest(scope_id=SCOPE))
    assert seen == [["p1", "p2"]]
    assert (first.current_cursor, first.processed_source_count) == (3, 3)
    # A window of task results only: the extractor is not asked, the cursor still moves.
    runtime.task_results.record(record({"scope_id": SCOPE, "task_id": "b", "task": task()}))
    second = runtime.flush.flush(FlushMemoryRequest(scope_id=SCOPE))
    assert (second.status, second.current_cursor, seen) == ("processed", 4, [["p1", "p2"]])
    assert runtime.flush.flush(FlushMemoryRequest(scope_id=SCOPE)).status == "idle"


def test_activity_counts_prompts_not_task_results(runtime: Runtime) -> None:
    runtime.sources.capture(CaptureSourceRequest(scope_id=SCOPE, source_id="p1", content="one"))
    runtime.task_results.record(
        RecordTaskResultRequest.model_validate({"scope_id": SCOPE, "task_id": "a", "task": task()})
    )
    today = now_ms() // DAY_MS
    found = ActivityStore(runtime.db).activity(SCOPE, today - 1, 2, 0)
    assert sum(day.get("prompts_captured", 0) for day in found.days.values()) == 1
    assert found.captured == 2  # the journal holds both


def test_metrics_count_the_operation_and_hold_no_content(http: TestClient) -> None:
    body = {"scope_id": SCOPE, "task_id": "m-1", "task": task(goal=SECRET_GOAL)}
    assert http.post(RECORD, json=body).status_code == 201
    scraped = http.get("/metrics").text
    assert 'operation="record_task_result"' in scraped
    assert SECRET_GOAL not in scraped and SCOPE not in scraped and "m-1" not in scraped
