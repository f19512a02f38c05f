"""A custom extractor for ``flush_memory``: decisions and constraints from captured prompts.

The built-in ``directives`` extractor keeps only ``remember:`` lines. This one keeps the lines a
team writes as ``Decision: …`` / ``决定：…`` and ``Constraint: …`` / ``约束：…`` as ``decision``
and ``constraint`` entries, each citing the prompt it came from. The file is both: the
extractor the daemon imports, and a script that captures three prompts the way the plugins'
hooks do, flushes them, and prints what became Memory.

    PYTHONPATH=examples POWERCONTEXT_EXTRACTOR=custom_extractor:DecisionExtractor \\
        powercontext serve &
    python examples/custom_extractor.py

The contract (docs/flush.md § Your own extractor): a class (created without arguments) or an
object with a ``name`` and a call from a window of ``CapturedSource`` to ``ExtractedEntry``
values. It runs inside the daemon, outside any transaction; if it raises, the flush answers
``503 extraction_unavailable`` and the same prompts are offered again next time.
Client settings as in the quickstart; ``POWERCONTEXT_SCOPE_ID`` (default ``example:extractor``).
"""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Sequence

from powercontext_runtime.client import PowerContextClient
from powercontext_runtime.extraction import CapturedSource, ExtractedEntry

LINE = re.compile(
    r"^\s*(?:(?P<decision>decision|决定)|(?P<constraint>constraint|约束))\s*[:：]\s*(?P<text>.+)$",
    re.IGNORECASE | re.MULTILINE,
)


class DecisionExtractor:
    """Deterministic and offline: nothing is inferred, only what the prompt labels."""

    name = "decisions"

    def __call__(self, sources: Sequence[CapturedSource]) -> list[ExtractedEntry]:
        return [
            ExtractedEntry(
                "decision" if match["decision"] else "constraint",
                match["text"].strip(),
                (source.source_id,),  # the evidence: which prompt said it
            )
            for source in sources
            for match in LINE.finditer(source.content)
        ]


PROMPTS = [
    "Let's settle the queue question.\nDecision: background jobs run on Redis streams",
    "Constraint: the public API never returns more than 100 items per page",
    "Why is the build slow today?",
]


def main() -> None:
    scope = os.environ.get("POWERCONTEXT_SCOPE_ID", "example:extractor")
    run = uuid.uuid4().hex[:8]  # source ids are idempotency keys: one set per run
    with PowerContextClient() as pc:
        for number, prompt in enumerate(PROMPTS, 1):
            pc.capture_content_source(
                scope_id=scope, source_id=f"prompt-{run}-{number}", content=prompt
            )
        flushed = pc.flush_memory(scope_id=scope)
        print(
            f"flush {flushed.status}: {flushed.processed_source_count} prompts, "
            f"cursor {flushed.previous_cursor} -> {flushed.current_cursor}"
        )
        found = 0
        for kind in ("decision", "constraint"):
            for entry in pc.list_memory_entries(scope_id=scope, kind=kind).entries:
                cited = ", ".join(ref.source_id for ref in entry.source_refs)
                print(f"{entry.kind}: {entry.text}  (from {cited})")
                found += 1
        if not found:
            raise SystemExit(
                "nothing extracted: is the daemon running with "
                "POWERCONTEXT_EXTRACTOR=custom_extractor:DecisionExtractor?"
            )


if __name__ == "__main__":
    main()
