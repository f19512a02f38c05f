"""Memory operations as seen by every front end (HTTP, MCP, CLI).

The service owns the analyzer: the store receives it for indexing and gets query terms from
here, so one analyzer serves every backend and both indexed families.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..contract.memory import (
    GetMemoryEntryRequest,
    ListMemoryChangesRequest,
    ListMemoryEntriesRequest,
    MemoryChanges,
    MemoryEntry,
    MemoryEntryList,
    MemoryWriteResult,
    RememberMemoryRequest,
    RetireMemoryEntryRequest,
    ReviseMemoryEntryRequest,
    SearchMemoryRequest,
    SearchMemoryResponse,
)
from ..search.analyzer import query_terms
from ..store.memory import MemoryStore, SearchResult

__all__ = ["MemoryService"]


class MemoryService:
    def __init__(self, store: MemoryStore) -> None:
        self._store = store

    def remember(self, req: RememberMemoryRequest) -> MemoryWriteResult:
        return self._store.remember(req)

    def revise(self, req: ReviseMemoryEntryRequest) -> MemoryWriteResult:
        return self._store.revise(req)

    def retire(self, req: RetireMemoryEntryRequest) -> MemoryWriteResult:
        return self._store.retire(req)

    def get(self, req: GetMemoryEntryRequest) -> MemoryEntry:
        return self._store.get(req.scope_id, req.citation)

    def list(self, req: ListMemoryEntriesRequest) -> MemoryEntryList:
        return self._store.list(req)

    def changes(self, req: ListMemoryChangesRequest) -> MemoryChanges:
        return self._store.changes(req)

    def search(self, req: SearchMemoryRequest) -> SearchMemoryResponse:
        result = self.find(req.scope_id, query_terms(req.query), req.limit)
        return SearchMemoryResponse(memory=result.memory, mode="fts", hits=result.search_hits())

    def find(
        self,
        scope_id: str,
        terms: Sequence[str],
        limit: int,
        exclude_versions: frozenset[str] = frozenset(),
    ) -> SearchResult:
        """Search shared by ``search_memory`` and context preparation (``terms`` from
        :func:`~powercontext_runtime.search.analyzer.query_terms`, analysed once per request)."""
        return self._store.search(scope_id, terms, limit, exclude_versions)

    def reindex(self) -> int:
        return self._store.reindex()

    def index_is_consistent(self) -> bool:
        return self._store.index_is_consistent()
