"""Pre-authentication limits against a real ``powercontext serve`` (issue 15, item 6).

What an unauthenticated client can hold is bounded: the request head's size, the time to send
a head or a body, and the connections it keeps open — and a flood of slow connections does not
starve real requests on TCP, nor anything on the unix socket. Loopback only; every loop is
bounded; the deadlines configured here are short, the bounds waited for generous, and the
assertions are on behaviour (closed, answered, succeeded), never on timing.
"""

from __future__ import annotations

import resource
import socket
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from powercontext_runtime.serving.limits import MAX_PIPELINED
from tests.support.daemon import Daemon, start_daemon
from tests.support.slow_clients import Flood, trickle_until_closed

pytestmark = pytest.mark.e2e

#: How long any one observable close may take on a loaded 2-core machine (deadline ≈ 1 s).
BOUND_S = 60.0
HEAD_DEADLINE_S = 1
BODY_DEADLINE_S = 1


@pytest.fixture(scope="module")
def limited_daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    env = {
        "POWERCONTEXT_HEADER_TIMEOUT": str(HEAD_DEADLINE_S),
        "POWERCONTEXT_BODY_TIMEOUT": str(BODY_DEADLINE_S),
    }
    with start_daemon(tmp_path_factory.mktemp("limits") / "home", extra_env=env) as daemon:
        yield daemon


def _port(daemon: Daemon) -> int:
    return int(daemon.url.rsplit(":", 1)[1])


def _peak_rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise AssertionError("no VmHWM")


def test_an_oversized_header_is_refused_at_the_limit_and_memory_stays_flat(
    limited_daemon: Daemon,
) -> None:
    """A 64 MiB header: the server stops reading at 64 KiB (431 and close), so the sender is
    cut off long before the end and the daemon's peak RSS barely moves (before: the whole
    header was buffered, +256 MiB for 128 MiB, and the event loop stalled for ~20 s)."""
    before = _peak_rss_kib(limited_daemon.process.pid)
    chunk = b"a" * (1 << 20)
    sent = 0
    answer = b""
    with socket.create_connection(("127.0.0.1", _port(limited_daemon)), timeout=BOUND_S) as sock:
        try:
            sock.sendall(b"GET /v1/capabilities HTTP/1.1\r\nHost: localhost\r\nX-Pad: ")
            for _ in range(64):
                sock.sendall(chunk)
                sent += len(chunk)
            answer = sock.recv(4096)
        except (ConnectionResetError, BrokenPipeError):
            pass
    assert sent < 32 << 20, "the server kept reading a header far over the limit"
    assert answer in (b"",) or answer.startswith(b"HTTP/1.1 431 "), answer[:100]
    grown_mib = (_peak_rss_kib(limited_daemon.process.pid) - before) / 1024
    assert grown_mib < 32, f"peak RSS grew by {grown_mib:.0f} MiB"
    # The daemon still answers, over a normal request head.
    with limited_daemon.client() as client:
        assert client.get("/v1/capabilities").status_code == 200


def test_a_header_just_under_the_limit_is_still_served(limited_daemon: Daemon) -> None:
    with limited_daemon.client() as client:
        response = client.get("/v1/capabilities", headers={"X-Pad": "a" * 60_000})
        assert response.status_code == 200


def test_a_trickled_request_head_is_closed_after_the_head_deadline(
    limited_daemon: Daemon,
) -> None:
    """One byte every 200 ms never completes a head: the connection is closed (408) once the
    head deadline passes (before: it stayed open as long as bytes kept coming)."""
    closed, answer = trickle_until_closed(_port(limited_daemon), every=0.2, bound=BOUND_S)
    assert closed, "the server kept a trickling connection open"
    assert answer == b"" or answer.startswith(b"HTTP/1.1 408 "), answer[:100]


def test_an_idle_connection_that_sends_nothing_is_closed_too(limited_daemon: Daemon) -> None:
    with socket.create_connection(("127.0.0.1", _port(limited_daemon)), timeout=BOUND_S) as sock:
        answer = sock.recv(4096)  # blocks until the server answers or closes (bounded)
        assert answer.startswith(b"HTTP/1.1 408 ") or answer == b""


def test_a_stalled_body_is_cut_off_after_the_body_deadline(limited_daemon: Daemon) -> None:
    """An authenticated POST that announces 1,000 bytes and sends 10: 408, then close."""
    head = (
        "POST /v1/memory/search HTTP/1.1\r\nHost: localhost\r\n"
        f"Authorization: Bearer {limited_daemon.token}\r\n"
        "Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n"
    ).encode()
    with socket.create_connection(("127.0.0.1", _port(limited_daemon)), timeout=BOUND_S) as sock:
        sock.sendall(head + b'{"scope_id')
        answer = b""
        while chunk := sock.recv(4096):
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 408 "), answer[:200]
    assert b'"request_timeout"' in answer


def test_keep_alive_requests_are_not_cut_by_the_head_deadline(limited_daemon: Daemon) -> None:
    """The head deadline restarts after each response: a client pausing between requests
    for less than the keep-alive timeout keeps its connection."""
    with limited_daemon.client() as client:
        for _ in range(3):
            assert client.get("/v1/capabilities").status_code == 200


def _pipeline(daemon: Daemon, count: int) -> int:
    """Send ``count`` pipelined requests in one write; how many were answered before the
    server closed the connection (each ends with ``Connection: close`` on the last)."""
    request = b"GET /health/live HTTP/1.1\r\nHost: localhost\r\n\r\n"
    last = b"GET /health/live HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
    answered = b""
    with socket.create_connection(("127.0.0.1", _port(daemon)), timeout=BOUND_S) as sock:
        sock.sendall(request * (count - 1) + last)
        try:
            while chunk := sock.recv(65536):
                answered += chunk
        except ConnectionResetError:
            pass
    return answered.count(b"HTTP/1.1 200 ")


def test_deep_pipelining_is_cut_off(limited_daemon: Daemon) -> None:
    """200 pipelined requests in one write: the connection is closed after at most 17 answers
    (before: every request of a read was queued, thousands per read); 8 are all answered."""
    assert _pipeline(limited_daemon, 8) == 8
    assert _pipeline(limited_daemon, 200) <= 17


def test_a_pipeline_overflow_answers_the_queued_requests_and_closes_quietly(
    limited_daemon: Daemon,
) -> None:
    """25 pipelined GETs (none asks to close): the one being answered and the 16 queued
    behind it are answered, the last with ``Connection: close``, then the server closes the
    connection; the daemon logs no exception. (Before: the connection was closed at once, so
    not even the first request was answered, and the response being written to the closed
    transport was logged as "Exception in ASGI application", a RuntimeError.)"""
    request = b"GET /health/live HTTP/1.1\r\nHost: localhost\r\n\r\n"
    answered = b""
    with socket.create_connection(("127.0.0.1", _port(limited_daemon)), timeout=BOUND_S) as sock:
        sock.sendall(request * 25)
        while chunk := sock.recv(65536):  # b"": the server closed it (a reset would raise)
            answered += chunk
    heads = [part.split(b"\r\n\r\n", 1)[0].lower() for part in answered.split(b"HTTP/1.1 ")[1:]]
    assert len(heads) == 1 + MAX_PIPELINED, answered[-500:]
    assert all(head.startswith(b"200 ok") for head in heads), heads
    assert [b"connection: close" in head for head in heads] == [False] * MAX_PIPELINED + [True]
    # A later request's access-log line: anything the overflow logged is written by then.
    with limited_daemon.client() as client:
        after = client.get("/health/live")
    log = limited_daemon.log_text_with(after.headers["x-request-id"])
    assert after.headers["x-request-id"] in log
    assert "Exception in ASGI application" not in log and "Traceback" not in log
    assert '"level":"error"' not in log, [line for line in log.splitlines() if "error" in line]


def _limit_files(limit: int) -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))


def test_a_flood_of_slow_connections_does_not_starve_real_requests(tmp_path: Path) -> None:
    """300 slow connections against a daemon with a 256-descriptor limit (so 64 connections
    per listener) and at most 64 waiting ones: every real request still succeeds, over TCP
    and over the unix socket (before: with 1,100 slow connections and 1,024 descriptors, 60
    of 60 real requests failed — libuv drops the backlog when accept() hits EMFILE)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 1024:  # this process holds the 300 attacking sockets
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 4096), hard))
    env = {"POWERCONTEXT_MAX_PENDING_CONNECTIONS": "64"}
    with start_daemon(
        tmp_path / "home", extra_env=env, preexec_fn=lambda: _limit_files(256)
    ) as daemon:
        flood = Flood(_port(daemon), count=300, interval=1.0)
        with flood.running(), daemon.unix_client() as local:
            failures = []
            for attempt in range(20):
                # A fresh TCP connection each time, like a hook process; then the socket.
                tcp = httpx.Client(base_url=daemon.url, timeout=30)
                for transport, client in (("tcp", tcp), ("unix", local)):
                    try:
                        response = client.get(
                            "/v1/capabilities",
                            headers={"Authorization": f"Bearer {daemon.token}"},
                        )
                        if response.status_code != 200:
                            failures.append((transport, attempt, response.status_code))
                    except httpx.HTTPError as exc:
                        failures.append((transport, attempt, type(exc).__name__))
                tcp.close()
            assert failures == []
        assert flood.closed_by_server > 300 - 64, "the server did not shed slow connections"
        assert daemon.process.poll() is None
