"""Persistence for scope bootstrap: Context References, Handoff revisions, delivery receipts.

Receipts are claimed with a conditional UPDATE (``WHERE state = 'pending'``), so of any number
of concurrent claims exactly one changes a row; the others see the stored state and get a
typed conflict. A stable host event maps to one receipt through a unique hashed event key, so
concurrent first requests for one event create exactly one receipt.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, and_, delete, insert, select, update

from ..contract.bootstrap import (
    CommitHandoffRequest,
    ContextReferences,
    HandoffContent,
    HandoffRef,
    HandoffResult,
    NextHandoff,
    SetContextReferencesRequest,
)
from ..contract.limits import BOOTSTRAP_TAG
from ..errors import ConflictError, NotFoundError
from ._records import canonical_json, new_id
from .database import Database, now_ms
from .schema import (
    artifact_heads,
    artifact_revisions,
    bootstrap_receipts,
    handoff_deliveries,
    memory_entries,
    memory_facets,
    memory_heads,
    memory_versions,
    scope_references,
)

__all__ = ["BootstrapStore", "ReceiptRecord", "StoredReceipt", "TaggedEntry"]

RECEIPT_TTL_MS = 30 * 24 * 3600 * 1000
PURGE_BATCH = 100
_h = artifact_heads
_a = artifact_revisions
_r = bootstrap_receipts
_d = handoff_deliveries


@dataclass(frozen=True, slots=True)
class TaggedEntry:
    scope_id: str
    revision: int
    entry_id: str
    entry_version_id: str
    kind: str
    text: str


@dataclass(frozen=True, slots=True)
class ReceiptRecord:
    receipt_id: str
    scope_id: str
    principal_id: str | None
    fingerprint: str
    state: str
    items: list[dict[str, Any]]
    expires_at: int


@dataclass(frozen=True, slots=True)
class StoredReceipt:
    """A receipt as the console's Bootstrap page reads it (no id, no principal, no content,
    no digest: the service filters the items by the caller's grants before showing any)."""

    integration: str
    lifecycle: str
    state: str
    content_bytes: int
    items: list[dict[str, Any]]
    mine: bool
    created_at: int
    updated_at: int
    expires_at: int


class BootstrapStore:
    def __init__(self, db: Database) -> None:
        self._db = db

    # -- Context References --------------------------------------------------------------------

    def set_references(self, req: SetContextReferencesRequest) -> ContextReferences:
        def work(conn: Connection) -> ContextReferences:
            query = select(scope_references.c.version).where(
                scope_references.c.scope_id == req.scope_id
            )
            if self._db.backend != "sqlite":
                query = query.with_for_update()
            current = conn.execute(query).scalar()
            version = int(current or 0)
            if req.expected_version is not None and req.expected_version != version:
                raise ConflictError(
                    "the references changed; re-read them and retry",
                    code="references_conflict",
                    details={"expected_version": req.expected_version, "current_version": version},
                )
            values = {
                "referenced": json.dumps(req.references),
                "version": version + 1,
                "updated_at": now_ms(),
            }
            if current is None:
                conn.execute(insert(scope_references).values(scope_id=req.scope_id, **values))
            else:
                conn.execute(
                    update(scope_references)
                    .where(scope_references.c.scope_id == req.scope_id)
                    .values(**values)
                )
            return ContextReferences(
                scope_id=req.scope_id, references=req.references, version=version + 1
            )

        return self._db.write(work)

    def get_references(self, scope_id: str) -> ContextReferences:
        with self._db.read() as conn:
            row = conn.execute(
                select(scope_references).where(scope_references.c.scope_id == scope_id)
            ).first()
        if row is None:
            return ContextReferences(scope_id=scope_id, references=[], version=0)
        return ContextReferences(
            scope_id=scope_id, references=json.loads(row.referenced), version=row.version
        )

    # -- Handoff ------------------------------------------------------------------------------

    def commit_handoff(self, req: CommitHandoffRequest) -> HandoffResult:
        def work(conn: Connection) -> HandoffResult:
            query = select(_h.c.revision).where(
                _h.c.scope_id == req.scope_id,
                _h.c.family == "handoff",
                _h.c.artifact_id == "handoff",
            )
            if self._db.backend != "sqlite":
                query = query.with_for_update()
            head = conn.execute(query).scalar()
            expected = None if req.base is None else req.base.revision
            if head != expected:
                current = (
                    None
                    if head is None
                    else HandoffRef(
                        family="handoff", artifact_id="handoff", revision=head
                    ).model_dump()
                )
                raise ConflictError(
                    "the handoff head moved; re-read it and retry",
                    code="artifact_conflict",
                    details={"current": current},
                )
            revision = (head or 0) + 1
            now = now_ms()
            if head is None:
                conn.execute(
                    insert(_h).values(
                        scope_id=req.scope_id,
                        family="handoff",
                        artifact_id="handoff",
                        revision=1,
                        updated_at=now,
                    )
                )
            else:
                conn.execute(
                    update(_h)
                    .where(
                        _h.c.scope_id == req.scope_id,
                        _h.c.family == "handoff",
                        _h.c.artifact_id == "handoff",
                    )
                    .values(revision=revision, updated_at=now)
                )
            conn.execute(
                insert(_a).values(
                    scope_id=req.scope_id,
                    family="handoff",
                    artifact_id="handoff",
                    revision=revision,
                    content=canonical_json(req.content.model_dump(by_alias=True)),
                    source_refs="[]",
                    artifact_refs="[]",
                    candidate_id=None,
                    candidate_version=None,
                    created_at=now,
                )
            )
            if req.deliver_next_session:
                # The scope's row is locked by the head update above, so replacing it is safe.
                conn.execute(delete(_d).where(_d.c.scope_id == req.scope_id))
                conn.execute(
                    insert(_d).values(scope_id=req.scope_id, revision=revision, queued_at=now)
                )
            return HandoffResult(
                reference=HandoffRef(family="handoff", artifact_id="handoff", revision=revision),
                content=req.content,
                queued=req.deliver_next_session,
            )

        return self._db.write(work)

    def get_handoff(self, scope_id: str, ref: HandoffRef) -> HandoffResult:
        with self._db.read() as conn:
            content = conn.execute(
                select(_a.c.content).where(
                    _a.c.scope_id == scope_id,
                    _a.c.family == "handoff",
                    _a.c.artifact_id == "handoff",
                    _a.c.revision == ref.revision,
                )
            ).scalar()
            queued = conn.execute(select(_d.c.revision).where(_d.c.scope_id == scope_id)).scalar()
        if content is None:
            raise NotFoundError("no such handoff revision", code="artifact_not_found")
        return HandoffResult(
            reference=ref,
            content=HandoffContent.model_validate_json(content),
            queued=queued == ref.revision,
        )

    def handoff_revisions(self, scope_id: str, limit: int) -> list[tuple[int, str, int]]:
        """The scope's latest Handoff revisions, newest first: (revision, disposition,
        created_at), read from the revisions' unique key range."""
        if limit <= 0:
            return []
        with self._db.read() as conn:
            rows = conn.execute(
                select(_a.c.revision, _a.c.content, _a.c.created_at)
                .where(
                    _a.c.scope_id == scope_id,
                    _a.c.family == "handoff",
                    _a.c.artifact_id == "handoff",
                )
                .order_by(_a.c.revision.desc())
                .limit(limit)
            ).all()
        return [
            (row.revision, json.loads(row.content)["disposition"], row.created_at) for row in rows
        ]

    def recent_receipts(self, scope_id: str, principal_id: str, limit: int) -> list[StoredReceipt]:
        """The scope's live receipts, newest first (``ix_bootstrap_receipts_scope``)."""
        if limit <= 0:
            return []
        now = now_ms()
        with self._db.read() as conn:
            rows = conn.execute(
                select(
                    _r.c.integration,
                    _r.c.lifecycle,
                    _r.c.state,
                    _r.c.content_bytes,
                    _r.c["items"],
                    _r.c.principal_id,
                    _r.c.created_at,
                    _r.c.updated_at,
                    _r.c.expires_at,
                )
                .where(_r.c.scope_id == scope_id)
                .order_by(_r.c.created_at.desc())
                .limit(limit + PURGE_BATCH)  # room for expired ones not purged yet
            ).all()
        live = [row for row in rows if row.expires_at > now][:limit]
        return [
            StoredReceipt(
                row.integration,
                row.lifecycle,
                row.state,
                row.content_bytes,
                json.loads(row.items),
                row.principal_id == principal_id,
                row.created_at,
                row.updated_at,
                row.expires_at,
            )
            for row in live
        ]

    def next_handoff(self, scope_id: str) -> NextHandoff:
        with self._db.read() as conn:
            row = conn.execute(
                select(_d.c.revision, _d.c.queued_at).where(_d.c.scope_id == scope_id)
            ).first()
        return _next_handoff(scope_id, row)

    def withdraw_handoff(self, scope_id: str) -> NextHandoff:
        """Un-queue the scope's waiting Handoff (the revision itself stays readable)."""

        def work(conn: Connection) -> NextHandoff:
            row = conn.execute(
                select(_d.c.revision, _d.c.queued_at).where(_d.c.scope_id == scope_id)
            ).first()
            if row is not None:
                conn.execute(delete(_d).where(_d.c.scope_id == scope_id))
            return _next_handoff(scope_id, row)

        return self._db.write(work)

    # -- eligible memory ----------------------------------------------------------------------

    def tagged_entries(self, scope_id: str, inspect: int) -> list[TaggedEntry] | None:
        """The first ``inspect`` active entries tagged for bootstrap, in creation order.

        ``None`` when the scope has no Memory at all (an unknown scope). Read from the tag's
        range of ``memory_facets`` (each entry's current tags, kept in step by every write),
        so a scope with 100k entries and a few tagged ones reads a few rows.
        """
        e, v, f = memory_entries, memory_versions, memory_facets
        with self._db.read() as conn:
            head = conn.execute(
                select(memory_heads.c.revision).where(memory_heads.c.scope_id == scope_id)
            ).scalar()
            if not head:
                return None
            rows = conn.execute(
                select(v.c.entry_id, v.c.entry_version_id, v.c.kind, v.c.text)
                .select_from(f)
                .join(e, and_(e.c.scope_id == f.c.scope_id, e.c.entry_id == f.c.entry_id))
                .join(
                    v,
                    and_(
                        v.c.scope_id == e.c.scope_id, v.c.entry_version_id == e.c.current_version_id
                    ),
                )
                .where(
                    f.c.scope_id == scope_id,
                    f.c.facet == "tag",
                    f.c.value == BOOTSTRAP_TAG,
                    f.c.state == "active",
                )
                .order_by(f.c.created_revision, f.c.entry_id)
                .limit(inspect)
            ).all()
        return [
            TaggedEntry(scope_id, int(head), r.entry_id, r.entry_version_id, r.kind, r.text)
            for r in rows
        ]

    def memory_version_text(self, scope_id: str, entry_version_id: str) -> str | None:
        with self._db.read() as conn:
            return conn.execute(
                select(memory_versions.c.text).where(
                    memory_versions.c.scope_id == scope_id,
                    memory_versions.c.entry_version_id == entry_version_id,
                )
            ).scalar()

    # -- receipts -----------------------------------------------------------------------------

    def receipt_for_event(self, event_key: str) -> ReceiptRecord | None:
        """The live receipt of a stable host event (event keys include the principal, so it
        can only be the caller's own)."""
        with self._db.read() as conn:
            row = conn.execute(select(_r).where(_r.c.event_key == event_key)).first()
        return None if row is None or row.expires_at <= now_ms() else _receipt(row)

    def receipt(self, scope_id: str, receipt_id: str, principal_id: str) -> ReceiptRecord | None:
        """A live receipt of this scope created by this principal; None for anyone else's."""
        with self._db.read() as conn:
            row = conn.execute(
                select(_r).where(
                    _r.c.receipt_id == receipt_id,
                    _r.c.scope_id == scope_id,
                    _r.c.principal_id == principal_id,
                )
            ).first()
        return None if row is None or row.expires_at <= now_ms() else _receipt(row)

    def create_receipt(
        self,
        *,
        scope_id: str,
        principal_id: str,
        integration: str,
        lifecycle: str,
        event_key: str | None,
        fingerprint: str,
        state: str,
        items: list[dict[str, Any]],
        pack_digest: str | None,
        content_bytes: int,
    ) -> ReceiptRecord:
        """Store a receipt; for a stable event, the first writer wins and others get its row."""
        receipt_id = new_id("rcpt_")
        now = now_ms()

        def work(conn: Connection) -> ReceiptRecord:
            if event_key is not None:
                existing = conn.execute(select(_r).where(_r.c.event_key == event_key)).first()
                if existing is not None:
                    if existing.expires_at > now:
                        return _receipt(existing)
                    conn.execute(delete(_r).where(_r.c.receipt_id == existing.receipt_id))
            conn.execute(
                insert(_r).values(
                    receipt_id=receipt_id,
                    scope_id=scope_id,
                    principal_id=principal_id,
                    integration=integration,
                    lifecycle=lifecycle,
                    event_key=event_key,
                    fingerprint=fingerprint,
                    state=state,
                    # Key order is part of the rendered citation: keep it (no sort_keys).
                    items=json.dumps(items, ensure_ascii=False, separators=(",", ":")),
                    pack_digest=pack_digest,
                    content_bytes=content_bytes,
                    created_at=now,
                    updated_at=now,
                    expires_at=now + RECEIPT_TTL_MS,
                )
            )
            return ReceiptRecord(
                receipt_id, scope_id, principal_id, fingerprint, state, items, now + RECEIPT_TTL_MS
            )

        return self._db.write(work)

    def transition(
        self, scope_id: str, receipt_id: str, state: str, principal_id: str
    ) -> str | None:
        """Move a pending receipt to ``state``; the stored state when it was not pending.

        Returns ``None`` on success. Raises ``NotFoundError`` for an unknown receipt, and for
        another principal's: whoever did not create a receipt can neither consume it nor
        learn that it exists.
        """
        mine = (
            _r.c.receipt_id == receipt_id,
            _r.c.scope_id == scope_id,
            _r.c.principal_id == principal_id,
        )

        def work(conn: Connection) -> str | None:
            changed = conn.execute(
                update(_r)
                .where(
                    *mine,
                    _r.c.state == "pending",
                    _r.c.expires_at > now_ms(),
                )
                .values(state=state, updated_at=now_ms())
            ).rowcount
            if changed == 1:
                if state == "injected":
                    _consume_delivered_handoff(conn, scope_id, receipt_id)
                return None
            stored = conn.execute(select(_r.c.state, _r.c.expires_at).where(*mine)).first()
            if stored is None or stored.expires_at <= now_ms():
                raise NotFoundError("no such receipt", code="receipt_not_found")
            return str(stored.state)

        return self._db.write(work)

    def purge_expired(self, batch: int = PURGE_BATCH) -> int:
        """Delete up to ``batch`` expired receipts (called in passing by later requests)."""

        def work(conn: Connection) -> int:
            ids = [
                row.receipt_id
                for row in conn.execute(
                    select(_r.c.receipt_id).where(_r.c.expires_at <= now_ms()).limit(batch)
                )
            ]
            if ids:
                conn.execute(delete(_r).where(_r.c.receipt_id.in_(ids)))
            return len(ids)

        return self._db.write(work)


def _next_handoff(scope_id: str, row: Any) -> NextHandoff:
    if row is None:
        return NextHandoff(scope_id=scope_id, handoff_ref=None)
    ref = HandoffRef(family="handoff", artifact_id="handoff", revision=row.revision)
    return NextHandoff(scope_id=scope_id, handoff_ref=ref, queued_at=row.queued_at)


def _consume_delivered_handoff(conn: Connection, scope_id: str, receipt_id: str) -> None:
    """A receipt just claimed ``injected``: if it carried the queued Handoff revision, that
    delivery is done. A newer revision queued meanwhile stays queued."""
    items = conn.execute(select(_r.c["items"]).where(_r.c.receipt_id == receipt_id)).scalar()
    for item in json.loads(items or "[]"):
        if item.get("kind") == "handoff" and item.get("scope_id") == scope_id:
            revision = item["citation"]["artifact_ref"]["revision"]
            conn.execute(delete(_d).where(_d.c.scope_id == scope_id, _d.c.revision == revision))


def _receipt(row: Any) -> ReceiptRecord:
    return ReceiptRecord(
        row.receipt_id,
        row.scope_id,
        row.principal_id,
        row.fingerprint,
        row.state,
        json.loads(row.items),
        row.expires_at,
    )
