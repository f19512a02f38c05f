"""The asyncio client: many requests in flight on one connection pool.

Four entries are written at once — the runtime serialises writers on the scope's head, so each
lands in its own revision and none is lost — then three questions are asked at once, each
answered by the entry it is about. ``AsyncPowerContextClient`` has every method of the sync
client, as coroutines.

    powercontext serve &
    python examples/async_client.py

Same settings as the quickstart: ``POWERCONTEXT_URL`` / ``POWERCONTEXT_TOKEN`` (else the local
socket and token file), ``POWERCONTEXT_SCOPE_ID`` (default ``example:async``).
"""

from __future__ import annotations

import asyncio
import os

from powercontext_runtime.client import AsyncPowerContextClient

SCOPE = os.environ.get("POWERCONTEXT_SCOPE_ID", "example:async")
FACTS = [
    "Deploys go out on Tuesdays and Thursdays",
    "The billing service owns the invoices table",
    "Feature flags live in config/flags.yaml",
    "The staging database is reset every night",
]
QUESTIONS = ["Which days do we deploy?", "Who owns the invoices table?", "Where are the flags?"]


async def main() -> None:
    async with AsyncPowerContextClient() as pc:
        written = await asyncio.gather(
            *(pc.remember_memory(scope_id=SCOPE, kind="fact", text=fact) for fact in FACTS)
        )
        entries = {result.entry.citation.entry_id for result in written}
        revisions = sorted({result.entry.citation.memory_ref.revision for result in written})
        print(f"{len(FACTS)} concurrent writes: {len(entries)} entries, revisions {revisions}")

        answers = await asyncio.gather(
            *(pc.search_memory(scope_id=SCOPE, query=question, limit=1) for question in QUESTIONS)
        )
        for question, answer in zip(QUESTIONS, answers, strict=True):
            best = answer.hits[0].text if answer.hits else "(nothing)"
            print(f"{question} -> {best}")


if __name__ == "__main__":
    asyncio.run(main())
