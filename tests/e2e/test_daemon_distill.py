"""The distill worker in a real daemon (issue #31 items 3-4): a task result recorded over HTTP
becomes a pending candidate, proposed by the offline distiller and citing it, that
``candidate list`` shows — polled against a generous deadline, never slept on — and
``/metrics`` counts it (no content). Nothing reaches a pack before approval."""

from __future__ import annotations

import time

import httpx
import pytest

from tests.e2e.helpers import cli_json, new_scope
from tests.runtime.test_distill_worker import fail_then_pass
from tests.support.daemon import Daemon

pytestmark = pytest.mark.e2e

DEADLINE = 60.0  # seconds: a loaded CI box; the worker's poll is 2 s and a record wakes it


def test_a_recorded_task_result_becomes_a_pending_candidate(module_daemon: Daemon) -> None:
    d = module_daemon
    scope = new_scope("distill")
    headers = {"Authorization": f"Bearer {d.token}"}
    with httpx.Client(base_url=d.url, headers=headers, timeout=30) as client:
        recorded = client.post(
            "/v1/task-results/record",
            json={"scope_id": scope, "task_id": "run-1", "task": fail_then_pass(1)},
        )
        assert recorded.status_code == 201, recorded.text
        deadline = time.monotonic() + DEADLINE
        while True:
            listed = cli_json(d, "candidate", "list", "--scope", scope, "--json")["candidates"]
            if listed:
                break
            assert time.monotonic() < deadline, "no candidate within the deadline"
            time.sleep(0.2)  # a poll interval, not a synchronisation
        [candidate] = listed
        assert candidate["status"] == "pending" and candidate["proposed_by"] == "offline"
        assert candidate["source_refs"] == [recorded.json()["source"]]
        pack = client.post(
            "/v1/context/prepare",
            json={"scope_id": scope, "query": "pytest IntegrityError duplicate email"},
        )
        assert pack.status_code == 200 and "IntegrityError" not in (pack.json()["content"] or "")
        metrics = client.get("/metrics").text
        assert 'powercontext_distilled_lessons{distiller="offline",outcome="proposed"}' in metrics
        assert scope not in metrics and "IntegrityError" not in metrics
