"""``powercontext serve --workers N``: several processes behind one socket, one database."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.e2e.helpers import CHANGES, PREPARE, SEARCH, list_all, new_scope, remember
from tests.support.concurrency import run_at_once
from tests.support.daemon import Daemon, start_daemon

pytestmark = pytest.mark.e2e

WORKERS = 2
WRITERS = 8
WRITES_EACH = 25


def _children(pid: int) -> set[int]:
    """Direct child processes of ``pid`` (Linux ``/proc``)."""
    found: set[int] = set()
    for task in Path(f"/proc/{pid}/task").iterdir():
        text = (task / "children").read_text().split()
        found.update(int(child) for child in text)
    return found


@pytest.fixture(scope="module")
def workers_daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    home = tmp_path_factory.mktemp("workers") / "home"
    with start_daemon(home, extra_env={"POWERCONTEXT_WORKERS": str(WORKERS)}) as daemon:
        yield daemon


def test_the_supervisor_runs_the_requested_workers(workers_daemon: Daemon) -> None:
    children = _children(workers_daemon.process.pid)
    # Besides the workers, multiprocessing may keep its resource tracker as a child.
    serving = [pid for pid in children if "resource_tracker" not in _cmdline(pid)]
    assert len(serving) == WORKERS, [_cmdline(pid) for pid in children]


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def test_concurrent_writes_through_every_worker_are_all_kept(workers_daemon: Daemon) -> None:
    """Fresh connections are spread over the workers; the database still orders every write."""
    scope = new_scope("workers")

    def writer(index: int) -> list[dict]:
        acked = []
        for n in range(WRITES_EACH):
            # A new connection per request, so the kernel hands requests to different workers.
            with workers_daemon.client() as client:
                acked.append(remember(client, scope, f"worker note {index}-{n} zq{index}x{n}"))
        return acked

    outcomes = run_at_once([lambda i=i: writer(i) for i in range(WRITERS)])
    assert all(outcome.ok for outcome in outcomes), [o.error for o in outcomes if not o.ok]
    acked = [result for outcome in outcomes for result in outcome.value or []]
    assert len(acked) == WRITERS * WRITES_EACH
    revisions = sorted(a["memory"]["revision"] for a in acked)
    assert revisions == list(range(1, WRITERS * WRITES_EACH + 1))
    with workers_daemon.client() as client:
        stored = {e["citation"]["entry_id"]: e["text"] for e in list_all(client, scope)}
        assert stored == {a["entry"]["citation"]["entry_id"]: a["entry"]["text"] for a in acked}
        changes = client.post(CHANGES, json={"scope_id": scope, "limit": 500}).json()["changes"]
        assert [c["revision"] for c in changes] == revisions
        # Every worker reads what any worker wrote: search and prepare see the last write.
        for _ in range(2 * WORKERS):
            with workers_daemon.client() as fresh:
                hits = fresh.post(SEARCH, json={"scope_id": scope, "query": "zq7x24"}).json()
                assert [h["text"] for h in hits["hits"]] == ["worker note 7-24 zq7x24"]
                pack = fresh.post(PREPARE, json={"scope_id": scope, "query": "zq3x11"}).json()
                assert pack["status"] == "ready"
                assert "worker note 3-11 zq3x11" in pack["content"]


def test_sigterm_stops_every_worker_and_exits_cleanly(tmp_path: Path) -> None:
    with start_daemon(tmp_path / "home", extra_env={"POWERCONTEXT_WORKERS": "2"}) as daemon:
        with daemon.client() as client:
            remember(client, new_scope("stop"), "kept across the restart")
        workers = [
            pid
            for pid in _children(daemon.process.pid)
            if "resource_tracker" not in _cmdline(pid)  # it leaves on its own, later
        ]
        assert len(workers) == 2
        assert daemon.stop(signal.SIGTERM) == 0
        for pid in workers:  # the supervisor joins its workers before it exits
            assert not _alive(pid), _cmdline(pid)
        with pytest.raises(httpx.TransportError):
            httpx.get(daemon.url + "/health/live", timeout=2)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    status = Path(f"/proc/{pid}/status")
    return status.exists() and "State:\tZ" not in status.read_text()


def test_a_revoked_token_stops_working_at_once_in_every_worker(workers_daemon: Daemon) -> None:
    """No worker keeps a verified token in a cache: the request right after ``token revoke``
    is refused, whichever worker takes it (issue 15 #8; before, each cached it for 2 s)."""
    from tests.e2e.helpers import create_token, run_cli

    scope = new_scope("revoke")
    name = f"short-lived-{os.getpid()}"
    token = create_token(workers_daemon, name, scope)
    headers = {"Authorization": f"Bearer {token}", "Connection": "close"}
    body = {"scope_id": scope}

    def statuses() -> set[int]:
        # A fresh connection each time: the kernel spreads them over the workers.
        return {
            httpx.post(
                workers_daemon.url + CHANGES, json=body, headers=headers, timeout=30
            ).status_code
            for _ in range(4 * WORKERS)
        }

    assert statuses() == {200}
    revoked = run_cli(workers_daemon, "token", "revoke", name)
    assert revoked.returncode == 0, revoked.stderr
    assert statuses() == {401}


def _remembered(daemon: Daemon) -> float:
    """remember_memory 200s counted by ``/metrics``, asked on a fresh connection."""
    with daemon.client() as client:
        response = client.get("/metrics")
    assert response.status_code == 200
    total = 0.0
    for line in response.text.splitlines():
        if line.startswith("powercontext_http_requests_total{") and (
            'operation="remember_memory"' in line and 'status="200"' in line
        ):
            total += float(line.rsplit(" ", 1)[1])
    return total


def test_metrics_sum_every_worker(workers_daemon: Daemon) -> None:
    """A scrape answered by any one worker counts the requests every worker served."""
    before = _remembered(workers_daemon)
    scope = new_scope("workers-metrics")
    writes = 4 * WORKERS * 5
    for n in range(writes):
        with workers_daemon.client() as client:  # new connections spread over the workers
            remember(client, scope, f"metrics note {n}")
    # Every scrape, whichever worker takes it, sees all of them.
    assert [_remembered(workers_daemon) for _ in range(3 * WORKERS)] == [before + writes] * (
        3 * WORKERS
    )
    # The workers' files live in the private data dir (the supervisor wiped it at start).
    metrics_dir = workers_daemon.home / "metrics"
    assert metrics_dir.stat().st_mode & 0o777 == 0o700
    assert any(p.name.startswith("counter_") for p in metrics_dir.iterdir())
