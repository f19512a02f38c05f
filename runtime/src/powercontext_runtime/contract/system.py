"""Health and capability documents (spec 03 § Capabilities)."""

from __future__ import annotations

from typing import Literal

from .common import StrictModel

CONTEXT_SCHEMA = "powercontext.prepared-context.v1"
BOOTSTRAP_SCHEMA = "powercontext.bootstrap-context.v1"
BOOTSTRAP_PROFILE = "powercontext.scope-bootstrap.v1"


class Liveness(StrictModel):
    status: Literal["ok"]


class EmbeddingStatus(StrictModel):
    """The semantic channel's progress: how many entry versions wait for a vector (counted up
    to a cap: `pending_capped` says there are at least that many) and the background
    worker's state (`off` with the channel off; `failing` with the last failure's kind, an
    exception type). Counts and names only, never content or a scope."""

    state: Literal["off", "idle", "embedding", "failing"]
    model: str | None
    pending: int | None
    pending_capped: bool
    vectors: int | None  # stored for this model
    error: str | None
    last_round: str | None  # when the worker's last round ended (UTC, ISO 8601)


class Readiness(StrictModel):
    status: Literal["ready"]
    database: Literal["sqlite", "oceanbase"]
    embeddings: EmbeddingStatus


class Capabilities(StrictModel):
    context_versions: list[str]
    bootstrap_versions: list[str]
    bootstrap_profiles: list[str]
    artifact_families: list[str]
    source_types: list[str]
    search_modes: list[str]
    memory_extraction: bool


class ErrorBody(StrictModel):
    code: str
    message: str
    details: dict[str, object] | None


class ErrorEnvelope(StrictModel):
    error: ErrorBody
