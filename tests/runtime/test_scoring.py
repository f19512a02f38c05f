"""The relevance floor weighs evidence by selectivity and caps what it requires."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from powercontext_runtime.search.scoring import QueryPlan, document, plan_query, rank


def test_nothing_to_match_gives_no_plan() -> None:
    assert plan_query(["wbread"], 100, {}) is None
    assert plan_query(["wbread"], 0, {"wbread": 1}) is None


def test_common_terms_are_not_used_for_retrieval_when_rare_ones_exist() -> None:
    plan = plan_query(["wthe", "wfixture"], 10_000, {"wthe": 9_000, "wfixture": 3})
    assert plan is not None
    assert plan.retrieval_terms == ("wfixture",)
    only_common = plan_query(["wthe"], 10_000, {"wthe": 9_000})
    assert only_common is not None and only_common.retrieval_terms == ("wthe",)


def test_one_incidental_common_word_does_not_satisfy_a_query_about_something_else() -> None:
    terms = ["wbake", "wsourdough", "wbread", "whome"]
    plan = plan_query(terms, 1000, {"whome": 300})
    assert plan is not None
    assert rank(plan, [document(1, ["whome", "wdirectory", "wlayout"])]) == []


def test_a_long_prompt_still_admits_the_entry_it_is_about() -> None:
    # 80 terms the scope has never seen, plus three rare ones the entry carries.
    noise = [f"wnoise{i}" for i in range(80)]
    terms = [*noise, "wpersist", "wcontract", "wbackend"]
    frequencies = {"wpersist": 2, "wcontract": 3, "wbackend": 5}
    plan = plan_query(terms, 5000, frequencies)
    assert plan is not None
    entry = ["wrun", "wbackend", "wcontract", "wtest", "wpersist", "wbehavior"]
    other = ["wbackend", "wdeploy", "wfriday"]
    admitted = rank(plan, [document(1, entry), document(2, other)])
    assert [r.rowid for r in admitted] == [1]
    assert 0 < admitted[0].score <= 1


def test_better_matches_rank_first_and_scores_stay_in_range() -> None:
    plan = plan_query(["wcache", "wredis"], 100, {"wcache": 4, "wredis": 2})
    assert plan is not None
    ranked = rank(
        plan,
        [document(1, ["wcache"]), document(2, ["wcache", "wredis"]), document(3, ["wredis"])],
    )
    assert ranked[0].rowid == 2
    assert all(0 <= r.score <= 1 for r in ranked)


def _reference_scores(
    plan: QueryPlan, documents: list[tuple[int, list[str]]]
) -> list[tuple[int, float]]:
    """The ranking written plainly over whole term sequences (tf by counting, length by len)."""
    admitted = []
    for rowid, terms in documents:
        present = set(plan.weights) & set(terms)
        if sum(plan.weights[t] for t in present) + 1e-9 < plan.required:
            continue
        length_factor = 1.2 * (0.5 + 0.5 * len(terms) / 32.0)
        weighted = 0.0
        for t in sorted(present):
            weighted += plan.weights[t] * terms.count(t) / (terms.count(t) + length_factor)
        admitted.append((rowid, round(min(1.0, weighted / plan.total_weight), 6)))
    return sorted(admitted, key=lambda item: -item[1])


_VOCABULARY = [f"q{word}" for word in ("alpha", "beta", "gamma", "delta", "eps", "zeta", "eta")]


@settings(max_examples=300, deadline=None)
@given(
    query=st.lists(st.sampled_from(_VOCABULARY), min_size=1, max_size=7, unique=True),
    documents=st.lists(st.lists(st.sampled_from(_VOCABULARY), max_size=12), max_size=12),
    doc_count=st.integers(min_value=12, max_value=10_000),
)
def test_ranking_from_distinct_terms_and_repeats_equals_ranking_whole_documents(
    query: list[str], documents: list[list[str]], doc_count: int
) -> None:
    """Documents are stored as distinct terms plus repeated occurrences; ranking them must
    give exactly what counting over the whole term sequence gives."""
    frequencies: dict[str, int] = {}
    for terms in documents:
        for term in set(terms):
            frequencies[term] = frequencies.get(term, 0) + 1
    plan = plan_query(query, doc_count, frequencies)
    numbered = list(enumerate(documents, start=1))
    if plan is None:
        assert not any(set(query) & set(terms) for terms in documents)
        return
    ranked = rank(plan, [document(rowid, terms) for rowid, terms in numbered])
    assert [(r.rowid, r.score) for r in ranked] == _reference_scores(plan, numbered)
