"""Every concurrency race of spec 08 ("Reliability and security tests" → Concurrency), per backend.

All contenders are released together by ``run_at_once`` (a barrier, no sleeps), and every
outcome is judged: a race may end in success or in a *typed* conflict (HTTP 409), never in any
other error — an untyped exception here is a 500 over HTTP. After each race the stored state is
read back, because a race that answers correctly but stores two winners is still lost.

The ``runtime`` fixture runs each test on SQLite and on OceanBase (seekdb). Two *processes*
sharing one OceanBase database is a different race and lives in
``tests/e2e/test_oceanbase_daemons.py``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any, TypeVar

import pytest
from sqlalchemy import func, select

from powercontext_runtime.composition import Runtime
from powercontext_runtime.contract.bootstrap import (
    BootstrapContextRequest,
    BootstrapContextResponse,
    CommitHandoffRequest,
    GetHandoffRequest,
    HandoffRef,
    HandoffResult,
    RecordReceiptRequest,
    RecordReceiptResponse,
    SetContextReferencesRequest,
)
from powercontext_runtime.contract.flush import FlushMemoryRequest
from powercontext_runtime.contract.memory import (
    CaptureSourceRequest,
    ListMemoryChangesRequest,
    ListMemoryEntriesRequest,
    MemoryChange,
    MemoryEntry,
    MemoryWriteResult,
    RememberMemoryRequest,
    SearchMemoryRequest,
)
from powercontext_runtime.contract.review import (
    ApproveCandidateRequest,
    Candidate,
    ProposeExperienceRequest,
)
from powercontext_runtime.errors import ConflictError
from powercontext_runtime.extraction import CapturedSource, ExtractedEntry
from powercontext_runtime.extraction.directives import DirectivesExtractor
from powercontext_runtime.search.analyzer import document_terms
from powercontext_runtime.services.auth import Principal
from powercontext_runtime.services.flush import FlushService
from powercontext_runtime.store.flush import FlushStore
from powercontext_runtime.store.memory import MemoryStore
from powercontext_runtime.store.schema import artifact_revisions, bootstrap_receipts, sources
from tests.support.concurrency import Outcome, run_at_once

SCOPE = "git:example.com/acme/races"
OK = "ok"
T = TypeVar("T")


def verdicts(outcomes: Sequence[Outcome[Any]]) -> list[str]:
    """``"ok"`` or the conflict code for each contender; any other failure fails the test.

    The unexpected exception is re-raised as it was, so the report shows the worker's traceback.
    """
    results: list[str] = []
    for outcome in outcomes:
        if outcome.error is None:
            results.append(OK)
        elif isinstance(outcome.error, ConflictError):
            results.append(outcome.error.code)
        else:
            raise outcome.error
    return results


def winners(outcomes: Sequence[Outcome[T]]) -> list[T]:
    return [o.value for o in outcomes if o.error is None and o.value is not None]


# -- memory reads used to check the stored state after a race -------------------------------


def all_entries(rt: Runtime, scope: str) -> list[MemoryEntry]:
    entries: list[MemoryEntry] = []
    cursor = None
    while True:
        page = rt.memory.list(ListMemoryEntriesRequest(scope_id=scope, limit=100, cursor=cursor))
        entries += page.entries
        cursor = page.next_cursor
        if cursor is None:
            return entries


def all_changes(rt: Runtime, scope: str) -> list[MemoryChange]:
    changes: list[MemoryChange] = []
    while True:
        since = changes[-1].revision if changes else 0
        page = rt.memory.changes(
            ListMemoryChangesRequest(scope_id=scope, since_revision=since, limit=1000)
        )
        if not page.changes:
            return changes
        changes += page.changes


def assert_memory_holds_exactly(rt: Runtime, scope: str, written: list[MemoryWriteResult]) -> None:
    """The scope's Memory is exactly the acknowledged writes, one revision each, gap-free."""
    total = len(written)
    assert sorted(w.memory.revision for w in written) == list(range(1, total + 1))
    stored = {e.citation.entry_id: e.text for e in all_entries(rt, scope)}
    assert stored == {w.entry.citation.entry_id: w.entry.text for w in written}
    changes = all_changes(rt, scope)
    assert [c.revision for c in changes] == list(range(1, total + 1))
    by_revision = {w.memory.revision: w.entry.citation.entry_id for w in written}
    assert {c.revision: c.entry_id for c in changes} == by_revision
    assert rt.memory.index_is_consistent()


# -- Review: approvals --------------------------------------------------------------------------


def test_32_concurrent_approvals_of_one_version_succeed_once(runtime: Runtime) -> None:
    runtime.sources.capture(
        CaptureSourceRequest(scope_id=SCOPE, source_id="prompt/run-42", content="result")
    )
    candidate = runtime.review.propose_experience(
        ProposeExperienceRequest.model_validate(
            {
                "scope_id": SCOPE,
                "proposal": {
                    "situation": "Changing the OpenAPI document",
                    "action": "Regenerated the client and ran the contract tests",
                    "outcome": "Caught a breaking rename before release",
                    "lesson": "After editing openapi, regenerate the client",
                },
                "source_refs": [{"name": "content", "source_id": "prompt/run-42"}],
            }
        )
    )
    request = ApproveCandidateRequest(
        scope_id=SCOPE, candidate_id=candidate.candidate_id, expected_version=candidate.version
    )
    outcomes = run_at_once([partial(runtime.review.approve, request)] * 32)

    results = verdicts(outcomes)
    assert results.count(OK) == 1
    assert set(results) == {OK, "candidate_terminal"}
    (approved,) = winners(outcomes)
    assert isinstance(approved, Candidate) and approved.status == "approved"
    with runtime.db.read() as conn:
        artifacts = conn.execute(select(func.count()).select_from(artifact_revisions)).scalar()
    assert artifacts == 1
    assert runtime.review.index_is_consistent()


# -- Bootstrap: receipts -------------------------------------------------------------------------


def _bootstrap(rt: Runtime, event_id: str | None = None) -> BootstrapContextResponse:
    request = BootstrapContextRequest.model_validate(
        {
            "scope_id": SCOPE,
            "enabled": True,
            "profile": "powercontext.scope-bootstrap.v1",
            "lifecycle": "startup",
            "integration": "codex",
            "event_id": event_id,
        }
    )
    return rt.bootstrap.bootstrap(request, Principal.unrestricted())


def _remember_bootstrap_convention(rt: Runtime) -> None:
    rt.memory.remember(
        RememberMemoryRequest(
            scope_id=SCOPE,
            kind="convention",
            text="Run make lint before pushing",
            tags=["bootstrap-context"],
        )
    )


def test_32_concurrent_receipt_claims_exactly_one_succeeds(runtime: Runtime) -> None:
    _remember_bootstrap_convention(runtime)
    receipt = _bootstrap(runtime).receipt.receipt_id
    claim = RecordReceiptRequest(scope_id=SCOPE, receipt_id=receipt, state="injected")
    outcomes = run_at_once(
        [partial(runtime.bootstrap.record_receipt, claim, Principal.unrestricted())] * 32
    )

    results = verdicts(outcomes)
    assert results.count(OK) == 1
    assert set(results) == {OK, "receipt_conflict"}
    (claimed,) = winners(outcomes)
    assert isinstance(claimed, RecordReceiptResponse) and claimed.state == "injected"
    with runtime.db.read() as conn:
        assert conn.execute(select(bootstrap_receipts.c.state)).scalars().all() == ["injected"]


def test_concurrent_bootstrap_requests_for_one_event_create_one_receipt(
    runtime: Runtime,
) -> None:
    _remember_bootstrap_convention(runtime)
    outcomes = run_at_once([partial(_bootstrap, runtime, "race-event")] * 16)

    assert set(verdicts(outcomes)) == {OK}
    responses = winners(outcomes)
    assert len({r.receipt.receipt_id for r in responses}) == 1
    assert len({r.content for r in responses}) == 1 and responses[0].status == "ready"
    with runtime.db.read() as conn:
        assert len(conn.execute(select(bootstrap_receipts)).all()) == 1


# -- flush_memory -----------------------------------------------------------------------------


class _GatedExtractor:
    """Holds every call at a barrier, so all flushes have read the same window before any commit.

    Without it the first flush may commit before the others read, and they would see an empty
    window: correct, but no race.
    """

    name = "gated"

    def __init__(self, parties: int) -> None:
        self._barrier = threading.Barrier(parties)

    def __call__(self, sources: Sequence[CapturedSource]) -> list[ExtractedEntry]:
        self._barrier.wait(timeout=60)
        return DirectivesExtractor()(sources)


def test_concurrent_flushes_of_one_window_write_once(runtime: Runtime) -> None:
    flushes = 4
    runtime.sources.capture(
        CaptureSourceRequest(scope_id=SCOPE, source_id="p1", content="remember: only once please")
    )
    service = FlushService(
        FlushStore(runtime.db, MemoryStore(runtime.db, document_terms)), _GatedExtractor(flushes)
    )
    request = FlushMemoryRequest(scope_id=SCOPE)
    outcomes = run_at_once([partial(service.flush, request)] * flushes)

    assert sorted(verdicts(outcomes)) == [*["flush_conflict"] * (flushes - 1), OK]
    (flushed,) = winners(outcomes)
    assert (flushed.status, flushed.current_cursor) == ("processed", 1)
    assert [e.text for e in all_entries(runtime, SCOPE)] == ["only once please"]
    assert [c.revision for c in all_changes(runtime, SCOPE)] == [1]


# -- first writes to a fresh scope ------------------------------------------------------------

FIRST_WRITERS = 16


@pytest.mark.parametrize("pattern", ["all-expect-empty", "mixed"])
def test_concurrent_first_remembers_to_a_fresh_scope(runtime: Runtime, pattern: str) -> None:
    """Expected head 0 is a compare-and-swap on a head row that does not exist yet.

    ``mixed`` alternates CAS writes with unconditional ones: the unconditional ones must all
    land, and a CAS write can only win as the very first revision.
    """

    def expected(i: int) -> int | None:
        return 0 if pattern == "all-expect-empty" or i % 2 == 0 else None

    requests = [
        RememberMemoryRequest(
            scope_id=SCOPE, kind="fact", text=f"first write {i}", expected_revision=expected(i)
        )
        for i in range(FIRST_WRITERS)
    ]
    outcomes = run_at_once([partial(runtime.memory.remember, r) for r in requests])

    results = verdicts(outcomes)
    cas = [r for i, r in enumerate(results) if expected(i) == 0]
    unconditional = [r for i, r in enumerate(results) if expected(i) is None]
    assert set(cas) <= {OK, "revision_conflict"} and cas.count(OK) <= 1
    assert unconditional == [OK] * len(unconditional)
    if pattern == "all-expect-empty":
        assert cas.count(OK) == 1
    for i, outcome in enumerate(outcomes):
        if expected(i) == 0 and outcome.value is not None:
            assert outcome.value.memory.revision == 1
    assert_memory_holds_exactly(runtime, SCOPE, winners(outcomes))


@pytest.mark.parametrize("pattern", ["all-expect-empty", "mixed"])
def test_concurrent_first_reference_sets_on_a_fresh_scope(runtime: Runtime, pattern: str) -> None:
    def expected(i: int) -> int | None:
        return 0 if pattern == "all-expect-empty" or i % 2 == 0 else None

    requests = [
        SetContextReferencesRequest(
            scope_id=SCOPE,
            references=[f"git:example.com/acme/lib-{i}"],
            expected_version=expected(i),
        )
        for i in range(FIRST_WRITERS)
    ]
    outcomes = run_at_once([partial(runtime.bootstrap.set_references, r) for r in requests])

    results = verdicts(outcomes)
    cas = [r for i, r in enumerate(results) if expected(i) == 0]
    unconditional = [r for i, r in enumerate(results) if expected(i) is None]
    assert set(cas) <= {OK, "references_conflict"} and cas.count(OK) <= 1
    assert unconditional == [OK] * len(unconditional)
    if pattern == "all-expect-empty":
        assert cas.count(OK) == 1
    written = winners(outcomes)
    # Every successful set took its own version; the stored value is the last one's.
    assert sorted(w.version for w in written) == list(range(1, len(written) + 1))
    last = max(written, key=lambda w: w.version)
    stored = runtime.bootstrap.get_references(SCOPE)
    assert (stored.version, stored.references) == (last.version, last.references)


def test_concurrent_first_captures_to_a_fresh_scope(runtime: Runtime) -> None:
    """Positions come from a per-scope counter row that the first capture has to create.

    Contenders come in pairs per ``source_id``: even pairs repeat the payload (idempotent, both
    get one position), odd pairs differ (one is stored, the other is a typed conflict).
    """

    def request(i: int) -> CaptureSourceRequest:
        pair = i // 2
        payload = f"payload {pair}" if pair % 2 == 0 else f"payload {pair} from contender {i}"
        return CaptureSourceRequest(scope_id=SCOPE, source_id=f"s{pair}", content=payload)

    outcomes = run_at_once([partial(runtime.sources.capture, request(i)) for i in range(16)])

    results = verdicts(outcomes)
    positions: dict[str, set[int]] = {}
    for pair in range(8):
        pair_results = results[2 * pair : 2 * pair + 2]
        if pair % 2 == 0:
            assert pair_results == [OK, OK]
        else:
            assert sorted(pair_results) == [OK, "source_conflict"]
        for outcome in outcomes[2 * pair : 2 * pair + 2]:
            if outcome.value is not None:
                positions.setdefault(outcome.value.source.source_id, set()).add(
                    outcome.value.position
                )
    assert all(len(given) == 1 for given in positions.values())  # a repeat: the same position
    with runtime.db.read() as conn:
        rows = conn.execute(select(sources.c.source_id, sources.c.position)).all()
    assert {source_id: position for source_id, position in rows} == {
        source_id: given.pop() for source_id, given in positions.items()
    }
    assert sorted(position for _, position in rows) == list(range(1, 9))


def _commit_handoff(rt: Runtime, objective: str, base: HandoffRef | None) -> HandoffResult:
    return rt.bootstrap.commit_handoff(
        CommitHandoffRequest.model_validate(
            {
                "scope_id": SCOPE,
                "base": None if base is None else base.model_dump(),
                "content": {
                    "schema": "powercontext.handoff.v1",
                    "objective": objective,
                    "state": ["store done"],
                    "disposition": "continuable",
                    "next_action": "run the benchmarks",
                    "omissions": [],
                },
            }
        )
    )


def _race_handoff_commits(rt: Runtime, base: HandoffRef | None) -> HandoffResult:
    """``FIRST_WRITERS`` commits on one base: exactly one wins; the head is the winner's."""
    calls: list[Callable[[], HandoffResult]] = [
        partial(_commit_handoff, rt, f"objective {i}", base) for i in range(FIRST_WRITERS)
    ]
    outcomes = run_at_once(calls)
    results = verdicts(outcomes)
    assert results.count(OK) == 1 and set(results) == {OK, "artifact_conflict"}
    (won,) = winners(outcomes)
    assert won.reference.revision == (0 if base is None else base.revision) + 1
    stored = rt.bootstrap.get_handoff(GetHandoffRequest(scope_id=SCOPE, artifact=won.reference))
    assert stored.content == won.content
    return won


def test_concurrent_handoff_commits_on_one_base_succeed_once(runtime: Runtime) -> None:
    first = _race_handoff_commits(runtime, None)  # the fresh scope: no head row yet
    second = _race_handoff_commits(runtime, first.reference)
    with runtime.db.read() as conn:
        revisions = conn.execute(
            select(artifact_revisions.c.revision).where(artifact_revisions.c.family == "handoff")
        ).scalars()
        assert sorted(revisions) == [1, 2]
    assert second.reference.revision == 2


# -- 8 writers x 200 remembers ----------------------------------------------------------------

WRITERS = 8
WRITES_PER_WRITER = 200
# Searching all 1,600 entries one by one costs ~7 s on seekdb (~2 s on SQLite) on a 2-core
# machine; every 8th write of each writer plus its last one (208 searches) exercises every
# writer and every stretch of the run. *Every* entry being indexed is checked by
# ``index_is_consistent`` (index rows == active versions) in ``assert_memory_holds_exactly``.
SEARCHED = [*range(0, WRITES_PER_WRITER, 8), WRITES_PER_WRITER - 1]


def test_8_writers_x_200_remembers_keep_every_acknowledged_entry(runtime: Runtime) -> None:
    """Writers contend for one scope head the whole time, not only on the first write."""
    acknowledged: list[list[MemoryWriteResult]] = [[] for _ in range(WRITERS)]

    def token(writer: int, i: int) -> str:
        return f"w{writer}i{i}"  # one analyzer term that no other entry contains

    def writer(n: int) -> None:
        for i in range(WRITES_PER_WRITER):
            request = RememberMemoryRequest(
                scope_id=SCOPE, kind="fact", text=f"note {token(n, i)} from a concurrent writer"
            )
            acknowledged[n].append(runtime.memory.remember(request))

    outcomes = run_at_once([partial(writer, n) for n in range(WRITERS)])

    # What was acknowledged must be stored even if some writer failed later on ...
    written = [result for results in acknowledged for result in results]
    assert_memory_holds_exactly(runtime, SCOPE, written)
    # ... and no writer may fail at all: nothing here conflicts.
    assert set(verdicts(outcomes)) == {OK}
    assert len(written) == WRITERS * WRITES_PER_WRITER
    for n in range(WRITERS):
        for i in SEARCHED:
            found = runtime.memory.search(
                SearchMemoryRequest(scope_id=SCOPE, query=token(n, i), limit=2)
            )
            assert [h.citation.entry_id for h in found.hits] == [
                acknowledged[n][i].entry.citation.entry_id
            ]
