"""What both clients share: defaults, request building and envelope decoding."""

from __future__ import annotations

import os
from typing import Any, TypeVar

import httpx
from pydantic import BaseModel, ValidationError

from ..errors import (
    InvalidRequestError,
    PowerContextError,
    UnavailableError,
    error_class_for_status,
)
from ..settings import DEFAULT_HOST, DEFAULT_PORT, default_home, read_token_file

M = TypeVar("M", bound=BaseModel)

DEFAULT_TIMEOUT = 30.0


def default_url() -> str:
    return os.environ.get("POWERCONTEXT_URL") or f"http://{DEFAULT_HOST}:{DEFAULT_PORT}"


def default_token() -> str | None:
    """``POWERCONTEXT_TOKEN``, else the local token file the runtime wrote on first start."""
    return os.environ.get("POWERCONTEXT_TOKEN") or read_token_file(
        default_home() / "auth" / "token"
    )


def headers_for(token: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"} if token else {}


def build(model: type[M], request: M | None, fields: dict[str, Any]) -> M:
    if request is not None:
        if fields:
            raise TypeError("pass either a request model or keyword fields, not both")
        return request
    try:
        return model.model_validate(fields)
    except ValidationError as exc:
        errors = [
            {"loc": [str(p) for p in e["loc"]], "msg": e["msg"], "type": e["type"]}
            for e in exc.errors(include_input=False, include_url=False)
        ]
        raise InvalidRequestError("the request is invalid", details={"errors": errors}) from None


def body_of(request: BaseModel) -> dict[str, Any]:
    # Only what the caller set (an explicit null such as a first Handoff's `base` is kept).
    return request.model_dump(mode="json", by_alias=True, exclude_unset=True)


def decode(response: httpx.Response, model: type[M]) -> M:
    if response.is_success:
        return model.model_validate_json(response.content, strict=False)
    raise error_from(response)


def error_from(response: httpx.Response) -> PowerContextError:
    cls = error_class_for_status(response.status_code)
    try:
        error = response.json()["error"]
        return cls(str(error["message"]), code=str(error["code"]), details=error.get("details"))
    except (ValueError, KeyError, TypeError):
        return cls(f"unexpected HTTP {response.status_code} from the runtime")


def unreachable(exc: httpx.HTTPError) -> UnavailableError:
    kind = "timed out" if isinstance(exc, httpx.TimeoutException) else "is not reachable"
    return UnavailableError(f"the runtime {kind}", code="runtime_unreachable")
