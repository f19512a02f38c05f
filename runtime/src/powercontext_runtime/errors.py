"""Typed errors shared by the server and the Python client.

Every failure a caller can act on has a stable snake_case ``code`` and an HTTP status. The
server turns these into the error envelope; the client turns an envelope back into the same
classes, so ``except ConflictError`` works identically in-process and over HTTP.

Messages are written for humans and must never contain stored content, queries, scope ids,
tokens or SQL: they are returned to callers and may end up in logs.
"""

from __future__ import annotations

from typing import Any, ClassVar

__all__ = [
    "ConflictError",
    "ForbiddenError",
    "InternalError",
    "InvalidRequestError",
    "NotFoundError",
    "PayloadTooLargeError",
    "PowerContextError",
    "UnauthorizedError",
    "UnavailableError",
    "error_class_for_status",
]


class PowerContextError(Exception):
    """Base of every typed error; ``status`` is the HTTP status the code maps to."""

    status: ClassVar[int] = 500
    default_code: ClassVar[str] = "internal_error"

    def __init__(
        self, message: str, *, code: str | None = None, details: dict[str, Any] | None = None
    ) -> None:
        super().__init__(message)
        self.message = message
        self.code = code or self.default_code
        self.details = details

    def envelope(self) -> dict[str, Any]:
        return {"error": {"code": self.code, "message": self.message, "details": self.details}}


class UnauthorizedError(PowerContextError):
    status = 401
    default_code = "unauthorized"


class ForbiddenError(PowerContextError):
    status = 403
    default_code = "scope_forbidden"


class NotFoundError(PowerContextError):
    status = 404
    default_code = "not_found"


class ConflictError(PowerContextError):
    status = 409
    default_code = "conflict"


class PayloadTooLargeError(PowerContextError):
    status = 413
    default_code = "payload_too_large"


class InvalidRequestError(PowerContextError):
    status = 422
    default_code = "invalid_request"


class UnavailableError(PowerContextError):
    status = 503
    default_code = "database_unavailable"


class InternalError(PowerContextError):
    status = 500
    default_code = "internal_error"


_BY_STATUS: dict[int, type[PowerContextError]] = {
    cls.status: cls
    for cls in (
        UnauthorizedError,
        ForbiddenError,
        NotFoundError,
        ConflictError,
        PayloadTooLargeError,
        InvalidRequestError,
        UnavailableError,
        InternalError,
    )
}


def error_class_for_status(status: int) -> type[PowerContextError]:
    """The typed error a client raises for an HTTP status (unknown 4xx → invalid request)."""
    if status in _BY_STATUS:
        return _BY_STATUS[status]
    if 400 <= status < 500:
        return InvalidRequestError
    return InternalError if status < 503 else UnavailableError
