"""Why a lexical search returned what it did (``explain_context`` only; pure, no I/O).

A search given a :class:`LexicalTrace` fills it from the ranking's own records
(:class:`~powercontext_runtime.search.scoring.Assessed`): the same ranking decides the hits and
explains them, so the explanation cannot drift from what a prompt gets.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal, NamedTuple

from ..search import scoring

__all__ = ["TRACE_EXTRA", "LexicalTrace", "TracedEntry", "trace_lexical"]

#: Candidates of each kind a traced search reports beyond its hits (below the floor, past the
#: limit): enough to answer "why not this one?" for the entries closest to being recalled.
TRACE_EXTRA = 8


class TracedEntry(NamedTuple):
    """One lexical candidate of a traced search (``explain_context``): ``outcome`` ``hit``
    (among the results), ``beyond_limit`` (admitted, ranked past the limit), ``below_floor``
    (retrieved, not enough shared content or evidence) or ``delivered`` (removed before ranking:
    a bootstrap receipt delivered this version whole; ``score`` says whether it would have
    been admitted). ``rank``: 1-based among the admitted, in final order."""

    ident: str  # memory: the entry id; experience: the artifact id
    version: str  # memory: the entry version id; experience: the revision
    text: str
    content: float
    evidence: float
    score: float | None
    rank: int | None
    outcome: Literal["hit", "beyond_limit", "below_floor", "delivered"]


@dataclass
class LexicalTrace:
    """What a lexical search did besides its hits, filled only when a caller asks
    (``explain_context``): the plan's requirements, how many candidates the index returned,
    and the candidates nearest to the results (:data:`TRACE_EXTRA` of each kind)."""

    planned: bool = False  # False: no query term occurs in the scope (nothing could match)
    retrieved: int = 0
    content_required: float = 0.0
    evidence_required: float = 0.0
    entries: list[TracedEntry] = field(default_factory=list)


def trace_lexical(
    trace: LexicalTrace,
    plan: scoring.QueryPlan,
    retrieved: int,
    assessed: Sequence[scoring.Assessed],
    ranked: Sequence[scoring.Ranked],
    hits: Sequence[int],
    delivered: Sequence[scoring.Assessed],
    rows: Callable[[list[int]], dict[int, tuple[str, str, str]]],
) -> None:
    """Fill ``trace`` from a ranking's records: ``hits`` the row ids returned (final order),
    ``ranked`` every admitted row best first, ``rows`` reads (ident, version, text) by row id."""
    trace.planned = True
    trace.retrieved = retrieved
    trace.content_required = round(plan.content_required, 6)
    trace.evidence_required = round(plan.required, 6)
    by_row = {a.rowid: a for a in assessed}
    returned = set(hits)
    beyond = [r.rowid for r in ranked if r.rowid not in returned][:TRACE_EXTRA]
    below = sorted(
        (a for a in assessed if a.score is None), key=lambda a: (-a.content, -a.evidence, a.rowid)
    )[:TRACE_EXTRA]
    wanted = [*hits, *beyond, *(a.rowid for a in below), *(a.rowid for a in delivered)]
    found = rows(wanted)
    ranks = {rowid: position for position, rowid in enumerate(hits, start=1)}
    ranks.update({rowid: len(hits) + n for n, rowid in enumerate(beyond, start=1)})
    kinds: list[tuple[int, scoring.Assessed, str]] = [
        *((rowid, by_row[rowid], "hit") for rowid in hits),
        *((rowid, by_row[rowid], "beyond_limit") for rowid in beyond),
        *((a.rowid, a, "below_floor") for a in below),
        *((a.rowid, a, "delivered") for a in delivered),
    ]
    for rowid, a, outcome in kinds:
        if rowid not in found:
            continue
        ident, version, text = found[rowid]
        trace.entries.append(
            TracedEntry(
                ident, version, text, a.content, a.evidence, a.score,
                ranks.get(rowid), outcome,  # type: ignore[arg-type]
            )
        )  # fmt: skip
