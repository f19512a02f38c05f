"""The web console under ``/ui`` (docs/ui.md): its static page, login, session and logout.

The page is plain HTML, CSS and JavaScript shipped inside the package (``http/console/``): no
CDN, no build step, nothing fetched from anywhere but this daemon, under a Content-Security-
Policy that allows no inline script and no other origin. Everything it shows comes from the
ordinary ``/v1/…`` operations, which accept the console's session header with the same
capability and scope checks as the session's token (http/console_auth.py, middleware.py).
None of these routes is in the OpenAPI document: they are the console's, not the API's.
"""

from __future__ import annotations

import functools
import json
from importlib import resources
from typing import Any

import anyio
from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, RedirectResponse, Response

from ..errors import PowerContextError
from ..services.auth import ALL_CAPABILITIES
from .console_auth import SESSION_HEADER, ConsoleSession, ConsoleSessions, session_credential
from .errors import envelope_response

__all__ = ["CONSOLE_PATHS", "SECURITY_HEADERS", "console_router"]

#: Every response of the console carries these (the page's own, and its JSON answers).
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
        "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Resource-Policy": "same-origin",
}

_ASSETS = {
    "index.html": "text/html; charset=utf-8",
    "app.js": "text/javascript; charset=utf-8",
    "i18n.js": "text/javascript; charset=utf-8",
    "app.css": "text/css; charset=utf-8",
    "icon.svg": "image/svg+xml",
}
#: The paths this router serves (the access log names them; others are "<unmatched>").
CONSOLE_PATHS = (
    "/ui",
    "/ui/",
    "/ui/login",
    "/ui/logout",
    "/ui/session",
    *(f"/ui/{name}" for name in _ASSETS if name != "index.html"),
)

console_router = APIRouter(include_in_schema=False)


@functools.cache
def _asset(name: str) -> bytes:
    return (resources.files("powercontext_runtime.http") / "console" / name).read_bytes()


def _secured(response: Response) -> Response:
    response.headers.update(SECURITY_HEADERS)
    return response


def _error(
    request: Request, status: int, code: str, message: str, details: dict[str, Any] | None = None
) -> Response:
    return _secured(envelope_response(request, status, code, message, details))


def _sessions(request: Request) -> ConsoleSessions | None:
    return request.app.state.console_sessions


def _describe(session: ConsoleSession | None) -> dict[str, Any]:
    """What the page may know of its session (never the token or the credential)."""
    if session is None:  # auth is off (POWERCONTEXT_AUTH=none): loopback only, no login
        return {
            "auth": "off",
            "logged_in": True,
            "token_name": None,
            "capabilities": list(ALL_CAPABILITIES),
            "scopes": ["*"],
            "expires_at": None,
        }
    principal = session.principal
    return {
        "auth": "token",
        "logged_in": True,
        "token_name": session.token_name,
        "capabilities": [c for c in ALL_CAPABILITIES if c in principal.capabilities],
        "scopes": list(principal.scopes),
        "expires_at": session.expires_at,
    }


def _page(name: str) -> Response:
    return _secured(Response(_asset(name), media_type=_ASSETS[name]))


@console_router.get("/ui")
def console_root() -> Response:
    return _secured(RedirectResponse("/ui/", status_code=308))


@console_router.get("/ui/")
def console_page() -> Response:
    return _page("index.html")


for _name in _ASSETS:
    if _name != "index.html":
        console_router.add_api_route(
            f"/ui/{_name}", lambda name=_name: _page(name), methods=["GET"]
        )


@console_router.get("/ui/session")
def console_session(request: Request) -> Response:
    """The session the request's ``X-PowerContext-Session`` names (the page asks on load)."""
    if _sessions(request) is None:
        return _secured(JSONResponse(_describe(None)))
    session = getattr(request.state, "console_session", None)
    if session is None:  # a 200, so that the login page loads without a console error
        return _secured(JSONResponse({"auth": "token", "logged_in": False}))
    return _secured(JSONResponse(_describe(session)))


@console_router.post("/ui/login")
async def console_login(request: Request) -> Response:
    """``{"token": "pc_…"}`` as JSON; answers the session and its ``credential``, which the
    page sends back in ``X-PowerContext-Session`` (no cookie). The middleware has already
    refused an ``Origin`` other than the daemon's own."""
    sessions = _sessions(request)
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    token = _token_from(kind, await request.body())
    if token is None:
        return _error(request, 422, "invalid_request", 'send {"token": "…"} as JSON')
    if sessions is None:
        return _secured(JSONResponse(_describe(None)))
    try:
        issued = await anyio.to_thread.run_sync(sessions.login, token)  # a database write
    except PowerContextError as exc:  # no read capability (403); storage unavailable (503)
        return _error(request, exc.status, exc.code, exc.message, exc.details)
    if issued is None:
        return _error(request, 401, "unauthorized", "this token is not valid (or was revoked)")
    credential, session = issued
    return _secured(JSONResponse({**_describe(session), "credential": credential}))


def _token_from(kind: str, raw: bytes) -> str | None:
    if kind != "application/json":
        return None
    try:
        body = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return None
    if not isinstance(body, dict) or set(body) != {"token"}:
        return None
    token = body["token"]
    if not isinstance(token, str) or not 0 < len(token.strip()) <= 512:
        return None
    return token.strip()


@console_router.post("/ui/logout")
def console_logout(request: Request) -> Response:
    """Ends the session the request names, server-side: its credential is refused from now
    on by every worker and every daemon sharing the database. 204 also when it had already
    ended (logging out twice is not an error)."""
    sessions = _sessions(request)
    credential = session_credential(request.headers.get(SESSION_HEADER))
    if sessions is not None and credential is not None:
        sessions.logout(credential)
    return _secured(Response(status_code=204))
