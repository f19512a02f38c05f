"""Scope bootstrap, Context References and Handoff (spec 05, spec 02 § Handoff)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field, model_validator

from . import limits
from .common import MemoryCitation, ScopeId, StrictModel

__all__ = [
    "BOOTSTRAP_PROFILE",
    "BOOTSTRAP_SCHEMA",
    "BootstrapContextRequest",
    "BootstrapContextResponse",
    "BootstrapItem",
    "BootstrapLimits",
    "BootstrapOverview",
    "BootstrapReceipt",
    "CommitHandoffRequest",
    "ContextReferences",
    "GetBootstrapOverviewRequest",
    "GetContextReferencesRequest",
    "GetHandoffRequest",
    "HandoffContent",
    "HandoffOverview",
    "HandoffRef",
    "HandoffResult",
    "HandoffRevision",
    "NextHandoff",
    "NextHandoffRequest",
    "OverviewEntry",
    "OverviewScope",
    "ReceiptItem",
    "ReceiptSummary",
    "RecordReceiptRequest",
    "RecordReceiptResponse",
    "SetContextReferencesRequest",
]

BOOTSTRAP_SCHEMA = "powercontext.bootstrap-context.v1"
BOOTSTRAP_PROFILE = "powercontext.scope-bootstrap.v1"
HANDOFF_SCHEMA = "powercontext.handoff.v1"
MAX_REFERENCES = 32


def _not_blank(value: str) -> str:
    if not value.strip():
        raise ValueError("must not be blank")
    return value


Statement = Annotated[str, Field(min_length=1, max_length=2000), AfterValidator(_not_blank)]


class HandoffContent(StrictModel):
    schema_: Literal["powercontext.handoff.v1"] = Field(alias="schema")
    objective: Annotated[str, Field(min_length=1, max_length=8192), AfterValidator(_not_blank)]
    state: Annotated[list[Statement], Field(min_length=1, max_length=64)]
    disposition: Literal["continuable", "blocked", "complete"]
    next_action: Statement | None = None
    omissions: Annotated[list[Statement], Field(max_length=64)] = []


class HandoffRef(StrictModel):
    family: Literal["handoff"]
    artifact_id: Literal["handoff"]
    revision: int = Field(ge=1, lt=limits.INT64_END)


class CommitHandoffRequest(StrictModel):
    scope_id: ScopeId
    base: HandoffRef | None
    content: HandoffContent
    #: Queue this revision for the scope's next session: the hooks name it in their next
    #: bootstrap request, and the first injected delivery consumes the queue (docs/bootstrap.md).
    deliver_next_session: bool = True


class GetHandoffRequest(StrictModel):
    scope_id: ScopeId
    artifact: HandoffRef


class HandoffResult(StrictModel):
    reference: HandoffRef
    content: HandoffContent
    #: Whether this revision is the one waiting for the scope's next session.
    queued: bool = False


class NextHandoffRequest(StrictModel):
    scope_id: ScopeId


class NextHandoff(StrictModel):
    """The Handoff revision queued for the scope's next session (``null``: none waits)."""

    scope_id: str
    handoff_ref: HandoffRef | None
    queued_at: int | None = None


def _distinct(values: list[str]) -> list[str]:
    if len(set(values)) != len(values):
        raise ValueError("references must be distinct")
    return values


class SetContextReferencesRequest(StrictModel):
    scope_id: ScopeId
    references: Annotated[
        list[ScopeId], Field(max_length=MAX_REFERENCES), AfterValidator(_distinct)
    ]
    expected_version: Annotated[int, Field(ge=0, lt=limits.INT64_END)] | None = None

    @model_validator(mode="after")
    def _not_self(self) -> SetContextReferencesRequest:
        if self.scope_id in self.references:
            raise ValueError("a scope cannot reference itself")
        return self


class GetContextReferencesRequest(StrictModel):
    scope_id: ScopeId


class ContextReferences(StrictModel):
    scope_id: str
    references: list[str]
    version: int


Lifecycle = Literal["startup", "resume", "clear", "compact", "restore", "fork"]
Integration = Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9-]{0,63}$")]


class BootstrapContextRequest(StrictModel):
    scope_id: ScopeId
    enabled: bool
    profile: Literal["powercontext.scope-bootstrap.v1"]
    lifecycle: Lifecycle
    integration: Integration
    event_id: Annotated[str, Field(min_length=1, max_length=256)] | None = None
    max_bytes: Annotated[int, Field(ge=512, le=8192)] = 4096
    handoff_ref: HandoffRef | None = None


class BootstrapItem(StrictModel):
    kind: Literal["handoff", "memory"]
    scope_id: str
    citation: dict[str, Any]
    content_digest: str
    truncated: bool


class BootstrapReceipt(StrictModel):
    receipt_id: str
    state: Literal["pending", "skipped", "injected", "failed"]
    ephemeral: bool


class BootstrapContextResponse(StrictModel):
    schema_: Literal["powercontext.bootstrap-context.v1"] = Field(alias="schema")
    status: Literal["ready", "empty", "skipped"]
    content: str | None
    content_bytes: int
    pack_digest: str | None
    items: list[BootstrapItem]
    omitted: int
    receipt: BootstrapReceipt


class RecordReceiptRequest(StrictModel):
    scope_id: ScopeId
    receipt_id: Annotated[str, Field(min_length=1, max_length=128)]
    state: Literal["injected", "failed"]


class RecordReceiptResponse(StrictModel):
    receipt_id: str
    state: Literal["injected", "failed"]


# -- get_bootstrap_overview: what a SessionStart would consider (docs/ui.md § Bootstrap) ------


class GetBootstrapOverviewRequest(StrictModel):
    scope_id: ScopeId
    receipts: Annotated[int, Field(ge=0, le=100)] = 20
    handoffs: Annotated[int, Field(ge=0, le=50)] = 10


class OverviewEntry(StrictModel):
    citation: MemoryCitation
    kind: str
    text: str
    #: Whether bootstrap would deliver it (budget permitting): ``secret_kind`` entries never
    #: are; past the first 6 eligible ones, ``beyond_limit``.
    eligible: bool
    excluded: Literal["secret_kind", "beyond_limit"] | None


class OverviewScope(StrictModel):
    scope_id: str
    role: Literal["current", "reference"]
    #: ``read``; ``forbidden`` (not granted to this token); ``no_memory``; ``beyond_limit``
    #: (references past the first 8 are never read).
    status: Literal["read", "forbidden", "no_memory", "beyond_limit"]
    entries: list[OverviewEntry]  # the tagged active entries inspected (≤ 32), creation order


class HandoffRevision(StrictModel):
    reference: HandoffRef
    disposition: Literal["continuable", "blocked", "complete"]
    created_at: str


class HandoffOverview(StrictModel):
    head: HandoffRef | None
    queued: HandoffRef | None  # what the next session's hooks will name
    queued_at: str | None
    revisions: list[HandoffRevision]  # newest first


class ReceiptItem(StrictModel):
    """A delivered item named by its immutable citation. No digest: a bare hash of stored text
    lets anyone who sees it confirm a guess offline, and the citation already names the exact
    version (``get_memory_entry`` / ``get_handoff`` return it to whoever may read it)."""

    kind: Literal["handoff", "memory"]
    scope_id: str
    citation: dict[str, Any]
    truncated: bool


class ReceiptSummary(StrictModel):
    """A delivery receipt as stored: identity metadata, states and the exact item references
    the caller's token may read now; never content, digests or its id (which only its creator
    may use). A receipt may hold items of scopes the caller is not granted (another token's,
    or the caller's before its grants shrank): those are ``withheld`` — counted, not named —
    and then ``content_bytes`` is null too, since the pack's size would measure them."""

    integration: str
    lifecycle: str
    state: Literal["pending", "skipped", "injected", "failed"]
    content_bytes: int | None
    items: list[ReceiptItem]
    withheld: int  # items of scopes the caller's token is not granted
    mine: bool  # created by the caller's token
    created_at: str
    updated_at: str
    expires_at: str


class BootstrapLimits(StrictModel):
    memory_items: int
    referenced_scopes: int
    inspected_per_scope: int


class BootstrapOverview(StrictModel):
    scope_id: str
    references: list[str]
    references_version: int
    scopes: list[OverviewScope]  # the current scope, then its references in order
    limits: BootstrapLimits
    handoff: HandoffOverview
    receipts: list[ReceiptSummary]  # newest first, live (unexpired) only
