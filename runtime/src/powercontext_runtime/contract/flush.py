"""``flush_memory``: turn the next window of captured sources into Memory (spec 06)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from .common import MemoryRef, ScopeId, StrictModel

__all__ = ["MAX_FLUSH_WINDOW", "FlushMemoryRequest", "FlushMemoryResponse"]

MAX_FLUSH_WINDOW = 100


class FlushMemoryRequest(StrictModel):
    scope_id: ScopeId
    max_sources: Annotated[int, Field(ge=1, le=MAX_FLUSH_WINDOW)] = MAX_FLUSH_WINDOW


class FlushMemoryResponse(StrictModel):
    status: Literal["idle", "processed"]
    previous_cursor: int
    current_cursor: int
    high_watermark: int
    processed_source_count: int
    memory: MemoryRef | None
