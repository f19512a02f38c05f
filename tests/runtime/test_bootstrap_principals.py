"""Bootstrap receipts belong to the principal that created them (issue 15 #1), both backends.

The attack: a token limited to scope A replays a pending bootstrap request (same scope,
integration, lifecycle and event id) first made by a broader token. Before the fix it got the
broader token's pack — items of referenced scopes it was never granted — and could claim or
skip that receipt so the real host never got its pack.
"""

from __future__ import annotations

import json

import pytest
from sqlalchemy import select

from powercontext_runtime.composition import Runtime
from powercontext_runtime.contract.bootstrap import SetContextReferencesRequest
from powercontext_runtime.contract.context import PrepareContextRequest
from powercontext_runtime.errors import NotFoundError
from powercontext_runtime.services.auth import Principal
from powercontext_runtime.store.schema import bootstrap_receipts
from tests.runtime.test_bootstrap_contract import SCOPE, boot, claim, pack_items, remember

OTHER = "git:example.com/platform/secrets"
READ = frozenset({"read"})
BROAD = Principal("tok_broad", ("*",), READ)
NARROW = Principal("tok_narrow", (SCOPE,), READ)
EVENT = {"event_id": "session-1"}


@pytest.fixture
def shared(runtime: Runtime) -> Runtime:
    """SCOPE references OTHER; each has one curated entry."""
    remember(runtime, "own convention")
    remember(runtime, "platform secret convention", scope=OTHER)
    runtime.bootstrap.set_references(
        SetContextReferencesRequest(scope_id=SCOPE, references=[OTHER])
    )
    return runtime


def _contents(response) -> list[str]:  # type: ignore[no-untyped-def]
    return [item["content"] for item in pack_items(response)]


def test_a_replay_by_another_token_gets_only_what_it_may_read(shared: Runtime) -> None:
    first = boot(shared, BROAD, **EVENT)
    assert _contents(first) == ["own convention", "platform secret convention"]
    replay = boot(shared, NARROW, **EVENT)
    assert _contents(replay) == ["own convention"]
    assert replay.receipt.receipt_id != first.receipt.receipt_id
    assert all(item.scope_id == SCOPE for item in replay.items)
    assert "platform secret" not in json.dumps(replay.model_dump(mode="json"))
    # The broad token's own replay is still its exact pack.
    again = boot(shared, BROAD, **EVENT)
    assert (again.content, again.receipt.receipt_id) == (first.content, first.receipt.receipt_id)


@pytest.mark.parametrize("state", ["injected", "failed"])
def test_another_token_cannot_claim_or_fail_a_receipt(shared: Runtime, state: str) -> None:
    first = boot(shared, BROAD, **EVENT)
    with pytest.raises(NotFoundError) as caught:
        claim(shared, first.receipt.receipt_id, state, principal=NARROW)
    assert caught.value.code == "receipt_not_found"
    assert caught.value.details is None  # not even the stored state is revealed
    with shared.db.read() as conn:
        stored = conn.execute(
            select(bootstrap_receipts.c.state, bootstrap_receipts.c.principal_id).where(
                bootstrap_receipts.c.receipt_id == first.receipt.receipt_id
            )
        ).one()
    assert tuple(stored) == ("pending", "tok_broad")
    assert claim(shared, first.receipt.receipt_id, principal=BROAD).state == "injected"


def test_a_claimed_receipt_still_reveals_nothing_to_another_token(shared: Runtime) -> None:
    first = boot(shared, BROAD, **EVENT)
    claim(shared, first.receipt.receipt_id, principal=BROAD)
    with pytest.raises(NotFoundError):  # not a 409 carrying the stored state
        claim(shared, first.receipt.receipt_id, principal=NARROW)


def test_a_replay_with_enabled_false_cannot_skip_another_tokens_receipt(shared: Runtime) -> None:
    first = boot(shared, BROAD, **EVENT)
    off = boot(shared, NARROW, enabled=False, **EVENT)
    assert off.status == "skipped" and off.receipt.receipt_id != first.receipt.receipt_id
    assert claim(shared, first.receipt.receipt_id, principal=BROAD).state == "injected"


def test_recall_deduplication_uses_only_the_callers_own_receipt(shared: Runtime) -> None:
    first = boot(shared, BROAD, **EVENT)
    claim(shared, first.receipt.receipt_id, principal=BROAD)
    request = PrepareContextRequest(
        scope_id=SCOPE, query="own convention", bootstrap_receipt_id=first.receipt.receipt_id
    )
    # The creator's prompt leaves out what bootstrap delivered; anyone else's is unaffected.
    assert shared.context.prepare(request, BROAD).status == "empty"
    recalled = shared.context.prepare(request, NARROW)
    assert recalled.content is not None and "own convention" in recalled.content


def test_every_replay_reauthorises_each_item(shared: Runtime) -> None:
    first = boot(shared, BROAD, **EVENT)
    assert len(first.items) == 2
    # The same principal id, but its grants no longer include the referenced scope.
    shrunk = Principal("tok_broad", (SCOPE,), READ)
    replay = boot(shared, shrunk, **EVENT)
    assert (replay.status, replay.content, replay.items) == ("skipped", None, [])
    assert replay.receipt.receipt_id == first.receipt.receipt_id
    assert replay.receipt.state == "failed"  # ended: it can never be served again
    assert boot(shared, BROAD, **EVENT).status == "skipped"
