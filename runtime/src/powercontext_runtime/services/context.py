"""``prepare_context``: one Memory search, one build, nothing written (spec 04).

The head revision is read once, inside the same snapshot as the search; every memory item
must cite it. A hit citing any other revision is an invariant failure and fails the whole
request — a partial or inconsistent pack is worse than none.
"""

from __future__ import annotations

from ..context.builder import MemoryHit, PreparedContext, PreparedContextBuilder
from ..contract.context import PrepareContextRequest
from ..errors import InternalError
from .memory import MemoryService

__all__ = ["ContextService"]

MEMORY_CANDIDATES = 16


class ContextService:
    def __init__(self, memory: MemoryService, builder: PreparedContextBuilder) -> None:
        self._memory = memory
        self._builder = builder

    def prepare(self, req: PrepareContextRequest) -> PreparedContext:
        # bootstrap_receipt_id is accepted now and honoured once bootstrap receipts exist.
        result = self._memory.find(req.scope_id, req.query, MEMORY_CANDIDATES)
        if result.memory is None:
            return self._builder.build([], [], req.max_bytes)
        head = result.memory.revision
        hits = []
        for hit in result.hits:
            if hit.citation.memory_ref.revision != head:
                raise InternalError("internal error")
            hits.append(
                MemoryHit(
                    revision=head,
                    entry_id=hit.citation.entry_id,
                    entry_version_id=hit.citation.entry_version_id,
                    text=hit.text,
                )
            )
        return self._builder.build(hits, [], req.max_bytes)
