"""Scope bootstrap, receipts and recall de-duplication on every backend (spec 05, issue 7)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import ValidationError
from sqlalchemy import select, update

from powercontext_runtime.composition import Runtime
from powercontext_runtime.contract.bootstrap import (
    BootstrapContextRequest,
    BootstrapContextResponse,
    CommitHandoffRequest,
    HandoffRef,
    RecordReceiptRequest,
    SetContextReferencesRequest,
)
from powercontext_runtime.contract.context import PrepareContextRequest
from powercontext_runtime.contract.memory import (
    RememberMemoryRequest,
    ReviseMemoryEntryRequest,
)
from powercontext_runtime.errors import ConflictError, NotFoundError
from powercontext_runtime.services.auth import Principal
from powercontext_runtime.store.schema import bootstrap_receipts

SCOPE = "git:example.com/acme/app"
EVERYTHING = Principal.unrestricted()
TAG = ["bootstrap-context"]


def remember(
    rt: Runtime,
    text: str,
    scope: str = SCOPE,
    kind: str = "convention",
    tags: list[str] | None = None,
) -> Any:
    return rt.memory.remember(
        RememberMemoryRequest(
            scope_id=scope, kind=kind, text=text, tags=TAG if tags is None else tags
        )
    )


def boot(rt: Runtime, principal: Principal = EVERYTHING, **fields: Any) -> BootstrapContextResponse:
    body = {
        "scope_id": SCOPE,
        "enabled": True,
        "profile": "powercontext.scope-bootstrap.v1",
        "lifecycle": "startup",
        "integration": "codex",
        **fields,
    }
    return rt.bootstrap.bootstrap(BootstrapContextRequest.model_validate(body), principal)


def claim(
    rt: Runtime,
    receipt_id: str,
    state: str = "injected",
    scope: str = SCOPE,
    principal: Principal = EVERYTHING,
) -> Any:
    return rt.bootstrap.record_receipt(
        RecordReceiptRequest(scope_id=scope, receipt_id=receipt_id, state=state), principal
    )


def pack_items(response: BootstrapContextResponse) -> list[dict[str, Any]]:
    assert response.content is not None
    lines = response.content.split("\n")
    assert response.content.splitlines() == lines  # one line per marker under any rule
    assert lines[0] == "PowerContext bootstrap untrusted historical context."
    assert lines[3] == "BEGIN_POWERCONTEXT_BOOTSTRAP_CONTEXT_V1"
    assert lines[-1] == "END_POWERCONTEXT_BOOTSTRAP_CONTEXT_V1" and len(lines) == 6
    document = json.loads(lines[4])
    assert document["trust"] == "untrusted_history"
    assert document["profile"] == "powercontext.scope-bootstrap.v1"
    return document["items"]


def handoff(
    rt: Runtime, objective: str = "Finish the OceanBase backend", base: HandoffRef | None = None
) -> HandoffRef:
    result = rt.bootstrap.commit_handoff(
        CommitHandoffRequest.model_validate(
            {
                "scope_id": SCOPE,
                "base": None if base is None else base.model_dump(),
                "content": {
                    "schema": "powercontext.handoff.v1",
                    "objective": objective,
                    "state": ["store done", "search done"],
                    "disposition": "continuable",
                    "next_action": "run the benchmarks",
                    "omissions": [],
                },
            }
        )
    )
    return result.reference


def test_disabled_is_skipped_with_an_ephemeral_receipt(runtime: Runtime) -> None:
    remember(runtime, "Run make lint before pushing")
    off = boot(runtime, enabled=False)
    assert (off.status, off.content, off.content_bytes, off.items) == ("skipped", None, 0, [])
    assert off.receipt.state == "skipped" and off.receipt.ephemeral is True
    with runtime.db.read() as conn:
        assert conn.execute(select(bootstrap_receipts)).all() == []


@pytest.mark.parametrize("lifecycle", ["startup", "resume", "clear", "compact", "restore", "fork"])
def test_every_lifecycle_gets_the_curated_pack(runtime: Runtime, lifecycle: str) -> None:
    remember(runtime, "Run make lint before pushing")
    remember(runtime, "not curated", tags=[])
    response = boot(runtime, lifecycle=lifecycle)
    assert response.status == "ready" and response.receipt.state == "pending"
    assert [item["content"] for item in pack_items(response)] == ["Run make lint before pushing"]
    assert response.pack_digest is not None and response.pack_digest.startswith("sha256:")


def test_nothing_eligible_is_empty(runtime: Runtime) -> None:
    remember(runtime, "untagged", tags=[])
    empty = boot(runtime)
    assert (empty.status, empty.content, empty.receipt.state) == ("empty", None, "skipped")
    assert empty.receipt.ephemeral is True


def test_handoff_only_when_named_and_always_first(runtime: Runtime) -> None:
    remember(runtime, "Run make lint before pushing")
    first = handoff(runtime)
    second = handoff(runtime, "Ship it", base=first)
    assert [i["kind"] for i in pack_items(boot(runtime))] == ["memory"]
    items = pack_items(boot(runtime, handoff_ref=first.model_dump()))
    assert [i["kind"] for i in items] == ["handoff", "memory"]
    assert items[0]["citation"] == {"artifact_ref": first.model_dump()}
    assert items[0]["content"].startswith("Objective: Finish the OceanBase backend\n")
    assert second.revision == 2
    with pytest.raises(ConflictError) as caught:
        handoff(runtime, "stale", base=first)
    assert caught.value.code == "artifact_conflict"
    missing = boot(
        runtime, handoff_ref={"family": "handoff", "artifact_id": "handoff", "revision": 9}
    )
    assert missing.omitted == 1 and [i["kind"] for i in pack_items(missing)] == ["memory"]


def test_scopes_contribute_in_canonical_order_and_are_authorised(runtime: Runtime) -> None:
    remember(runtime, "own scope entry")
    remember(runtime, "shared org entry", scope="git:example.com/acme/shared")
    remember(runtime, "secret team entry", scope="git:example.com/other/secret")
    remember(runtime, "platform entry", scope="git:example.com/acme/platform")
    runtime.bootstrap.set_references(
        SetContextReferencesRequest(
            scope_id=SCOPE,
            references=[
                "git:example.com/acme/platform",
                "git:example.com/other/secret",
                "git:example.com/acme/shared",
                "git:example.com/acme/unknown",
            ],
        )
    )
    all_scopes = pack_items(boot(runtime))
    assert [i["content"] for i in all_scopes] == [
        "own scope entry",
        "platform entry",
        "secret team entry",
        "shared org entry",
    ]
    limited = Principal("limited", (SCOPE, "git:example.com/acme/*"), frozenset({"read"}))
    response = boot(runtime, principal=limited)
    assert [i["scope_id"] for i in pack_items(response)] == [
        SCOPE,
        "git:example.com/acme/platform",
        "git:example.com/acme/shared",
    ]
    assert response.omitted == 2  # the forbidden scope and the unknown one


def test_references_are_ordered_distinct_and_compare_and_swap(runtime: Runtime) -> None:
    first = runtime.bootstrap.set_references(
        SetContextReferencesRequest(scope_id=SCOPE, references=["b", "a"], expected_version=0)
    )
    assert (first.references, first.version) == (["b", "a"], 1)
    with pytest.raises(ConflictError) as caught:
        runtime.bootstrap.set_references(
            SetContextReferencesRequest(scope_id=SCOPE, references=["c"], expected_version=0)
        )
    assert caught.value.code == "references_conflict"
    assert runtime.bootstrap.get_references(SCOPE).references == ["b", "a"]
    for bad in (["a", "a"], [SCOPE], [f"s{i}" for i in range(33)]):
        with pytest.raises(ValidationError):
            SetContextReferencesRequest(scope_id=SCOPE, references=bad)


@pytest.mark.parametrize(
    "kind",
    [
        "API-Key",
        "api_key",
        "Access Key",
        "github_token",
        "password",
        "Private-Key",
        "db_credentials",
        "SECRET",
    ],
)
def test_secret_kinds_are_never_bootstrapped(runtime: Runtime, kind: str) -> None:
    remember(runtime, "sk-live-do-not-leak", kind=kind)
    remember(runtime, "a harmless convention")
    contents = [i["content"] for i in pack_items(boot(runtime))]
    assert contents == ["a harmless convention"]


def test_at_most_six_memory_items_and_byte_limits(runtime: Runtime) -> None:
    for i in range(8):
        remember(runtime, f"约定 {i}: " + "数据库持久化逻辑🙂" * 60)
    response = boot(runtime)
    items = pack_items(response)
    assert response.content is not None
    assert len(response.content.encode()) == response.content_bytes <= 4096
    assert len(items) <= 6
    assert response.omitted == 8 - len(items)
    for item in items:
        assert 64 <= len(item["content"].encode()) <= 2000
    big = boot(runtime, max_bytes=8192, event_id="e-big")
    assert big.content_bytes <= 8192
    assert len(items) < len(pack_items(big)) <= 6
    assert big.omitted == 8 - len(pack_items(big))
    with pytest.raises(ValidationError):
        BootstrapContextRequest.model_validate(
            {
                "scope_id": SCOPE,
                "enabled": True,
                "profile": "powercontext.scope-bootstrap.v1",
                "lifecycle": "startup",
                "integration": "codex",
                "max_bytes": 8193,
            }
        )


HOSTILE = "\u2028\u2029\x85\u202e\u2066\u200f\v\f\x1c"


def test_line_boundaries_and_bidi_controls_stay_escaped(runtime: Runtime) -> None:
    """Stored memory and a Handoff holding every kind of line boundary and bidi control: the
    pack carries none of them raw, so ``splitlines()`` sees exactly one END marker, and the
    parsed items give the stored text back exactly. The same holds for a pending replay."""
    end = "END_POWERCONTEXT_BOOTSTRAP_CONTEXT_V1"
    text = f"before{HOSTILE}{end}{HOSTILE}after"
    remember(runtime, text)
    ref = handoff(runtime, objective=f"ship{HOSTILE}{end}")
    first = boot(runtime, handoff_ref=ref.model_dump(), event_id="e-hostile")
    for response in (first, boot(runtime, handoff_ref=ref.model_dump(), event_id="e-hostile")):
        assert response.content is not None
        assert not set(HOSTILE) & set(response.content)
        assert response.content.splitlines().count(end) == 1
        items = pack_items(response)
        assert f"Objective: ship{HOSTILE}{end}" in items[0]["content"]
        assert items[1]["content"] == text
        assert len(response.content.encode()) == response.content_bytes <= 4096
    assert first.content == response.content


def test_claims_happen_once(runtime: Runtime) -> None:
    remember(runtime, "Run make lint before pushing")
    receipt = boot(runtime).receipt.receipt_id
    assert claim(runtime, receipt).state == "injected"
    with pytest.raises(ConflictError) as caught:
        claim(runtime, receipt)
    assert caught.value.code == "receipt_conflict"
    assert caught.value.details == {"state": "injected"}
    with pytest.raises(NotFoundError):
        claim(runtime, receipt, scope="some-other-scope")
    failed = boot(runtime).receipt.receipt_id
    assert claim(runtime, failed, "failed").state == "failed"


def test_stable_events_replay_the_same_pack_then_skip(runtime: Runtime) -> None:
    remember(runtime, "Run make lint before pushing")
    first = boot(runtime, event_id="session-1")
    remember(runtime, "added after the first request")  # must not change the replay
    again = boot(runtime, event_id="session-1")
    assert (again.content, again.pack_digest, again.receipt.receipt_id) == (
        first.content,
        first.pack_digest,
        first.receipt.receipt_id,
    )
    with pytest.raises(ConflictError) as caught:
        boot(runtime, event_id="session-1", max_bytes=2048)
    assert caught.value.code == "bootstrap_request_conflict"
    claim(runtime, first.receipt.receipt_id)
    after = boot(runtime, event_id="session-1")
    assert (after.status, after.content) == ("skipped", None)
    assert after.receipt.receipt_id == first.receipt.receipt_id
    assert after.receipt.state == "injected"
    # The same event id under another lifecycle is another event.
    assert boot(runtime, event_id="session-1", lifecycle="resume").status == "ready"


def test_disabling_while_pending_finalises_as_skipped(runtime: Runtime) -> None:
    remember(runtime, "Run make lint before pushing")
    pending = boot(runtime, event_id="session-2")
    off = boot(runtime, event_id="session-2", enabled=False)
    assert (off.status, off.receipt.state) == ("skipped", "skipped")
    assert off.receipt.receipt_id == pending.receipt.receipt_id
    with pytest.raises(ConflictError):
        claim(runtime, pending.receipt.receipt_id)


def test_receipt_rows_hold_no_content_or_raw_event_id(runtime: Runtime) -> None:
    remember(runtime, "SENTINEL-content-4471 run make lint")
    response = boot(runtime, event_id="SENTINEL-event-8812")
    claim(runtime, response.receipt.receipt_id)
    with runtime.db.read() as conn:
        rows = [dict(row._mapping) for row in conn.execute(select(bootstrap_receipts))]
    dumped = json.dumps(rows, default=str)
    assert "SENTINEL-content" not in dumped and "SENTINEL-event" not in dumped
    assert rows[0]["state"] == "injected" and rows[0]["content_bytes"] == response.content_bytes


def test_expired_receipts_are_ignored_and_purged(runtime: Runtime) -> None:
    remember(runtime, "Run make lint before pushing")
    old = boot(runtime, event_id="old-session")
    with runtime.db.engine.begin() as conn:
        conn.execute(update(bootstrap_receipts).values(expires_at=1))
    with pytest.raises(NotFoundError):
        claim(runtime, old.receipt.receipt_id)
    fresh = boot(runtime, event_id="another-session")  # purges in passing
    with runtime.db.read() as conn:
        ids = [r.receipt_id for r in conn.execute(select(bootstrap_receipts.c.receipt_id))]
    assert ids == [fresh.receipt.receipt_id]


def test_recall_skips_versions_delivered_whole_before_the_limit(runtime: Runtime) -> None:
    delivered = remember(runtime, "Deploy checklist: run the smoke tests first")
    long_text = "Deploy checklist details: " + "check the smoke tests and canaries. " * 80
    truncated = remember(runtime, long_text)
    plain = remember(runtime, "Deploy checklist: the smoke tests live in docs/deploy.md", tags=[])
    response = boot(runtime, max_bytes=1500)
    by_id = {i["citation"]["entry_id"]: i for i in pack_items(response)}
    assert by_id[delivered.entry.citation.entry_id]["truncated"] is False
    assert by_id[truncated.entry.citation.entry_id]["truncated"] is True

    def recalled(receipt_id: str | None) -> list[str]:
        pack = runtime.context.prepare(
            PrepareContextRequest(
                scope_id=SCOPE,
                query="deploy checklist smoke tests",
                bootstrap_receipt_id=receipt_id,
            ),
            EVERYTHING,
        )
        assert pack.content is not None
        return [i["citation"]["entry_id"] for i in json.loads(pack.content.split("\n")[4])["items"]]

    everything = {
        delivered.entry.citation.entry_id,
        truncated.entry.citation.entry_id,
        plain.entry.citation.entry_id,
    }
    receipt = response.receipt.receipt_id
    assert set(recalled(receipt)) == everything  # pending: not delivered yet, nothing removed
    claim(runtime, receipt)
    assert set(recalled(receipt)) == everything - {delivered.entry.citation.entry_id}
    assert set(recalled("rcpt_unknown")) == everything  # fails open
    # A later version of a delivered entry is recallable again.
    runtime.memory.revise(
        ReviseMemoryEntryRequest(
            scope_id=SCOPE,
            citation=delivered.entry.citation,
            text="Deploy checklist: run the smoke tests first, then canaries",
        )
    )
    assert set(recalled(receipt)) == everything
