"""The SessionStart bootstrap and the Handoff: where the last session stopped, delivered once.

Session 1 ends by committing a Handoff. Session 2 starts the way the plugins' SessionStart hook
does: it asks which Handoff waits, requests the bootstrap pack naming exactly that revision
(plus the entries tagged ``bootstrap-context``), claims the pack's receipt *before* showing it,
and passes the receipt with its first prompt so the pack's entries are not recalled twice.
Session 3 gets the tagged entries again but not the Handoff: it was delivered once.

    powercontext serve &
    python examples/bootstrap_handoff.py

Client settings as in the quickstart; ``POWERCONTEXT_SCOPE_ID`` (default ``example:bootstrap``).
The plugins do all of this themselves once bootstrap is on (``install --bootstrap``).
"""

from __future__ import annotations

import os
import uuid
from typing import Any

from powercontext_runtime.client import ConflictError, PowerContextClient
from powercontext_runtime.contract.bootstrap import BOOTSTRAP_PROFILE, HandoffResult

SCOPE = os.environ.get("POWERCONTEXT_SCOPE_ID", "example:bootstrap")
HANDOFF = {
    "schema": "powercontext.handoff.v1",
    "objective": "Move the nightly report after the importer",
    "state": ["The importer job is done", "The report job still starts at 01:00"],
    "disposition": "continuable",
    "next_action": "Change the report's schedule to 03:00 and run it once by hand",
}


def commit_handoff(pc: PowerContextClient, content: dict[str, Any]) -> HandoffResult:
    """Commit the scope's next revision: ``base`` is the revision it follows (a CAS)."""
    base = None  # the first revision follows nothing
    for _ in range(3):
        try:
            return pc.commit_handoff(scope_id=SCOPE, base=base, content=content)
        except ConflictError as exc:  # an earlier session committed: follow its revision
            base = exc.details["current"] if exc.details else None
    raise RuntimeError("the Handoff kept moving")


def start_session(pc: PowerContextClient, session: str) -> str | None:
    """What a SessionStart hook does; returns the claimed receipt id (None: nothing shown)."""
    waiting = pc.next_handoff(scope_id=SCOPE).handoff_ref
    pack = pc.bootstrap_context(
        scope_id=SCOPE,
        enabled=True,
        profile=BOOTSTRAP_PROFILE,
        lifecycle="startup",
        integration="example",
        event_id=f"{session.replace(' ', '-')}-{uuid.uuid4().hex}",  # the host's session id
        handoff_ref=waiting,
    )
    kinds = [item.kind for item in pack.items]
    print(f"{session}: pack {pack.status}, {pack.content_bytes} bytes, items {kinds}")
    if pack.status != "ready":
        return None
    # Claim it before showing it: of two claims only one wins, so it is shown at most once.
    receipt = pc.record_bootstrap_receipt(
        scope_id=SCOPE, receipt_id=pack.receipt.receipt_id, state="injected"
    )
    print(pack.content)
    return receipt.receipt_id


def main() -> None:
    with PowerContextClient() as pc:
        pc.remember_memory(
            scope_id=SCOPE,
            kind="convention",
            tags=["bootstrap-context"],
            text="Run make lint before pushing",
        )
        committed = commit_handoff(pc, HANDOFF)
        print(
            f"session 1: committed handoff revision {committed.reference.revision}, "
            f"queued: {committed.queued}"
        )

        receipt = start_session(pc, "session 2")
        left = pc.next_handoff(scope_id=SCOPE).handoff_ref
        print(f"session 2: after the claim, waiting handoff: {left}")
        prompt = "What should I run before pushing?"
        first = pc.prepare_context(scope_id=SCOPE, query=prompt, bootstrap_receipt_id=receipt)
        again = pc.prepare_context(scope_id=SCOPE, query=prompt)
        print(
            f"session 2: first prompt's pack {first.status} (the bootstrap pack had it); "
            f"without the receipt {again.status}"
        )

        start_session(pc, "session 3")


if __name__ == "__main__":
    main()
