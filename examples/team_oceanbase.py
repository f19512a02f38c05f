"""A team on OceanBase: two runtimes, one database — what one writes, the other serves.

Alice's runtime and Bob's runtime are separate ``powercontext serve`` processes (on two
machines, or two ports here) pointed at the same OceanBase/seekdb database. A token created
once on that database is accepted by both. Alice writes a decision through hers; Bob finds it
through his and revises it; Alice's stale revise is refused with the version Bob wrote; when
she retires it, Bob's runtime stops serving it at once.

    make seekdb                                   # prints mysql+pymysql://root@127.0.0.1:PORT/…
    export POWERCONTEXT_DATABASE_URL='mysql+pymysql://root@127.0.0.1:PORT/powercontext?charset=utf8mb4'
    powercontext token create --name team --scope 'example:*'          # prints the secret once
    powercontext serve --data-dir /tmp/alice --port 7411 --socket off &
    powercontext serve --data-dir /tmp/bob --port 7412 --socket off &
    POWERCONTEXT_TOKEN=pc_… \\
    POWERCONTEXT_TEAM_URLS='http://127.0.0.1:7411 http://127.0.0.1:7412' \\
        python examples/team_oceanbase.py

``POWERCONTEXT_SCOPE_ID`` picks the scope (default ``example:team``).
"""

from __future__ import annotations

import os

from powercontext_runtime.client import ConflictError, PowerContextClient

SCOPE = os.environ.get("POWERCONTEXT_SCOPE_ID", "example:team")


def main() -> None:
    alice_url, bob_url = os.environ["POWERCONTEXT_TEAM_URLS"].split()
    with PowerContextClient(alice_url) as alice, PowerContextClient(bob_url) as bob:
        for name, pc in (("alice", alice), ("bob", bob)):
            print(f"{name}'s runtime at {pc.url}: {pc.get_readiness().database}")

        written = alice.remember_memory(
            scope_id=SCOPE, kind="decision", text="Release freezes start Friday at 15:00 UTC"
        )
        citation = written.entry.citation
        print(f"alice wrote {citation.entry_id} in revision {written.memory.revision}")

        hits = bob.search_memory(scope_id=SCOPE, query="when does the release freeze start?")
        mine = [hit for hit in hits.hits if hit.citation == citation]
        print(f"bob's search finds alice's entry: {bool(mine)} (same citation, same bytes)")

        bobs = bob.revise_memory_entry(
            scope_id=SCOPE, citation=citation, text="Release freezes start Friday at 12:00 UTC"
        )
        print(f"bob revised it to version {bobs.entry.version}")
        try:
            alice.revise_memory_entry(scope_id=SCOPE, citation=citation, text="Friday 16:00")
        except ConflictError as exc:
            current = exc.details["current"] if exc.details else {}
            mine_now = current.get("entry_version_id") == bobs.entry.citation.entry_version_id
            print(f"alice's stale revise: {exc.code}; current is bob's version: {mine_now}")

        alice.retire_memory_entry(scope_id=SCOPE, citation=bobs.entry.citation)
        after = bob.search_memory(scope_id=SCOPE, query="when does the release freeze start?")
        gone = all(hit.citation.entry_id != citation.entry_id for hit in after.hits)
        print(f"alice retired it; bob's runtime no longer serves it: {gone}")


if __name__ == "__main__":
    main()
