"""The relevance floor weighs evidence by selectivity and caps what it requires."""

from __future__ import annotations

from powercontext_runtime.search.scoring import plan_query, rank


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
    assert rank(plan, [(1, ["whome", "wdirectory", "wlayout"])]) == []


def test_a_long_prompt_still_admits_the_entry_it_is_about() -> None:
    # 80 terms the scope has never seen, plus three rare ones the entry carries.
    noise = [f"wnoise{i}" for i in range(80)]
    terms = [*noise, "wpersist", "wcontract", "wbackend"]
    frequencies = {"wpersist": 2, "wcontract": 3, "wbackend": 5}
    plan = plan_query(terms, 5000, frequencies)
    assert plan is not None
    entry = ["wrun", "wbackend", "wcontract", "wtest", "wpersist", "wbehavior"]
    other = ["wbackend", "wdeploy", "wfriday"]
    admitted = rank(plan, [(1, entry), (2, other)])
    assert [r.rowid for r in admitted] == [1]
    assert 0 < admitted[0].score <= 1


def test_better_matches_rank_first_and_scores_stay_in_range() -> None:
    plan = plan_query(["wcache", "wredis"], 100, {"wcache": 4, "wredis": 2})
    assert plan is not None
    ranked = rank(plan, [(1, ["wcache"]), (2, ["wcache", "wredis"]), (3, ["wredis"])])
    assert ranked[0].rowid == 2
    assert all(0 <= r.score <= 1 for r in ranked)
