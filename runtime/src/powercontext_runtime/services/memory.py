"""Memory operations as seen by every front end (HTTP, MCP, CLI).

The service owns the analyzer: the store receives it for indexing and gets query terms from
here, so one analyzer serves every backend and both indexed families.

With the semantic channel configured (:mod:`.semantic`) ``auto`` searches are hybrid: the
lexical hits and the vector candidates, read in one snapshot, fused by
:mod:`..search.fusion`. Without it every path below is the lexical one, unchanged.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from ..contract.memory import (
    GetMemoryEntryRequest,
    ListMemoryChangesRequest,
    ListMemoryEntriesRequest,
    ListMemoryEntryVersionsRequest,
    MemoryChanges,
    MemoryEntry,
    MemoryEntryHistory,
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
from ..store.tracing import LexicalTrace

if TYPE_CHECKING:
    from ..store.vectors import Prior
    from .semantic import PendingQuery, SemanticChannel

__all__ = ["MemoryService", "MemoryTrace", "QueryVector"]

Mode = Literal["fts", "vector", "hybrid"]
#: Vector candidates considered per search, at least (more for larger limits).
VECTOR_CANDIDATES = 32


class QueryVector:
    """A resolved search: the mode to run and, for vector/hybrid, the query embedding under
    way and which vector-only candidates may join. After the search, ``mode`` is the search
    that ran and ``fallback`` the error code when a hybrid search fell back to fts."""

    __slots__ = ("admission", "fallback", "mode", "operation", "pending")

    def __init__(
        self,
        mode: Mode,
        pending: PendingQuery | None = None,
        admission: fusion.Admission | None = None,
        operation: str = "",
        fallback: str | None = None,
    ) -> None:
        self.mode = mode
        self.pending = pending
        self.admission = admission
        self.operation = operation
        self.fallback = fallback


_FTS = QueryVector("fts")


def vector_candidates(limit: int) -> int:
    """Vector candidates a search of ``limit`` hits considers."""
    return max(VECTOR_CANDIDATES, 2 * limit)


def lexical_candidates(limit: int) -> int:
    """Lexical hits a hybrid search of ``limit`` hits fuses: twice the limit, like the vector
    channel's, so a lexical hit ranked just past the limit whose cosine is strong can still
    make it, instead of only the lexical channel's own top ``limit`` being reordered (LoCoMo
    dev split: hybrid hit@10 0.697 -> 0.705, MRR 0.487 -> 0.488; docs/decisions/
    semantic-channel.md, "Lexical candidates past the limit"). The fts search is unchanged."""
    return 2 * limit


@dataclass
class MemoryTrace:
    """Why a Memory search returned what it did (``explain_context``): the lexical channel's
    trace and, for hybrid/vector searches, the fusion's decisions with each vector
    candidate's (entry id, text) by entry version id."""

    lexical: LexicalTrace = field(default_factory=LexicalTrace)
    fusion: fusion.FusionTrace | None = None
    vector: dict[str, tuple[str, str]] = field(default_factory=dict)


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

    def versions(self, req: ListMemoryEntryVersionsRequest) -> MemoryEntryHistory:
        return self._store.versions(req)

    def changes(self, req: ListMemoryChangesRequest) -> MemoryChanges:
        return self._store.changes(req)

    def search(self, req: SearchMemoryRequest) -> SearchMemoryResponse:
        if self._semantic is None and req.mode == "auto":
            result = self.find(req.scope_id, query_terms(req.query), req.limit)
            return SearchMemoryResponse(memory=result.memory, mode="fts", hits=result.search_hits())
        resolved = self.resolve(req.query, req.mode, "search_memory", req.scope_id, req.limit)
        result = self.find(req.scope_id, query_terms(req.query), req.limit, query=resolved)
        return SearchMemoryResponse(
            memory=result.memory,
            mode=result.mode,  # type: ignore[arg-type]
            hits=result.search_hits(),
        )

    def resolve(
        self,
        query: str,
        mode: str,
        operation: str,
        scope_id: str | None = None,
        limit: int | None = None,
    ) -> QueryVector:
        """The search to run for ``mode`` (``auto`` = hybrid when available, else fts). The
        query embedding starts here and runs while the lexical search does; :meth:`find` waits
        for it at most until the deadline. With the ``scope_id`` and ``limit`` that
        :meth:`find` will get, the query thread also searches the scope's loaded vectors.
        A hybrid search whose embedding fails or misses its deadline falls back to fts
        (counted, logged without content); an explicit ``vector`` search has nothing to fall
        back to and raises."""
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
        semantic = self._semantic
        admission = semantic.prepare if operation == "prepare_context" else semantic.search
        resolved = QueryVector(wanted, None, admission, operation)
        k = 0 if limit is None else vector_candidates(limit)
        try:
            resolved.pending = semantic.start_query(query, scope_id, k)
        except EmbeddingUnavailableError as exc:
            self._fell_back(resolved, exc)
        return resolved

    def _vector(self, query: QueryVector, scope_id: str, k: int) -> tuple[Any, Prior | None]:
        """The query's vector, or ``None`` after a fallback (``query`` then says fts), and the
        query thread's search of the loaded index when it was for this scope and ``k``."""
        pending = query.pending
        if pending is None:
            return None, None
        query.pending = None
        try:
            vector = pending.result()
        except EmbeddingUnavailableError as exc:
            self._fell_back(query, exc)
            return None, None
        prior = pending.prior if (pending.scope_id, pending.k) == (scope_id, k) else None
        return vector, prior

    def _fell_back(self, query: QueryVector, exc: EmbeddingUnavailableError) -> None:
        if query.mode == "vector":
            raise exc
        assert self._semantic is not None
        self._semantic.note_fallback(query.operation, exc)
        query.mode, query.fallback = "fts", exc.code

    def find(
        self,
        scope_id: str,
        terms: Sequence[str],
        limit: int,
        exclude_versions: frozenset[str] = frozenset(),
        query: QueryVector = _FTS,
        trace: MemoryTrace | None = None,
    ) -> SearchResult:
        """Search shared by ``search_memory`` and context preparation (``terms`` from
        :func:`~powercontext_runtime.search.analyzer.query_terms`, analysed once per request;
        ``query`` from :meth:`resolve`, the lexical search when omitted). ``trace``
        (``explain_context``) is filled with why; the result is the same with or without."""
        lexical_trace = None if trace is None else trace.lexical
        if query.mode == "fts" or self._semantic is None:
            return self._store.search(scope_id, terms, limit, exclude_versions, lexical_trace)
        semantic = self._semantic
        assert query.admission is not None
        k = vector_candidates(limit)
        with semantic.snapshot():  # head, lexical and vector candidates: one snapshot
            if query.mode == "hybrid":
                lexical = self._store.search(
                    scope_id, terms, lexical_candidates(limit), exclude_versions, lexical_trace
                )
                head = lexical.head
            else:
                lexical = SearchResult(0, [])
                head = self._store.head(scope_id)
            # The embedding (and the loaded index's search) ran alongside the lexical search.
            embedded, prior = self._vector(query, scope_id, k)
            if embedded is None:
                return lexical
            if not head:
                return SearchResult(0, [], query.mode)
            vector = semantic.candidates(scope_id, embedded, k, exclude_versions, prior)
        found: dict[str, FoundEntry] = {h.entry_version_id: h for h in lexical.hits}
        for c in vector:
            found.setdefault(
                c.entry_version_id, FoundEntry(c.entry_id, c.entry_version_id, c.text, 0.0)
            )

        def tiebreak(key: object) -> bytes:
            return found[str(key)].entry_id.encode("utf-8")

        pairs = [(c.entry_version_id, c.similarity) for c in vector]
        similarity = dict(pairs)
        fused_trace = None
        if trace is not None:
            trace.fusion = fused_trace = fusion.FusionTrace()
            trace.vector = {c.entry_version_id: (c.entry_id, c.text) for c in vector}
        if query.mode == "hybrid":
            scored = [(h.entry_version_id, h.score) for h in lexical.hits]
            fused = fusion.fuse(scored, pairs, query.admission, limit, tiebreak, fused_trace)
        else:
            fused = fusion.vector_only(pairs, query.admission, limit, tiebreak, fused_trace)
        admission = query.admission

        def fused_hit(f: fusion.Fused) -> FoundEntry:
            hit = found[str(f.key)]
            # A pack's relative cutoff compares coverage; the cosine adds to it what it adds
            # to the score, so the cutoff means the same with the channel on.
            bonus = admission.bonus(similarity[str(f.key)]) if f.matched_by != "fts" else 0.0
            return hit._replace(
                score=f.score, matched_by=f.matched_by, coverage=min(1.0, hit.coverage + bonus)
            )

        return SearchResult(head, [fused_hit(f) for f in fused], query.mode)

    def reindex(self) -> int:
        return self._store.reindex()

    def index_is_consistent(self) -> bool:
        return self._store.index_is_consistent()

    def facets_are_consistent(self) -> bool:
        return self._store.facets_are_consistent()

    def rebuild_facets(self) -> int:
        return self._store.rebuild_facets()
