"""``prepare_context`` request and response (spec 04, ``powercontext.prepared-context.v1``)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from .common import ScopeId, StrictModel
from .memory import Query

__all__ = ["PrepareContextRequest", "PreparedContextResponse"]


class PrepareContextRequest(StrictModel):
    scope_id: ScopeId
    query: Query
    max_bytes: Annotated[int, Field(ge=512, le=32768)] = 8000
    bootstrap_receipt_id: Annotated[str, Field(min_length=1, max_length=128)] | None = None


class PreparedContextResponse(StrictModel):
    schema_: Literal["powercontext.prepared-context.v1"] = Field(alias="schema")
    status: Literal["ready", "empty"]
    content: str | None
    content_bytes: Annotated[int, Field(ge=0)]
