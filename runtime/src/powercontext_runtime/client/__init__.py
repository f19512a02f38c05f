"""Python clients for the PowerContext HTTP API.

``PowerContextClient`` (sync) and ``AsyncPowerContextClient`` expose one method per
operation, named by its operationId. Methods accept the operation's fields as keyword
arguments (or a ready request model), validate them with the same models the server uses and
return typed response models. Error envelopes come back as the typed exceptions of
:mod:`powercontext_runtime.errors` (``ConflictError``, ``NotFoundError``, ...).
"""

from ..errors import (
    ConflictError,
    ForbiddenError,
    InternalError,
    InvalidRequestError,
    NotFoundError,
    PayloadTooLargeError,
    PowerContextError,
    UnauthorizedError,
    UnavailableError,
)
from ._async import AsyncPowerContextClient
from ._sync import PowerContextClient

__all__ = [
    "AsyncPowerContextClient",
    "ConflictError",
    "ForbiddenError",
    "InternalError",
    "InvalidRequestError",
    "NotFoundError",
    "PayloadTooLargeError",
    "PowerContextClient",
    "PowerContextError",
    "UnauthorizedError",
    "UnavailableError",
]
