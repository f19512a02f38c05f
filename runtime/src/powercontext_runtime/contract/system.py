"""Health and capability documents (spec 03 § Capabilities)."""

from __future__ import annotations

from typing import Literal

from .common import StrictModel

CONTEXT_SCHEMA = "powercontext.prepared-context.v1"
BOOTSTRAP_SCHEMA = "powercontext.bootstrap-context.v1"
BOOTSTRAP_PROFILE = "powercontext.scope-bootstrap.v1"


class Liveness(StrictModel):
    status: Literal["ok"]


class Readiness(StrictModel):
    status: Literal["ready"]
    database: Literal["sqlite", "oceanbase"]


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
