"""``flush_memory``: captured sources → extractor → Memory, cursor and entries in one commit."""

from __future__ import annotations

import logging

from pydantic import ValidationError

from ..contract.common import SourceRef
from ..contract.flush import FlushMemoryRequest, FlushMemoryResponse
from ..contract.memory import RememberMemoryRequest
from ..errors import PowerContextError
from ..extraction import Extractor
from ..store.flush import FlushStore

__all__ = ["FlushService"]

_log = logging.getLogger("powercontext.flush")


class FlushService:
    def __init__(self, store: FlushStore, extractor: Extractor) -> None:
        self._store = store
        self._extractor = extractor

    @property
    def extractor_name(self) -> str:
        return self._extractor.name

    def flush(self, req: FlushMemoryRequest) -> FlushMemoryResponse:
        window = self._store.window(req.scope_id, req.max_sources)
        if not window.sources:
            return FlushMemoryResponse(
                status="idle",
                previous_cursor=window.cursor,
                current_cursor=window.cursor,
                high_watermark=window.high_watermark,
                processed_source_count=0,
                memory=self._store.memory_head(req.scope_id),
            )
        extracted = self._extractor(window.sources)  # outside any transaction
        requests = []
        for entry in extracted:
            try:
                requests.append(
                    RememberMemoryRequest(
                        scope_id=req.scope_id,
                        kind=entry.kind,
                        text=entry.text,
                        source_refs=[
                            SourceRef(name="content", source_id=s) for s in entry.source_ids
                        ],
                    )
                )
            except ValidationError:
                continue  # an extractor proposal the Memory contract refuses is dropped
        new_cursor = window.sources[-1].position
        memory = self._store.commit(
            req.scope_id, window.cursor, new_cursor, requests, len(window.sources)
        )
        return FlushMemoryResponse(
            status="processed",
            previous_cursor=window.cursor,
            current_cursor=new_cursor,
            high_watermark=window.high_watermark,
            processed_source_count=len(window.sources),
            memory=memory,
        )

    def flush_pending(self, scopes_per_round: int = 50) -> int:
        """One round of the optional periodic flush; returns how many scopes advanced."""
        advanced = 0
        for scope_id in self._store.pending_scopes(scopes_per_round):
            try:
                result = self.flush(FlushMemoryRequest(scope_id=scope_id))
            except PowerContextError as exc:
                _log.warning("periodic_flush_failed", extra={"error_type": exc.code})
                continue
            advanced += result.status == "processed"
        return advanced
