"""Loopback-only URLs, and a transport that never outlives its deadline or reads unbounded.

The exchange is the same over TCP loopback and over the runtime's unix socket (``any_stub``);
what only the socket has — the trust checks before connecting, long paths — is at the end.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from powercontext_hook_kit import transport
from powercontext_hook_kit.transport import (
    Deadline,
    Endpoint,
    HttpFailure,
    HttpResponse,
    UnixEndpoint,
    UnsafeUrl,
    describe_endpoint,
    parse_loopback_url,
    parse_runtime_url,
    post_json,
)
from tests.hook_kit.stub import (
    PREPARE,
    SUN_PATH_MAX,
    Reply,
    StubRuntime,
    bind_unix,
    dead_port,
    prepared_body,
    running_stub,
)

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux only")

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


def test_an_expired_deadline_sends_nothing(any_stub: StubRuntime) -> None:
    result = post_json(
        parse_runtime_url(any_stub.url), PREPARE, b"{}", token="t", deadline=Deadline.after(-1)
    )
    assert result == HttpFailure("timeout")
    assert any_stub.requests == []


def test_error_bodies_are_not_read(any_stub: StubRuntime) -> None:
    any_stub.replies[PREPARE] = Reply(500, b"x" * 10_000)
    result = post_json(
        parse_runtime_url(any_stub.url), PREPARE, b"{}", token="t", deadline=Deadline.after(2)
    )
    assert result == HttpResponse(500, b"")


def test_refused_connection(stub: StubRuntime) -> None:
    result = post_json(
        Endpoint("127.0.0.1", dead_port()), PREPARE, b"{}", token="t", deadline=Deadline.after(2)
    )
    assert result == HttpFailure("connection_failed")


@pytest.mark.parametrize("budget", [0.3, 1.0])
def test_trickled_headers_are_bounded_in_total(any_stub: StubRuntime, budget: float) -> None:
    """Even the status line arriving byte by byte cannot hold the hook past its budget."""
    any_stub.replies[PREPARE] = Reply(200, prepared_body("x" * 1000), trickle=0.01)
    started = time.monotonic()
    result = post_json(
        parse_runtime_url(any_stub.url),
        PREPARE,
        b"{}",
        token="t",
        deadline=Deadline.after(budget),
        request_timeout=5,
    )
    assert result == HttpFailure("timeout")
    assert time.monotonic() - started < budget + SLACK


def test_response_cap_is_configurable_and_exact(any_stub: StubRuntime) -> None:
    any_stub.replies[PREPARE] = Reply(200, b"x" * 100)
    endpoint = parse_runtime_url(any_stub.url)
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
        parse_runtime_url(stub.url), PREPARE, b"{}", token="t", deadline=Deadline.after(2)
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
def test_response_framing(any_stub: StubRuntime, raw: bytes, expected: object) -> None:
    """Every way a response can be framed, and the ways framing can lie, give a definite answer."""
    result = _raw_exchange(any_stub, raw)
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


# --- the unix socket ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "path"),
    [
        ("unix:/run/user/1000/powercontext.sock", "/run/user/1000/powercontext.sock"),
        ("  unix:/tmp/pc/powercontext.sock ", "/tmp/pc/powercontext.sock"),
        ("UNIX:/tmp/pc.sock", "/tmp/pc.sock"),
        ("unix:/tmp/with space/pc.sock", "/tmp/with space/pc.sock"),
        ("unix:/tmp/é/pc.sock", "/tmp/é/pc.sock"),
    ],
)
def test_unix_urls_are_accepted(url: str, path: str) -> None:
    assert parse_runtime_url(url) == UnixEndpoint(path)
    assert describe_endpoint(UnixEndpoint(path)) == f"unix socket {path}"


@pytest.mark.parametrize(
    "url",
    [
        "unix:",
        "unix:relative/powercontext.sock",
        "unix:./powercontext.sock",
        "unix://localhost/tmp/pc.sock",  # no authority forms: one literal absolute path
        "unix:///tmp/pc.sock",
        "unix:/tmp/pc/",
        "unix:/tmp/line\nbreak.sock",
        "unix:/tmp/nul\x00.sock",
        "unix:/tmp/del\x7f.sock",
        "unixx:/tmp/pc.sock",
        "http+unix://%2Ftmp%2Fpc.sock",
    ],
)
def test_bad_unix_urls_are_refused(url: str) -> None:
    with pytest.raises(UnsafeUrl):
        parse_runtime_url(url)


def test_http_urls_still_mean_tcp() -> None:
    assert parse_runtime_url("http://127.0.0.1:7411") == Endpoint("127.0.0.1", 7411)
    assert describe_endpoint(Endpoint("127.0.0.1", 7411)) == "TCP 127.0.0.1:7411"
    assert describe_endpoint(Endpoint("::1", 7411)) == "TCP [::1]:7411"
    with pytest.raises(UnsafeUrl):
        parse_runtime_url("https://127.0.0.1:7411")


def test_the_unix_request_is_well_formed_http(unix_stub: StubRuntime) -> None:
    """Same request as over TCP, with ``Host: localhost`` (a socket has no host name)."""
    unix_stub.replies[PREPARE] = Reply(200, prepared_body("x"))
    body = b'{"q": 1}'
    result = post_json(
        parse_runtime_url(unix_stub.url), PREPARE, body, token="tok", deadline=Deadline.after(2)
    )
    assert result == HttpResponse(200, prepared_body("x"))
    (request,) = unix_stub.requests
    assert request.body == body
    assert request.headers["Host"] == "localhost"
    assert request.headers["Authorization"] == "Bearer tok"
    assert request.headers["Connection"] == "close"


def _post(endpoint: UnixEndpoint) -> HttpResponse | HttpFailure:
    return post_json(endpoint, PREPARE, b"{}", token="SECRET", deadline=Deadline.after(5))


def test_a_missing_socket_is_unavailable(tmp_path: Path) -> None:
    assert _post(UnixEndpoint(str(tmp_path / "powercontext.sock"))) == HttpFailure(
        "connection_failed"
    )
    assert _post(UnixEndpoint(str(tmp_path / "no-dir" / "powercontext.sock"))) == HttpFailure(
        "connection_failed"
    )


def test_a_stale_socket_is_unavailable(tmp_path: Path) -> None:
    """The runtime died and left its socket file: refused, not a hang."""
    path = str(tmp_path / "powercontext.sock")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    bind_unix(listener, path)
    listener.close()  # bound, never listening: connect is refused
    assert _post(UnixEndpoint(path)) == HttpFailure("connection_failed")


def test_a_symlink_to_a_real_socket_is_refused(unix_stub: StubRuntime, tmp_path: Path) -> None:
    """A planted symlink is never followed, even to a socket that would answer."""
    assert unix_stub.unix_socket is not None
    link = tmp_path / "planted.sock"
    link.symlink_to(unix_stub.unix_socket)
    assert _post(UnixEndpoint(str(link))) == HttpFailure("untrusted_socket")
    assert unix_stub.requests == []
    # The real socket itself answers: the refusal was about the symlink.
    assert isinstance(_post(UnixEndpoint(unix_stub.unix_socket)), HttpResponse)


@pytest.mark.parametrize("kind", ["file", "directory", "fifo"])
def test_a_non_socket_at_the_socket_path_is_refused(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "powercontext.sock"
    if kind == "file":
        path.write_text("not a socket")
    elif kind == "directory":
        path.mkdir()
    else:
        os.mkfifo(path)
    assert _post(UnixEndpoint(str(path))) == HttpFailure("untrusted_socket")


def test_a_socket_owned_by_someone_else_is_refused(
    unix_stub: StubRuntime, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Seen from another user, the runtime's socket is not theirs: nothing is sent to it."""
    assert unix_stub.unix_socket is not None
    real = os.geteuid()
    monkeypatch.setattr(transport.os, "geteuid", lambda: real + 1)
    assert _post(UnixEndpoint(unix_stub.unix_socket)) == HttpFailure("untrusted_socket")
    assert unix_stub.requests == []


_NOBODY = 65534
_FOREIGN_LISTENER = """
import os, socket, sys
os.setgid({uid}); os.setuid({uid})
listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
listener.bind(sys.argv[1]); listener.listen(4)
print("ready", flush=True)
received = b""
listener.settimeout(30)
try:
    connection, _ = listener.accept()
    connection.settimeout(5)
    received = connection.recv(65536)
except OSError:
    pass
print("received", len(received), flush=True)
"""


@linux_only
@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to run a listener as another user")
def test_a_listener_running_as_another_user_is_refused() -> None:
    """The socket file is ours (chowned after bind), the process behind it is not: on Linux the
    peer's uid (``SO_PEERCRED``) is checked after connecting, and nothing is sent."""
    with tempfile.TemporaryDirectory(prefix="pc-peer-") as shared:  # pytest's tmp is 0700
        os.chmod(shared, 0o777)
        _check_foreign_listener(Path(shared) / "pc.sock")


def _check_foreign_listener(path: Path) -> None:
    listener = subprocess.Popen(
        [sys.executable, "-I", "-c", _FOREIGN_LISTENER.format(uid=_NOBODY), str(path)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert listener.stdout is not None
        assert listener.stdout.readline().strip() == "ready"
        os.chown(path, 0, 0)  # now lstat says: a socket owned by us
        assert _post(UnixEndpoint(str(path))) == HttpFailure("untrusted_socket")
        out, _ = listener.communicate(timeout=60)
    finally:
        listener.kill()
        listener.wait()
    assert out.strip() == "received 0"  # connected, refused, closed: not a byte of the token


@linux_only
def test_a_socket_path_longer_than_sun_path_is_reached(tmp_path: Path) -> None:
    """Deep data dirs (pytest's tmp paths, long home directories) still work on Linux: the
    directory is opened and ``/proc/self/fd/<fd>/powercontext.sock`` connected to."""
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    deep.mkdir(parents=True)
    path = str(deep / "powercontext.sock")
    assert len(os.fsencode(path)) > SUN_PATH_MAX
    with running_stub(path) as stub:
        stub.replies[PREPARE] = Reply(200, prepared_body("deep"))
        assert _post(UnixEndpoint(path)) == HttpResponse(200, prepared_body("deep"))
        (request,) = stub.requests
        assert request.headers["Authorization"] == "Bearer SECRET"
        # The ownership check applies to long paths too.
        link = deep / "link.sock"
        link.symlink_to(path)
        assert _post(UnixEndpoint(str(link))) == HttpFailure("untrusted_socket")
    assert len(stub.requests) == 1
    fds = set(os.listdir("/proc/self/fd"))
    _post(UnixEndpoint(path))  # gone now: unavailable, and the directory fd is closed again
    assert set(os.listdir("/proc/self/fd")) <= fds | {str(max(map(int, fds)) + 1)}
