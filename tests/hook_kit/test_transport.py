"""Loopback-only URLs, and a transport that never outlives its deadline or reads unbounded."""

from __future__ import annotations

import time

import pytest

from powercontext_hook_kit.transport import (
    Deadline,
    Endpoint,
    HttpFailure,
    HttpResponse,
    UnsafeUrl,
    parse_loopback_url,
    post_json,
)
from tests.hook_kit.stub import PREPARE, Reply, StubRuntime, dead_port, prepared_body

SLACK = 0.75


@pytest.mark.parametrize(
    ("url", "endpoint"),
    [
        ("http://127.0.0.1:7411", Endpoint("127.0.0.1", 7411)),
        ("http://127.0.0.1:7411/", Endpoint("127.0.0.1", 7411)),
        ("  http://127.0.0.1:7411  ", Endpoint("127.0.0.1", 7411)),
        ("HTTP://127.9.8.7:1", Endpoint("127.9.8.7", 1)),
        ("http://localhost:8080", Endpoint("localhost", 8080)),
        ("http://LocalHost:8080", Endpoint("localhost", 8080)),
        ("http://[::1]:7411", Endpoint("::1", 7411)),
        ("http://[0:0:0:0:0:0:0:1]:7411", Endpoint("0:0:0:0:0:0:0:1", 7411)),
        ("http://127.0.0.1", Endpoint("127.0.0.1", 80)),
    ],
)
def test_loopback_urls_are_accepted(url: str, endpoint: Endpoint) -> None:
    assert parse_loopback_url(url) == endpoint


@pytest.mark.parametrize(
    "url",
    [
        "",
        "127.0.0.1:7411",
        "https://127.0.0.1:7411",
        "ftp://127.0.0.1:7411",
        "http://10.0.0.1:7411",
        "http://192.168.1.2:7411",
        "http://0.0.0.0:7411",
        "http://example.com:7411",
        "http://localhost.example.com:7411",
        "http://127.1:7411",
        "http://[::ffff:127.0.0.1]:7411",
        "http://[::2]:7411",
        "http://[::1:7411",
        "http://user:secret@127.0.0.1:7411",
        "http://token@127.0.0.1:7411",
        "http://127.0.0.1:7411/prefix",
        "http://127.0.0.1:7411?x=1",
        "http://127.0.0.1:7411#x",
        "http://127.0.0.1:0",
        "http://127.0.0.1:65536",
        "http://127.0.0.1:-1",
        "http://127.0.0.1:port",
        "http://:7411",
    ],
)
def test_everything_else_is_refused(url: str) -> None:
    with pytest.raises(UnsafeUrl) as caught:
        parse_loopback_url(url)
    assert "secret" not in str(caught.value)


def test_localhost_reaches_the_ipv4_loopback(stub: StubRuntime) -> None:
    stub.replies[PREPARE] = Reply(200, prepared_body("x"))
    result = post_json(
        parse_loopback_url(f"http://localhost:{stub.port}"),
        PREPARE,
        b"{}",
        token=None,
        deadline=Deadline.after(2),
    )
    assert result == HttpResponse(200, prepared_body("x"))
    assert "Authorization" not in stub.requests[0].headers


def test_an_expired_deadline_sends_nothing(stub: StubRuntime) -> None:
    result = post_json(
        parse_loopback_url(stub.url), PREPARE, b"{}", token="t", deadline=Deadline.after(-1)
    )
    assert result == HttpFailure("timeout")
    assert stub.requests == []


def test_error_bodies_are_not_read(stub: StubRuntime) -> None:
    stub.replies[PREPARE] = Reply(500, b"x" * 10_000)
    result = post_json(
        parse_loopback_url(stub.url), PREPARE, b"{}", token="t", deadline=Deadline.after(2)
    )
    assert result == HttpResponse(500, b"")


def test_refused_connection(stub: StubRuntime) -> None:
    result = post_json(
        Endpoint("127.0.0.1", dead_port()), PREPARE, b"{}", token="t", deadline=Deadline.after(2)
    )
    assert result == HttpFailure("connection_failed")


@pytest.mark.parametrize("budget", [0.3, 1.0])
def test_trickled_headers_are_bounded_in_total(stub: StubRuntime, budget: float) -> None:
    """Even the status line arriving byte by byte cannot hold the hook past its budget."""
    stub.replies[PREPARE] = Reply(200, prepared_body("x" * 1000), trickle=0.01)
    started = time.monotonic()
    result = post_json(
        parse_loopback_url(stub.url),
        PREPARE,
        b"{}",
        token="t",
        deadline=Deadline.after(budget),
        request_timeout=5,
    )
    assert result == HttpFailure("timeout")
    assert time.monotonic() - started < budget + SLACK


def test_response_cap_is_configurable_and_exact(stub: StubRuntime) -> None:
    stub.replies[PREPARE] = Reply(200, b"x" * 100)
    endpoint = parse_loopback_url(stub.url)
    exact = post_json(
        endpoint, PREPARE, b"{}", token=None, deadline=Deadline.after(2), max_response_bytes=100
    )
    over = post_json(
        endpoint, PREPARE, b"{}", token=None, deadline=Deadline.after(2), max_response_bytes=99
    )
    assert exact == HttpResponse(200, b"x" * 100)
    assert over == HttpFailure("oversize", 200)


def _raw_exchange(stub: StubRuntime, raw: bytes) -> HttpResponse | HttpFailure:
    stub.replies[PREPARE] = Reply(raw=raw)
    return post_json(
        parse_loopback_url(stub.url), PREPARE, b"{}", token="t", deadline=Deadline.after(2)
    )


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        # Interim 1xx answers are skipped; the final response counts.
        (
            b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}",
            HttpResponse(200, b"{}"),
        ),
        # No length and not chunked: the body runs to the end of the stream.
        (b'HTTP/1.0 200 OK\r\n\r\n{"a": 1}', HttpResponse(200, b'{"a": 1}')),
        # Bare LF line endings are tolerated, chunk extensions and trailers ignored.
        (
            b"HTTP/1.1 200 OK\nTransfer-Encoding: chunked\n\n2;ext=1\n{}\n0\nX-Trailer: 1\n\n",
            HttpResponse(200, b"{}"),
        ),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}", "malformed"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: -2\r\n\r\n{}", "malformed"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n{}", "malformed"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "malformed"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}XX0\r\n\r\n", "malformed"),
        (b"HTTP/1.1 200 OK\r\n" + b"X: y\r\n" * 101 + b"\r\n", "malformed"),
        (b"HTTP/1.1 200 OK\r\nX-Long: " + b"y" * 70_000 + b"\r\n\r\n", "malformed"),
        (b"HTTP/1.1 200 OK\r\n Folded: no\r\n\r\n", "malformed"),
        (b"HTTP/2 200\r\n\r\n", "malformed"),
        (b"HTTP/1.1 20x OK\r\n\r\n", "malformed"),
        (b"HTTP/1.1 200 OK\r\nContent-Len", "malformed"),
        (
            b"HTTP/1.1 302 Found\r\nLocation: http://example.com/\r\n\r\n",
            HttpFailure("redirect", 302),
        ),
    ],
)
def test_response_framing(stub: StubRuntime, raw: bytes, expected: object) -> None:
    """Every way a response can be framed, and the ways framing can lie, give a definite answer."""
    result = _raw_exchange(stub, raw)
    if isinstance(expected, str):
        assert result == HttpFailure("malformed"), raw[:60]
    else:
        assert result == expected


def test_the_request_is_well_formed_http(stub: StubRuntime) -> None:
    stub.replies[PREPARE] = Reply(200, prepared_body("x"))
    body = '{"q": "é"}'.encode()
    post_json(parse_loopback_url(stub.url), PREPARE, body, token="tok", deadline=Deadline.after(2))
    (request,) = stub.requests
    assert request.body == body
    assert request.headers["Content-Length"] == str(len(body))
    assert request.headers["Authorization"] == "Bearer tok"
    assert request.headers["Host"] == f"127.0.0.1:{stub.port}"
    assert request.headers["Connection"] == "close"
