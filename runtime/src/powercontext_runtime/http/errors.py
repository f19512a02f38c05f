"""Every failure leaves as the error envelope; nothing else ever reaches a client.

Validation errors keep only location, message and type of the first few errors, shortened
(pydantic would otherwise echo the offending input, which may be stored content, and a body of
many bad keys would get a many times larger answer). Unexpected exceptions are answered by
``RequestMiddleware`` (a generic 500, logged by type only) so that they keep their request id.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from ..errors import PowerContextError, validation_error_items
from .middleware import report

__all__ = ["envelope_response", "install_error_handlers"]

_HTTP_CODES = {
    401: "unauthorized",
    403: "scope_forbidden",
    404: "not_found",
    405: "method_not_allowed",
    413: "payload_too_large",
    415: "unsupported_media_type",
}


def envelope_response(
    request: Request,
    status: int,
    code: str,
    message: str,
    details: dict[str, Any] | None = None,
    headers: dict[str, str] | None = None,
) -> JSONResponse:
    """The envelope; its code also goes to the request's access-log line and metrics."""
    report(request.scope)["code"] = code
    return JSONResponse(
        {"error": {"code": code, "message": message, "details": details}},
        status_code=status,
        headers=headers,
    )


def _validation_errors(exc: RequestValidationError) -> list[dict[str, Any]]:
    errors = validation_error_items(exc.errors())
    for error in errors:
        if error["type"] == "json_invalid":
            error["msg"] = "the body is not valid JSON"
    return errors


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(PowerContextError)
    async def _typed(request: Request, exc: PowerContextError) -> JSONResponse:
        headers = {"WWW-Authenticate": "Bearer"} if exc.status == 401 else None
        return envelope_response(request, exc.status, exc.code, exc.message, exc.details, headers)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        return envelope_response(
            request,
            422,
            "invalid_request",
            "the request is invalid",
            {"errors": _validation_errors(exc)},
        )

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        if exc.status_code == 400:
            # FastAPI answers 400 for bodies it cannot decode (e.g. invalid UTF-8).
            return envelope_response(
                request, 422, "invalid_request", "the body could not be decoded"
            )
        code = _HTTP_CODES.get(exc.status_code, "invalid_request")
        message = {404: "no such endpoint", 405: "method not allowed"}.get(
            exc.status_code, "the request was rejected"
        )
        # Starlette's own headers stay: a 405 must carry ``Allow`` (RFC 9110 § 15.5.6).
        return envelope_response(request, exc.status_code, code, message, headers=exc.headers)
