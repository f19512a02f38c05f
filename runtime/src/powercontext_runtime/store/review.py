"""Review Inbox: candidates, their immutable versions, and reviewed artifacts (spec 06).

Experience and Skill artifacts come into being only here, by approving a candidate. Approval is
one transaction — the artifact revision, the Experience search document and the candidate's
``approved`` status commit together or not at all — and it approves exactly one candidate
version under two compare-and-swap checks: the candidate's version and, for a modification,
the target artifact's head.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ValidationError
from sqlalchemy import Connection, Row, and_, insert, or_, select, update

from ..contract.common import ArtifactRef, SourceRef
from ..contract.limits import MAX_EVIDENCE_REFS
from ..contract.review import (
    ApproveCandidateRequest,
    Candidate,
    CandidateList,
    ExperienceProposal,
    GetCandidateRequest,
    ListCandidatesRequest,
    ProposedBy,
    ProposeExperienceRequest,
    ProposeSkillRequest,
    RejectCandidateRequest,
    ReviseCandidateRequest,
    SkillProposal,
)
from ..errors import ConflictError, InvalidRequestError, NotFoundError, validation_error_items
from ..search import scoring
from ._records import (
    ARTIFACT_REFS,
    SOURCE_REFS,
    canonical_json,
    decode_cursor,
    dump_refs,
    encode_cursor,
    iso_time,
    new_id,
    sha256_hex,
)
from .database import Database, now_ms
from .fulltext import read_frequencies
from .schema import (
    artifact_heads,
    artifact_revisions,
    candidate_versions,
    candidates,
    memory_heads,
    source_heads,
    sources,
)
from .tracing import LexicalTrace, trace_lexical

__all__ = [
    "DISTILL_MATCH_CHANGED",
    "ApprovedExperience",
    "DistilledMatch",
    "ReviewStore",
    "StoredArtifact",
    "experience_search_text",
    "signature_digest",
]

ReviewedFamily = Literal["experience", "skill"]
Analyze = Callable[[str], list[str]]

_PROPOSAL_MODELS: dict[str, type[BaseModel]] = {
    "experience": ExperienceProposal,
    "skill": SkillProposal,
}
_ARTIFACT_PREFIX = {"experience": "exp_", "skill": "skill_"}
_c = candidates
_cv = candidate_versions
_a = artifact_revisions
_h = artifact_heads


@dataclass(frozen=True, slots=True)
class StoredArtifact:
    reference: ArtifactRef
    content: dict[str, Any]
    source_refs: list[Any]
    artifact_refs: list[Any]


@dataclass(frozen=True, slots=True)
class ApprovedExperience:
    """A current approved Experience head returned by the Experience search."""

    artifact_id: str
    revision: int
    content: dict[str, str]
    score: float


#: The conflict code a distilled proposal raises when, between the distill worker's read and
#: its write, another candidate with the same signature appeared (never reaches a client:
#: the worker reads again and decides again).
DISTILL_MATCH_CHANGED = "distill_match_changed"


def signature_digest(signature: str) -> str:
    """What is stored of a lesson signature (``candidates.signature``): its SHA-256, so the
    column has a fixed width for the index whatever a distiller's signature holds."""
    return sha256_hex("lesson-signature-v1", signature)


@dataclass(frozen=True, slots=True)
class DistilledMatch:
    """The newest candidate proposed with a lesson signature, as the distill worker decides
    on it: its status and current version, and for an approved one the artifact's current
    head (``head``), which a revision candidate must target exactly."""

    candidate_id: str
    status: Literal["pending", "approved", "rejected"]
    version: int
    proposal: dict[str, Any]
    source_refs: list[SourceRef]
    artifact_refs: list[ArtifactRef]
    head: StoredArtifact | None


def experience_search_text(content: dict[str, str]) -> str:
    return "\n".join(content[field] for field in ("situation", "action", "outcome", "lesson"))


class ReviewStore:
    def __init__(self, db: Database, analyze: Analyze) -> None:
        self._db = db
        self._analyze = analyze
        # Test seam: called inside the approval transaction after the artifact write and before
        # the status update, so a test can prove a failure there leaves nothing behind.
        self.before_approval_status: Callable[[], None] = lambda: None

    # -- proposals ---------------------------------------------------------------------------

    def propose(
        self,
        family: ReviewedFamily,
        req: ProposeExperienceRequest | ProposeSkillRequest,
        *,
        proposed_by: ProposedBy = "agent",
        signature: str | None = None,
        newest: str | None = None,
    ) -> Candidate:
        """A pending v1. ``proposed_by`` and ``signature`` (a :func:`signature_digest`) are the
        distill worker's: with a signature, the write first locks the scope's source head (so
        distilled proposals of one scope are serialised on every backend) and checks that the
        newest candidate with that signature is still ``newest`` (the one the worker decided
        on; None: there was none), else 409 :data:`DISTILL_MATCH_CHANGED` — never a duplicate.
        """

        def work(conn: Connection) -> Candidate:
            if signature is not None:
                self._lock_scope(conn, req.scope_id)
                found = self._newest_with_signature(conn, req.scope_id, signature)
                if (None if found is None else found.candidate_id) != newest:
                    raise ConflictError(
                        "another candidate with this lesson appeared", code=DISTILL_MATCH_CHANGED
                    )
            if req.target is not None:
                self._check_target(conn, req.scope_id, req.target, lock=False)
            self._require_evidence(
                conn, req.scope_id, req.source_refs, req.artifact_refs, req.target
            )
            now = now_ms()
            candidate_id = new_id("cand_")
            conn.execute(
                insert(_c).values(
                    scope_id=req.scope_id,
                    candidate_id=candidate_id,
                    family=family,
                    status="pending",
                    version=1,
                    target=None if req.target is None else canonical_json(req.target.model_dump()),
                    result_artifact=None,
                    decision_reason=None,
                    proposed_by=proposed_by,
                    signature=signature,
                    created_at=now,
                    updated_at=now,
                )
            )
            self._insert_version(
                conn,
                req.scope_id,
                candidate_id,
                1,
                req.proposal.model_dump(),
                req.source_refs,
                req.artifact_refs,
                req.reason,
                now,
            )
            return self._candidate(conn, req.scope_id, candidate_id, None)

        return self._db.write(work)

    def get(self, req: GetCandidateRequest) -> Candidate:
        with self._db.read() as conn:
            return self._candidate(conn, req.scope_id, req.candidate_id, req.version)

    def list(self, req: ListCandidatesRequest) -> CandidateList:
        query = (
            select(_c.c.candidate_id, _c.c.created_at)
            .where(_c.c.scope_id == req.scope_id, _c.c.status == req.status)
            .order_by(_c.c.created_at, _c.c.candidate_id)
            .limit(req.limit + 1)
        )
        if req.family is not None:
            query = query.where(_c.c.family == req.family)
        if req.cursor:
            created_at, candidate_id = decode_cursor(req.cursor)
            query = query.where(
                or_(
                    _c.c.created_at > created_at,
                    and_(_c.c.created_at == created_at, _c.c.candidate_id > candidate_id),
                )
            )
        with self._db.read() as conn:
            rows = conn.execute(query).all()
            page = rows[: req.limit]
            items = [self._candidate(conn, req.scope_id, row.candidate_id, None) for row in page]
        next_cursor = (
            encode_cursor(page[-1].created_at, page[-1].candidate_id)
            if len(rows) > req.limit
            else None
        )
        return CandidateList(candidates=items, next_cursor=next_cursor)

    def distilled_match(self, scope_id: str, signature: str) -> DistilledMatch | None:
        """The newest candidate of the scope proposed with ``signature`` (a
        :func:`signature_digest`), in one read snapshot; None when there is none."""
        with self._db.read() as conn:
            found = self._newest_with_signature(conn, scope_id, signature)
            if found is None:
                return None
            row = self._version_row(conn, scope_id, found.candidate_id, found.version)
            head = None
            if found.status == "approved" and found.result_artifact is not None:
                result = ArtifactRef.model_validate_json(found.result_artifact)
                revision = conn.execute(
                    select(_h.c.revision).where(
                        _h.c.scope_id == scope_id,
                        _h.c.family == result.family,
                        _h.c.artifact_id == result.artifact_id,
                    )
                ).scalar()
                if revision is not None:
                    current = result.model_copy(update={"revision": int(revision)})
                    head = self._stored(conn, scope_id, current)
        return DistilledMatch(
            candidate_id=found.candidate_id,
            status=found.status,
            version=found.version,
            proposal=json.loads(row.proposal),
            source_refs=SOURCE_REFS.validate_json(row.source_refs),
            artifact_refs=ARTIFACT_REFS.validate_json(row.artifact_refs),
            head=head,
        )

    def _newest_with_signature(
        self, conn: Connection, scope_id: str, signature: str
    ) -> Row[Any] | None:
        return conn.execute(
            select(_c.c.candidate_id, _c.c.status, _c.c.version, _c.c.result_artifact)
            .where(_c.c.scope_id == scope_id, _c.c.signature == signature)
            .order_by(_c.c.created_at.desc(), _c.c.candidate_id.desc())
            .limit(1)
        ).first()

    def _lock_scope(self, conn: Connection, scope_id: str) -> None:
        """Hold the scope's source-head row until commit (OceanBase; SQLite's write
        transactions are serialised already). It exists: a distilled proposal cites a task
        result, whose append created it."""
        if self._db.backend != "sqlite":
            conn.execute(
                select(source_heads.c.scope_id)
                .where(source_heads.c.scope_id == scope_id)
                .with_for_update()
            ).first()

    # -- review decisions --------------------------------------------------------------------

    def revise(self, req: ReviseCandidateRequest) -> Candidate:
        def work(conn: Connection) -> Candidate:
            head = self._lock_pending(conn, req.scope_id, req.candidate_id, req.expected_version)
            current = self._version_row(conn, req.scope_id, req.candidate_id, head.version)
            proposal = _validated_proposal(head.family, req.proposal)
            source_refs = (
                req.source_refs
                if req.source_refs is not None
                else SOURCE_REFS.validate_json(current.source_refs)
            )
            artifact_refs = (
                req.artifact_refs
                if req.artifact_refs is not None
                else ARTIFACT_REFS.validate_json(current.artifact_refs)
            )
            target = _target_of(head)
            _check_evidence(source_refs, artifact_refs, target)
            # Carried-over evidence was checked when it was proposed; only new lists are.
            self._require_evidence(
                conn, req.scope_id, req.source_refs or [], req.artifact_refs or [], target
            )
            version = head.version + 1
            now = now_ms()
            self._insert_version(
                conn,
                req.scope_id,
                req.candidate_id,
                version,
                proposal,
                source_refs,
                artifact_refs,
                req.reason,
                now,
            )
            conn.execute(
                update(_c)
                .where(_c.c.scope_id == req.scope_id, _c.c.candidate_id == req.candidate_id)
                .values(version=version, updated_at=now)
            )
            return self._candidate(conn, req.scope_id, req.candidate_id, None)

        return self._db.write(work)

    def reject(self, req: RejectCandidateRequest) -> Candidate:
        def work(conn: Connection) -> Candidate:
            self._lock_pending(conn, req.scope_id, req.candidate_id, req.expected_version)
            conn.execute(
                update(_c)
                .where(_c.c.scope_id == req.scope_id, _c.c.candidate_id == req.candidate_id)
                .values(status="rejected", decision_reason=req.decision_reason, updated_at=now_ms())
            )
            return self._candidate(conn, req.scope_id, req.candidate_id, None)

        return self._db.write(work)

    def approve(self, req: ApproveCandidateRequest) -> Candidate:
        def work(conn: Connection) -> Candidate:
            head = self._lock_pending(conn, req.scope_id, req.candidate_id, req.expected_version)
            version = self._version_row(conn, req.scope_id, req.candidate_id, head.version)
            family: ReviewedFamily = head.family
            target = _target_of(head)
            now = now_ms()
            if target is not None:
                current = self._check_target(conn, req.scope_id, target, lock=True)
                reference = ArtifactRef(
                    family=family, artifact_id=target.artifact_id, revision=target.revision + 1
                )
                conn.execute(
                    update(_h)
                    .where(
                        _h.c.scope_id == req.scope_id,
                        _h.c.family == family,
                        _h.c.artifact_id == target.artifact_id,
                    )
                    .values(revision=reference.revision, updated_at=now)
                )
            else:
                current = None
                reference = ArtifactRef(
                    family=family, artifact_id=new_id(_ARTIFACT_PREFIX[family]), revision=1
                )
                conn.execute(
                    insert(_h).values(
                        scope_id=req.scope_id,
                        family=family,
                        artifact_id=reference.artifact_id,
                        revision=1,
                        updated_at=now,
                    )
                )
            result = conn.execute(
                insert(_a).values(
                    scope_id=req.scope_id,
                    family=family,
                    artifact_id=reference.artifact_id,
                    revision=reference.revision,
                    content=version.proposal,
                    source_refs=version.source_refs,
                    artifact_refs=version.artifact_refs,
                    candidate_id=req.candidate_id,
                    candidate_version=head.version,
                    created_at=now,
                )
            )
            if family == "experience":
                # Only the current approved head is searchable.
                if current is not None:
                    self._db.fulltext.remove(conn, "experience", req.scope_id, current.id)
                (row_id,) = result.inserted_primary_key or (None,)
                terms = self._analyze(experience_search_text(json.loads(version.proposal)))
                self._db.fulltext.add(conn, "experience", req.scope_id, int(row_id), terms)
            self.before_approval_status()
            conn.execute(
                update(_c)
                .where(_c.c.scope_id == req.scope_id, _c.c.candidate_id == req.candidate_id)
                .values(
                    status="approved",
                    updated_at=now,
                    result_artifact=canonical_json(reference.model_dump()),
                )
            )
            return self._candidate(conn, req.scope_id, req.candidate_id, None)

        return self._db.write(work)

    # -- artifacts ---------------------------------------------------------------------------

    def get_artifact(
        self, scope_id: str, family: ReviewedFamily, ref: ArtifactRef
    ) -> StoredArtifact:
        if ref.family != family:
            raise NotFoundError(f"no such {family} revision", code="artifact_not_found")
        with self._db.read() as conn:
            return self._stored(conn, scope_id, ref)

    def _stored(self, conn: Connection, scope_id: str, ref: ArtifactRef) -> StoredArtifact:
        row = conn.execute(
            select(_a).where(
                _a.c.scope_id == scope_id,
                _a.c.family == ref.family,
                _a.c.artifact_id == ref.artifact_id,
                _a.c.revision == ref.revision,
            )
        ).first()
        if row is None:
            raise NotFoundError(f"no such {ref.family} revision", code="artifact_not_found")
        return StoredArtifact(
            reference=ref,
            content=json.loads(row.content),
            source_refs=SOURCE_REFS.validate_json(row.source_refs),
            artifact_refs=ARTIFACT_REFS.validate_json(row.artifact_refs),
        )

    def list_artifacts(
        self, scope_id: str, family: ReviewedFamily, limit: int, cursor: str | None
    ) -> tuple[list[StoredArtifact], str | None]:
        """A page of the scope's approved ``family`` artifacts, each at its current head, in
        the order they were first approved (revision 1's time, then id) + the next cursor.

        The order never changes when an artifact is revised, so paging neither skips nor
        repeats an artifact; one approved during paging appears on a later page.
        """
        head = _a.alias("head_revision")
        first = _a.alias("first_revision")
        query = (
            select(
                _h.c.artifact_id,
                _h.c.revision,
                head.c.content,
                head.c.source_refs,
                head.c.artifact_refs,
                first.c.created_at.label("first_approved_at"),
            )
            .select_from(
                _h.join(
                    head,
                    and_(
                        head.c.scope_id == _h.c.scope_id,
                        head.c.family == _h.c.family,
                        head.c.artifact_id == _h.c.artifact_id,
                        head.c.revision == _h.c.revision,
                    ),
                ).join(
                    first,
                    and_(
                        first.c.scope_id == _h.c.scope_id,
                        first.c.family == _h.c.family,
                        first.c.artifact_id == _h.c.artifact_id,
                        first.c.revision == 1,
                    ),
                )
            )
            .where(_h.c.scope_id == scope_id, _h.c.family == family)
            .order_by(first.c.created_at, _h.c.artifact_id)
            .limit(limit + 1)
        )
        if cursor:
            created_at, artifact_id = decode_cursor(cursor)
            query = query.where(
                or_(
                    first.c.created_at > created_at,
                    and_(first.c.created_at == created_at, _h.c.artifact_id > artifact_id),
                )
            )
        with self._db.read() as conn:
            rows = conn.execute(query).all()
        page = rows[:limit]
        next_cursor = (
            encode_cursor(page[-1].first_approved_at, page[-1].artifact_id)
            if len(rows) > limit
            else None
        )
        items = [
            StoredArtifact(
                reference=ArtifactRef(
                    family=family, artifact_id=row.artifact_id, revision=row.revision
                ),
                content=json.loads(row.content),
                source_refs=SOURCE_REFS.validate_json(row.source_refs),
                artifact_refs=ARTIFACT_REFS.validate_json(row.artifact_refs),
            )
            for row in page
        ]
        return items, next_cursor

    def search_experience(
        self, scope_id: str, terms: Sequence[str], limit: int, trace: LexicalTrace | None = None
    ) -> list[ApprovedExperience]:
        """Current approved Experience heads for the query, best first (one snapshot).
        ``trace`` (``explain_context``) is filled with why; the result is the same."""
        if not terms:
            return []
        with self._db.search_read() as conn:
            doc_count, frequencies = read_frequencies(conn, "experience", scope_id, terms)
            plan = scoring.plan_query(terms, doc_count, frequencies)
            if plan is None:
                return []
            found = self._db.fulltext.match(
                conn, "experience", scope_id, plan.retrieval_terms, plan.candidate_limit
            )
            assessed: list[scoring.Assessed] | None = [] if trace is not None else None
            admitted = scoring.rank(plan, found, assessed)
            ranked = scoring.top(admitted, limit)
            rows = self._experience_rows(conn, scope_id, [r.rowid for r in ranked])
            ordered = sorted(
                (r for r in ranked if r.rowid in rows),
                key=lambda r: (
                    -r.score,
                    rows[r.rowid].artifact_id.encode("utf-8"),
                    rows[r.rowid].revision,
                ),
            )[:limit]
            if trace is not None:
                hits = [r.rowid for r in ordered]
                in_order = [*(r for r in ordered), *(r for r in admitted if r.rowid not in hits)]

                def read(ids: list[int]) -> dict[int, tuple[str, str, str]]:
                    return {
                        rowid: (row.artifact_id, str(row.revision), row.content)
                        for rowid, row in self._experience_rows(conn, scope_id, ids).items()
                    }

                trace_lexical(trace, plan, len(found), assessed or [], in_order, hits, [], read)
        return [
            ApprovedExperience(
                artifact_id=rows[r.rowid].artifact_id,
                revision=rows[r.rowid].revision,
                content=json.loads(rows[r.rowid].content),
                score=r.score,
            )
            for r in ordered
        ]

    def _experience_rows(self, conn: Connection, scope_id: str, ids: list[int]) -> dict[int, Any]:
        if not ids:
            return {}
        return {
            row.id: row
            for row in conn.execute(
                # By primary key only (a scope_id filter would make SQLite scan the scope).
                select(_a.c.id, _a.c.scope_id, _a.c.artifact_id, _a.c.revision, _a.c.content).where(
                    _a.c.id.in_(ids)
                )
            )
            if row.scope_id == scope_id
        }

    def reindex_experience(self) -> int:
        def work(conn: Connection) -> int:
            self._db.fulltext.clear(conn, "experience")
            rows = conn.execute(
                select(_a.c.id, _a.c.scope_id, _a.c.content)
                .join(
                    _h,
                    and_(
                        _h.c.scope_id == _a.c.scope_id,
                        _h.c.family == _a.c.family,
                        _h.c.artifact_id == _a.c.artifact_id,
                        _h.c.revision == _a.c.revision,
                    ),
                )
                .where(_a.c.family == "experience")
            ).all()
            for row in rows:
                terms = self._analyze(experience_search_text(json.loads(row.content)))
                self._db.fulltext.add(conn, "experience", row.scope_id, row.id, terms)
            return len(rows)

        return self._db.write(work)

    def experience_index_is_consistent(self) -> bool:
        with self._db.read() as conn:
            indexed = self._db.fulltext.document_count(conn, "experience")
            heads = conn.execute(select(_h.c.artifact_id).where(_h.c.family == "experience")).all()
        return indexed == len(heads)

    # -- internals ---------------------------------------------------------------------------

    def _lock_pending(
        self, conn: Connection, scope_id: str, candidate_id: str, expected_version: int
    ) -> Row[Any]:
        query = select(_c).where(_c.c.scope_id == scope_id, _c.c.candidate_id == candidate_id)
        if self._db.backend != "sqlite":
            query = query.with_for_update()
        head = conn.execute(query).first()
        if head is None:
            raise NotFoundError("no such candidate", code="candidate_not_found")
        if head.status != "pending":
            raise ConflictError(
                "the candidate was already decided",
                code="candidate_terminal",
                details={"status": head.status},
            )
        if head.version != expected_version:
            raise ConflictError(
                "the candidate changed; review its current version",
                code="candidate_conflict",
                details={"expected_version": expected_version, "current_version": head.version},
            )
        return head

    def _check_target(
        self, conn: Connection, scope_id: str, target: ArtifactRef, *, lock: bool
    ) -> Row[Any]:
        """The target's current head revision row; 409 unless ``target`` is that exact head."""
        query = select(_h.c.revision).where(
            _h.c.scope_id == scope_id,
            _h.c.family == target.family,
            _h.c.artifact_id == target.artifact_id,
        )
        if lock and self._db.backend != "sqlite":
            query = query.with_for_update()
        head_revision = conn.execute(query).scalar()
        if head_revision != target.revision:
            current = (
                None
                if head_revision is None
                else ArtifactRef(
                    family=target.family, artifact_id=target.artifact_id, revision=head_revision
                ).model_dump()
            )
            raise ConflictError(
                "the target is not the artifact's current head",
                code="artifact_conflict",
                details={"current": current},
            )
        return conn.execute(
            select(_a.c.id).where(
                _a.c.scope_id == scope_id,
                _a.c.family == target.family,
                _a.c.artifact_id == target.artifact_id,
                _a.c.revision == target.revision,
            )
        ).one()

    def _require_evidence(
        self,
        conn: Connection,
        scope_id: str,
        source_refs: Sequence[SourceRef],
        artifact_refs: Sequence[ArtifactRef],
        target: ArtifactRef | None,
    ) -> None:
        """404 ``evidence_not_found`` unless every reference exists in ``scope_id``.

        Runs in the caller's write transaction. Only this scope is read, so a reference that
        exists in another scope is missing here exactly like one that exists nowhere, and the
        error names positions only — never an id, so it reveals nothing about other scopes.
        ``target`` was already checked to be the exact head (:meth:`_check_target`).
        """
        missing_sources: list[int] = []
        if source_refs:
            wanted = {ref.source_id for ref in source_refs}
            found = {
                (row.name, row.source_id)
                for row in conn.execute(
                    select(sources.c.name, sources.c.source_id).where(
                        sources.c.scope_id == scope_id, sources.c.source_id.in_(sorted(wanted))
                    )
                )
            }
            missing_sources = [
                i for i, ref in enumerate(source_refs) if (ref.name, ref.source_id) not in found
            ]
        missing_artifacts: list[int] = []
        others = {
            (ref.family, ref.artifact_id, ref.revision)
            for ref in artifact_refs
            if ref.family != "memory" and ref != target
        }
        existing: set[tuple[str, str, int]] = set()
        if others:
            existing = {
                (row.family, row.artifact_id, row.revision)
                for row in conn.execute(
                    select(_a.c.family, _a.c.artifact_id, _a.c.revision).where(
                        _a.c.scope_id == scope_id,
                        or_(
                            *(
                                and_(
                                    _a.c.family == family,
                                    _a.c.artifact_id == artifact_id,
                                    _a.c.revision == revision,
                                )
                                for family, artifact_id, revision in sorted(others)
                            )
                        ),
                    )
                )
            }
        memory_head = 0
        if any(ref.family == "memory" for ref in artifact_refs):
            memory_head = (
                conn.execute(
                    select(memory_heads.c.revision).where(memory_heads.c.scope_id == scope_id)
                ).scalar()
                or 0
            )
        for i, ref in enumerate(artifact_refs):
            if ref == target:
                continue
            if ref.family == "memory":
                ok = ref.artifact_id == "memory" and ref.revision <= memory_head
            else:
                ok = (ref.family, ref.artifact_id, ref.revision) in existing
            if not ok:
                missing_artifacts.append(i)
        if missing_sources or missing_artifacts:
            raise NotFoundError(
                "some evidence references do not exist in this scope",
                code="evidence_not_found",
                details={"source_refs": missing_sources, "artifact_refs": missing_artifacts},
            )

    def _insert_version(
        self,
        conn: Connection,
        scope_id: str,
        candidate_id: str,
        version: int,
        proposal: dict[str, Any],
        source_refs: Sequence[Any],
        artifact_refs: Sequence[Any],
        reason: str | None,
        now: int,
    ) -> None:
        conn.execute(
            insert(_cv).values(
                scope_id=scope_id,
                candidate_id=candidate_id,
                version=version,
                proposal=canonical_json(proposal),
                source_refs=dump_refs(source_refs),
                artifact_refs=dump_refs(artifact_refs),
                reason=reason,
                created_at=now,
            )
        )

    def _version_row(
        self, conn: Connection, scope_id: str, candidate_id: str, version: int
    ) -> Row[Any]:
        row = conn.execute(
            select(_cv).where(
                _cv.c.scope_id == scope_id,
                _cv.c.candidate_id == candidate_id,
                _cv.c.version == version,
            )
        ).first()
        if row is None:
            raise NotFoundError("no such candidate version", code="candidate_not_found")
        return row

    def _candidate(
        self, conn: Connection, scope_id: str, candidate_id: str, version: int | None
    ) -> Candidate:
        head = conn.execute(
            select(_c).where(_c.c.scope_id == scope_id, _c.c.candidate_id == candidate_id)
        ).first()
        if head is None:
            raise NotFoundError("no such candidate", code="candidate_not_found")
        row = self._version_row(conn, scope_id, candidate_id, version or head.version)
        return Candidate(
            candidate_id=candidate_id,
            version=row.version,
            family=head.family,
            status=head.status,
            proposal=json.loads(row.proposal),
            source_refs=SOURCE_REFS.validate_json(row.source_refs),
            artifact_refs=ARTIFACT_REFS.validate_json(row.artifact_refs),
            target=_target_of(head),
            reason=row.reason,
            result_artifact=(
                None
                if head.result_artifact is None
                else ArtifactRef.model_validate_json(head.result_artifact)
            ),
            decision_reason=head.decision_reason,
            proposed_by=head.proposed_by or "agent",
            created_at=iso_time(head.created_at),
            updated_at=iso_time(head.updated_at),
        )


def _target_of(head: Row[Any]) -> ArtifactRef | None:
    return None if head.target is None else ArtifactRef.model_validate_json(head.target)


def _validated_proposal(family: str, proposal: dict[str, Any]) -> dict[str, Any]:
    try:
        return _PROPOSAL_MODELS[family].model_validate(proposal).model_dump()
    except ValidationError as exc:
        errors = validation_error_items(
            exc.errors(include_input=False, include_url=False), prefix=("body", "proposal")
        )
        raise InvalidRequestError(
            f"the proposal is not a valid {family}", details={"errors": errors}
        ) from None


def _check_evidence(
    source_refs: Sequence[Any], artifact_refs: Sequence[Any], target: ArtifactRef | None
) -> None:
    if not 1 <= len(source_refs) + len(artifact_refs) <= MAX_EVIDENCE_REFS:
        raise InvalidRequestError(
            f"a candidate needs 1..{MAX_EVIDENCE_REFS} evidence references in total"
        )
    if target is not None and target not in artifact_refs:
        raise InvalidRequestError("a candidate's target must stay in its artifact_refs")
