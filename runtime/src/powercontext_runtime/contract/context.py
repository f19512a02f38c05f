"""``prepare_context`` request and response (spec 04, ``powercontext.prepared-context.v1``)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from .common import ScopeId, StrictModel
from .memory import Query

__all__ = [
    "ExplainContextResponse",
    "ExplainedCandidate",
    "PrepareContextRequest",
    "PreparedContextResponse",
]


class PrepareContextRequest(StrictModel):
    scope_id: ScopeId
    query: Query
    max_bytes: Annotated[int, Field(ge=512, le=32768)] = 8000
    bootstrap_receipt_id: Annotated[str, Field(min_length=1, max_length=128)] | None = None


class PreparedContextResponse(StrictModel):
    schema_: Literal["powercontext.prepared-context.v1"] = Field(alias="schema")
    status: Literal["ready", "empty"]
    content: str | None
    content_bytes: Annotated[int, Field(ge=0)]


# -- explain_context: the same pack, and why (docs/ui.md § Pack inspector) -------------------

Outcome = Literal[
    "taken",
    "truncated",
    "over_budget",
    "duplicate",
    "blank",
    "beyond_item_limit",
    "beyond_candidate_limit",
    "below_floor",
    "below_relative_cutoff",
    "vector_only_cap",
    "delivered_by_bootstrap",
]


class LexicalFacts(StrictModel):
    """The lexical channel's view of a candidate (search/scoring.py): it is admitted when the
    topical ``content`` it shares with the prompt reaches ``content_required`` or its
    ``evidence`` (specific shared terms) reaches ``evidence_required``."""

    rank: int | None  # 1-based among the lexically admitted (None: below the floor)
    score: float | None
    content: float
    content_required: float
    evidence: float
    evidence_required: float
    cleared_floor: bool


class VectorFacts(StrictModel):
    """The vector channel's view (semantic recall on): its rank among the nearest versions,
    the cosine, and what the fusion did with it."""

    rank: int
    similarity: float
    decision: Literal["fused", "admitted", "below_floor", "over_cap"]


class ExplainedCandidate(StrictModel):
    family: Literal["memory", "experience"]
    #: A memory citation (``memory_ref``, ``entry_id``, ``entry_version_id``) or
    #: ``{"artifact_ref": …}`` for Experience: exact, re-readable.
    citation: dict[str, Any]
    preview: str  # the first 240 characters of the stored text
    stored_bytes: int
    #: What the builder (or, before it, the search) decided; see docs/ui.md § Why.
    outcome: Outcome
    #: ``cleared``: its search admitted it (it reached the builder or was cut by a limit).
    floor: Literal["cleared", "below"]
    matched_by: Literal["fts", "vector", "fts+vector"] | None
    search_rank: int | None  # 1-based position in the order the builder was given
    score: float | None  # the search's score (fused with semantic recall)
    lexical: LexicalFacts | None
    vector: VectorFacts | None
    pack_position: int | None  # 1-based place among the pack's items, when taken
    content_bytes: int  # bytes of its content in the pack (0 when not taken)
    item_bytes: int  # bytes of its item's JSON in the pack
    truncation: Literal["item_cap", "budget"] | None
    remaining_bytes: int | None  # budget bytes left when the builder reached it
    limit: Literal["memory_items", "experience_items", "items", "memory_candidates",
                   "experience_candidates"] | None  # fmt: skip


class SearchFacts(StrictModel):
    planned: bool  # False: no term of the prompt occurs in the scope's index
    retrieved: int  # candidates the full-text index returned
    returned: int  # hits handed to the builder
    candidate_limit: int


class ExplainBudget(StrictModel):
    max_bytes: int
    frame_bytes: int  # the wrapper and policy text every ready pack carries
    content_bytes: int
    item_content_cap: int
    min_truncated_bytes: int


class ExplainContextResponse(StrictModel):
    """``prepare_context``'s very answer (``pack``, byte for byte) and why it holds what it
    holds. Scores live here, never in the pack."""

    pack: PreparedContextResponse
    mode: Literal["fts", "vector", "hybrid"]
    fallback: str | None  # the error code when a hybrid search ran lexically
    empty_reason: Literal["no_memory", "no_match", "budget"] | None
    memory_revision: int | None  # the Memory head every memory item cites
    bootstrap_excluded: int  # versions a bootstrap receipt delivered whole, kept out
    budget: ExplainBudget
    memory_search: SearchFacts
    experience_search: SearchFacts
    candidates: list[ExplainedCandidate]
