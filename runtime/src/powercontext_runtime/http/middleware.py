"""Pure-ASGI request hygiene: request ids, the Host/Origin check, body size limit,
authentication, access log and request metrics, and the generic 500 for an exception nothing
else answered.

Routes and error handlers leave what the access log and the metrics may say about a request in
``scope["state"]`` under :data:`REPORT` (an error code, a pack's status, bytes, search mode and
empty reason): closed vocabularies and numbers only, never content.

Written as one raw ASGI middleware rather than Starlette's BaseHTTPMiddleware because it sits
on every request of the prompt-time hot path, and because it must answer 401/413 *before* the
body is parsed (a caller without a token learns nothing about body validation).
"""

from __future__ import annotations

import json
import logging
import os
import re
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import anyio

from ..errors import PowerContextError, UnauthorizedError
from ..metrics import Metrics
from ..services.auth import Authenticator, Principal
from .console_auth import SESSION_HEADER, ConsoleSessions, session_credential
from .hosts import HostPolicy

__all__ = ["REPORT", "RequestMiddleware", "report"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

_log = logging.getLogger("powercontext.http")
_REQUEST_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")
_PUBLIC_PATHS = frozenset({"/health", "/health/live", "/health/ready", "/openapi.json"})
#: ``scope["state"]`` key of the request's report (see :func:`report`).
REPORT = "powercontext_report"


def report(scope: MutableMapping[str, Any]) -> dict[str, Any]:
    """The request's report for the access log and the metrics: ``code`` (the error code of
    an envelope), ``pack_status``, ``pack_bytes``, ``search_mode``, ``empty_reason``,
    ``search_fallback``."""
    state: dict[str, Any] = scope.setdefault("state", {})
    found: dict[str, Any] = state.setdefault(REPORT, {})
    return found


class RequestMiddleware:
    def __init__(
        self,
        app: ASGIApp,
        *,
        authenticator: Authenticator,
        auth_enabled: bool,
        max_body_bytes: int,
        known_paths: frozenset[str],
        host_policy: HostPolicy,
        verify_on_loop: bool,
        operations: dict[str, str],
        metrics: Metrics,
        console: ConsoleSessions | None = None,
    ) -> None:
        """``verify_on_loop``: check tokens on the event loop (SQLite: a point read of a few
        microseconds, cheaper than the hop to a worker thread) instead of in the thread pool
        (OceanBase: a network round trip). ``operations``: the operation id of each route's
        path, so a caller without the capability an operation needs is refused before its
        body is read, like a caller without a token. ``console``: the web console's sessions
        (http/console_auth.py), honoured on ``/v1/…`` and ``/ui/…`` for a request without
        ``Authorization``."""
        self._app = app
        self._authenticator = authenticator
        self._auth_enabled = auth_enabled
        self._max_body = max_body_bytes
        self._known_paths = known_paths
        self._hosts = host_policy
        self._verify_on_loop = verify_on_loop
        self._operations = operations
        self._metrics = metrics
        self._console = console

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        started = time.perf_counter()
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        host_headers = sum(1 for k, _ in scope["headers"] if k.lower() == b"host")
        incoming = headers.get("x-request-id", "")
        # 128 random bits as 32 hex digits (what ``uuid4().hex`` gives, minus its object).
        request_id = incoming if _REQUEST_ID.match(incoming) else os.urandom(16).hex()
        status_holder = [500]
        answering = [False]

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                answering[0] = True
                status_holder[0] = message["status"]
                raw = [
                    (k, v) for k, v in message.get("headers", []) if k.lower() != b"x-request-id"
                ]
                raw.append((b"x-request-id", request_id.encode("ascii")))
                message["headers"] = raw
            await send(message)

        try:
            await self._handle(scope, receive, send_with_id, headers, host_headers)
        except Exception as exc:
            if answering[0]:  # too late for an answer: the server drops the connection
                raise
            # Starlette would answer this outside every middleware, so without the request
            # id (spec 03: every response carries one). Logged by type only: driver messages
            # can carry SQL and stored content.
            _log.error("internal_error", extra={"error_type": type(exc).__name__})
            await _reply(send_with_id, 500, "internal_error", "internal error", scope=scope)
        finally:
            path = scope["path"]
            seconds = time.perf_counter() - started
            said = report(scope)
            code = said.get("code", "")
            operation = self._operations.get(path) or _unnamed(path, self._known_paths)
            self._metrics.request(operation, status_holder[0], code, seconds)
            if "pack_status" in said:
                self._metrics.pack(
                    operation,
                    said["pack_status"],
                    said.get("search_mode", ""),
                    said.get("empty_reason", ""),
                    said.get("pack_bytes", 0),
                )
            if "search_fallback" in said:
                self._metrics.fallback(operation, said["search_fallback"])
            _log.info(
                "http_request",
                extra={
                    "method": scope["method"],
                    "path": path if path in self._known_paths else "<unmatched>",
                    "operation": operation,
                    "status": status_holder[0],
                    "duration_ms": round(seconds * 1000, 3),
                    "request_id": request_id,
                    **said,
                },
            )

    async def _handle(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        headers: dict[str, str],
        host_headers: int,
    ) -> None:
        path: str = scope["path"]
        # First, on every route: a request that does not name this daemon is a browser being
        # used against it (http/hosts.py), and learns nothing, not even whether auth is on.
        if host_headers != 1 or not self._hosts.allows_host(headers.get("host")):
            await _reply(
                send,
                421,
                "host_not_allowed",
                "the Host header does not name this server",
                scope=scope,
            )
            return
        if not self._hosts.allows_origin(headers.get("origin")):
            await _reply(
                send,
                403,
                "origin_not_allowed",
                "cross-origin requests are not allowed",
                scope=scope,
            )
            return
        console_page = path == "/ui" or path.startswith("/ui/")
        if (console_page or SESSION_HEADER in headers) and not self._hosts.same_origin(
            headers.get("origin"), headers.get("host")
        ):
            # The console is same-origin only: its login, and every request with a session,
            # from the daemon's own scheme, host and port (a page on another local port is
            # another origin; http/hosts.py).
            await _reply(
                send,
                403,
                "origin_not_allowed",
                "the web console answers only pages of its own origin",
                scope=scope,
            )
            return
        length = headers.get("content-length")
        if length is not None and (not length.isdigit() or int(length) > self._max_body):
            await _reply(
                send, 413, "payload_too_large", "the request body is too large", scope=scope
            )
            return
        if self._auth_enabled and path not in _PUBLIC_PATHS:
            try:
                if (
                    self._console is not None
                    and "authorization" not in headers
                    and (console_page or path.startswith("/v1/"))
                ):
                    principal = await self._console_principal(scope, headers, path)
                else:
                    principal = await self._authenticate(headers.get("authorization", ""))
            except PowerContextError as exc:  # the token store is unavailable (a typed 503),
                # or a console session refused (401)
                await _reply(
                    send, exc.status, exc.code, exc.message, details=exc.details, scope=scope
                )
                return
            if principal is None and not console_page:
                await _reply(
                    send,
                    401,
                    "unauthorized",
                    "a valid bearer token is required",
                    extra_headers=[(b"www-authenticate", b"Bearer")],
                    scope=scope,
                )
                return
            operation = self._operations.get(path)
            if operation is not None and principal is not None:
                try:
                    principal.authorize(operation, None)
                except PowerContextError as exc:
                    await _reply(
                        send, exc.status, exc.code, exc.message, details=exc.details, scope=scope
                    )
                    return
        else:
            principal = Principal.unrestricted()
        scope.setdefault("state", {})["principal"] = principal

        if length is None and scope["method"] in ("POST", "PUT", "PATCH"):
            # A chunked body has no declared length: buffer it up to the limit, then replay.
            body = await _read_bounded(receive, self._max_body)
            if body is _DISCONNECTED:  # the client left (or its body deadline passed)
                return
            if body is None:
                await _reply(
                    send, 413, "payload_too_large", "the request body is too large", scope=scope
                )
                return
            receive = _replay(body, receive)
        await self._app(scope, receive, send)

    async def _console_principal(
        self, scope: Scope, headers: dict[str, str], path: str
    ) -> Principal | None:
        """The principal of the console session a request without ``Authorization`` names in
        ``X-PowerContext-Session`` (http/console_auth.py), looked up like a bearer token
        (never cached); the session goes to ``scope["state"]`` for the console's routes. None
        without the header (a cookie is never looked at), and on the console's own pages with
        an invalid one (they show the login); 401 for an invalid one on ``/v1/…``."""
        assert self._console is not None
        raw = None if path == "/ui/login" else headers.get(SESSION_HEADER)
        if raw is None:
            return None
        credential = session_credential(raw)
        session = None
        if credential is not None:
            if self._verify_on_loop:
                session = self._console.resume(credential)
            else:
                session = await anyio.to_thread.run_sync(self._console.resume, credential)
        if session is None:
            if path.startswith("/v1/"):
                raise UnauthorizedError(
                    "the console session is invalid or has expired: log in again"
                )
            return None
        scope.setdefault("state", {})["console_session"] = session
        return session.principal

    async def _authenticate(self, header: str) -> Principal | None:
        """Every request's token is checked against the database, never a cache: a revoked
        token stops working on its next request, in every worker and on every daemon that
        shares the database."""
        scheme, _, token = header.partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            return None
        if self._verify_on_loop:
            return self._authenticator.principal_for(token)
        return await anyio.to_thread.run_sync(self._authenticator.principal_for, token)


def _unnamed(path: str, known: frozenset[str]) -> str:
    """The metrics' operation label of a path without an operation id."""
    if path == "/mcp":
        return "mcp"
    if path == "/ui" or path.startswith("/ui/"):
        return "console"
    return "other" if path in known else "unmatched"


async def _reply(
    send: Send,
    status: int,
    code: str,
    message: str,
    extra_headers: list[tuple[bytes, bytes]] | None = None,
    details: dict[str, Any] | None = None,
    *,
    scope: Scope,
) -> None:
    report(scope)["code"] = code
    body = json.dumps({"error": {"code": code, "message": message, "details": details}}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                *(extra_headers or []),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


_DISCONNECTED = b"<disconnected>"  # compared by identity: no body is this object


async def _read_bounded(receive: Receive, limit: int) -> bytes | None:
    """The whole body; None over ``limit``; ``_DISCONNECTED`` when the client went away
    before sending it all (a partial body is never handed to a route)."""
    body = bytearray()
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return _DISCONNECTED
        body += message.get("body", b"")
        if len(body) > limit:
            return None
        if not message.get("more_body", False):
            return bytes(body)


def _replay(body: bytes, receive: Receive) -> Receive:
    sent = False

    async def replayed() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replayed
