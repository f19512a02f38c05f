"""Memory operations as seen by every front end (HTTP, MCP, CLI).

The service owns the analyzer: the store receives it for indexing and gets query terms from
here, so one analyzer serves every backend and both indexed families.

With the semantic channel configured (:mod:`.semantic`) ``auto`` searches are hybrid: the
lexical hits and the vector candidates, read in one snapshot, fused by
:mod:`..search.fusion`. Without it every path below is the lexical one, unchanged.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Literal

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
from ..embeddings import EmbeddingUnavailableError
from ..errors import InvalidRequestError
from ..search import fusion
from ..search.analyzer import query_terms
from ..store.memory import FoundEntry, MemoryStore, SearchResult

if TYPE_CHECKING:
    from .semantic import SemanticChannel

__all__ = ["MemoryService", "QueryVector"]

Mode = Literal["fts", "vector", "hybrid"]
#: Vector candidates considered per search, at least (more for larger limits).
VECTOR_CANDIDATES = 32


class QueryVector:
    """A resolved search mode: the mode to run and, for vector/hybrid, the query's vector;
    ``fallback`` is the error code when a hybrid search fell back to fts."""

    __slots__ = ("fallback", "mode", "vector")

    def __init__(self, mode: Mode, vector: Any = None, fallback: str | None = None) -> None:
        self.mode = mode
        self.vector = vector
        self.fallback = fallback


_FTS = QueryVector("fts")


class MemoryService:
    def __init__(self, store: MemoryStore, semantic: SemanticChannel | None = None) -> None:
        self._store = store
        self._semantic = semantic
        #: Called after each local write (the embedding worker's wake-up), when set.
        self.on_write: Callable[[], None] | None = None

    @property
    def search_modes(self) -> list[str]:
        """What ``search_memory`` serves, as ``get_capabilities`` lists it."""
        return ["auto", "fts"] if self._semantic is None else ["auto", "fts", "vector", "hybrid"]

    def remember(self, req: RememberMemoryRequest) -> MemoryWriteResult:
        result = self._store.remember(req)
        self._wrote()
        return result

    def revise(self, req: ReviseMemoryEntryRequest) -> MemoryWriteResult:
        result = self._store.revise(req)
        self._wrote()
        return result

    def _wrote(self) -> None:
        if self.on_write is not None:
            self.on_write()

    def retire(self, req: RetireMemoryEntryRequest) -> MemoryWriteResult:
        return self._store.retire(req)

    def get(self, req: GetMemoryEntryRequest) -> MemoryEntry:
        return self._store.get(req.scope_id, req.citation)

    def list(self, req: ListMemoryEntriesRequest) -> MemoryEntryList:
        return self._store.list(req)

    def changes(self, req: ListMemoryChangesRequest) -> MemoryChanges:
        return self._store.changes(req)

    def search(self, req: SearchMemoryRequest) -> SearchMemoryResponse:
        if self._semantic is None and req.mode == "auto":
            result = self.find(req.scope_id, query_terms(req.query), req.limit)
            return SearchMemoryResponse(memory=result.memory, mode="fts", hits=result.search_hits())
        resolved = self.resolve(req.query, req.mode, "search_memory")
        result = self.find(req.scope_id, query_terms(req.query), req.limit, query=resolved)
        return SearchMemoryResponse(
            memory=result.memory,
            mode=result.mode,  # type: ignore[arg-type]
            hits=result.search_hits(),
        )

    def resolve(self, query: str, mode: str, operation: str) -> QueryVector:
        """The search to run for ``mode`` (``auto`` = hybrid when available, else fts), with
        the query embedded *before* any snapshot opens. A hybrid search whose embedding fails
        or misses its deadline falls back to fts (counted, logged without content); an
        explicit ``vector`` search has nothing to fall back to and raises."""
        if mode == "fts":
            return _FTS
        if self._semantic is None:
            if mode == "auto":
                return _FTS
            raise InvalidRequestError(
                f"search mode {mode!r} is not available: the semantic channel is off "
                "(get_capabilities lists the search modes)"
            )
        wanted: Mode = "hybrid" if mode == "auto" else mode  # type: ignore[assignment]
        try:
            vector = self._semantic.embed_query(query)
        except EmbeddingUnavailableError as exc:
            if wanted == "vector":
                raise
            self._semantic.note_fallback(operation, exc)
            return QueryVector("fts", fallback=exc.code)
        return QueryVector(wanted, vector)

    def find(
        self,
        scope_id: str,
        terms: Sequence[str],
        limit: int,
        exclude_versions: frozenset[str] = frozenset(),
        query: QueryVector = _FTS,
    ) -> SearchResult:
        """Search shared by ``search_memory`` and context preparation (``terms`` from
        :func:`~powercontext_runtime.search.analyzer.query_terms`, analysed once per request;
        ``query`` from :meth:`resolve`, the lexical search when omitted)."""
        if query.mode == "fts" or self._semantic is None:
            return self._store.search(scope_id, terms, limit, exclude_versions)
        semantic = self._semantic
        k = max(VECTOR_CANDIDATES, 2 * limit)
        with semantic.snapshot():  # head, lexical and vector candidates: one snapshot
            if query.mode == "hybrid":
                lexical = self._store.search(scope_id, terms, limit, exclude_versions)
                head = lexical.head
            else:
                lexical = SearchResult(0, [])
                head = self._store.head(scope_id)
            if not head:
                return SearchResult(0, [], query.mode)
            vector = semantic.candidates(scope_id, query.vector, k, exclude_versions)
        found: dict[str, FoundEntry] = {h.entry_version_id: h for h in lexical.hits}
        for c in vector:
            found.setdefault(
                c.entry_version_id, FoundEntry(c.entry_id, c.entry_version_id, c.text, 0.0)
            )

        def tiebreak(key: object) -> bytes:
            return found[str(key)].entry_id.encode("utf-8")

        pairs = [(c.entry_version_id, c.similarity) for c in vector]
        if query.mode == "hybrid":
            fused = fusion.fuse(
                [h.entry_version_id for h in lexical.hits], pairs, semantic.floor, limit, tiebreak
            )
        else:
            fused = fusion.vector_only(pairs, semantic.floor, limit, tiebreak)
        return SearchResult(
            head,
            [found[str(f.key)]._replace(score=f.score, matched_by=f.matched_by) for f in fused],
            query.mode,
        )

    def reindex(self) -> int:
        return self._store.reindex()

    def index_is_consistent(self) -> bool:
        return self._store.index_is_consistent()
