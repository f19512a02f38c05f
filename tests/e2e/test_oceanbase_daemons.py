"""Two runtime processes sharing one OceanBase (seekdb) database (spec 01, issue 3)."""

from __future__ import annotations

import threading
from functools import partial
from pathlib import Path

import httpx
import pytest

from tests.support.backends import fresh_database
from tests.support.concurrency import run_at_once
from tests.support.daemon import start_daemon

pytestmark = [pytest.mark.oceanbase, pytest.mark.e2e]

SCOPE = "git:example.com/team/shared"
WRITERS_PER_DAEMON = 3
WRITES_PER_WRITER = 40


def _post(client: httpx.Client, path: str, body: dict) -> httpx.Response:  # type: ignore[type-arg]
    return client.post(path, json=body)


def test_two_daemons_write_one_scope_concurrently(
    tmp_path: Path, oceanbase_server_url: str
) -> None:
    url = fresh_database(oceanbase_server_url, "two_daemons")
    with (
        start_daemon(tmp_path / "a", database_url=url) as first,
        start_daemon(tmp_path / "b", database_url=url) as second,
    ):
        acknowledged: list[str] = []
        statuses: list[int] = []
        lock = threading.Lock()

        def writer(daemon_index: int, writer_index: int) -> None:
            daemon = (first, second)[daemon_index]
            with daemon.client() as client:
                for i in range(WRITES_PER_WRITER):
                    text = f"note {daemon_index}-{writer_index}-{i} about shared memory"
                    body: dict[str, object] = {"scope_id": SCOPE, "kind": "fact", "text": text}
                    if i % 10 == 9:
                        body["expected_revision"] = 1  # certainly stale by now: a typed 409
                    response = _post(client, "/v1/memory/remember", body)
                    with lock:
                        statuses.append(response.status_code)
                        if response.status_code == 200:
                            acknowledged.append(text)
                    if response.status_code == 409:
                        assert response.json()["error"]["code"] == "revision_conflict"

        outcomes = run_at_once(
            [partial(writer, d, w) for d in range(2) for w in range(WRITERS_PER_DAEMON)]
        )
        for outcome in outcomes:  # a failed assertion on a writer thread fails the test
            if outcome.error is not None:
                raise outcome.error

        assert set(statuses) <= {200, 409}, sorted(set(statuses))
        assert statuses.count(409) == 2 * WRITERS_PER_DAEMON * (WRITES_PER_WRITER // 10)
        assert len(acknowledged) == len(statuses) - statuses.count(409)

        # Every acknowledged write is visible through the *other* daemon, revisions gap-free.
        with second.client() as client:
            texts: list[str] = []
            cursor = None
            while True:
                body: dict[str, object] = {"scope_id": SCOPE, "limit": 100}
                if cursor:
                    body["cursor"] = cursor
                page = client.post("/v1/memory/entries/list", json=body).json()
                texts += [entry["text"] for entry in page["entries"]]
                cursor = page["next_cursor"]
                if cursor is None:
                    break
            changes = client.post(
                "/v1/memory/changes", json={"scope_id": SCOPE, "limit": 1000}
            ).json()
        assert sorted(texts) == sorted(acknowledged)
        revisions = [change["revision"] for change in changes["changes"]]
        assert revisions == list(range(1, len(acknowledged) + 1))
        assert "internal_error" not in first.log_text() + second.log_text()


def test_serve_on_oceanbase_answers_every_memory_operation(
    tmp_path: Path, oceanbase_server_url: str
) -> None:
    url = fresh_database(oceanbase_server_url, "serve_smoke")
    with start_daemon(tmp_path / "home", database_url=url) as daemon, daemon.client() as client:
        ready = client.get("/health/ready").json()
        assert (ready["status"], ready["database"]) == ("ready", "oceanbase")
        written = client.post(
            "/v1/memory/remember",
            json={"scope_id": SCOPE, "kind": "fact", "text": "修改数据库持久化逻辑前先跑契约测试"},
        ).json()
        citation = written["entry"]["citation"]
        hits = client.post(
            "/v1/memory/search", json={"scope_id": SCOPE, "query": "数据库持久化"}
        ).json()["hits"]
        assert [hit["citation"] for hit in hits] == [citation]
        revised = client.post(
            "/v1/memory/entries/revise",
            json={"scope_id": SCOPE, "citation": citation, "text": "先跑契约测试"},
        )
        assert revised.status_code == 200
        old = client.post(
            "/v1/memory/entries/get", json={"scope_id": SCOPE, "citation": citation}
        ).json()
        assert old["text"] == "修改数据库持久化逻辑前先跑契约测试"
        stale = client.post(
            "/v1/memory/entries/retire", json={"scope_id": SCOPE, "citation": citation}
        )
        assert stale.status_code == 409
        assert stale.json()["error"]["code"] == "revision_conflict"
        capture = client.post(
            "/v1/sources/content",
            json={"scope_id": SCOPE, "source_id": "p1", "content": "a prompt"},
        )
        assert capture.status_code == 202 and capture.json()["position"] == 1
