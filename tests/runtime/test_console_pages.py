"""The reads behind the console's Bootstrap and Activity pages, on every backend.

``get_bootstrap_overview`` reads a scope the way bootstrap does (the same survey decides the
pack's eligibility), and ``get_activity`` counts by day; neither ever returns content of a
receipt or of a captured prompt. The query plans are checked on SQLite.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select, update

from powercontext_runtime.composition import Runtime
from powercontext_runtime.contract.activity import GetActivityRequest, PackCounts
from powercontext_runtime.contract.bootstrap import (
    BootstrapContextRequest,
    CommitHandoffRequest,
    GetBootstrapOverviewRequest,
    RecordReceiptRequest,
    SetContextReferencesRequest,
)
from powercontext_runtime.contract.flush import FlushMemoryRequest
from powercontext_runtime.contract.memory import (
    CaptureSourceRequest,
    RememberMemoryRequest,
    ReviseMemoryEntryRequest,
)
from powercontext_runtime.contract.review import (
    ApproveCandidateRequest,
    ProposeExperienceRequest,
    RejectCandidateRequest,
)
from powercontext_runtime.services.activity import ActivityService
from powercontext_runtime.services.auth import Principal
from powercontext_runtime.store.activity import _RANGED, DAY_MS, ActivityStore
from powercontext_runtime.store.recall_counts import RecallLedger
from powercontext_runtime.store.schema import (
    bootstrap_receipts,
    candidates,
    flush_runs,
    memory_revisions,
    recall_counts,
    sources,
)
from tests.runtime.test_memory_browse import assert_indexed, statements

SCOPE = "git:example.com/acme/pages"
LIB = "git:example.com/acme/lib"
SECRET_SCOPE = "git:example.com/other/secret"
EMPTY = "git:example.com/acme/empty"
EVERYTHING = Principal.unrestricted()
PACKS = PackCounts(scope="daemon", since="2025-01-01T00:00:00.000Z", counts=[])
PROMPT = "remember: the nightly build publishes to the staging bucket"
#: A fixed mid-day instant (2026-06-15 12:00 UTC): Activity tests count days from it, never
#: from the real clock, so no run crosses midnight between writing a row and counting it.
NOON = 20_619 * DAY_MS + DAY_MS // 2
TAG = ["bootstrap-context"]


def remember(rt: Runtime, text: str, scope: str = SCOPE, **fields: Any) -> Any:
    body = {"scope_id": scope, "kind": "convention", "text": text, **fields}
    return rt.memory.remember(RememberMemoryRequest.model_validate(body)).entry


def boot(rt: Runtime, event: str, principal: Principal = EVERYTHING, **fields: Any) -> Any:
    body = {"scope_id": SCOPE, "enabled": True, "profile": "powercontext.scope-bootstrap.v1",
            "lifecycle": "startup", "integration": "codex", "event_id": event}  # fmt: skip
    body.update(fields)
    return rt.bootstrap.bootstrap(BootstrapContextRequest.model_validate(body), principal)


def overview(rt: Runtime, principal: Principal = EVERYTHING, **fields: Any) -> Any:
    request = GetBootstrapOverviewRequest.model_validate({"scope_id": SCOPE, **fields})
    return rt.bootstrap.overview(request, principal)


def test_the_overview_reads_the_scope_as_bootstrap_does(runtime: Runtime) -> None:
    for n in range(5):
        remember(runtime, f"Tagged convention {n}", tags=TAG)
    remember(runtime, "An untagged entry")
    remember(runtime, "ghp_not-a-real-token", kind="github_token", tags=TAG)
    remember(runtime, "Library rule one", scope=LIB, tags=TAG)
    remember(runtime, "Library rule two", scope=LIB, tags=TAG)
    remember(runtime, "Not for this token", scope=SECRET_SCOPE, tags=TAG)
    runtime.bootstrap.set_references(
        SetContextReferencesRequest(scope_id=SCOPE, references=[LIB, SECRET_SCOPE,
                                                                EMPTY])
    )  # fmt: skip
    handoff = {"schema": "powercontext.handoff.v1", "objective": "Ship the console",
               "state": ["explain done"], "disposition": "continuable"}  # fmt: skip
    first = runtime.bootstrap.commit_handoff(
        CommitHandoffRequest.model_validate({"scope_id": SCOPE, "base": None, "content": handoff})
    )
    runtime.bootstrap.commit_handoff(
        CommitHandoffRequest.model_validate(
            {"scope_id": SCOPE, "base": first.reference.model_dump(),
             "content": {**handoff, "disposition": "blocked"}, "deliver_next_session": False}
        )
    )  # fmt: skip
    reader = Principal("reader", (SCOPE, LIB, EMPTY), frozenset({"read"}))

    seen = overview(runtime, reader)
    assert seen.references == [LIB, SECRET_SCOPE, EMPTY]
    assert [(s.scope_id, s.role, s.status) for s in seen.scopes] == [
        (SCOPE, "current", "read"), (LIB, "reference", "read"),
        (SECRET_SCOPE, "reference", "forbidden"),
        (EMPTY, "reference", "no_memory"),
    ]  # fmt: skip
    mine = seen.scopes[0].entries
    assert [e.text for e in mine][:5] == [f"Tagged convention {n}" for n in range(5)]
    assert [(e.kind, e.excluded) for e in mine if not e.eligible] == [
        ("github_token", "secret_kind")
    ]
    lib = seen.scopes[1].entries
    assert [(e.eligible, e.excluded) for e in lib] == [(True, None), (False, "beyond_limit")]
    assert seen.scopes[2].entries == []  # a forbidden scope is never read
    assert seen.limits.memory_items == 6
    assert seen.handoff.head is not None and seen.handoff.head.revision == 2
    assert seen.handoff.queued == first.reference  # the second was not queued
    assert [(r.reference.revision, r.disposition) for r in seen.handoff.revisions] == [
        (2, "blocked"), (1, "continuable"),
    ]  # fmt: skip

    # The pack bootstrap builds holds exactly the eligible entries, in order.
    pack = boot(runtime, "session-1", reader, handoff_ref=seen.handoff.queued.model_dump())
    delivered = [i.citation for i in pack.items if i.kind == "memory"]
    eligible = [e.citation.model_dump() for s in seen.scopes for e in s.entries if e.eligible]
    assert delivered == eligible
    assert pack.omitted == 3  # the forbidden and the empty reference, the 7th eligible entry


def test_receipts_are_listed_without_content_or_ids(runtime: Runtime) -> None:
    secret = "The deploy key rotates on Mondays"
    remember(runtime, secret, tags=TAG)
    other = Principal("someone-else", ("*",), frozenset({"read"}))
    claimed = boot(runtime, "session-1")
    runtime.bootstrap.record_receipt(
        RecordReceiptRequest(scope_id=SCOPE, receipt_id=claimed.receipt.receipt_id,
                             state="injected"), EVERYTHING
    )  # fmt: skip
    pending = boot(runtime, "session-2", other)
    seen = overview(runtime)
    assert [(r.state, r.mine) for r in seen.receipts] == [("pending", False), ("injected", True)]
    receipt = seen.receipts[1]
    assert receipt.integration == "codex" and receipt.lifecycle == "startup"
    assert receipt.content_bytes == claimed.content_bytes and receipt.withheld == 0
    assert [i.citation for i in receipt.items] == [i.citation for i in claimed.items]
    dumped = json.dumps([r.model_dump() for r in seen.receipts])
    assert secret not in dumped and "digest" not in dumped
    for receipt_id in (claimed.receipt.receipt_id, pending.receipt.receipt_id):
        assert receipt_id not in dumped
    assert overview(runtime, receipts=1).receipts[0].state == "pending"
    assert overview(runtime, receipts=0).receipts == []
    with runtime.db.engine.begin() as conn:  # expired receipts are not shown
        conn.execute(update(bootstrap_receipts).values(expires_at=1))
    assert overview(runtime).receipts == []


def activity(rt: Runtime, now_ms: int, **fields: Any) -> Any:
    service = ActivityService(ActivityStore(rt.db), clock=lambda: now_ms / 1000)
    request = GetActivityRequest.model_validate({"scope_id": SCOPE, **fields})
    return service.activity(request, PACKS, rt.embedding_status())


def test_activity_counts_by_day_and_never_content(runtime: Runtime) -> None:
    for n in range(3):
        runtime.sources.capture(
            CaptureSourceRequest(scope_id=SCOPE, source_id=f"prompt-{n}", content=f"{PROMPT} {n}")
        )
    flushed = runtime.flush.flush(FlushMemoryRequest(scope_id=SCOPE, max_sources=2))
    assert flushed.status == "processed"
    entry = remember(runtime, "Run make lint before pushing")
    runtime.memory.revise(
        ReviseMemoryEntryRequest(scope_id=SCOPE, citation=entry.citation, text="Run make lint")
    )
    remember(runtime, "another scope's entry", scope=LIB)
    boot(runtime, "session-1")
    # Everything happened at NOON, a fixed mid-day instant, and "now" is an hour later, on the
    # same day whenever the suite runs (before: the real clock, so a run after 23:00 UTC put
    # "now" on the next day). Then move a capture and a write to "yesterday", and one capture
    # out of the window.
    day, now = NOON, NOON + 3600_000
    with runtime.db.engine.begin() as conn:
        for table in (sources, memory_revisions, flush_runs, bootstrap_receipts):
            conn.execute(update(table).where(table.c.scope_id == SCOPE).values(created_at=day))
        conn.execute(update(sources).where(sources.c.scope_id == SCOPE, sources.c.position == 2)
                     .values(created_at=day - DAY_MS))  # fmt: skip
        conn.execute(update(sources).where(sources.c.scope_id == SCOPE, sources.c.position == 3)
                     .values(created_at=day - 30 * DAY_MS))  # fmt: skip
        conn.execute(update(memory_revisions).where(memory_revisions.c.scope_id == SCOPE,
                                                    memory_revisions.c.revision == 1)
                     .values(created_at=day - DAY_MS))  # fmt: skip
    seen = activity(runtime, now, days=7)
    assert len(seen.days) == 7 and seen.days[-1].day > seen.days[0].day
    today, yesterday = seen.days[-1], seen.days[-2]
    assert (yesterday.prompts_captured, today.prompts_captured) == (1, 1)
    assert today.flush_runs == 1 and today.sources_flushed == 2
    assert today.entries_from_flush == 2  # one remember: line in each flushed prompt
    assert (yesterday.remembered, today.remembered, today.revised) == (1, 2, 1)
    assert today.bootstrap_skipped == 1  # nothing tagged: an empty pack, a skipped receipt
    assert sum(d.prompts_captured for d in seen.days) == seen.totals.prompts_captured == 2
    assert (seen.capture.captured, seen.capture.flushed, seen.capture.waiting) == (3, 2, 1)
    assert seen.memory.active == 3 and seen.memory.retired == 0
    assert seen.memory.revision == 4
    assert PROMPT not in seen.model_dump_json()
    wide = activity(runtime, now, days=90)
    assert wide.totals.prompts_captured == 3
    # Days follow the requested offset: +14 h puts "now" on the next calendar day.
    shifted = activity(runtime, now, days=2, utc_offset_minutes=840)
    assert shifted.utc_offset_minutes == 840 and len(shifted.days) == 2


def distilled(rt: Runtime, lesson: str, proposed_by: Any) -> str:
    """A pending Experience candidate from ``proposed_by``, citing a captured prompt."""
    source = f"src-{lesson}"
    rt.sources.capture(CaptureSourceRequest(scope_id=SCOPE, source_id=source, content=PROMPT))
    proposal = {"situation": "s", "action": "a", "outcome": "o", "lesson": lesson}
    refs = [{"name": "content", "source_id": source}]
    body = {"scope_id": SCOPE, "source_refs": refs, "proposal": proposal}
    request = ProposeExperienceRequest.model_validate(body)
    store = rt.review._store  # the worker's door: only it can set proposed_by
    return store.propose("experience", request, proposed_by=proposed_by).candidate_id


def decide(rt: Runtime, candidate_id: str, approve: bool) -> None:
    body = {"scope_id": SCOPE, "candidate_id": candidate_id, "expected_version": 1}
    if approve:
        rt.review.approve(ApproveCandidateRequest.model_validate(body))
    else:
        rt.review.reject(RejectCandidateRequest.model_validate({**body, "decision_reason": "no"}))


def test_activity_counts_each_proposers_candidates_in_the_window(runtime: Runtime) -> None:
    kept = distilled(runtime, "offline kept", "offline")
    dropped = distilled(runtime, "offline dropped", "offline")
    distilled(runtime, "offline pending", "offline")
    old = distilled(runtime, "offline proposed long ago", "offline")
    model = distilled(runtime, "model rejected", "openai-compatible")
    agent = distilled(runtime, "agent kept", "agent")
    stale = distilled(runtime, "agent decided long ago", "agent")
    for candidate_id, approve in ((kept, True), (dropped, False), (old, True), (model, False),
                                  (agent, True), (stale, False)):  # fmt: skip
        decide(runtime, candidate_id, approve)
    day, now = NOON, NOON + 3600_000
    c = candidates
    with runtime.db.engine.begin() as conn:
        conn.execute(update(c).where(c.c.scope_id == SCOPE).values(created_at=day, updated_at=day))
        # Proposed before the window, approved in it: an approval, not a proposal.
        conn.execute(update(c).where(c.c.candidate_id == old).values(created_at=day - 9 * DAY_MS))
        # Proposed and decided before the window: nothing.
        conn.execute(update(c).where(c.c.candidate_id == stale)
                     .values(created_at=day - 9 * DAY_MS, updated_at=day - 8 * DAY_MS))  # fmt: skip
        # From before the distillers (NULL): an agent's.
        conn.execute(update(c).where(c.c.candidate_id == agent).values(proposed_by=None))
    seen = {d.proposed_by: (d.proposed, d.approved, d.rejected)
            for d in activity(runtime, now, days=7).distillers}  # fmt: skip
    assert seen == {"offline": (3, 2, 1), "openai-compatible": (1, 0, 1), "agent": (1, 1, 0)}
    assert [d.proposed_by for d in activity(runtime, now, days=7).distillers] == [
        "agent", "offline", "openai-compatible"]  # fmt: skip
    wide = {d.proposed_by: (d.proposed, d.approved, d.rejected)
            for d in activity(runtime, now, days=30).distillers}  # fmt: skip
    assert wide["offline"] == (4, 2, 1) and wide["agent"] == (2, 1, 1)
    # Another scope's candidates are not this one's.
    other = GetActivityRequest.model_validate({"scope_id": LIB})
    counted = ActivityService(ActivityStore(runtime.db), clock=lambda: now / 1000).activity(
        other, PACKS, runtime.embedding_status()
    )
    assert all((d.proposed, d.approved, d.rejected) == (0, 0, 0) for d in counted.distillers)


def test_http_pages_need_read_and_report_the_daemons_packs(api: TestClient) -> None:
    body = {"scope_id": SCOPE, "kind": "fact", "text": "Run make lint before pushing"}
    assert api.post("/v1/memory/remember", json=body).status_code == 200
    assert api.post("/v1/context/prepare", json={"scope_id": SCOPE, "query": "lint"}).status_code
    answer = api.post("/v1/activity/get", json={"scope_id": SCOPE, "days": 3})
    assert answer.status_code == 200, answer.text
    packs = answer.json()["packs"]
    assert packs["scope"] == "daemon"
    assert {"operation": "prepare_context", "status": "ready", "mode": "fts", "reason": "",
            "count": 1} in packs["counts"]  # fmt: skip
    # The semantic channel is off here: the Activity page says so rather than hiding it.
    assert answer.json()["embeddings"] == {
        "state": "off", "model": None, "pending": None, "pending_capped": False,
        "vectors": None, "error": None, "last_round": None,
    }  # fmt: skip
    assert api.post("/v1/activity/get", json={"scope_id": SCOPE, "days": 91}).status_code == 422
    shown = api.post("/v1/context/bootstrap/overview", json={"scope_id": SCOPE})
    assert shown.status_code == 200, shown.text
    assert shown.json()["scopes"][0]["status"] == "read"


@pytest.mark.parametrize("days", [1, 90])
def test_page_queries_are_index_ranges(sqlite_runtime: Runtime, days: int) -> None:
    rt = sqlite_runtime
    remember(rt, "Tagged", tags=TAG)
    rt.sources.capture(CaptureSourceRequest(scope_id=SCOPE, source_id="p", content=PROMPT))
    rt.flush.flush(FlushMemoryRequest(scope_id=SCOPE))
    boot(rt, "session-1")
    decide(rt, distilled(rt, "indexed", "offline"), approve=True)
    with statements(rt) as seen:
        activity(rt, 2**41, days=days)
        overview(rt)
    assert_indexed(rt, seen)
    # The day counts go through the driver cursor (no SQLAlchemy event sees them): each is a
    # range of a (scope, created_at, …) index, and nothing is sorted.
    with rt.db.engine.connect() as conn:
        for sql, _, unit in _RANGED:
            plan = [r[-1] for r in conn.exec_driver_sql("EXPLAIN QUERY PLAN " + sql,
                                                        (SCOPE, 0, DAY_MS // unit))]  # fmt: skip
            assert len(plan) == 1 and plan[0].startswith("SEARCH"), (sql, plan)
            # Covering, but for the few flush runs (their sums read the rows) and the quarter
            # hours' counters (the primary key's range).
            covering = "USING COVERING INDEX ix_" in plan[0]
            assert (
                covering
                or "USING INDEX ix_flush_runs_created" in plan[0]
                or "USING INDEX sqlite_autoindex_recall_counts_1" in plan[0]
            ), (sql, plan)
            column = "created_at" if unit == 1 else "bucket"
            assert f"{column}>? AND {column}<?" in plan[0], (sql, plan)


def test_packs_prepared_are_counted_per_scope_and_day(runtime: Runtime) -> None:
    remember(runtime, "Run make lint before pushing")
    entry_day = 20_000 * DAY_MS  # a fixed day; the ledger's clock and the page's agree
    clock = [entry_day / 1000 + 3600]
    ledger = RecallLedger(runtime.db, flush_seconds=600, clock=lambda: clock[0])
    try:
        for outcome in ("ready", "ready", "no_match"):
            ledger.note(SCOPE, outcome)
        ledger.note(LIB, "no_memory")  # another scope's
        clock[0] -= 86_400  # yesterday
        ledger.note(SCOPE, "budget")
        assert ledger.flush() == 4
        clock[0] += 86_400
        ledger.note(SCOPE, "ready")  # added to the row already written
        assert ledger.flush() == 1
        assert ledger.flush() == 0
    finally:
        ledger.close()
    seen = activity(runtime, entry_day + 7200_000, days=2)
    yesterday, today = seen.days
    assert (today.packs_ready, today.packs_no_match, today.packs_no_memory) == (3, 1, 0)
    assert (yesterday.packs_budget, yesterday.packs_ready) == (1, 0)
    assert (seen.totals.packs_ready, seen.totals.packs_budget) == (3, 1)
    # Days follow the offset in whole quarter hours: at -90 minutes, 01:00 UTC is yesterday.
    west = activity(runtime, entry_day + 7200_000, days=2, utc_offset_minutes=-90)
    assert (west.days[0].packs_ready, west.days[1].packs_ready) == (3, 0)


def test_counts_survive_a_failed_write_and_close_writes_the_rest(runtime: Runtime) -> None:
    ledger = RecallLedger(runtime.db, flush_seconds=600)
    real_write = runtime.db.write
    failing = [True]

    def write(work: Any, **kw: Any) -> Any:
        if failing[0]:
            failing[0] = False
            raise RuntimeError("the database is unwritable for a moment")
        return real_write(work, **kw)

    runtime.db.write = write  # type: ignore[method-assign]
    try:
        ledger.note(SCOPE, "ready")
        with pytest.raises(RuntimeError):
            ledger.flush()
        ledger.note(SCOPE, "ready")
    finally:
        ledger.close()  # the retry: both counts
        runtime.db.write = real_write  # type: ignore[method-assign]
    with runtime.db.read() as conn:
        assert conn.execute(select(func.sum(recall_counts.c.count))).scalar() == 2


def test_http_prepare_counts_its_outcome_for_the_scope(api: TestClient) -> None:
    empty = api.post("/v1/context/prepare", json={"scope_id": SCOPE, "query": "lint"})
    assert empty.json()["status"] == "empty"  # the scope has no memory yet
    body = {"scope_id": SCOPE, "kind": "fact", "text": "Run make lint before pushing"}
    assert api.post("/v1/memory/remember", json=body).status_code == 200
    for query in ("what about lint before pushing?", "the weather in Lisbon"):
        assert api.post("/v1/context/prepare", json={"scope_id": SCOPE, "query": query})
    runtime = api.app.state.runtime  # type: ignore[attr-defined]
    runtime.recall.flush()
    today = api.post("/v1/activity/get", json={"scope_id": SCOPE, "days": 1}).json()["days"][0]
    assert (today["packs_ready"], today["packs_no_match"], today["packs_no_memory"]) == (1, 1, 1)
