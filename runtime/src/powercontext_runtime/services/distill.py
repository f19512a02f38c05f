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

Never logged: content, scope ids, task ids, signatures. Counts per distiller and outcome feed
``/metrics`` (:data:`OUTCOMES`).
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

from ..contract.common import SourceRef
from ..contract.limits import MAX_EVIDENCE_REFS
from ..contract.review import ProposedBy, ProposeExperienceRequest, ReviseCandidateRequest
from ..distill.offline import Lesson, TaskInput, propose_lessons
from ..errors import ConflictError, InvalidRequestError, NotFoundError
from ..files import write_private_file
from ..store.database import Database
from ..store.review import DISTILL_MATCH_CHANGED, ReviewStore, signature_digest
from ..store.schema import source_heads, sources
from ..store.task_results import TASK_RESULT

__all__ = [
    "OUTCOMES",
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
            try:
                lessons = distiller.propose(task.source_id, parsed)
            except Exception as exc:  # one distiller, one task result: the worker goes on
                _log.warning(
                    "distill_failed",
                    extra={"operation": distiller.name, "error_type": type(exc).__name__},
                )
                self._count(distiller.name, "failed")
                continue
            for lesson in lessons[:LESSONS_PER_TASK]:
                self._count(distiller.name, self._merge_lesson(scope_id, distiller, lesson, task))

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


class DistillWorker:
    """The background thread that runs :meth:`DistillService.run_round`, like the embedding
    worker: every ``interval`` seconds or when a local ``record_task_result`` wakes it, again at
    once while rounds come back full, and with a doubling back-off (up to a minute) while a
    round raises (the database is away). A failure is logged by exception type only."""

    MAX_BACKOFF = 60.0

    def __init__(
        self, service: DistillService, interval: float = INTERVAL, *, state_file: Path | None = None
    ) -> None:
        self.state: DistillState | None = None
        self._service = service
        self._interval = interval
        self._state_file = state_file
        self._published: tuple[str, str | None, float, dict[str, int]] | None = None
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread = threading.Thread(target=self._run, name="powercontext-distill", daemon=True)

    def start(self) -> None:
        if self._state_file is not None:  # a previous run's: not this worker's state
            self._state_file.unlink(missing_ok=True)
        self._thread.start()

    def wake(self) -> None:
        self._wake.set()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        self._thread.join(timeout=self._interval + 30)

    def _run(self) -> None:
        delay = 0.0  # a first round at start: catch up with what was recorded while down
        while not self._stop.is_set():
            if self._wake.wait(delay):
                self._wake.clear()
            if self._stop.is_set():
                return
            try:
                read = self._service.run_round()
            except Exception as exc:  # keep the loop alive; log the type only
                _log.warning("distill_round_failed", extra={"error_type": type(exc).__name__})
                self._record("failing", type(exc).__name__)
                delay = min(max(delay * 2, self._interval), self.MAX_BACKOFF)
                continue
            if read:
                _log.info("task_results_distilled", extra={"count": read})
            full = read >= TASKS_PER_ROUND
            self._record("distilling" if full else "idle", None)
            delay = 0.0 if full else self._interval

    def _record(self, state: Literal["idle", "distilling", "failing"], error: str | None) -> None:
        """Keep the round's outcome and publish it to the state file on a change of state or
        error kind at once, a change of counts at most every ``STATE_PUBLISH_SECONDS``."""
        now = time.time()
        counts = {f"{d}/{o}": n for (d, o), n in sorted(self._service.counts().items())}
        self.state = DistillState(state, error, now, counts)
        if self._state_file is None:
            return
        published = self._published
        if (
            published is not None
            and published[:2] == (state, error)
            and (published[3] == counts or now - published[2] < STATE_PUBLISH_SECONDS)
        ):
            return
        try:
            write_private_file(self._state_file, json.dumps(self.state._asdict()))
        except OSError as exc:  # /metrics then shows older counts; never the loop's end
            _log.warning("distill_state_unwritten", extra={"error_type": type(exc).__name__})
            return
        self._published = (state, error, now, counts)
