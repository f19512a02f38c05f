"""Console sessions on a real daemon with several worker processes (no browser needed).

Each worker builds its own app, so a session must hold in every one of them (one key in the
data dir, the token looked up in the shared database), and revoking its token with the CLI —
another process again — must end it at once in all of them.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.e2e.helpers import LIST, assert_envelope, create_token, new_scope, run_cli
from tests.support.daemon import Daemon, start_daemon

pytestmark = pytest.mark.e2e

WORKERS = 2
REQUESTS = 24
CSRF = "X-PowerContext-CSRF"


@pytest.fixture(scope="module")
def workers_daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    home = tmp_path_factory.mktemp("console-workers") / "home"
    with start_daemon(home, extra_env={"POWERCONTEXT_WORKERS": str(WORKERS)}) as daemon:
        yield daemon


def _login(daemon: Daemon, token: str) -> tuple[str, str]:
    response = httpx.post(daemon.url + "/ui/login", json={"token": token}, timeout=30)
    assert response.status_code == 200, response.text
    return response.cookies["powercontext_session"], response.json()["csrf"]


def _list(daemon: Daemon, cookie: str, csrf: str, scope: str) -> httpx.Response:
    # A fresh connection each time, so the requests are spread over the workers.
    return httpx.post(
        daemon.url + LIST,
        json={"scope_id": scope},
        cookies={"powercontext_session": cookie},
        headers={CSRF: csrf, "Connection": "close"},
        timeout=30,
    )


def test_a_session_holds_in_every_worker_and_dies_with_its_token(workers_daemon: Daemon) -> None:
    scope = new_scope("console-workers")
    token = create_token(workers_daemon, "console-alice", "*", capabilities=("read", "review"))
    cookie, csrf = _login(workers_daemon, token)
    statuses = [_list(workers_daemon, cookie, csrf, scope).status_code for _ in range(REQUESTS)]
    assert statuses == [200] * REQUESTS
    key = workers_daemon.home / "auth" / "console-key"
    assert key.stat().st_mode & 0o777 == 0o600
    revoked = run_cli(workers_daemon, "token", "revoke", "console-alice")
    assert revoked.returncode == 0, revoked.stderr
    for _ in range(REQUESTS // 2):
        assert_envelope(_list(workers_daemon, cookie, csrf, scope), 401, "unauthorized")
    logged_in = httpx.get(
        workers_daemon.url + "/ui/session", cookies={"powercontext_session": cookie}, timeout=30
    )
    assert logged_in.json() == {"auth": "token", "logged_in": False}


def test_the_daemon_log_names_console_paths_but_never_a_token_or_cookie(
    workers_daemon: Daemon,
) -> None:
    cookie, csrf = _login(workers_daemon, workers_daemon.token)
    assert _list(workers_daemon, cookie, csrf, new_scope("console-log")).status_code == 200
    httpx.get(workers_daemon.url + "/ui/app.js", timeout=30).raise_for_status()
    log = workers_daemon.log_text_with('"path":"/ui/login"', '"path":"/ui/app.js"')
    assert '"path":"/ui/login"' in log
    assert '"path":"/ui/app.js"' in log
    for secret in (workers_daemon.token, workers_daemon.token.split("_", 2)[2], cookie, csrf):
        assert secret not in log
