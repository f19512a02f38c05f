"""The distill worker: recorded task results in, *pending* candidates out (issue #31, spec 06).

Distillers only ever propose. This worker runs beside the embedding worker (the serving
process; the supervisor with ``serve --workers N``, so one per data dir), outside any database
transaction while a distiller thinks: it reads the task results recorded after each scope's
high-water mark (``source_heads.distill_cursor``, persisted, so a restart neither proposes
again nor skips), hands each to every enabled distiller (:class:`Distiller`), and merges each
lesson into the Review Inbox by its signature (docs/decisions/offline-distiller.md):

* the newest candidate with the signature is **pending** → a new version of it with the task
  result added to its evidence (CAS on its version; proposal unchanged; at most 32 references,
  a full candidate stays as it is);
* it is **approved** → a revision candidate whose ``target`` is the Experience's exact current
  head (also in ``artifact_refs``), carrying the head's evidence plus the task result;
* it is **rejected** → nothing: the reviewer's decision on that lesson stands;
* there is none → a new pending candidate citing the task result.

A lesson whose task result the match already cites changes nothing, so reading a task result
twice (a crash between a write and the cursor's advance, an import) is harmless. A reviewer who
decides between the worker's read and its write makes the write fail its CAS; the worker reads
again and decides again. Nothing here reaches a pack: only approval does (spec 06).

Skills (spec 06, :mod:`..distill.skills`): after the task results, each round looks at the
scopes whose approved Experience set changed (a cheap signal: the number of Experience heads and
the sum of their revisions, which every approval moves) and hands their approved heads to
:func:`~..distill.skills.propose_skills`. A Skill candidate is stored under its *group*'s
signature (``skill|<topic>``), so a group that gained a member revises the pending candidate
instead of proposing a second one (:meth:`DistillService.merge_skill`). Approving a Skill never
changes a pack.

A model distiller whose endpoint failed (:class:`~..distill.errors.DistillerUnavailable` with
``retryable``) does not lose the task result: it is queued for that distiller alone and asked
again on later rounds, with a doubling back-off, at most :data:`RETRY_ATTEMPTS` calls in all,
then counted ``failed``. The scope's high-water mark moves on regardless, so the other
distillers are never held back; the queue is in memory (a restart passes what was waiting).

Never logged: content, scope ids, task ids, signatures. Counts per distiller and outcome feed
``/metrics`` (:data:`OUTCOMES`); Skill outcomes are counted under :data:`SKILLS`.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal, NamedTuple, Protocol

from sqlalchemy import Connection, func, select, update

from ..contract.common import ArtifactRef, SourceRef
from ..contract.limits import LIST_LIMIT_MAX, MAX_EVIDENCE_REFS
from ..contract.review import (
    ProposedBy,
    ProposeExperienceRequest,
    ProposeSkillRequest,
    ReviseCandidateRequest,
)
from ..distill.errors import DistillerUnavailable
from ..distill.offline import Lesson, TaskInput, propose_lessons
from ..distill.skills import ApprovedExperienceView, SkillLesson, propose_skills
from ..errors import ConflictError, InvalidRequestError, NotFoundError
from ..store.database import Database
from ..store.review import DISTILL_MATCH_CHANGED, ReviewStore, signature_digest
from ..store.schema import artifact_heads, source_heads, sources
from ..store.task_results import TASK_RESULT
from .background import BackgroundWorker

__all__ = [
    "OUTCOMES",
    "RETRY_ATTEMPTS",
    "SKILLS",
    "DistillService",
    "DistillWorker",
    "Distiller",
    "OfflineDistiller",
    "read_distill_state",
]

_log = logging.getLogger("powercontext.distill")

#: What one lesson (or one distiller call) came to, per distiller: a new pending candidate, a
#: new version of a pending one, a revision candidate of an approved Experience, nothing
#: (already cited, evidence full, or a rejected lesson), or a failure (the distiller raised, or
#: its lesson was refused, or the merge kept racing).
Outcome = Literal["proposed", "merged", "revision", "unchanged", "failed"]
OUTCOMES: tuple[Outcome, ...] = ("proposed", "merged", "revision", "unchanged", "failed")
#: Task results read per round, over every scope; and per scope, so one busy scope cannot
#: hold the others back for long. A round is one read per scope plus the merges.
TASKS_PER_ROUND = 32
TASKS_PER_SCOPE = 8
#: Scopes with unread task results looked at per round (the rest wait for the next).
SCOPES_PER_ROUND = 64
#: Lessons merged from one distiller's answer for one task result.
LESSONS_PER_TASK = 3
#: Reads-and-decides of one lesson before it counts as failed (each retry follows a
#: concurrent decision on the same candidate; more than a few means something is wrong).
MERGE_ATTEMPTS = 4
#: Calls of one distiller for one task result when its endpoint keeps failing retryably (the
#: first, in the round that read it, and the retries), before it counts as failed.
RETRY_ATTEMPTS = 3
#: Seconds before the first retry; each further one waits twice as long.
RETRY_BACKOFF = 2.0
#: Task results waiting for a retry, per distiller; one more is counted failed at once (an
#: endpoint down for hours must not grow the worker's memory without bound).
RETRY_QUEUE = 256
#: The key Skill proposals are counted under (``counts()``, the state file), next to the
#: distillers' names: Skills come from approved Experience, not from one distiller.
SKILLS = "skills"
#: Approved Experience heads of one scope read for :func:`propose_skills` (every one up to
#: this; a scope with more gets its Skills from the first approved).
SKILL_EXPERIENCES = 1000
#: Scopes whose approved Experience set changed looked at per round.
SKILL_SCOPES_PER_ROUND = 16
#: Seconds between the worker's polls (a local ``record_task_result`` wakes it at once; with
#: ``serve --workers`` the request lands in another process, so the poll is what finds it).
INTERVAL = 2.0
#: Seconds between rewrites of the state file when only counts changed.
STATE_PUBLISH_SECONDS = 5.0
#: Codes after which a merge reads again and decides again: the candidate moved on (revised,
#: approved, rejected), the approved head moved, or a candidate with the signature appeared.
_RETRY_CODES = frozenset(
    {"candidate_conflict", "candidate_terminal", "artifact_conflict", DISTILL_MATCH_CHANGED}
)


class Distiller(Protocol):
    """Anything that turns one task result into lessons (/work/notes' interface, issue #31):
    pure or network-only, never the database. ``name`` is stored on the candidates it
    proposes (``proposed_by``). It may raise; the worker counts and logs the failure by type
    and goes on."""

    name: ProposedBy

    def propose(self, task_ref: str, task: TaskInput) -> list[Lesson]: ...


class OfflineDistiller:
    """The offline rules (:mod:`..distill.offline`): deterministic, no model, on by default."""

    name: ProposedBy = "offline"

    def propose(self, task_ref: str, task: TaskInput) -> list[Lesson]:
        return propose_lessons(task_ref, task)


class _Task(NamedTuple):
    position: int
    source_id: str
    content: str


class _Retry(NamedTuple):
    """A task result one distiller must be asked again (its endpoint failed retryably)."""

    scope_id: str
    task: _Task
    attempts: int  # calls made so far
    due: float  # the service's clock


class DistillService:
    """One round at a time (:meth:`run_round`) of reading task results and merging lessons;
    :class:`DistillWorker` runs rounds in a thread. Tests call :meth:`run_round` directly."""

    def __init__(self, db: Database, review: ReviewStore, distillers: Sequence[Distiller]) -> None:
        self._db = db
        self._review = review
        self.distillers = tuple(distillers)
        self._round = threading.Lock()  # one round at a time in this process
        self._counts_lock = threading.Lock()
        self._counts: dict[tuple[str, str], int] = {}
        #: Test seam: called between a merge's read and its write, so a test can decide the
        #: candidate there (a concurrent reviewer) and prove the worker decides again.
        self.before_merge_write: Callable[[], None] = lambda: None
        #: The retries' clock (monotonic seconds); a test seam, so back-off is tested without
        #: waiting.
        self.clock: Callable[[], float] = time.monotonic
        #: distiller name -> (scope, task source id) -> what to ask again, when.
        self._retries: dict[str, dict[tuple[str, str], _Retry]] = {}
        #: scope -> the approved-Experience signal :func:`propose_skills` last ran on.
        self._skill_seen: dict[str, tuple[int, int]] = {}

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(d.name for d in self.distillers)

    def counts(self) -> dict[tuple[str, str], int]:
        """``(distiller, outcome) -> count`` since this service started."""
        with self._counts_lock:
            return dict(self._counts)

    def _count(self, distiller: str, outcome: Outcome) -> None:
        with self._counts_lock:
            key = (distiller, outcome)
            self._counts[key] = self._counts.get(key, 0) + 1

    # -- a round ---------------------------------------------------------------------------

    def run_round(self, max_tasks: int = TASKS_PER_ROUND) -> int:
        """Read up to ``max_tasks`` task results past the scopes' high-water marks, merge
        their lessons and advance the marks; how many task results were read. A storage
        failure raises (nothing past the last advanced mark is lost: the next round reads it
        again); a distiller's failure on one task result does not."""
        with self._round:
            heads = self._read(
                lambda conn: conn.execute(
                    select(
                        source_heads.c.scope_id,
                        source_heads.c.last_position,
                        source_heads.c.distill_cursor,
                    )
                    .where(
                        source_heads.c.last_position
                        > func.coalesce(source_heads.c.distill_cursor, 0)
                    )
                    .order_by(source_heads.c.scope_id)
                    .limit(SCOPES_PER_ROUND)
                ).all()
            )
            done = 0
            for head in heads:
                budget = min(TASKS_PER_SCOPE, max_tasks - done)
                if budget <= 0:
                    break
                done += self._scope_round(
                    head.scope_id, int(head.distill_cursor or 0), int(head.last_position), budget
                )
            self._retry_due()
            self._skills_round()
            return done

    def _scope_round(self, scope_id: str, cursor: int, last: int, budget: int) -> int:
        tasks = self._read(
            lambda conn: [
                _Task(*row)
                for row in conn.execute(
                    select(sources.c.position, sources.c.source_id, sources.c.content)
                    .where(
                        sources.c.scope_id == scope_id,
                        sources.c.position > cursor,
                        sources.c.position <= last,
                        sources.c.name == TASK_RESULT,
                    )
                    .order_by(sources.c.position)
                    .limit(budget)
                )
            ]
        )
        for task in tasks:
            self._distill(scope_id, task)
            if not self._advance(scope_id, cursor, task.position):
                return len(tasks)  # another process distils this scope: leave it to it
            cursor = task.position
        if len(tasks) < budget and cursor < last:
            # Everything up to ``last`` was read (the rest are prompts): skip past it.
            self._advance(scope_id, cursor, last)
        return len(tasks)

    def _advance(self, scope_id: str, expected: int, to: int) -> bool:
        """Move the scope's high-water mark from ``expected`` to ``to`` (CAS); False when it
        had moved already."""

        def work(conn: Connection) -> bool:
            moved = conn.execute(
                update(source_heads)
                .where(
                    source_heads.c.scope_id == scope_id,
                    func.coalesce(source_heads.c.distill_cursor, 0) == expected,
                )
                .values(distill_cursor=to)
            )
            return bool(moved.rowcount)

        return bool(self._db.write(work))

    def _distill(self, scope_id: str, task: _Task) -> None:
        try:
            data = json.loads(task.content)
            parsed = TaskInput.from_mapping(data if isinstance(data, dict) else {})
        except ValueError:  # stored by the runtime; an unreadable one is passed, not retried
            _log.warning("distill_task_unreadable", extra={"error_type": "ValueError"})
            return
        for distiller in self.distillers:
            self._ask(distiller, scope_id, task, parsed, attempts=0)

    def _ask(
        self, distiller: Distiller, scope_id: str, task: _Task, parsed: TaskInput, attempts: int
    ) -> None:
        """One call of one distiller for one task result and the merge of its lessons; a
        retryable failure queues the task result for this distiller (back-off doubling per
        call) until :data:`RETRY_ATTEMPTS` calls were made. Logged: the error's type and kind
        only."""
        try:
            lessons = distiller.propose(task.source_id, parsed)
        except Exception as exc:  # one distiller, one task result: the worker goes on
            attempts += 1
            kind = exc.kind if isinstance(exc, DistillerUnavailable) else None
            queue = self._retries.setdefault(distiller.name, {})
            retry = (
                isinstance(exc, DistillerUnavailable)
                and exc.retryable
                and attempts < RETRY_ATTEMPTS
                and (len(queue) < RETRY_QUEUE or (scope_id, task.source_id) in queue)
            )
            _log.warning(
                "distill_retry_later" if retry else "distill_failed",
                extra={
                    "operation": distiller.name,
                    "error_type": type(exc).__name__,
                    "kind": kind,
                    "attempts": attempts,
                },
            )
            if retry:
                due = self.clock() + RETRY_BACKOFF * 2 ** (attempts - 1)
                queue[(scope_id, task.source_id)] = _Retry(scope_id, task, attempts, due)
            else:
                self._count(distiller.name, "failed")
            return
        for lesson in lessons[:LESSONS_PER_TASK]:
            self._count(distiller.name, self._merge_lesson(scope_id, distiller, lesson, task))

    def _retry_due(self) -> None:
        """Ask each distiller again for its queued task results whose back-off has passed
        (only that distiller: the others already answered for them). Merging is by signature,
        so a lesson another distiller proposed meanwhile changes nothing or adds evidence."""
        now = self.clock()
        for distiller in self.distillers:
            queue = self._retries.get(distiller.name)
            if not queue:
                continue
            for key, retry in sorted(queue.items(), key=lambda item: item[1].due):
                if retry.due > now:
                    continue
                del queue[key]
                data = json.loads(retry.task.content)  # it parsed when first read
                parsed = TaskInput.from_mapping(data if isinstance(data, dict) else {})
                self._ask(distiller, retry.scope_id, retry.task, parsed, retry.attempts)

    def pending_retries(self) -> int:
        """Task results waiting for a distiller's retry, over all distillers."""
        return sum(len(queue) for queue in self._retries.values())

    def _merge_lesson(
        self, scope_id: str, distiller: Distiller, lesson: Lesson, task: _Task
    ) -> Outcome:
        try:
            return self.merge(scope_id, distiller.name, lesson, task.source_id)
        except (InvalidRequestError, NotFoundError) as exc:  # a lesson the contract refuses
            _log.warning(
                "distill_lesson_refused",
                extra={"operation": distiller.name, "code": exc.code},
            )
            return "failed"

    # -- the merge -------------------------------------------------------------------------

    def merge(
        self, scope_id: str, proposed_by: ProposedBy, lesson: Lesson, task_ref: str
    ) -> Outcome:
        """Merge one lesson citing ``task_ref`` into the scope's Inbox (the module's rules),
        reading again and deciding again after every lost CAS."""
        signature = signature_digest(lesson.signature)
        ref = SourceRef(name=TASK_RESULT, source_id=task_ref)
        for _ in range(MERGE_ATTEMPTS):
            match = self._review.distilled_match(scope_id, signature)
            self.before_merge_write()
            try:
                if match is None:
                    self._review.propose(
                        "experience",
                        ProposeExperienceRequest(
                            scope_id=scope_id,
                            proposal=lesson.proposal(),
                            source_refs=[ref],
                            reason=f"Proposed by the {proposed_by} distiller ({lesson.rule}).",
                        ),
                        proposed_by=proposed_by,
                        signature=signature,
                        newest=None,
                    )
                    return "proposed"
                if match.status == "rejected":
                    return "unchanged"
                if match.status == "pending":
                    if ref in match.source_refs:
                        return "unchanged"
                    if len(match.source_refs) + len(match.artifact_refs) >= MAX_EVIDENCE_REFS:
                        return "unchanged"  # full: the reviewer has evidence enough
                    self._review.revise(
                        ReviseCandidateRequest(
                            scope_id=scope_id,
                            candidate_id=match.candidate_id,
                            expected_version=match.version,
                            proposal=match.proposal,
                            source_refs=[*match.source_refs, ref],
                            reason=f"The {proposed_by} distiller saw this lesson again.",
                        )
                    )
                    return "merged"
                head = match.head
                if head is None or ref in head.source_refs:
                    return "unchanged"
                artifact_refs = [
                    head.reference,
                    *(r for r in head.artifact_refs if r != head.reference),
                ]
                source_refs = [*head.source_refs, ref]
                if len(source_refs) + len(artifact_refs) > MAX_EVIDENCE_REFS:
                    return "unchanged"
                self._review.propose(
                    "experience",
                    ProposeExperienceRequest(
                        scope_id=scope_id,
                        proposal=head.content,
                        source_refs=source_refs,
                        artifact_refs=artifact_refs,
                        target=head.reference,
                        reason=(
                            f"The {proposed_by} distiller saw this approved lesson again: "
                            "the same Experience with one more task result as evidence."
                        ),
                    ),
                    proposed_by=proposed_by,
                    signature=signature,
                    newest=match.candidate_id,
                )
                return "revision"
            except ConflictError as exc:
                if exc.code not in _RETRY_CODES:
                    raise
        _log.warning("distill_merge_raced", extra={"operation": proposed_by})
        return "failed"

    # -- Skills from approved Experience ----------------------------------------------------

    def _skills_round(self) -> None:
        """Propose Skills for the scopes whose approved Experience set changed since this
        service last looked. The signal is one aggregate over ``artifact_heads`` (rows =
        approved artifacts): per scope the number of Experience heads and the sum of their
        revisions — a new Experience moves the first, a revision the second, nothing else
        moves either — so an unchanged scope costs no read of its Experiences. In memory: a
        new process looks at every scope once, harmless since merging is by signature."""
        rows = self._read(
            lambda conn: conn.execute(
                select(
                    artifact_heads.c.scope_id,
                    func.count(),
                    func.coalesce(func.sum(artifact_heads.c.revision), 0),
                )
                .where(artifact_heads.c.family == "experience")
                .group_by(artifact_heads.c.scope_id)
                .order_by(artifact_heads.c.scope_id)
            ).all()
        )
        changed = [
            (str(scope_id), (int(count), int(total)))
            for scope_id, count, total in rows
            if self._skill_seen.get(str(scope_id)) != (int(count), int(total))
        ]
        for scope_id, signal in changed[:SKILL_SCOPES_PER_ROUND]:
            views: list[ApprovedExperienceView] = []
            cursor: str | None = None
            while len(views) < SKILL_EXPERIENCES:
                page, cursor = self._review.list_artifacts(
                    scope_id, "experience", LIST_LIMIT_MAX, cursor
                )
                views.extend(
                    ApprovedExperienceView.from_artifact(
                        {"reference": a.reference.model_dump(), "content": a.content}
                    )
                    for a in page
                )
                if cursor is None:
                    break
            for skill in propose_skills(views[:SKILL_EXPERIENCES]):
                self._count(SKILLS, self._merge_skill(scope_id, skill))
            self._skill_seen[scope_id] = signal  # a storage error above: looked at again

    def _merge_skill(self, scope_id: str, skill: SkillLesson) -> Outcome:
        try:
            return self.merge_skill(scope_id, skill)
        except (InvalidRequestError, NotFoundError) as exc:  # refused by the contract
            _log.warning("distill_skill_refused", extra={"operation": SKILLS, "code": exc.code})
            return "failed"

    def merge_skill(self, scope_id: str, skill: SkillLesson) -> Outcome:
        """Merge one proposed Skill into the scope's Inbox, like a lesson but keyed on its
        *group* (``skill|<topic>``, the signature without its members), compared by the
        approved Experiences cited (artifact ids; a member's new revision is not news):

        * none → a pending Skill candidate citing the group's Experiences;
        * pending, citing every member already → nothing; else (the group gained or changed a
          member) → a new version (CAS) with the rebuilt procedure and the group's citations,
          so one candidate per topic waits for review, never two;
        * approved, the head citing every member → nothing; else a revision candidate
          targeting the Skill's exact head;
        * rejected → nothing while the group has no Experience the rejected one did not
          cite; one that gained a member is a new proposal (the member set is what was
          judged, as the full ``SkillLesson.signature`` says).

        Reads again and decides again after a lost CAS, like :meth:`merge`."""
        signature = signature_digest(skill.signature.rsplit("|", 1)[0])
        wanted = [ArtifactRef.model_validate(ref) for ref in skill.artifact_refs()]
        members = {ref.artifact_id for ref in wanted}
        reason = (
            f"Proposed by the offline distiller: {len(wanted)} approved Experiences about "
            f"`{skill.group}` add up to one procedure."
        )

        def cites_all(refs: Sequence[ArtifactRef]) -> bool:
            return members <= {r.artifact_id for r in refs if r.family == "experience"}

        for _ in range(MERGE_ATTEMPTS):
            match = self._review.distilled_match(scope_id, signature)
            self.before_merge_write()
            try:
                if match is None or (
                    match.status == "rejected" and not cites_all(match.artifact_refs)
                ):
                    self._review.propose(
                        "skill",
                        ProposeSkillRequest(
                            scope_id=scope_id,
                            proposal=skill.proposal(),
                            artifact_refs=wanted,
                            reason=reason,
                        ),
                        proposed_by="offline",
                        signature=signature,
                        newest=None if match is None else match.candidate_id,
                    )
                    return "proposed"
                if match.status == "rejected":
                    return "unchanged"
                if match.status == "pending":
                    if cites_all(match.artifact_refs):
                        return "unchanged"
                    heads = [r for r in match.artifact_refs if r.family == "skill"]
                    self._review.revise(
                        ReviseCandidateRequest(
                            scope_id=scope_id,
                            candidate_id=match.candidate_id,
                            expected_version=match.version,
                            proposal=skill.proposal(),
                            source_refs=match.source_refs,
                            artifact_refs=[*heads, *wanted][:MAX_EVIDENCE_REFS],
                            reason=f"{reason} The group gained an Experience.",
                        )
                    )
                    return "merged"
                head = match.head
                if head is None or cites_all(head.artifact_refs):
                    return "unchanged"
                artifact_refs = [head.reference, *wanted]
                if len(artifact_refs) > MAX_EVIDENCE_REFS:
                    return "unchanged"
                self._review.propose(
                    "skill",
                    ProposeSkillRequest(
                        scope_id=scope_id,
                        proposal=skill.proposal(),
                        artifact_refs=artifact_refs,
                        target=head.reference,
                        reason=f"{reason} The approved Skill's group gained an Experience.",
                    ),
                    proposed_by="offline",
                    signature=signature,
                    newest=match.candidate_id,
                )
                return "revision"
            except ConflictError as exc:
                if exc.code not in _RETRY_CODES:
                    raise
        _log.warning("distill_merge_raced", extra={"operation": SKILLS})
        return "failed"

    def _read(self, work: Callable[[Connection], Any]) -> Any:
        with self._db.read() as conn:
            return work(conn)


class DistillState(NamedTuple):
    """What the distill worker's last round did and its counts since it started (the
    metrics), never content: a failure is its exception's type."""

    state: Literal["idle", "distilling", "failing"]
    error: str | None
    last_round: float  # epoch seconds
    counts: dict[str, int]  # "distiller/outcome" -> count


def read_distill_state(path: Path) -> DistillState | None:
    """The state the serving process's worker published (``serve --workers``: it runs in the
    supervisor, and the workers that answer ``/metrics`` read it here). None when absent or
    unreadable."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        counts = {str(k): int(v) for k, v in data["counts"].items()}
        state = DistillState(data["state"], data["error"], float(data["last_round"]), counts)
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    if state.state not in ("idle", "distilling", "failing"):
        return None
    return state


class DistillWorker(BackgroundWorker):
    """The background thread that runs :meth:`DistillService.run_round` (the loop shared with
    the embedding worker, :mod:`.background`): every ``interval`` seconds or when a local
    ``record_task_result`` wakes it, again at once while rounds come back full, and with a
    doubling back-off (up to a minute) while a round raises (the database is away). A failure
    is logged by exception type only."""

    THREAD_NAME = "powercontext-distill"
    LOG = _log
    FAILED_EVENT = "distill_round_failed"
    UNWRITTEN_EVENT = "distill_state_unwritten"
    PUBLISH_SECONDS = STATE_PUBLISH_SECONDS

    def __init__(
        self, service: DistillService, interval: float = INTERVAL, *, state_file: Path | None = None
    ) -> None:
        self.state: DistillState | None = None
        self._service = service
        super().__init__(interval, state_file)

    def _round(self) -> float:
        read = self._service.run_round()
        if read:
            _log.info("task_results_distilled", extra={"count": read})
        full = read >= TASKS_PER_ROUND
        self._record("distilling" if full else "idle", None)
        return 0.0 if full else self._interval

    def _failed(self, error_type: str) -> None:
        self._record("failing", error_type)

    def _record(self, state: Literal["idle", "distilling", "failing"], error: str | None) -> None:
        """Keep the round's outcome and publish it: a change of state or error kind at once, a
        change of counts at most every ``STATE_PUBLISH_SECONDS``."""
        counts = {f"{d}/{o}": n for (d, o), n in sorted(self._service.counts().items())}
        self.state = DistillState(state, error, time.time(), counts)
        self._publish(self.state, counts)
