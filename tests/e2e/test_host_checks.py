"""DNS rebinding and cross-site requests (issue 15 #3) against a real daemon with auth off.

With ``POWERCONTEXT_AUTH=none`` a web page could, before the fix, read and poison every scope:
by rebinding a name it controls to 127.0.0.1 (``Host`` then names the page's domain) or by a
cross-site POST (``Origin`` names the page). Every route, health and /mcp included, must
refuse both, and nothing may be written.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.e2e.helpers import (
    CHANGES,
    REMEMBER,
    assert_envelope,
    new_scope,
    served_operations,
    valid_bodies,
)
from tests.support.daemon import Daemon, start_daemon

pytestmark = pytest.mark.e2e

FOREIGN_HOSTS = ["evil.example", "evil.example:7411", "localhost.evil.example", "127.0.0.1.nip.io",
                 "localhost.", "", "[::1", "localhost:x"]  # fmt: skip
FOREIGN_ORIGINS = ["http://evil.example", "null", "http://localhost.evil.example:7411",
                   "file://", "http://127.0.0.1:7411/path"]  # fmt: skip


@pytest.fixture(scope="module")
def open_daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    home = tmp_path_factory.mktemp("hosts") / "home"
    env = {"POWERCONTEXT_AUTH": "none", "POWERCONTEXT_ALLOWED_HOSTS": "devbox.internal"}
    with start_daemon(home, extra_env=env) as running:
        yield running


def _routes(daemon: Daemon) -> list[tuple[str, str, bytes | None]]:
    with httpx.Client(base_url=daemon.url, timeout=30) as client:
        operations = served_operations(client)
    bodies = valid_bodies(new_scope("rebind"))
    routes: list[tuple[str, str, bytes | None]] = [
        ("POST", "/mcp", b"{}"),
        ("GET", "/openapi.json", None),
    ]
    for method, path, _ in operations:
        routes.append((method, path, None if method == "GET" else httpx.Request(
            "POST", "http://x", json=bodies[path]).content))  # fmt: skip
    return routes


@pytest.mark.parametrize(
    ("header", "value", "status", "code"),
    [("host", host, 421, "host_not_allowed") for host in FOREIGN_HOSTS]
    + [("origin", origin, 403, "origin_not_allowed") for origin in FOREIGN_ORIGINS],
)
def test_a_foreign_host_or_origin_is_refused_on_every_route(
    open_daemon: Daemon, header: str, value: str, status: int, code: str
) -> None:
    with httpx.Client(base_url=open_daemon.url, timeout=30) as client:
        for method, path, raw in _routes(open_daemon):
            response = client.request(
                method, path, content=raw,
                headers={header: value, "content-type": "application/json"},
            )  # fmt: skip
            assert_envelope(response, status, code)
            assert response.headers["x-request-id"]


def test_nothing_is_written_by_refused_requests(open_daemon: Daemon) -> None:
    scope = new_scope("poison")
    body = {"scope_id": scope, "kind": "fact", "text": "injected by a web page"}
    with httpx.Client(base_url=open_daemon.url, timeout=30) as client:
        assert client.post(REMEMBER, json=body, headers={"host": "evil.example"}).status_code == 421
        refused = client.post(REMEMBER, json=body, headers={"origin": "http://evil.example"})
        assert refused.status_code == 403
        assert client.post(CHANGES, json={"scope_id": scope}).json()["changes"] == []


@pytest.mark.parametrize(
    ("host", "origin"),
    [
        ("localhost:{port}", None),
        ("127.0.0.1:{port}", "http://127.0.0.1:{port}"),
        ("[::1]:{port}", "http://[::1]:{port}"),
        ("LOCALHOST", "http://localhost:{port}"),
        ("devbox.internal:{port}", "https://devbox.internal"),  # POWERCONTEXT_ALLOWED_HOSTS
    ],
)
def test_loopback_and_configured_names_are_served(
    open_daemon: Daemon, host: str, origin: str | None
) -> None:
    port = open_daemon.url.rsplit(":", 1)[1]
    headers = {"host": host.format(port=port)}
    if origin is not None:
        headers["origin"] = origin.format(port=port)
    with httpx.Client(base_url=open_daemon.url, timeout=30) as client:
        assert client.get("/health/ready", headers=headers).status_code == 200
        scope = new_scope("served")
        body = {"scope_id": scope, "kind": "fact", "text": "written locally"}
        assert client.post(REMEMBER, json=body, headers=headers).status_code == 200


def test_mcp_answers_a_loopback_host(open_daemon: Daemon) -> None:
    """The SDK's own rebinding check got the same allow-list, so it does not refuse ours."""
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    headers = {"accept": "application/json, text/event-stream",
               "mcp-protocol-version": "2025-06-18"}  # fmt: skip
    with httpx.Client(base_url=open_daemon.url, timeout=30) as client:
        for host in ("localhost", "127.0.0.1:1234", "devbox.internal"):
            response = client.post("/mcp", json=call, headers={**headers, "host": host})
            assert response.status_code == 200, (host, response.text)
            assert response.json()["result"]["tools"]


def test_a_request_without_host_is_refused(open_daemon: Daemon) -> None:
    import socket

    host, port = open_daemon.url.removeprefix("http://").rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(b"GET /health/live HTTP/1.0\r\n\r\n")
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 421 "), answer[:200]
