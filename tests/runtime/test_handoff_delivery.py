"""A Handoff reaches the next session once (docs/bootstrap.md, "Handing off to the next session").

Committing queues the revision for the scope's next session; the host asks which revision waits
(``next_handoff``), names it in its bootstrap request, and claiming that pack ``injected``
consumes the queue. Every step on both backends.
"""

from __future__ import annotations

from typing import Any

from powercontext_runtime.composition import Runtime
from powercontext_runtime.contract.bootstrap import (
    CommitHandoffRequest,
    GetHandoffRequest,
    HandoffRef,
    NextHandoffRequest,
)
from tests.runtime.test_bootstrap_contract import SCOPE, boot, claim, pack_items

OTHER = "git:example.com/acme/other"


def commit(
    rt: Runtime,
    objective: str,
    *,
    base: int | None = None,
    deliver: bool | None = None,
    scope: str = SCOPE,
) -> Any:
    body: dict[str, Any] = {
        "scope_id": scope,
        "base": None if base is None else ref(base).model_dump(),
        "content": {
            "schema": "powercontext.handoff.v1",
            "objective": objective,
            "state": ["the store is done"],
            "disposition": "continuable",
        },
    }
    if deliver is not None:
        body["deliver_next_session"] = deliver
    return rt.bootstrap.commit_handoff(CommitHandoffRequest.model_validate(body))


def ref(revision: int) -> HandoffRef:
    return HandoffRef(family="handoff", artifact_id="handoff", revision=revision)


def waiting(rt: Runtime, scope: str = SCOPE) -> int | None:
    answer = rt.bootstrap.next_handoff(NextHandoffRequest(scope_id=scope))
    assert answer.scope_id == scope
    return None if answer.handoff_ref is None else answer.handoff_ref.revision


def start_session(rt: Runtime, **fields: Any) -> Any:
    """What a host does at SessionStart: ask which Handoff waits, name it, claim the pack."""
    revision = waiting(rt)
    handoff_ref = None if revision is None else ref(revision).model_dump()
    response = boot(rt, handoff_ref=handoff_ref, **fields)
    if response.status == "ready":
        claim(rt, response.receipt.receipt_id)
    return response


def test_nothing_waits_in_a_new_scope(runtime: Runtime) -> None:
    assert waiting(runtime) is None


def test_a_commit_waits_for_the_next_session_which_receives_it_once(runtime: Runtime) -> None:
    result = commit(runtime, "Finish the OceanBase backend")
    assert result.queued is True
    assert waiting(runtime) == 1
    first = start_session(runtime, event_id="session-1")
    [item] = pack_items(first)
    assert item["kind"] == "handoff"
    assert item["citation"] == {"artifact_ref": ref(1).model_dump()}
    assert "Finish the OceanBase backend" in item["content"]
    assert waiting(runtime) is None
    second = start_session(runtime, event_id="session-2")
    assert second.status == "empty"


def test_an_unclaimed_pack_does_not_consume_the_handoff(runtime: Runtime) -> None:
    commit(runtime, "Finish the OceanBase backend")
    preview = boot(runtime, handoff_ref=ref(1).model_dump())
    assert preview.status == "ready"
    assert waiting(runtime) == 1  # only a claimed (injected) delivery counts
    claim(runtime, preview.receipt.receipt_id, state="failed")
    assert waiting(runtime) == 1


def test_a_newer_commit_replaces_the_waiting_revision(runtime: Runtime) -> None:
    commit(runtime, "first")
    commit(runtime, "second", base=1)
    assert waiting(runtime) == 2
    [item] = pack_items(start_session(runtime, event_id="s"))
    assert item["citation"] == {"artifact_ref": ref(2).model_dump()}
    assert waiting(runtime) is None


def test_a_revision_queued_while_an_older_one_is_delivered_stays_queued(runtime: Runtime) -> None:
    commit(runtime, "first")
    response = boot(runtime, handoff_ref=ref(1).model_dump(), event_id="s")
    commit(runtime, "second", base=1)
    claim(runtime, response.receipt.receipt_id)
    assert waiting(runtime) == 2


def test_no_deliver_stores_without_queueing(runtime: Runtime) -> None:
    result = commit(runtime, "just for the record", deliver=False)
    assert result.queued is False
    assert waiting(runtime) is None
    commit(runtime, "deliver this", base=1)
    commit(runtime, "and keep the queue", base=2, deliver=False)
    assert waiting(runtime) == 2  # a stored-only revision leaves the waiting one alone


def test_get_reports_which_revision_waits(runtime: Runtime) -> None:
    commit(runtime, "first")
    commit(runtime, "second", base=1)
    get = runtime.bootstrap.get_handoff
    assert get(GetHandoffRequest(scope_id=SCOPE, artifact=ref(1))).queued is False
    assert get(GetHandoffRequest(scope_id=SCOPE, artifact=ref(2))).queued is True


def test_withdraw_unqueues_and_keeps_the_revision(runtime: Runtime) -> None:
    commit(runtime, "first")
    withdrawn = runtime.bootstrap.withdraw_handoff(NextHandoffRequest(scope_id=SCOPE))
    assert withdrawn.handoff_ref == ref(1)
    assert waiting(runtime) is None
    again = runtime.bootstrap.withdraw_handoff(NextHandoffRequest(scope_id=SCOPE))
    assert again.handoff_ref is None
    kept = runtime.bootstrap.get_handoff(GetHandoffRequest(scope_id=SCOPE, artifact=ref(1)))
    assert kept.content.objective == "first"
    assert start_session(runtime, event_id="s").status == "empty"


def test_queues_are_per_scope(runtime: Runtime) -> None:
    commit(runtime, "here")
    commit(runtime, "there", scope=OTHER)
    start_session(runtime, event_id="s")
    assert waiting(runtime) is None
    assert waiting(runtime, OTHER) == 1
