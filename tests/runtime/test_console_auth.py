"""The web console's session mechanism (http/console_auth.py), one rule per test, in-process.

The real daemon and a real browser are exercised by tests/e2e/test_console_browser.py; here
every rule of the cookie, the CSRF secret and the capability checks is pinned on the app.
"""

from __future__ import annotations

import re
import stat
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from powercontext_runtime.composition import Runtime
from powercontext_runtime.http import create_app
from powercontext_runtime.http.console_auth import (
    COOKIE_NAME,
    SESSION_LIFETIME,
    ConsoleSessions,
    cookie_value,
    load_or_create_key,
)
from powercontext_runtime.settings import Settings

SCOPE = "git:example.com/acme/console"
OTHER = "git:example.com/acme/elsewhere"
LIST = "/v1/memory/entries/list"
REMEMBER = "/v1/memory/remember"
APPROVE = "/v1/artifact-candidates/approve"
CSRF = "X-PowerContext-CSRF"


@pytest.fixture
def rt(sqlite_runtime: Runtime) -> Runtime:
    sqlite_runtime.ensure_local_token()
    return sqlite_runtime


@pytest.fixture
def browser(rt: Runtime) -> Iterator[TestClient]:
    """A cookie-keeping client with no bearer token: what the console's page is."""
    with TestClient(create_app(rt), base_url="http://localhost") as client:
        yield client


def operator_token(rt: Runtime) -> str:
    return rt.settings.token_file.read_text().strip()


def login(client: TestClient, token: str) -> dict:
    response = client.post("/ui/login", json={"token": token})
    assert response.status_code == 200, response.text
    return response.json()


def envelope(response, status: int, code: str) -> dict:  # type: ignore[no-untyped-def]
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"code", "message", "details"}
    assert body["error"]["code"] == code, body
    return body["error"]


# -- login ----------------------------------------------------------------------------------


def test_login_sets_a_strict_httponly_session_cookie(browser: TestClient, rt: Runtime) -> None:
    response = browser.post("/ui/login", json={"token": operator_token(rt)})
    assert response.status_code == 200, response.text
    header = response.headers["set-cookie"]
    attributes = [part.strip() for part in header.split(";")]
    assert attributes[0].startswith(f"{COOKIE_NAME}=v1.")
    assert {"HttpOnly", "SameSite=Strict", "Path=/", f"Max-Age={SESSION_LIFETIME}"} <= set(
        attributes
    )
    assert "Secure" not in attributes  # plain http on loopback: a browser would drop it
    token = operator_token(rt)
    assert token not in header and token.split("_", 2)[2] not in header  # no secret inside
    session = response.json()
    assert session["logged_in"] is True and session["auth"] == "token"
    assert session["capabilities"] == ["read", "write", "propose", "review", "admin"]
    assert re.fullmatch(r"[A-Za-z0-9_-]{43}", session["csrf"])
    assert browser.get("/ui/session").json() == session


def test_a_form_login_redirects_to_the_console(browser: TestClient, rt: Runtime) -> None:
    response = browser.post("/ui/login", data={"token": operator_token(rt)}, follow_redirects=False)
    assert response.status_code == 303 and response.headers["location"] == "/ui/"
    assert COOKIE_NAME in response.headers["set-cookie"]
    assert browser.get("/ui/session").json()["logged_in"] is True


@pytest.mark.parametrize(
    "token", ["", "pc_nope_nope", "not-a-token", "pc_" + "a" * 12 + "_" + "b" * 43]
)
def test_a_wrong_token_gets_no_session(browser: TestClient, token: str) -> None:
    response = browser.post("/ui/login", json={"token": token})
    assert response.status_code in (401, 422), response.text
    assert "set-cookie" not in response.headers
    assert browser.get("/ui/session").json() == {"auth": "token", "logged_in": False}


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


def test_a_token_without_read_cannot_log_in(browser: TestClient, rt: Runtime) -> None:
    token = rt.tokens.create("propose-only", ["*"], ["propose"])
    error = envelope(browser.post("/ui/login", json={"token": token}), 403, "capability_forbidden")
    assert error["details"] == {"required": "read"}
    assert "set-cookie" not in browser.post("/ui/login", json={"token": token}).headers


# -- the cookie on the API ------------------------------------------------------------------


def test_the_cookie_authenticates_api_calls_that_carry_the_csrf_secret(
    browser: TestClient, rt: Runtime
) -> None:
    csrf = login(browser, operator_token(rt))["csrf"]
    written = browser.post(
        REMEMBER, json={"scope_id": SCOPE, "kind": "fact", "text": "written from the console"},
        headers={CSRF: csrf},
    )  # fmt: skip
    assert written.status_code == 200, written.text
    listed = browser.post(LIST, json={"scope_id": SCOPE}, headers={CSRF: csrf})
    assert [e["text"] for e in listed.json()["entries"]] == ["written from the console"]


def test_a_cookie_request_without_the_csrf_secret_is_refused_unread(
    browser: TestClient, rt: Runtime
) -> None:
    csrf = login(browser, operator_token(rt))["csrf"]
    body = {"scope_id": SCOPE, "kind": "fact", "text": "must not be written"}
    envelope(browser.post(REMEMBER, json=body), 403, "csrf_failed")
    envelope(browser.post(REMEMBER, json=body, headers={CSRF: _flip_last(csrf)}), 403,
             "csrf_failed")  # fmt: skip
    envelope(browser.post(REMEMBER, json=body, headers={CSRF: ""}), 403, "csrf_failed")
    # Refused before the body is read: even an invalid body gets the CSRF answer.
    envelope(browser.post(REMEMBER, content=b"{", headers={"content-type": "application/json"}),
             403, "csrf_failed")  # fmt: skip
    envelope(browser.post("/ui/logout"), 403, "csrf_failed")
    listed = browser.post(LIST, json={"scope_id": SCOPE}, headers={CSRF: csrf})
    assert listed.json()["entries"] == []


def test_the_csrf_secret_of_another_session_does_not_fit(browser: TestClient, rt: Runtime) -> None:
    first = login(browser, operator_token(rt))["csrf"]
    second = login(browser, operator_token(rt))["csrf"]  # a new session, a new secret
    assert first != second
    envelope(browser.post(LIST, json={"scope_id": SCOPE}, headers={CSRF: first}), 403,
             "csrf_failed")  # fmt: skip
    assert browser.post(LIST, json={"scope_id": SCOPE}, headers={CSRF: second}).status_code == 200


def test_revoking_the_token_ends_its_sessions_at_once(browser: TestClient, rt: Runtime) -> None:
    token = rt.tokens.create("alice", ["*"], ["read", "review"])
    csrf = login(browser, token)["csrf"]
    assert browser.post(LIST, json={"scope_id": SCOPE}, headers={CSRF: csrf}).status_code == 200
    rt.tokens.revoke("alice")
    refused_session(browser.post(LIST, json={"scope_id": SCOPE}, headers={CSRF: csrf}))
    assert browser.get("/ui/session").json()["logged_in"] is False


def test_a_reissued_local_token_ends_the_sessions_of_the_old_one(
    browser: TestClient, rt: Runtime
) -> None:
    csrf = login(browser, operator_token(rt))["csrf"]
    rt.settings.token_file.unlink()
    assert rt.ensure_local_token()  # a new operator token; the old one is revoked
    refused_session(browser.post(LIST, json={"scope_id": SCOPE}, headers={CSRF: csrf}))


def _cookie(client: TestClient) -> str:
    value = client.cookies.get(COOKIE_NAME)
    assert value
    return value


def _with_cookie(client: TestClient, value: str) -> None:
    """From now on ``client`` sends exactly this session cookie (its jar is emptied)."""
    client.cookies.clear()
    client.headers["Cookie"] = f"{COOKIE_NAME}={value}"


def refused_session(response) -> None:  # type: ignore[no-untyped-def]
    """A 401 for the cookie (so the cookie was seen, and refused)."""
    error = envelope(response, 401, "unauthorized")
    assert error["message"] == "the console session is invalid or has expired: log in again"


def test_an_expired_cookie_is_refused(browser: TestClient, rt: Runtime) -> None:
    key = load_or_create_key(rt.settings.token_file.parent)
    past = ConsoleSessions(rt.tokens, key, clock=lambda: time.time() - SESSION_LIFETIME - 1)
    issued = past.login(operator_token(rt))
    assert issued is not None
    value, session = issued
    _with_cookie(browser, value)
    refused_session(browser.post(LIST, json={"scope_id": SCOPE}, headers={CSRF: session.csrf}))
    assert browser.get("/ui/session").json()["logged_in"] is False


def test_a_session_expires_after_its_lifetime(rt: Runtime) -> None:
    now = [1_000_000.0]
    sessions = ConsoleSessions(
        rt.tokens, load_or_create_key(rt.settings.token_file.parent), clock=lambda: now[0]
    )
    issued = sessions.login(operator_token(rt))
    assert issued is not None
    now[0] += SESSION_LIFETIME - 1
    assert sessions.resume(issued[0]) is not None
    now[0] += 1
    assert sessions.resume(issued[0]) is None


def _flip_last(text: str) -> str:
    """``text`` with its last character changed (always changed: a fixed replacement letter
    equals the original one time in 64)."""
    return text[:-1] + ("A" if text[-1] != "A" else "B")


def _tampered(value: str) -> list[str]:
    version, token_id, expires, nonce, mac = value.split(".")
    return [
        ".".join([version, token_id, str(int(expires) + 3600), nonce, mac]),  # a longer life
        ".".join([version, token_id, expires, _flip_last(nonce), mac]),
        ".".join([version, token_id, expires, nonce, _flip_last(mac)]),
        ".".join([version, "0" * len(token_id), expires, nonce, mac]),  # another token
        ".".join(["v2", token_id, expires, nonce, mac]),
        value + ".",
        value[:-1],
        "",
        "garbage",
    ]


def test_a_tampered_cookie_is_refused(browser: TestClient, rt: Runtime) -> None:
    csrf = login(browser, operator_token(rt))["csrf"]
    for forged in _tampered(_cookie(browser)):
        _with_cookie(browser, forged)
        response = browser.post(LIST, json={"scope_id": SCOPE}, headers={CSRF: csrf})
        if forged:
            refused_session(response)
        else:
            envelope(response, 401, "unauthorized")
        assert browser.get("/ui/session").json()["logged_in"] is False, forged


def test_a_cookie_signed_with_another_key_is_refused(browser: TestClient, rt: Runtime) -> None:
    other = ConsoleSessions(rt.tokens, b"k" * 32).login(operator_token(rt))
    assert other is not None
    _with_cookie(browser, other[0])
    refused_session(browser.post(LIST, json={"scope_id": SCOPE}, headers={CSRF: other[1].csrf}))


# -- capabilities and scopes through the cookie ---------------------------------------------


def test_a_session_can_do_what_its_token_can_and_no_more(browser: TestClient, rt: Runtime) -> None:
    token = rt.tokens.create("reader", [SCOPE], ["read"])
    csrf = login(browser, token)["csrf"]
    headers = {CSRF: csrf}
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
    csrf = login(browser, agent)["csrf"]
    envelope(browser.post(APPROVE, json=approve, headers={CSRF: csrf}), 403,
             "capability_forbidden")  # fmt: skip
    reviewer = rt.tokens.create("reviewer", ["*"], ["read", "review"])
    csrf = login(browser, reviewer)["csrf"]
    # Past the capability check: the candidate does not exist.
    envelope(browser.post(APPROVE, json=approve, headers={CSRF: csrf}), 404,
             "candidate_not_found")  # fmt: skip


# -- bearer tokens are unchanged ------------------------------------------------------------


def test_a_bearer_request_never_looks_at_the_cookie(browser: TestClient, rt: Runtime) -> None:
    login(browser, operator_token(rt))
    # A valid cookie does not rescue a wrong bearer token, and needs no CSRF with a good one.
    bad = browser.post(LIST, json={"scope_id": SCOPE}, headers={"Authorization": "Bearer pc_x_y"})
    envelope(bad, 401, "unauthorized")
    assert bad.headers["www-authenticate"] == "Bearer"
    good = browser.post(
        LIST, json={"scope_id": SCOPE}, headers={"Authorization": f"Bearer {operator_token(rt)}"}
    )
    assert good.status_code == 200
    _with_cookie(browser, "garbage")
    assert (
        browser.post(
            LIST,
            json={"scope_id": SCOPE},
            headers={"Authorization": f"Bearer {operator_token(rt)}"},
        ).status_code
        == 200
    )


def test_no_token_and_no_cookie_is_the_same_401_as_before(browser: TestClient) -> None:
    response = browser.post(LIST, json={"scope_id": SCOPE})
    error = envelope(response, 401, "unauthorized")
    assert error["message"] == "a valid bearer token is required"
    assert response.headers["www-authenticate"] == "Bearer"


def test_the_cookie_does_not_open_mcp(browser: TestClient, rt: Runtime) -> None:
    csrf = login(browser, operator_token(rt))["csrf"]
    response = browser.post(
        "/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, headers={CSRF: csrf}
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
    envelope(browser.post("/ui/login", json=login_body, headers={"origin": "http://evil.example"}),
             403, "origin_not_allowed")  # fmt: skip
    envelope(browser.post("/ui/login", json=login_body, headers={"host": "evil.example:7411"}),
             421, "host_not_allowed")  # fmt: skip
    assert browser.get("/ui/session").json()["logged_in"] is False
    csrf = login(browser, token)["csrf"]
    envelope(browser.post(LIST, json={"scope_id": SCOPE},
                          headers={CSRF: csrf, "origin": "http://evil.example"}),
             403, "origin_not_allowed")  # fmt: skip
    same_origin = browser.post(
        LIST, json={"scope_id": SCOPE}, headers={CSRF: csrf, "origin": "http://localhost"}
    )
    assert same_origin.status_code == 200


# -- logout, pages, key ---------------------------------------------------------------------


def test_logout_clears_the_cookie(browser: TestClient, rt: Runtime) -> None:
    csrf = login(browser, operator_token(rt))["csrf"]
    response = browser.post("/ui/logout", headers={CSRF: csrf})
    assert response.status_code == 204
    assert response.headers["set-cookie"].startswith(f"{COOKIE_NAME}=;")
    assert "Max-Age=0" in response.headers["set-cookie"]
    assert browser.get("/ui/session").json()["logged_in"] is False
    envelope(browser.post(LIST, json={"scope_id": SCOPE}), 401, "unauthorized")


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


def test_the_console_routes_stay_out_of_the_openapi_document(browser: TestClient) -> None:
    paths = browser.get("/openapi.json").json()["paths"]
    assert not [path for path in paths if path.startswith("/ui")]


def test_the_key_is_private_and_survives_a_restart(rt: Runtime, tmp_path: Path) -> None:
    auth = rt.settings.token_file.parent
    with TestClient(create_app(rt), base_url="http://localhost") as first:
        csrf = login(first, operator_token(rt))["csrf"]
        value = _cookie(first)
    key_file = auth / "console-key"
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    with TestClient(create_app(rt), base_url="http://localhost") as second:  # "restarted"
        _with_cookie(second, value)
        assert second.post(LIST, json={"scope_id": SCOPE}, headers={CSRF: csrf}).status_code == 200
    assert load_or_create_key(auth) == load_or_create_key(auth)


def test_cookie_parsing() -> None:
    assert cookie_value(None) is None and cookie_value("") is None
    assert cookie_value(f"a=1; {COOKIE_NAME}=v1.x; b=2") == "v1.x"
    assert cookie_value(f"{COOKIE_NAME}x=1") is None


def test_with_auth_off_the_console_needs_no_login(tmp_path: Path) -> None:
    settings = Settings.load(env={"POWERCONTEXT_AUTH": "none"}, home=tmp_path / "home")
    runtime = Runtime.open(settings)
    try:
        with TestClient(create_app(runtime), base_url="http://localhost") as client:
            session = client.get("/ui/session").json()
            assert session["auth"] == "off" and session["logged_in"] is True
            assert session["csrf"] is None
            login_answer = client.post("/ui/login", json={"token": "anything"})
            assert login_answer.status_code == 200 and "set-cookie" not in login_answer.headers
            assert client.post(LIST, json={"scope_id": SCOPE}).status_code == 200
        assert not (tmp_path / "home" / "auth" / "console-key").exists()
    finally:
        runtime.close()


def test_an_unreadable_key_file_falls_back_to_a_key_of_the_process(
    rt: Runtime, caplog: pytest.LogCaptureFixture
) -> None:
    key_file = rt.settings.token_file.parent / "console-key"
    key_file.write_text("not hex\n")
    with caplog.at_level("WARNING", logger="powercontext.console"):
        app = create_app(rt)
    assert [r.getMessage() for r in caplog.records] == ["console_key_unavailable"]
    with TestClient(app, base_url="http://localhost") as client:
        csrf = login(client, operator_token(rt))["csrf"]
        assert client.post(LIST, json={"scope_id": SCOPE}, headers={CSRF: csrf}).status_code == 200
