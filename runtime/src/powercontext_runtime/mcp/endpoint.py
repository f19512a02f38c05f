"""The ASGI app at ``/mcp``: it loads the MCP SDK and starts its session manager on the
first MCP request, not when the daemon starts.

Why lazily: the SDK and what it pulls in (its client, sse-starlette, cryptography, …) are
≈ 23 MiB of resident memory and ≈ 0.35 s of start-up, against a 300 MiB budget for the whole
daemon with the embedding model loaded, and most daemons only ever serve hooks over plain
HTTP. The first MCP request pays the import once, off the event loop (other requests go on
meanwhile); every later one goes straight to the running manager.

The manager runs in a task of the host app's lifespan, so it stops with the app; a fresh one
is made for each lifespan (the SDK's ``run()`` may be entered once per instance), which keeps
an app usable across repeated lifespans (test clients). A request outside a lifespan, or one
that finds the SDK unable to start, gets a clean 503 envelope instead of a 500.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, MutableMapping
from contextlib import asynccontextmanager
from types import ModuleType
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc
from starlette.responses import JSONResponse

from ..composition import Runtime

if TYPE_CHECKING:
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
    from mcp.server.transport_security import TransportSecuritySettings

__all__ = ["McpEndpoint"]

_log = logging.getLogger("powercontext.mcp")

Scope = MutableMapping[str, Any]
Receive = Any
Send = Any


class McpEndpoint:
    """The ``/mcp`` route plus the lifespan its session manager runs in."""

    def __init__(
        self,
        runtime: Runtime,
        *,
        max_body_bytes: int,
        security: Callable[[], TransportSecuritySettings],
    ) -> None:
        self._runtime = runtime
        self._max_body = max_body_bytes
        self._security = security  # called at start: building the settings needs the SDK
        self._group: anyio.abc.TaskGroup | None = None
        self._starting: anyio.Lock | None = None
        self._manager: StreamableHTTPSessionManager | None = None

    @property
    def started(self) -> bool:
        """Whether the SDK's session manager is running (it starts with the first request)."""
        return self._manager is not None

    @asynccontextmanager
    async def lifespan(self, _app: object) -> AsyncIterator[None]:
        async with anyio.create_task_group() as group:
            self._group, self._starting = group, anyio.Lock()
            try:
                yield
            finally:
                self._group = self._starting = self._manager = None
                group.cancel_scope.cancel()  # stops the manager, if it was started

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["method"] != "POST":
            # Stateless: there is no standalone SSE stream to GET and no session to DELETE.
            # The MCP spec answers both with 405; the SDK would instead hold a GET open forever.
            await _reply(
                scope,
                receive,
                send,
                405,
                "method_not_allowed",
                "method not allowed",
                headers={"Allow": "POST"},
            )
            return
        manager = self._manager or await self._start()
        if manager is None:
            await _reply(scope, receive, send, 503, "runtime_not_ready", "MCP is not running")
            return
        await manager.handle_request(scope, receive, send)

    async def _start(self) -> StreamableHTTPSessionManager | None:
        group, starting = self._group, self._starting
        if group is None or starting is None:
            return None  # outside the app's lifespan
        async with starting:  # concurrent first requests start one manager
            if self._manager is None:
                try:
                    await group.start(self._run)
                except Exception as exc:
                    # By type only, like every internal error (no message, no content).
                    _log.error("mcp_start_failed", extra={"error_type": type(exc).__name__})
                    return None
        return self._manager

    async def _run(self, *, task_status: anyio.abc.TaskStatus[None]) -> None:
        server = await anyio.to_thread.run_sync(_load_server)
        manager = server.session_manager(
            self._runtime, max_body_bytes=self._max_body, security=self._security()
        )
        async with manager.run():
            self._manager = manager
            task_status.started()
            await anyio.sleep_forever()


def _load_server() -> ModuleType:
    from . import server

    return server


async def _reply(
    scope: Scope,
    receive: Receive,
    send: Send,
    status: int,
    code: str,
    message: str,
    headers: dict[str, str] | None = None,
) -> None:
    body = {"error": {"code": code, "message": message, "details": None}}
    await JSONResponse(body, status_code=status, headers=headers)(scope, receive, send)
