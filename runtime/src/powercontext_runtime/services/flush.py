"""``flush_memory``: captured sources → extractor → Memory, cursor and entries in one commit."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from pydantic import ValidationError

from ..contract.common import SourceRef
from ..contract.flush import FlushMemoryRequest, FlushMemoryResponse
from ..contract.limits import MAX_EVIDENCE_REFS
from ..contract.memory import RememberMemoryRequest
from ..errors import PowerContextError, UnavailableError
from ..extraction import CapturedSource, ExtractedEntry, Extractor
from ..store.flush import FlushStore

__all__ = ["FlushService"]

_log = logging.getLogger("powercontext.flush")

#: Entries one flush may write (a window is ≤ 100 sources): a runaway extractor fails the run
#: instead of committing an unbounded transaction.
MAX_EXTRACTED_ENTRIES = 500


class FlushService:
    def __init__(self, store: FlushStore, extractor: Extractor) -> None:
        self._store = store
        self._extractor = extractor

    @property
    def extractor_name(self) -> str:
        return self._extractor.name

    def flush(self, req: FlushMemoryRequest) -> FlushMemoryResponse:
        window = self._store.window(req.scope_id, req.max_sources)
        if not window.read:
            return FlushMemoryResponse(
                status="idle",
                previous_cursor=window.cursor,
                current_cursor=window.cursor,
                high_watermark=window.high_watermark,
                processed_source_count=0,
                memory=self._store.memory_head(req.scope_id),
            )
        # Outside any transaction. A window of task results only has nothing to extract: the
        # cursor still moves past them.
        extracted = self._extract(window.sources) if window.sources else []
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
        new_cursor = window.end
        memory = self._store.commit(req.scope_id, window.cursor, new_cursor, requests, window.read)
        return FlushMemoryResponse(
            status="processed",
            previous_cursor=window.cursor,
            current_cursor=new_cursor,
            high_watermark=window.high_watermark,
            processed_source_count=window.read,
            memory=memory,
        )

    def _extract(self, sources: Sequence[CapturedSource]) -> list[ExtractedEntry]:
        """The extractor's entries for ``sources``, checked; ``extraction_unavailable`` when it
        fails or answers something that is not entries citing this window.

        An extractor may be the operator's own code (``POWERCONTEXT_EXTRACTOR=module:Name``),
        so its failure must look like any other: the cursor stays and the next flush retries.
        Logged by exception type only — an exception's text may quote a prompt.
        """
        try:
            extracted = self._extractor(sources)
        except UnavailableError as exc:
            if exc.code == "extraction_unavailable":
                raise
            _log.warning("extractor_failed", extra={"error_type": type(exc).__name__})
            raise _unavailable() from None
        except Exception as exc:
            _log.warning("extractor_failed", extra={"error_type": type(exc).__name__})
            raise _unavailable() from None
        window = {source.source_id for source in sources}
        if (
            not isinstance(extracted, list)
            or len(extracted) > MAX_EXTRACTED_ENTRIES
            or not all(_cites_window(entry, window) for entry in extracted)
        ):
            _log.warning("extractor_output_invalid", extra={"error_type": "invalid_output"})
            raise _unavailable()
        return extracted

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


def _cites_window(entry: object, window: set[str]) -> bool:
    """An :class:`ExtractedEntry` whose evidence is 1..32 source ids of this window."""
    return (
        isinstance(entry, ExtractedEntry)
        and isinstance(entry.source_ids, tuple)
        and 1 <= len(entry.source_ids) <= MAX_EVIDENCE_REFS
        and all(isinstance(s, str) and s in window for s in entry.source_ids)
    )


def _unavailable() -> UnavailableError:
    return UnavailableError("the memory extractor is unavailable", code="extraction_unavailable")
