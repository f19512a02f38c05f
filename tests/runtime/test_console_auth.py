"""The web console's session mechanism (http/console_auth.py), one rule per test, in-process.

The session is a credential the login answers in its body and the page sends back in
``X-PowerContext-Session``; it is a row of ``console_sessions`` on both backends, so logout
ends it for every process sharing the database. No cookie is set or read. A real daemon and a
real browser are exercised by tests/e2e/test_console_sessions.py and
tests/e2e/test_console_browser.py.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

from powercontext_runtime.composition import Runtime
from powercontext_runtime.http import create_app
from powercontext_runtime.http.console_auth import (
    SESSION_LIFETIME,
    ConsoleSessions,
    session_credential,
)
from powercontext_runtime.settings import Settings
from powercontext_runtime.store.schema import console_sessions

SCOPE = "git:example.com/acme/console"
OTHER = "git:example.com/acme/elsewhere"
LIST = "/v1/memory/entries/list"
REMEMBER = "/v1/memory/remember"
APPROVE = "/v1/artifact-candidates/approve"
HEADER = "X-PowerContext-Session"
#: What the daemon answered before (a cookie named so); sending it must count for nothing.
OLD_COOKIE = "powercontext_session"


@pytest.fixture
def rt(sqlite_runtime: Runtime) -> Runtime:
    sqlite_runtime.ensure_local_token()
    return sqlite_runtime


@pytest.fixture
def both(runtime: Runtime) -> Runtime:
    """The runtime on each backend (SQLite and a real seekdb), with its local tokens."""
    runtime.ensure_local_token()
    return runtime


def client_of(runtime: Runtime) -> TestClient:
    """A client with no bearer token (what the console's page is), on the daemon's own
    origin ``http://localhost``."""
    return TestClient(create_app(runtime), base_url="http://localhost")


@pytest.fixture
def browser(rt: Runtime) -> Iterator[TestClient]:
    with client_of(rt) as client:
        yield client


def operator_token(rt: Runtime) -> str:
    return rt.settings.token_file.read_text().strip()


def login(client: TestClient, token: str) -> str:
    """Log in; the session's credential."""
    response = client.post("/ui/login", json={"token": token})
    assert response.status_code == 200, response.text
    return response.json()["credential"]


def with_session(credential: str) -> dict[str, str]:
    return {HEADER: credential}


def envelope(response, status: int, code: str) -> dict:  # type: ignore[no-untyped-def]
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"code", "message", "details"}
    assert body["error"]["code"] == code, body
    return body["error"]


def refused_session(response) -> None:  # type: ignore[no-untyped-def]
    """A 401 for the session header (so the header was seen, and refused)."""
    error = envelope(response, 401, "unauthorized")
    assert error["message"] == "the console session is invalid or has expired: log in again"


def stored_sessions(runtime: Runtime) -> list[tuple[str, ...]]:
    with runtime.db.read() as conn:
        return [tuple(row) for row in conn.execute(select(console_sessions)).all()]


def listed(client: TestClient, credential: str, scope: str = SCOPE):  # type: ignore[no-untyped-def]
    return client.post(LIST, json={"scope_id": scope}, headers=with_session(credential))


# -- login ----------------------------------------------------------------------------------


def test_login_answers_a_credential_in_its_body_and_sets_no_cookie(both: Runtime) -> None:
    token = operator_token(both)
    with client_of(both) as client:
        response = client.post("/ui/login", json={"token": token})
        assert response.status_code == 200, response.text
        assert "set-cookie" not in response.headers and not client.cookies
        assert response.headers["cache-control"] == "no-store"
        session = response.json()
        credential = session.pop("credential")
        assert re.fullmatch(r"pcs_[A-Za-z0-9_-]{43}", credential)
        assert token not in response.text and token.split("_", 2)[2] not in response.text
        assert session["logged_in"] is True and session["auth"] == "token"
        assert session["capabilities"] == ["read", "write", "propose", "review", "admin"]
        assert "csrf" not in session
        # /ui/session describes the session the header names, and nothing without it.
        assert client.get("/ui/session", headers=with_session(credential)).json() == session
        assert client.get("/ui/session").json() == {"auth": "token", "logged_in": False}
    # Stored: the credential's hash, the token id, the times; never the credential itself.
    [row] = stored_sessions(both)
    assert row[0] == hashlib.sha256(credential.encode()).hexdigest()
    assert row[1] == token.split("_", 2)[1]
    assert credential not in repr(row) and credential[4:] not in repr(row)
    assert row[3] - row[2] == SESSION_LIFETIME * 1000


@pytest.mark.parametrize(
    "token", ["", "pc_nope_nope", "not-a-token", "pc_" + "a" * 12 + "_" + "b" * 43]
)
def test_a_wrong_token_gets_no_session(browser: TestClient, rt: Runtime, token: str) -> None:
    response = browser.post("/ui/login", json={"token": token})
    assert response.status_code in (401, 422), response.text
    assert "credential" not in response.text and "set-cookie" not in response.headers
    assert stored_sessions(rt) == []


def test_a_wrong_token_is_401_and_a_malformed_login_is_422(
    browser: TestClient, rt: Runtime
) -> None:
    envelope(
        browser.post("/ui/login", json={"token": operator_token(rt) + "x"}), 401, "unauthorized"
    )
    for body in ({}, {"token": 7}, {"token": "t", "extra": 1}, ["t"]):
        envelope(browser.post("/ui/login", json=body), 422, "invalid_request")
    envelope(browser.post("/ui/login", content=b"token", headers={"content-type": "text/plain"}),
             422, "invalid_request")  # fmt: skip
    # A form cannot hand a header credential to the page: only JSON logs in.
    envelope(browser.post("/ui/login", data={"token": operator_token(rt)}), 422,
             "invalid_request")  # fmt: skip
    assert stored_sessions(rt) == []


def test_a_token_without_read_cannot_log_in(browser: TestClient, rt: Runtime) -> None:
    token = rt.tokens.create("propose-only", ["*"], ["propose"])
    error = envelope(browser.post("/ui/login", json={"token": token}), 403, "capability_forbidden")
    assert error["details"] == {"required": "read"}
    assert stored_sessions(rt) == []


@pytest.mark.parametrize(
    "origin",
    [
        "http://localhost:3000",  # another server of this machine
        "http://localhost:18251",
        "http://127.0.0.1:18251",
        "https://localhost:8443",
        "http://127.0.0.1",  # the daemon's own port, under another name: another origin
        "null",
        "http://evil.example",
    ],
)
def test_a_login_from_another_origin_is_refused(
    browser: TestClient, rt: Runtime, origin: str
) -> None:
    """Login CSRF: a page on another port must not sign the operator in (issue #30 #5)."""
    response = browser.post(
        "/ui/login", json={"token": operator_token(rt)}, headers={"origin": origin}
    )
    envelope(response, 403, "origin_not_allowed")
    assert "credential" not in response.text
    assert stored_sessions(rt) == []


@pytest.mark.parametrize("origin", ["http://localhost", "http://localhost:80", None])
def test_a_login_from_the_daemon_s_own_origin_or_without_one_works(
    browser: TestClient, rt: Runtime, origin: str | None
) -> None:
    """The client's Host is ``localhost`` (port 80): its own origin. No Origin at all is a
    client that is not a browser (browsers send one on every POST)."""
    headers = {} if origin is None else {"origin": origin}
    response = browser.post("/ui/login", json={"token": operator_token(rt)}, headers=headers)
    assert response.status_code == 200, response.text
    assert listed(browser, response.json()["credential"]).status_code == 200


def test_the_own_origin_is_the_request_s_host_and_port(rt: Runtime) -> None:
    with TestClient(create_app(rt), base_url="http://127.0.0.1:7411") as client:
        token = {"token": operator_token(rt)}
        ok = client.post("/ui/login", json=token, headers={"origin": "http://127.0.0.1:7411"})
        assert ok.status_code == 200, ok.text
        for origin in ("http://127.0.0.1:7412", "http://127.0.0.1", "http://localhost:7411"):
            envelope(client.post("/ui/login", json=token, headers={"origin": origin}), 403,
                     "origin_not_allowed")  # fmt: skip
        # A session request from another origin is refused too (before the session is read).
        credential = ok.json()["credential"]
        for origin, status in (("http://127.0.0.1:3000", 403), ("http://127.0.0.1:7411", 200)):
            answer = client.post(
                LIST, json={"scope_id": SCOPE}, headers={HEADER: credential, "origin": origin}
            )
            assert answer.status_code == status, answer.text


# -- the credential on the API --------------------------------------------------------------


def test_the_credential_authenticates_api_calls(both: Runtime) -> None:
    with client_of(both) as client:
        credential = login(client, operator_token(both))
        written = client.post(
            REMEMBER, json={"scope_id": SCOPE, "kind": "fact", "text": "written from the console"},
            headers=with_session(credential),
        )  # fmt: skip
        assert written.status_code == 200, written.text
        entries = listed(client, credential).json()["entries"]
        assert [e["text"] for e in entries] == ["written from the console"]


def test_a_cookie_alone_gets_nothing(browser: TestClient, rt: Runtime) -> None:
    """The old attack (issue #30 #3): cookies are not isolated by port, so a server on
    another local port received the session cookie. Whatever a cookie holds — even a valid
    credential — it opens nothing."""
    credential = login(browser, operator_token(rt))
    browser.headers["Cookie"] = f"{OLD_COOKIE}={credential}"
    body = {"scope_id": SCOPE, "kind": "fact", "text": "must not be written"}
    error = envelope(browser.post(REMEMBER, json=body), 401, "unauthorized")
    assert error["message"] == "a valid bearer token is required"
    envelope(browser.post(LIST, json={"scope_id": SCOPE}), 401, "unauthorized")
    assert browser.get("/ui/session").json() == {"auth": "token", "logged_in": False}
    assert listed(browser, credential).json()["entries"] == []  # nothing was written


def test_each_login_is_its_own_session(browser: TestClient, rt: Runtime) -> None:
    first = login(browser, operator_token(rt))
    second = login(browser, operator_token(rt))
    assert first != second and len(stored_sessions(rt)) == 2
    assert browser.post("/ui/logout", headers=with_session(first)).status_code == 204
    refused_session(listed(browser, first))
    assert listed(browser, second).status_code == 200


@pytest.mark.parametrize(
    "forged",
    [
        "pcs_" + "A" * 43,  # well-formed, never issued
        "garbage",
        "",
        "Bearer pcs_" + "A" * 43,
    ],
)
def test_a_credential_that_was_not_issued_is_refused(
    browser: TestClient, rt: Runtime, forged: str
) -> None:
    real = login(browser, operator_token(rt))
    refused_session(listed(browser, forged))
    refused_session(listed(browser, real[:-1] + ("A" if real[-1] != "A" else "B")))
    refused_session(listed(browser, real + "A"))
    assert browser.get("/ui/session", headers=with_session(forged)).json()["logged_in"] is False


def test_revoking_the_token_ends_its_sessions_at_once(both: Runtime) -> None:
    token = both.tokens.create("alice", ["*"], ["read", "review"])
    with client_of(both) as client:
        credential = login(client, token)
        assert listed(client, credential).status_code == 200
        both.tokens.revoke("alice")
        refused_session(listed(client, credential))
        assert client.get("/ui/session", headers=with_session(credential)).json() == {
            "auth": "token",
            "logged_in": False,
        }


def test_a_reissued_local_token_ends_the_sessions_of_the_old_one(
    browser: TestClient, rt: Runtime
) -> None:
    credential = login(browser, operator_token(rt))
    rt.settings.token_file.unlink()
    assert rt.ensure_local_token()  # a new operator token; the old one is revoked
    refused_session(listed(browser, credential))


def test_a_session_expires_after_its_lifetime(both: Runtime) -> None:
    now = [1_000_000.0]
    sessions = ConsoleSessions(both.db, both.tokens, clock=lambda: now[0])
    issued = sessions.login(operator_token(both))
    assert issued is not None
    credential, session = issued
    assert session.expires_at == 1_000_000 + SESSION_LIFETIME
    now[0] += SESSION_LIFETIME - 1
    assert sessions.resume(credential) is not None
    now[0] += 1
    assert sessions.resume(credential) is None
    # The next login deletes the expired row.
    assert sessions.login(operator_token(both)) is not None
    assert len(stored_sessions(both)) == 1


def test_an_expired_session_is_refused_over_http(browser: TestClient, rt: Runtime) -> None:
    past = ConsoleSessions(rt.db, rt.tokens, clock=lambda: 0.0)  # issued in 1970
    issued = past.login(operator_token(rt))
    assert issued is not None
    refused_session(listed(browser, issued[0]))


# -- logout ---------------------------------------------------------------------------------


def test_logout_ends_the_session_for_every_process_sharing_the_database(both: Runtime) -> None:
    """Issue #30 #3: logout must end the session server-side. A second runtime on the same
    database (its own engine and connections: another daemon) refuses it at once."""
    other = Runtime.open(both.settings)
    try:
        with client_of(both) as first, client_of(other) as second:
            credential = login(first, operator_token(both))
            assert listed(second, credential).status_code == 200  # valid on the other one
            logout = first.post("/ui/logout", headers=with_session(credential))
            assert logout.status_code == 204 and "set-cookie" not in logout.headers
            refused_session(listed(second, credential))
            refused_session(listed(first, credential))
            for client in (first, second):
                session = client.get("/ui/session", headers=with_session(credential)).json()
                assert session == {"auth": "token", "logged_in": False}
            assert stored_sessions(both) == []
            # Logging out again is not an error.
            assert first.post("/ui/logout", headers=with_session(credential)).status_code == 204
    finally:
        other.close()


# -- capabilities and scopes through the session --------------------------------------------


def test_a_session_can_do_what_its_token_can_and_no_more(browser: TestClient, rt: Runtime) -> None:
    token = rt.tokens.create("reader", [SCOPE], ["read"])
    headers = with_session(login(browser, token))
    assert browser.post(LIST, json={"scope_id": SCOPE}, headers=headers).status_code == 200
    envelope(browser.post(LIST, json={"scope_id": OTHER}, headers=headers), 403,
             "scope_forbidden")  # fmt: skip
    write = {"scope_id": SCOPE, "kind": "fact", "text": "x"}
    envelope(browser.post(REMEMBER, json=write, headers=headers), 403, "capability_forbidden")
    approve = {"scope_id": SCOPE, "candidate_id": "cand_x", "expected_version": 1}
    error = envelope(browser.post(APPROVE, json=approve, headers=headers), 403,
                     "capability_forbidden")  # fmt: skip
    assert error["details"] == {"required": "review"}


def test_a_review_action_needs_the_review_capability(browser: TestClient, rt: Runtime) -> None:
    approve = {"scope_id": SCOPE, "candidate_id": "cand_doesnotexist", "expected_version": 1}
    agent = rt.settings.agent_token_file.read_text().strip()  # read, write, propose
    headers = with_session(login(browser, agent))
    envelope(browser.post(APPROVE, json=approve, headers=headers), 403,
             "capability_forbidden")  # fmt: skip
    reviewer = rt.tokens.create("reviewer", ["*"], ["read", "review"])
    headers = with_session(login(browser, reviewer))
    # Past the capability check: the candidate does not exist.
    envelope(browser.post(APPROVE, json=approve, headers=headers), 404,
             "candidate_not_found")  # fmt: skip


# -- bearer tokens are unchanged ------------------------------------------------------------


def test_a_bearer_request_never_looks_at_the_session(browser: TestClient, rt: Runtime) -> None:
    credential = login(browser, operator_token(rt))
    # A valid session does not rescue a wrong bearer token; a bad one does not spoil a good one.
    bad = browser.post(LIST, json={"scope_id": SCOPE},
                       headers={"Authorization": "Bearer pc_x_y", HEADER: credential})  # fmt: skip
    envelope(bad, 401, "unauthorized")
    assert bad.headers["www-authenticate"] == "Bearer"
    good = browser.post(
        LIST,
        json={"scope_id": SCOPE},
        headers={"Authorization": f"Bearer {operator_token(rt)}", HEADER: "garbage"},
    )
    assert good.status_code == 200


def test_no_token_and_no_session_is_the_same_401_as_before(browser: TestClient) -> None:
    response = browser.post(LIST, json={"scope_id": SCOPE})
    error = envelope(response, 401, "unauthorized")
    assert error["message"] == "a valid bearer token is required"
    assert response.headers["www-authenticate"] == "Bearer"


def test_the_session_does_not_open_mcp(browser: TestClient, rt: Runtime) -> None:
    credential = login(browser, operator_token(rt))
    response = browser.post(
        "/mcp",
        json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        headers=with_session(credential),
    )
    envelope(response, 401, "unauthorized")


# -- Host and Origin ------------------------------------------------------------------------


def test_foreign_hosts_and_origins_are_refused_on_the_console(
    browser: TestClient, rt: Runtime
) -> None:
    token = operator_token(rt)
    for path in ("/ui/", "/ui/session", "/ui/app.js"):
        envelope(browser.get(path, headers={"host": "evil.example"}), 421, "host_not_allowed")
        envelope(browser.get(path, headers={"origin": "http://evil.example"}), 403,
                 "origin_not_allowed")  # fmt: skip
    login_body = {"token": token}
    envelope(browser.post("/ui/login", json=login_body, headers={"host": "evil.example:7411"}),
             421, "host_not_allowed")  # fmt: skip
    assert stored_sessions(rt) == []
    credential = login(browser, token)
    envelope(browser.post(LIST, json={"scope_id": SCOPE},
                          headers={HEADER: credential, "origin": "http://evil.example"}),
             403, "origin_not_allowed")  # fmt: skip
    same_origin = browser.post(
        LIST, json={"scope_id": SCOPE}, headers={HEADER: credential, "origin": "http://localhost"}
    )
    assert same_origin.status_code == 200


# -- pages, schema --------------------------------------------------------------------------


def test_the_pages_are_served_under_a_strict_policy(browser: TestClient) -> None:
    page = browser.get("/ui/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    csp = page.headers["content-security-policy"]
    assert "default-src 'none'" in csp and "script-src 'self'" in csp
    assert "unsafe-inline" not in csp and "frame-ancestors 'none'" in csp
    assert page.headers["x-frame-options"] == "DENY"
    assert page.headers["x-content-type-options"] == "nosniff"
    html = page.text
    scripts = re.findall(r"<script\b[^>]*>(.*?)</script>", html, re.S)
    assert scripts and all(body == "" for body in scripts)  # no inline script
    assert not re.search(r"\son\w+=", html) and "style=" not in html
    assert "http://" not in html and "https://" not in html  # nothing from the internet
    for asset, kind in (("app.js", "text/javascript"), ("i18n.js", "text/javascript"),
                        ("app.css", "text/css"), ("icon.svg", "image/svg+xml")):  # fmt: skip
        response = browser.get(f"/ui/{asset}")
        assert response.status_code == 200 and response.headers["content-type"].startswith(kind)
        # No URL but the SVG namespace name (an identifier, never fetched).
        urls = set(re.findall(r"https?://[^\s\"')]+", response.text))
        assert urls <= {"http://www.w3.org/2000/svg"}, urls
    redirect = browser.get("/ui", follow_redirects=False)
    assert redirect.status_code == 308 and redirect.headers["location"] == "/ui/"
    envelope(browser.get("/ui/nothing-here"), 404, "not_found")


def test_the_page_keeps_the_credential_in_session_storage_and_sends_no_cookie() -> None:
    """What the page does with the credential, read from the shipped script (the browser test
    checks it in a real Chromium)."""
    import powercontext_runtime.http as http_package

    source = (Path(http_package.__file__).parent / "console" / "app.js").read_text()
    assert 'SESSION_HEADER = "X-PowerContext-Session"' in source
    assert "sessionStorage" in source and 'credentials: "omit"' in source
    assert "localStorage.setItem(SESSION_KEY" not in source and "document.cookie" not in source


def test_the_console_routes_stay_out_of_the_openapi_document(browser: TestClient) -> None:
    paths = browser.get("/openapi.json").json()["paths"]
    assert not [path for path in paths if path.startswith("/ui")]


def test_a_database_from_before_sessions_gets_the_table(both: Runtime) -> None:
    """Upgrade: ``create_schema`` adds the table to a database an older release made."""
    both.db.write(lambda conn: conn.exec_driver_sql("DROP TABLE console_sessions"))
    with pytest.raises(Exception):  # noqa: B017  (gone: the driver's or a typed 503)
        stored_sessions(both)
    both.db.create_schema()
    with client_of(both) as client:
        assert listed(client, login(client, operator_token(both))).status_code == 200
    assert len(stored_sessions(both)) == 1


def test_credential_parsing() -> None:
    good = "pcs_" + "a" * 43
    assert session_credential(good) == good and session_credential(f" {good} ") == good
    for bad in (None, "", "pcs_", good + "a", good[:-1], "pc_" + "a" * 43, "pcs_" + "!" * 43):
        assert session_credential(bad) is None, bad


def test_with_auth_off_the_console_needs_no_login(tmp_path: Path) -> None:
    settings = Settings.load(env={"POWERCONTEXT_AUTH": "none"}, home=tmp_path / "home")
    runtime = Runtime.open(settings)
    try:
        with TestClient(create_app(runtime), base_url="http://localhost") as client:
            session = client.get("/ui/session").json()
            assert session["auth"] == "off" and session["logged_in"] is True
            login_answer = client.post("/ui/login", json={"token": "anything"})
            assert login_answer.status_code == 200 and "credential" not in login_answer.json()
            assert client.post(LIST, json={"scope_id": SCOPE}).status_code == 200
        assert stored_sessions(runtime) == []
    finally:
        runtime.close()
