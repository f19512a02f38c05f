"""Builds the FastAPI application around an already-opened Runtime."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from fastapi.routing import APIRoute

from .. import __version__
from ..composition import Runtime
from ..mcp import McpEndpoint
from ..metrics import Metrics
from .bootstrap_routes import bootstrap_router
from .console_auth import ConsoleSessions
from .console_routes import CONSOLE_PATHS, console_router
from .errors import install_error_handlers
from .hosts import HostPolicy
from .middleware import RequestMiddleware
from .review_routes import review_router
from .routes import router
from .task_result_routes import task_result_router

__all__ = ["create_app"]

_DESCRIPTION = (
    "Durable, cited, explicitly untrusted project memory for coding agents. Every operation "
    "except health and capabilities is `POST /v1/<area>/<verb>` with a JSON body carrying "
    '`scope_id`; errors always use the envelope `{"error": {code, message, details}}`.'
)


def create_app(runtime: Runtime) -> FastAPI:
    # MCP (spec 03 § MCP): the SDK's session manager runs in the app lifespan, started by the
    # first MCP request (mcp/endpoint.py).
    settings = runtime.settings
    hosts = HostPolicy(settings.host, settings.allowed_hosts)
    mcp = McpEndpoint(runtime, max_body_bytes=settings.max_body_bytes, security=hosts.mcp_settings)
    app = FastAPI(
        title="PowerContext Runtime",
        version=__version__,
        description=_DESCRIPTION,
        docs_url=None,
        redoc_url=None,
        lifespan=mcp.lifespan,
    )
    app.state.runtime = runtime
    app.state.metrics = metrics = Metrics(runtime.backend, __version__)
    runtime.review.on_decision(metrics.decision)
    # The web console's sessions (http/console_auth.py); none while auth is off.
    console = ConsoleSessions(runtime.db, runtime.tokens) if settings.auth == "token" else None
    app.state.console_sessions = console
    app.openapi = lambda: _openapi_with_security(app)  # type: ignore[method-assign]
    install_error_handlers(app)
    app.include_router(router)
    app.include_router(review_router)
    app.include_router(task_result_router)
    app.include_router(bootstrap_router)
    app.include_router(console_router)
    # MCP at exactly /mcp as a raw ASGI route (a Mount would redirect /mcp to /mcp/), kept out
    # of the OpenAPI document; RequestMiddleware below authenticates it like every route.
    app.add_route("/mcp", mcp, include_in_schema=False)
    # FastAPI includes routers lazily, so ``app.routes`` alone does not list the router's
    # paths; without them every request would be logged as "<unmatched>".
    routes = (
        *app.routes,
        *router.routes,
        *review_router.routes,
        *task_result_router.routes,
        *bootstrap_router.routes,
    )
    known = frozenset(
        {*(path for route in routes if (path := getattr(route, "path", None))), *CONSOLE_PATHS}
    )
    operations = {
        route.path: route.operation_id
        for route in routes
        if isinstance(route, APIRoute) and route.operation_id
    }
    app.add_middleware(
        RequestMiddleware,
        authenticator=runtime.authenticator,
        auth_enabled=settings.auth == "token",
        max_body_bytes=settings.max_body_bytes,
        known_paths=known,
        host_policy=hosts,
        verify_on_loop=runtime.backend == "sqlite",
        operations=operations,
        metrics=metrics,
        console=console,
    )
    return app


def _openapi_with_security(app: FastAPI) -> dict[str, Any]:
    """Document the bearer auth the middleware enforces (health endpoints stay public)."""
    if app.openapi_schema is None:
        document = get_openapi(
            title=app.title, version=app.version, description=app.description, routes=app.routes
        )
        document.setdefault("components", {})["securitySchemes"] = {
            "bearer": {"type": "http", "scheme": "bearer"}
        }
        document["security"] = [{"bearer": []}]
        for path in ("/health/live", "/health/ready"):
            for operation in document["paths"].get(path, {}).values():
                operation["security"] = []
        app.openapi_schema = document
    return app.openapi_schema
