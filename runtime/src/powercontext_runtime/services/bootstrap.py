"""Scope bootstrap at SessionStart: eligibility, the pack, receipts (spec 05).

Only explicitly curated content is eligible — memory entries tagged ``bootstrap-context`` from
the current scope and its direct Context References (each authorised separately), plus at most
one Handoff revision the caller names exactly. No search, ranking or generation: the same
inputs always give the same bytes, which is what lets a pending receipt rebuild *the same* pack.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from ..context.bootstrap import BootstrapCandidate, build_bootstrap, digest
from ..contract.bootstrap import (
    BOOTSTRAP_SCHEMA,
    BootstrapContextRequest,
    BootstrapContextResponse,
    BootstrapItem,
    BootstrapLimits,
    BootstrapOverview,
    BootstrapReceipt,
    CommitHandoffRequest,
    ContextReferences,
    GetBootstrapOverviewRequest,
    GetHandoffRequest,
    HandoffContent,
    HandoffOverview,
    HandoffRef,
    HandoffResult,
    HandoffRevision,
    NextHandoff,
    NextHandoffRequest,
    OverviewEntry,
    OverviewScope,
    ReceiptItem,
    ReceiptSummary,
    RecordReceiptRequest,
    RecordReceiptResponse,
    SetContextReferencesRequest,
)
from ..contract.common import MemoryCitation
from ..errors import ConflictError, NotFoundError
from ..store._records import iso_time, new_id, sha256_hex
from ..store.bootstrap import BootstrapStore, ReceiptRecord, StoredReceipt, TaggedEntry
from .auth import Principal

__all__ = ["BootstrapService", "is_secret_kind", "readable_items", "render_handoff"]

MAX_MEMORY_ITEMS = 6
MAX_REFERENCED_SCOPES = 8
INSPECT_PER_SCOPE = 32
_SECRET_MARKERS = (
    "secret",
    "credential",
    "password",
    "passwd",
    "token",
    "apikey",
    "accesskey",
    "privatekey",
)


def is_secret_kind(kind: str) -> bool:
    """``API-Key``, ``api_key``, ``Access Key``, ``github_token`` … are never bootstrapped."""
    folded = "".join(ch for ch in kind.lower() if ch.isalnum())
    return any(marker in folded for marker in _SECRET_MARKERS)


def render_handoff(content: HandoffContent) -> str:
    lines = [f"Objective: {content.objective}", f"Disposition: {content.disposition}", "State:"]
    lines += [f"- {statement}" for statement in content.state]
    if content.next_action:
        lines.append(f"Next action: {content.next_action}")
    if content.omissions:
        lines.append("Omissions:")
        lines += [f"- {omission}" for omission in content.omissions]
    return "\n".join(lines)


@dataclass
class SurveyedScope:
    """One participating scope as bootstrap reads it: ``status`` ``read``, ``forbidden`` (the
    caller is not granted it), ``no_memory`` or ``beyond_limit`` (a reference past the first
    8, never read); its tagged entries, each with why it would not be delivered (a secret kind,
    past the 6 memory items) or None."""

    scope_id: str
    role: Literal["current", "reference"]
    status: Literal["read", "forbidden", "no_memory", "beyond_limit"]
    entries: list[tuple[TaggedEntry, Literal["secret_kind", "beyond_limit"] | None]] = field(
        default_factory=list
    )


class BootstrapService:
    def __init__(self, store: BootstrapStore) -> None:
        self._store = store

    # -- references and handoff ------------------------------------------------------------

    def set_references(self, req: SetContextReferencesRequest) -> ContextReferences:
        return self._store.set_references(req)

    def get_references(self, scope_id: str) -> ContextReferences:
        return self._store.get_references(scope_id)

    def commit_handoff(self, req: CommitHandoffRequest) -> HandoffResult:
        return self._store.commit_handoff(req)

    def get_handoff(self, req: GetHandoffRequest) -> HandoffResult:
        return self._store.get_handoff(req.scope_id, req.artifact)

    def next_handoff(self, req: NextHandoffRequest) -> NextHandoff:
        """The revision the user queued for the next session. The host names it in its
        bootstrap request itself, so the pack still only carries a Handoff the caller named."""
        return self._store.next_handoff(req.scope_id)

    def withdraw_handoff(self, req: NextHandoffRequest) -> NextHandoff:
        return self._store.withdraw_handoff(req.scope_id)

    # -- the pack --------------------------------------------------------------------------

    def bootstrap(
        self, req: BootstrapContextRequest, principal: Principal
    ) -> BootstrapContextResponse:
        self._store.purge_expired()
        handoff = None if req.handoff_ref is None else req.handoff_ref.model_dump()
        fingerprint = sha256_hex("bootstrap-fingerprint-v1", req.profile, req.max_bytes, handoff)
        # The principal is part of the event's identity: a host event is one token's, and a
        # request with the same event under another token is a different event, with its own
        # receipt built under its own grants — never a replay of someone else's pack.
        event_key = (
            None
            if req.event_id is None
            else sha256_hex(
                "bootstrap-event-v2",
                principal.principal_id,
                req.scope_id,
                req.integration,
                req.lifecycle,
                req.event_id,
            )
        )
        if event_key is not None:
            existing = self._store.receipt_for_event(event_key)
            if existing is not None:
                return self._replay(req, existing, fingerprint, principal)
        if not req.enabled:
            return self._skipped(req, principal, event_key, fingerprint, omitted=0)
        candidates, omitted = self._eligible(req, principal)
        pack = build_bootstrap(candidates, req.max_bytes)
        omitted += pack.omitted
        if pack.content is None:
            return self._skipped(
                req, principal, event_key, fingerprint, omitted=omitted, status="empty"
            )
        items = [
            {
                "kind": p.candidate.kind,
                "scope_id": p.candidate.scope_id,
                "citation": p.candidate.citation,
                "content_digest": p.content_digest,
                "truncated": p.truncated,
            }
            for p in pack.items
        ]
        record = self._store.create_receipt(
            scope_id=req.scope_id,
            principal_id=principal.principal_id,
            integration=req.integration,
            lifecycle=req.lifecycle,
            event_key=event_key,
            fingerprint=fingerprint,
            state="pending",
            items=items,
            pack_digest=digest(pack.content),
            content_bytes=len(pack.content.encode("utf-8")),
        )
        if record.items != items or record.state != "pending":
            # A concurrent first request for this event won: answer with *its* receipt.
            return self._replay(req, record, fingerprint, principal)
        return _ready(pack.content, items, omitted, record)

    def record_receipt(
        self, req: RecordReceiptRequest, principal: Principal
    ) -> RecordReceiptResponse:
        """Claim or fail the caller's own pending receipt (anyone else's is not found)."""
        stored = self._store.transition(
            req.scope_id, req.receipt_id, req.state, principal.principal_id
        )
        if stored is not None:
            raise ConflictError(
                "the receipt was already claimed or finalised",
                code="receipt_conflict",
                details={"state": stored},
            )
        return RecordReceiptResponse(receipt_id=req.receipt_id, state=req.state)

    def delivered_whole(self, scope_id: str, receipt_id: str, principal: Principal) -> set[str]:
        """Memory versions of this scope the caller's *injected* receipt delivered untruncated.

        Anything else — unknown, expired, foreign-scope, another principal's or not injected —
        excludes nothing: recall de-duplication fails open.
        """
        record = self._store.receipt(scope_id, receipt_id, principal.principal_id)
        if record is None or record.state != "injected":
            return set()
        return {
            item["citation"]["entry_version_id"]
            for item in readable_items(record.items, principal)[0]
            if item["kind"] == "memory" and item["scope_id"] == scope_id and not item["truncated"]
        }

    # -- internals -------------------------------------------------------------------------

    def _survey(self, scope_id: str, principal: Principal) -> list[SurveyedScope]:
        """What bootstrap reads for ``scope_id``: the scope, then its direct references in
        canonical order (each authorised separately), and their tagged entries in creation
        order. The one place eligibility is decided (the pack and the overview both use it)."""
        references = self._store.get_references(scope_id).references
        surveyed: list[SurveyedScope] = []
        eligible = 0
        for position, referenced in enumerate([scope_id, *references]):
            role: Literal["current", "reference"] = "reference" if position else "current"
            if position > MAX_REFERENCED_SCOPES:
                surveyed.append(SurveyedScope(referenced, role, "beyond_limit"))
                continue
            if position and not principal.allows(referenced):
                surveyed.append(SurveyedScope(referenced, role, "forbidden"))
                continue
            entries = self._store.tagged_entries(referenced, INSPECT_PER_SCOPE)
            found = SurveyedScope(referenced, role, "read" if entries is not None else "no_memory")
            for entry in entries or []:
                if is_secret_kind(entry.kind):
                    found.entries.append((entry, "secret_kind"))
                    continue
                eligible += 1
                past = eligible > MAX_MEMORY_ITEMS
                found.entries.append((entry, "beyond_limit" if past else None))
            surveyed.append(found)
        return surveyed

    def _eligible(
        self, req: BootstrapContextRequest, principal: Principal
    ) -> tuple[list[BootstrapCandidate], int]:
        candidates: list[BootstrapCandidate] = []
        omitted = 0
        if req.handoff_ref is not None:
            try:
                handoff = self._store.get_handoff(req.scope_id, req.handoff_ref)
            except NotFoundError:
                omitted += 1
            else:
                candidates.append(
                    BootstrapCandidate(
                        "handoff",
                        req.scope_id,
                        {"artifact_ref": handoff.reference.model_dump()},
                        render_handoff(handoff.content),
                    )
                )
        memory: list[BootstrapCandidate] = []
        for surveyed in self._survey(req.scope_id, principal):
            if surveyed.role == "reference" and surveyed.status in ("forbidden", "no_memory"):
                omitted += 1
                continue
            for entry, excluded in surveyed.entries:
                if excluded == "secret_kind":
                    continue
                if excluded == "beyond_limit":
                    omitted += 1
                    continue
                memory.append(
                    BootstrapCandidate(
                        "memory", surveyed.scope_id, _memory_citation(entry), entry.text
                    )
                )
        return candidates + memory, omitted

    # -- the console's Bootstrap page ------------------------------------------------------

    def overview(self, req: GetBootstrapOverviewRequest, principal: Principal) -> BootstrapOverview:
        """What the next SessionStart of this scope would consider, and what was delivered:
        the references, each participating scope's tagged entries with their eligibility,
        the Handoff head, the queued one and the latest revisions, and the live receipts
        (only the items the caller may read, by citation; never content or digests). Reads
        only; nothing is queued, claimed or purged."""
        references = self._store.get_references(req.scope_id)
        queued = self._store.next_handoff(req.scope_id)
        revisions = self._store.handoff_revisions(req.scope_id, max(req.handoffs, 1))
        head = _handoff_ref(revisions[0][0]) if revisions else None
        return BootstrapOverview(
            scope_id=req.scope_id,
            references=references.references,
            references_version=references.version,
            scopes=[_overview_scope(s) for s in self._survey(req.scope_id, principal)],
            limits=BootstrapLimits(
                memory_items=MAX_MEMORY_ITEMS,
                referenced_scopes=MAX_REFERENCED_SCOPES,
                inspected_per_scope=INSPECT_PER_SCOPE,
            ),
            handoff=HandoffOverview(
                head=head,
                queued=queued.handoff_ref,
                queued_at=None if queued.queued_at is None else iso_time(queued.queued_at),
                revisions=[
                    HandoffRevision(
                        reference=_handoff_ref(revision),
                        disposition=disposition,  # type: ignore[arg-type]
                        created_at=iso_time(created),
                    )
                    for revision, disposition, created in revisions[: req.handoffs]
                ],
            ),
            receipts=[
                _receipt_summary(r, principal)
                for r in self._store.recent_receipts(
                    req.scope_id, principal.principal_id, req.receipts
                )
            ],
        )

    def _replay(
        self,
        req: BootstrapContextRequest,
        record: ReceiptRecord,
        fingerprint: str,
        principal: Principal,
    ) -> BootstrapContextResponse:
        if record.fingerprint != fingerprint:
            raise ConflictError(
                "this host event was already used with a different bootstrap request",
                code="bootstrap_request_conflict",
            )
        if record.state != "pending":
            return _skipped_response(record.receipt_id, record.state, ephemeral=False)
        if record.principal_id != principal.principal_id:
            # Unreachable while event keys include the principal; kept so that a receipt can
            # never be replayed to anyone but its creator, whatever finds it.
            raise NotFoundError("no such receipt", code="receipt_not_found")
        if not req.enabled:
            stored = self._store.transition(
                req.scope_id, record.receipt_id, "skipped", principal.principal_id
            )
            return _skipped_response(record.receipt_id, stored or "skipped", ephemeral=False)
        if readable_items(record.items, principal)[1]:
            # Every reread is authorised again: an item the caller may no longer read ends
            # the receipt (failed) instead of being served from what was allowed before.
            stored = self._store.transition(
                req.scope_id, record.receipt_id, "failed", principal.principal_id
            )
            return _skipped_response(record.receipt_id, stored or "failed", ephemeral=False)
        candidates = [self._reread(item) for item in record.items]
        pack = build_bootstrap(candidates, req.max_bytes)
        assert pack.content is not None  # the same candidates placed before
        return _ready(pack.content, record.items, 0, record)

    def _reread(self, item: dict[str, Any]) -> BootstrapCandidate:
        if item["kind"] == "handoff":
            ref = HandoffRef.model_validate(item["citation"]["artifact_ref"])
            text = render_handoff(self._store.get_handoff(item["scope_id"], ref).content)
        else:
            found = self._store.memory_version_text(
                item["scope_id"], item["citation"]["entry_version_id"]
            )
            if found is None:
                raise NotFoundError("a receipt item no longer exists", code="receipt_not_found")
            text = found
        return BootstrapCandidate(item["kind"], item["scope_id"], item["citation"], text)

    def _skipped(
        self,
        req: BootstrapContextRequest,
        principal: Principal,
        event_key: str | None,
        fingerprint: str,
        *,
        omitted: int,
        status: str = "skipped",
    ) -> BootstrapContextResponse:
        if event_key is None:  # nothing to remember: an ephemeral receipt, no row
            receipt = BootstrapReceipt(receipt_id=new_id("rcpt_"), state="skipped", ephemeral=True)
        else:
            record = self._store.create_receipt(
                scope_id=req.scope_id,
                principal_id=principal.principal_id,
                integration=req.integration,
                lifecycle=req.lifecycle,
                event_key=event_key,
                fingerprint=fingerprint,
                state="skipped",
                items=[],
                pack_digest=None,
                content_bytes=0,
            )
            if record.fingerprint != fingerprint:
                raise ConflictError(
                    "this host event was already used with a different bootstrap request",
                    code="bootstrap_request_conflict",
                )
            receipt = BootstrapReceipt(
                receipt_id=record.receipt_id, state=record.state, ephemeral=False
            )  # type: ignore[arg-type]
        return BootstrapContextResponse.model_validate(
            {
                "schema": BOOTSTRAP_SCHEMA,
                "status": status,
                "content": None,
                "content_bytes": 0,
                "pack_digest": None,
                "items": [],
                "omitted": omitted,
                "receipt": receipt,
            }
        )


def readable_items(
    items: list[dict[str, Any]], principal: Principal
) -> tuple[list[dict[str, Any]], int]:
    """A stored receipt's items the caller may read *now*, and how many it may not.

    A receipt's items were chosen under the grants of whoever made it — another token, or the
    caller before its grants shrank — so everything that shows or reuses them (the overview's
    receipts, a replay) goes through this one filter, never through the stored list as is.
    """
    readable = [item for item in items if principal.allows(item["scope_id"])]
    return readable, len(items) - len(readable)


def _receipt_summary(stored: StoredReceipt, principal: Principal) -> ReceiptSummary:
    """A receipt as the overview shows it: the caller's readable items by citation only (no
    digest), the rest counted; a pack that held withheld items does not show its size."""
    readable, withheld = readable_items(stored.items, principal)
    return ReceiptSummary(
        integration=stored.integration,
        lifecycle=stored.lifecycle,
        state=stored.state,  # type: ignore[arg-type]
        content_bytes=None if withheld else stored.content_bytes,
        items=[
            ReceiptItem(
                kind=item["kind"],
                scope_id=item["scope_id"],
                citation=item["citation"],
                truncated=item["truncated"],
            )
            for item in readable
        ],
        withheld=withheld,
        mine=stored.mine,
        created_at=iso_time(stored.created_at),
        updated_at=iso_time(stored.updated_at),
        expires_at=iso_time(stored.expires_at),
    )


def _memory_citation(entry: TaggedEntry) -> dict[str, Any]:
    return {
        "memory_ref": {"family": "memory", "artifact_id": "memory", "revision": entry.revision},
        "entry_id": entry.entry_id,
        "entry_version_id": entry.entry_version_id,
    }


def _handoff_ref(revision: int) -> HandoffRef:
    return HandoffRef(family="handoff", artifact_id="handoff", revision=revision)


def _overview_scope(surveyed: SurveyedScope) -> OverviewScope:
    return OverviewScope(
        scope_id=surveyed.scope_id,
        role=surveyed.role,
        status=surveyed.status,
        entries=[
            OverviewEntry(
                citation=MemoryCitation.model_validate(_memory_citation(entry)),
                kind=entry.kind,
                text=entry.text,
                eligible=excluded is None,
                excluded=excluded,
            )
            for entry, excluded in surveyed.entries
        ],
    )


def _ready(
    content: str, items: list[dict[str, Any]], omitted: int, record: ReceiptRecord
) -> BootstrapContextResponse:
    return BootstrapContextResponse.model_validate(
        {
            "schema": BOOTSTRAP_SCHEMA,
            "status": "ready",
            "content": content,
            "content_bytes": len(content.encode("utf-8")),
            "pack_digest": digest(content),
            "items": [BootstrapItem.model_validate(item) for item in items],
            "omitted": omitted,
            "receipt": BootstrapReceipt(
                receipt_id=record.receipt_id, state="pending", ephemeral=False
            ),
        }
    )


def _skipped_response(receipt_id: str, state: str, *, ephemeral: bool) -> BootstrapContextResponse:
    return BootstrapContextResponse.model_validate(
        {
            "schema": BOOTSTRAP_SCHEMA,
            "status": "skipped",
            "content": None,
            "content_bytes": 0,
            "pack_digest": None,
            "items": [],
            "omitted": 0,
            "receipt": {"receipt_id": receipt_id, "state": state, "ephemeral": ephemeral},
        }
    )
