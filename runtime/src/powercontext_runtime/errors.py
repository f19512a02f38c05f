"""Typed errors shared by the server and the Python client.

Every failure a caller can act on has a stable snake_case ``code`` and an HTTP status. The
server turns these into the error envelope; the client turns an envelope back into the same
classes, so ``except ConflictError`` works identically in-process and over HTTP.

Messages are written for humans and must never contain stored content, queries, scope ids,
tokens or SQL: they are returned to callers and may end up in logs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from itertools import islice
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
    "validation_error_items",
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


# A validation report is bounded. The location of an unknown field is the caller's own key,
# which can be a megabyte long; and a body of 80,000 unknown keys would otherwise yield 80,000
# errors, a 6 MB answer to a 1 MB request. Real field names and indexes fit easily.
VALIDATION_ERRORS_MAX = 20
_LOC_PART_MAX_CHARS = 64


def validation_error_items(
    errors: Iterable[Mapping[str, Any]], prefix: tuple[str, ...] = ()
) -> list[dict[str, Any]]:
    """Location, message and type of the first few validation errors — never the input.

    ``errors`` are pydantic's error dicts; their ``input`` (which may be stored content) is
    dropped, and location parts are shortened so a hostile key is not echoed back whole.
    The one way every transport (HTTP, MCP, the proposal check of the review inbox) reports
    invalid input.
    """
    return [
        {
            "loc": [*prefix, *(_loc_part(part) for part in error.get("loc", ()))],
            "msg": str(error.get("msg", "invalid value")),
            "type": str(error.get("type", "value_error")),
        }
        for error in islice(errors, VALIDATION_ERRORS_MAX)
    ]


def _loc_part(part: object) -> str:
    text = str(part)
    if len(text) > _LOC_PART_MAX_CHARS:
        text = text[: _LOC_PART_MAX_CHARS - 1] + "…"
    # A lone surrogate in a key could not be encoded into the UTF-8 answer.
    return text.encode("utf-8", "replace").decode("utf-8")
