"""Console sessions on a real daemon with several worker processes, over raw HTTP (no browser).

Each worker is its own process with its own app, so a session must hold in every one of them
(a row of the shared database), and logout — answered by one worker — or revoking its token
with the CLI — another process again — must end it at once in all of them. The session is a
credential sent in ``X-PowerContext-Session``: a cookie, which a browser would also send to
every other port of the machine, opens nothing (issue #30 #3), and a login from another
origin is refused (issue #30 #5).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator

import httpx
import pytest

from tests.e2e.helpers import LIST, assert_envelope, create_token, new_scope, run_cli
from tests.support.daemon import Daemon, free_port, start_daemon

pytestmark = pytest.mark.e2e

WORKERS = 2
REQUESTS = 24
HEADER = "X-PowerContext-Session"


@pytest.fixture(scope="module")
def workers_daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    home = tmp_path_factory.mktemp("console-workers") / "home"
    with start_daemon(home, extra_env={"POWERCONTEXT_WORKERS": str(WORKERS)}) as daemon:
        yield daemon


def _login(daemon: Daemon, token: str, origin: str | None = None) -> httpx.Response:
    headers = {"Connection": "close"} if origin is None else {"Origin": origin}
    return httpx.post(daemon.url + "/ui/login", json={"token": token}, headers=headers, timeout=30)


def _credential(daemon: Daemon, token: str) -> str:
    response = _login(daemon, token)
    assert response.status_code == 200, response.text
    assert "set-cookie" not in response.headers  # nothing a browser would keep for every port
    return str(response.json()["credential"])


def _list(daemon: Daemon, scope: str, headers: dict[str, str] | None = None) -> httpx.Response:
    # A fresh connection each time, so the requests are spread over the workers.
    return httpx.post(
        daemon.url + LIST,
        json={"scope_id": scope},
        headers={"Connection": "close", **(headers or {})},
        timeout=30,
    )


def _sessions(daemon: Daemon) -> list[tuple[str, str]]:
    rows = daemon.query("SELECT secret_hash, token_id FROM console_sessions")
    return [(row[0], row[1]) for row in rows]


def test_a_session_holds_in_every_worker_and_dies_with_its_token(workers_daemon: Daemon) -> None:
    scope = new_scope("console-workers")
    token = create_token(workers_daemon, "console-alice", "*", capabilities=("read", "review"))
    credential = _credential(workers_daemon, token)
    stored = (hashlib.sha256(credential.encode()).hexdigest(), token.split("_", 2)[1])
    assert stored in _sessions(workers_daemon)  # the hash, never the credential
    session = {HEADER: credential}
    statuses = [_list(workers_daemon, scope, headers=session).status_code for _ in range(REQUESTS)]
    assert statuses == [200] * REQUESTS
    revoked = run_cli(workers_daemon, "token", "revoke", "console-alice")
    assert revoked.returncode == 0, revoked.stderr
    for _ in range(REQUESTS // 2):
        assert_envelope(_list(workers_daemon, scope, headers=session), 401, "unauthorized")
    logged_in = httpx.get(workers_daemon.url + "/ui/session", headers=session, timeout=30)
    assert logged_in.json() == {"auth": "token", "logged_in": False}


def test_logout_ends_the_session_in_every_worker(workers_daemon: Daemon) -> None:
    scope = new_scope("console-logout")
    credential = _credential(workers_daemon, workers_daemon.token)
    session = {HEADER: credential}
    statuses = [_list(workers_daemon, scope, headers=session).status_code for _ in range(REQUESTS)]
    assert statuses == [200] * REQUESTS
    logout = httpx.post(workers_daemon.url + "/ui/logout", headers=session, timeout=30)
    assert logout.status_code == 204
    # Refused from the very next request on, whichever worker answers it.
    for _ in range(REQUESTS):
        answer = _list(workers_daemon, scope, headers=session)
        error = assert_envelope(answer, 401, "unauthorized")
        assert error["message"] == "the console session is invalid or has expired: log in again"
    digest = hashlib.sha256(credential.encode()).hexdigest()
    assert digest not in [row[0] for row in _sessions(workers_daemon)]


def test_a_cookie_gets_nothing_whatever_it_holds(workers_daemon: Daemon) -> None:
    """The old attack: a server of another local user on another port received the session
    cookie (cookies are not isolated by port) and used it here. No cookie is set any more,
    and a cookie holding even a live credential opens nothing."""
    scope = new_scope("console-cookie")
    credential = _credential(workers_daemon, workers_daemon.token)
    for name in ("powercontext_session", HEADER):
        cookie = {"Cookie": f"{name}={credential}"}
        refused = _list(workers_daemon, scope, headers=cookie)
        error = assert_envelope(refused, 401, "unauthorized")
        assert error["message"] == "a valid bearer token is required"
        page = httpx.get(workers_daemon.url + "/ui/session", headers=cookie, timeout=30)
        assert page.json() == {"auth": "token", "logged_in": False}
    assert _list(workers_daemon, scope, headers={HEADER: credential}).status_code == 200


def test_a_login_from_another_origin_is_refused(workers_daemon: Daemon) -> None:
    port = int(workers_daemon.url.rsplit(":", 1)[1])
    other = free_port()
    before = _sessions(workers_daemon)
    for origin in (
        "http://localhost:3000",
        f"http://127.0.0.1:{other}",
        f"http://localhost:{other}",
        f"http://localhost:{port}",  # the daemon's port, but not the host this request named
    ):
        refused = _login(workers_daemon, workers_daemon.token, origin)
        assert_envelope(refused, 403, "origin_not_allowed")
        assert "credential" not in refused.text and "set-cookie" not in refused.headers
    assert _sessions(workers_daemon) == before
    own = _login(workers_daemon, workers_daemon.token, f"http://127.0.0.1:{port}")
    assert own.status_code == 200, own.text
    credential = own.json()["credential"]
    assert _list(workers_daemon, new_scope("own"), headers={HEADER: credential}).status_code == 200


def test_the_daemon_log_names_console_paths_but_never_a_token_or_credential(
    workers_daemon: Daemon,
) -> None:
    credential = _credential(workers_daemon, workers_daemon.token)
    listed = _list(workers_daemon, new_scope("console-log"), headers={HEADER: credential})
    assert listed.status_code == 200
    httpx.get(workers_daemon.url + "/ui/app.js", timeout=30).raise_for_status()
    log = workers_daemon.log_text_with('"path":"/ui/login"', '"path":"/ui/app.js"')
    assert '"path":"/ui/login"' in log
    assert '"path":"/ui/app.js"' in log
    for secret in (workers_daemon.token, workers_daemon.token.split("_", 2)[2], credential,
                   credential[4:]):  # fmt: skip
        assert secret not in log
