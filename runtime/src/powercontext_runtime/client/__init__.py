"""Python clients for the PowerContext HTTP API.

``PowerContextClient`` (sync) and ``AsyncPowerContextClient`` expose one method per
operation, named by its operationId. Methods accept the operation's fields as keyword
arguments (or a ready request model), validate them with the same models the server uses and
return typed response models. Error envelopes come back as the typed exceptions of
:mod:`powercontext_runtime.errors` (``ConflictError``, ``NotFoundError``, ...).

``default_url()`` and ``default_token()`` say where a client goes and with which token when
none is given (``POWERCONTEXT_URL`` / ``POWERCONTEXT_TOKEN``, else the local data dir's socket
and token file); other clients of the same runtime — an MCP session, a script using httpx —
use them to find it the same way (``default_token(agent=True)``: the agents' token).
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
from ._common import default_token, default_url
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
    "default_token",
    "default_url",
]
