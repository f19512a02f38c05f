"""Quickstart: the synchronous Python client against a local runtime.

Remember a convention, find it again by asking a question, see the context pack an agent's
hook would get for a prompt, revise the entry, and watch a stale citation being refused while
the old version stays readable — the promises of the README in about 40 lines.

    powercontext serve &                  # a local daemon (SQLite in your data dir)
    python examples/quickstart.py

The client finds the daemon and its operator token by itself: ``POWERCONTEXT_URL`` /
``POWERCONTEXT_TOKEN`` if set, else the data dir's unix socket and ``auth/token``.
``POWERCONTEXT_SCOPE_ID`` picks the scope (default ``example:quickstart``).
"""

from __future__ import annotations

import os

from powercontext_runtime.client import ConflictError, PowerContextClient

SCOPE = os.environ.get("POWERCONTEXT_SCOPE_ID", "example:quickstart")


def main() -> None:
    with PowerContextClient() as pc:
        written = pc.remember_memory(
            scope_id=SCOPE, kind="convention", text="Run make lint before pushing", tags=["ci"]
        )
        citation = written.entry.citation
        print(f"remembered {citation.entry_id} (Memory revision {written.memory.revision})")

        hits = pc.search_memory(scope_id=SCOPE, query="what do I run before pushing?").hits
        print(f"search: {len(hits)} hit, the best is {hits[0].text!r}")

        # What an agent's UserPromptSubmit hook injects for this prompt (never stored).
        pack = pc.prepare_context(scope_id=SCOPE, query="What should I run before pushing?")
        print(f"context pack: {pack.status}, {pack.content_bytes} bytes:\n{pack.content}")

        revised = pc.revise_memory_entry(
            scope_id=SCOPE, citation=citation, text="Run make lint and make test before pushing"
        )
        print(f"revised: version {revised.entry.version} is {revised.entry.text!r}")
        try:  # the first citation is stale now: a revise is a compare-and-swap on it
            pc.revise_memory_entry(scope_id=SCOPE, citation=citation, text="Just push")
        except ConflictError as exc:
            current = exc.details["current"]["entry_version_id"] if exc.details else "?"
            print(f"stale citation refused: {exc.code} (current version {current})")
        old = pc.get_memory_entry(scope_id=SCOPE, citation=citation)
        print(f"the first citation still reads back exactly: {old.text!r}")

        # Retire it so the next run starts alike; nothing is deleted, every version stays.
        pc.retire_memory_entry(scope_id=SCOPE, citation=revised.entry.citation)
        print("retired (its history stays readable by citation)")


if __name__ == "__main__":
    main()
