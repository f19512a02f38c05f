"""The relevance floor (issue 17): absolute evidence weighed by specificity in the scope and in
general language, not a share of the query's terms.

Scopes here are built from real analyzer output, so the general-language vocabulary applies as
it does in the runtime. Expected outcomes come from what a user means, not from running the
code: an entry about the thing a prompt names is admitted, a prompt about something the project
never mentions gets nothing.
"""

from __future__ import annotations

import math
import random

from hypothesis import given, settings
from hypothesis import strategies as st

from powercontext_runtime.search import general_vocabulary, scoring
from powercontext_runtime.search.analyzer import document_terms, query_terms
from powercontext_runtime.search.scoring import (
    QueryPlan,
    content_weight,
    document,
    plan_query,
    rank,
    specificity,
)

# A small, realistic project memory: what a team would store.
PROJECT = [
    "Run make lint before pushing",
    "修改数据库持久化逻辑前先跑契约测试\npersistence",
    "Integration tests need Postgres and Redis from docker compose; run make test-integration.",
    "Never log customer email addresses or phone numbers; log invoice_id and tenant_id instead.",
    "Money amounts are stored as integers in minor units next to an ISO 4217 currency code.",
    "Deploy freeze: no production deploys on Fridays after 14:00, nor in a month's last two days.",
    "Access tokens are JWTs valid for 15 minutes; signing keys rotate monthly.",
    "Flaky tests get a ticket within one day; unfixed within two weeks, they are deleted.",
    "The web app formats dates with dayjs and the timezone plugin; avoid toLocaleDateString.",
    "Background jobs run on Dramatiq with the Redis broker and must be idempotent.",
    "Invoices are rendered to PDF with WeasyPrint from Jinja2 templates.",
    "Use the tenant_factory fixture from tests/conftest.py to create tenants in tests.",
    "Switching the log level to DEBUG in production must be temporary.",
    "Client-only UI state such as the sidebar goes into Zustand stores under web/src/stores/.",
    "登录流程统一走 auth/login_flow.py，不要在各个页面里自己拼登录请求。",
    "合并前必须有一位后端同事 review，并且 CI 全绿才能点合并。",
]

TRAVEL = (
    "I'm planning a two-week trip with my partner in late March. We land on a Monday morning and "
    "want to see the old town, spend a few days by the lake and maybe take the night train to the "
    "mountains. We'd like to keep the budget around two thousand euros each, including flights. "
    "Could you suggest a day-by-day plan, which city passes are worth buying, whether we should "
    "book the train tickets in advance, and a couple of restaurants that serve good local food "
    "without a long wait? My partner is vegetarian, and I'd love one day of easy hiking with a "
    "view. We also need to know if it is usually rainy that time of year, what to pack, and how "
    "early we should get to the museums to avoid the queues at the weekend."
)
COOKING = (
    "周末想在家做一顿饭，一共八个人，有两个小朋友和两位老人。打算做六个菜一个汤，家里只有一个灶台和一个"
    "烤箱，厨房比较小。请帮我排一下从下午两点开始的准备顺序，哪些菜可以提前做好，哪些必须现做现吃，"
    "另外老人牙口不好，有没有哪些菜需要做得软烂一点？预算控制在八百元以内，帮我列一个采购清单。"
)


def _scope(texts: list[str]) -> tuple[int, dict[str, int], list[scoring.Document]]:
    frequencies: dict[str, int] = {}
    docs = []
    for rowid, text in enumerate(texts, start=1):
        doc = document(rowid, document_terms(text))
        docs.append(doc)
        for term in doc[1]:
            frequencies[term] = frequencies.get(term, 0) + 1
    return len(texts), frequencies, docs


def admitted(texts: list[str], prompt: str) -> list[int]:
    """Indices into ``texts`` that the floor admits for ``prompt`` (best first)."""
    n, frequencies, docs = _scope(texts)
    terms = query_terms(prompt)
    plan = plan_query(terms, n, {t: frequencies[t] for t in terms if t in frequencies})
    if plan is None:
        return []
    return [r.rowid - 1 for r in rank(plan, docs)]


# -- general language ----------------------------------------------------------------------


def test_question_words_and_everyday_words_carry_no_content() -> None:
    for word in ("know", "what should I do", "make", "get"):
        assert all(content_weight(t) == 0.0 for t in query_terms(word)), word
    for word in ("two", "day", "week", "people"):  # everyday: at most a little
        assert content_weight(query_terms(word)[0]) <= 1.5, word
    for chinese in ("什么", "怎么", "我们"):
        assert all(content_weight(t) <= 0.5 for t in query_terms(chinese)), chinese
    # Topical words do, and rare or unknown words carry the most.
    assert content_weight(query_terms("persistence")[0]) > content_weight(query_terms("push")[0])
    assert content_weight(query_terms("push")[0]) > 0
    assert content_weight(query_terms("weasyprint")[0]) > content_weight(
        query_terms("persistence")[0]
    )


def test_short_numbers_are_not_content_but_long_ones_are() -> None:
    # Timestamps in pasted logs are full of "05", "12", "2024".
    assert content_weight("q05") == 0.0 and content_weight("q12") == 0.0
    assert content_weight("q2024") < content_weight("q12111")


def test_specificity_falls_back_on_general_language_in_a_young_scope() -> None:
    # In a two-entry scope every word occurs in one entry; only general language tells
    # "know" from "push" from "persistence".
    know, push, persistence = (query_terms(w)[0] for w in ("know", "push", "persistence"))
    assert specificity(know, 2, 1) < specificity(push, 2, 1) < specificity(persistence, 2, 1)
    # In a large scope the scope's own rate decides: a word in half the entries says little.
    assert specificity(persistence, 10_000, 5_000) < 1.0
    # Never more specific than in general, however rare in the scope.
    assert specificity(know, 100_000, 1) == specificity(know, 2, 1)


def test_the_vocabulary_was_built_with_this_analyzer() -> None:
    # English keys are stemmed analyzer terms: inflections must hit the same key.
    words = scoring._general().words
    for word in ("pushing", "pushed", "changes", "tests", "persistence", "queries"):
        assert query_terms(word)[0] in words, word
    assert general_vocabulary.UNLISTED_ENGLISH_PROBABILITY < general_vocabulary.MIN_PROBABILITY


# -- the floor -----------------------------------------------------------------------------


def test_nothing_to_match_gives_no_plan() -> None:
    assert plan_query(query_terms("sourdough bread"), 100, {}) is None
    assert plan_query(["qbread"], 0, {"qbread": 1}) is None
    # Seen, but only words that could never admit an entry: no retrieval at all.
    assert plan_query(query_terms("what should I know"), 2, {"qknow": 1}) is None


def test_common_terms_are_not_used_for_retrieval_when_rare_ones_exist() -> None:
    plan = plan_query(["qmake", "qfixtur"], 10_000, {"qmake": 9_000, "qfixtur": 3})
    assert plan is not None
    assert plan.retrieval_terms == ("qfixtur",)


def test_a_name_in_most_of_the_scope_does_not_spend_the_retrieval_budget_alone() -> None:
    """A conversation: one speaker's name is in 339 of 419 turns. Having no general-language
    probability, the name is the query's most "contentful" term; retrieval must still start
    from the rare terms, or the candidates are just the newest 256 turns naming her and the
    turn that answers (an old one) is never scored (issue 33: LoCoMo hit@10 0.613 -> 0.567)."""
    terms = query_terms("When did Caroline give a speech at a school?")
    frequencies = {"qcarolin": 339, "qspeech": 3, "qschool": 11}
    assert set(frequencies) <= set(terms)
    plan = plan_query(terms, 419, {t: frequencies[t] for t in terms if t in frequencies})
    assert plan is not None
    assert plan.retrieval_terms[:2] == ("qspeech", "qschool")
    assert "qcarolin" not in plan.retrieval_terms  # 339 > what the budget has left
    assert plan.weights["qcarolin"] > 0  # still counts in the ranking of what is retrieved


def test_the_readme_demo_scope() -> None:
    demo = PROJECT[:2]  # the two entries the README stores
    assert admitted(demo, "I am changing the persistence layer, what should I know?") == [1]
    assert admitted(demo, "What should I know before pushing?") == [0]
    assert admitted(demo, "what do I run before pushing?") == [0]
    # The same question shapes about other things: nothing.
    assert admitted(demo, "What should I know before visiting Iceland?") == []
    assert admitted(demo, "How do I make a good cup of coffee?") == []
    assert admitted(demo, "去日本旅游之前要准备什么？") == []


def test_short_chinese_questions_recall_entries_with_the_phrase() -> None:
    login = [PROJECT[14], *(f"登录流程第{i}条约定：{x}" for i, x in enumerate("甲乙丙"))]
    scope = PROJECT[:14] + login + PROJECT[15:]
    got = admitted(scope, "登录流程有什么约定？")
    assert {scope.index(t) for t in login} <= set(got)
    assert scope.index(PROJECT[15]) in admitted(scope, "合并前需要做哪些检查？")
    assert admitted(scope, "有什么好吃的川菜推荐吗？") == []


def test_unrelated_long_prompts_get_nothing() -> None:
    # Both share everyday words with the project (two, day, weeks, ticket, Monday; 两个, 下午).
    assert admitted(PROJECT, TRAVEL) == []
    assert admitted(PROJECT, COOKING) == []
    assert admitted(PROJECT, f"{TRAVEL}\n\n{TRAVEL.upper()}") == []


def test_a_rare_shared_term_is_admitted_inside_a_long_prompt() -> None:
    target = PROJECT.index("Invoices are rendered to PDF with WeasyPrint from Jinja2 templates.")
    prompt = f"{TRAVEL}\nBy the way, the printer at the hotel uses WeasyPrint somehow.\n{TRAVEL}"
    assert len(prompt) > 1_000
    assert target in admitted(PROJECT, prompt)
    # Without that one line, nothing.
    assert admitted(PROJECT, f"{TRAVEL}\n{TRAVEL}") == []


_FILLER = TRAVEL.split() + COOKING.split("，") + ["2024-05-03", "20:01:12", "ERROR", "retry=3"]


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.sampled_from(_FILLER), max_size=300),
    st.sampled_from([
        ("zustand", "Client-only UI state such as the sidebar goes into Zustand stores"),
        ("tenant_factory", "Use the tenant_factory fixture from tests/conftest.py"),
        ("dramatiq", "Background jobs run on Dramatiq with the Redis broker"),
    ]),
)  # fmt: skip
def test_surrounding_text_never_hides_a_rare_shared_term(
    filler: list[str], case: tuple[str, str]
) -> None:
    """However much unrelated text surrounds the rare term, the entry stays admitted."""
    term, entry_start = case
    target = next(i for i, text in enumerate(PROJECT) if text.startswith(entry_start))
    words = list(filler)
    random.Random(len(words)).shuffle(words)
    prompt = " ".join([*words[: len(words) // 2], term, *words[len(words) // 2 :]])
    assert target in admitted(PROJECT, prompt[:8192])


def test_an_extra_line_does_not_dilute_a_rare_term() -> None:
    target = PROJECT.index(
        "Use the tenant_factory fixture from tests/conftest.py to create tenants in tests."
    )
    base = "how do I use tenant_factory?"
    assert target in admitted(PROJECT, base)
    for extra in ("Also the build takes ages lately.", "请顺便看一下 CI 为什么这么慢。", TRAVEL):
        assert target in admitted(PROJECT, f"{base}\n{extra}")


def test_better_matches_rank_first_and_scores_stay_in_range() -> None:
    n, frequencies, docs = _scope(PROJECT)
    terms = query_terms("integration tests need postgres and redis")
    plan = plan_query(terms, n, {t: frequencies[t] for t in terms if t in frequencies})
    assert plan is not None
    ranked = rank(plan, docs)
    assert ranked[0].rowid - 1 == 2
    assert all(0 <= r.score <= 1 for r in ranked)


def test_coverage_ignores_length_where_the_score_divides_by_it() -> None:
    """Issue 33: two entries sharing the same terms with the prompt cover the same share of it
    whatever their length; the longer one only ranks lower."""
    short = "Integration tests need Postgres and Redis."
    long = short + " " + " ".join(f"Note {n}: the compose file pins both images." for n in range(9))
    n, frequencies, docs = _scope([*PROJECT, short, long])
    terms = query_terms("integration tests postgres redis")
    plan = plan_query(terms, n, {t: frequencies[t] for t in terms if t in frequencies})
    assert plan is not None
    by_row = {r.rowid: r for r in rank(plan, docs)}
    first, second = by_row[len(PROJECT) + 1], by_row[len(PROJECT) + 2]
    assert second.score < first.score
    assert second.coverage == first.coverage == 1.0
    assert all(0 <= r.coverage <= 1 for r in by_row.values())


def test_planning_is_deterministic() -> None:
    n, frequencies, _ = _scope(PROJECT)
    terms = query_terms(TRAVEL + " tenant_factory 登录流程")
    seen = {t: frequencies[t] for t in terms if t in frequencies}
    assert plan_query(terms, n, seen) == plan_query(terms, n, dict(reversed(seen.items())))


# -- ranking equals a plain re-implementation ----------------------------------------------


def _reference_scores(
    plan: QueryPlan, documents: list[tuple[int, list[str]]]
) -> list[tuple[int, float, float]]:
    """The ranking written plainly over whole term sequences (tf by counting, length by len),
    with each hit's coverage: the share of the query's weight among its terms, whatever its
    length or repeats."""
    admitted_rows = []
    for rowid, terms in documents:
        present = set(plan.weights) & set(terms)
        evidence = sum(plan.evidence.get(t, 0.0) for t in present)
        content = sum(plan.content.get(t, 0.0) for t in present)
        if evidence + 1e-9 < plan.required and content + 1e-9 < plan.content_required:
            continue
        length_factor = 1.2 * (0.5 + 0.5 * len(terms) / 32.0)
        weighted = math.fsum(
            plan.weights[t] * terms.count(t) / (terms.count(t) + length_factor) for t in present
        )
        covered = math.fsum(plan.weights[t] for t in present) / plan.total_weight
        admitted_rows.append(
            (rowid, round(min(1.0, weighted / plan.total_weight), 6), round(min(1.0, covered), 6))
        )
    return sorted(admitted_rows, key=lambda item: -item[1])


_VOCABULARY = [
    "qtenant", "qfixtur", "qweasyprint", "qpush", "qknow", "b07d9505f55", "c767b",
    "i757365725f6964",
]  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(
    query=st.lists(st.sampled_from(_VOCABULARY), min_size=1, max_size=8, unique=True),
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
        return
    ranked = rank(plan, [document(rowid, terms) for rowid, terms in numbered])
    assert [(r.rowid, r.score, r.coverage) for r in ranked] == _reference_scores(plan, numbered)


def test_the_vocabulary_file_is_what_its_generator_writes() -> None:
    # The data file is loaded by a small module (search/general_vocabulary.py) and written by
    # tools/build_general_vocab.py: written back from what was loaded, it is the same bytes,
    # so the two agree on the format and a rebuild from the sources diffs line by line.
    from tools import build_general_vocab as build

    def grouped(table: dict[int, str], sep: str) -> dict[int, list[str]]:
        return {value: items.split(sep) if sep else list(items) for value, items in table.items()}

    v = general_vocabulary
    tables = {
        "ENGLISH": (grouped(v.ENGLISH, " "), " "),
        "HAN_CHARACTERS": (grouped(v.HAN_CHARACTERS, ""), ""),
        "HAN_PAIRS": (grouped(v.HAN_PAIRS, " "), " "),
        "HAN_WORD_ENDS": (grouped(v.HAN_WORD_ENDS, ""), ""),
        "HAN_WORD_STARTS": (grouped(v.HAN_WORD_STARTS, ""), ""),
    }
    words = [v.HAN_FUNCTION_WORDS[i : i + 2] for i in range(0, len(v.HAN_FUNCTION_WORDS), 2)]
    english = sum(len(items) for items in tables["ENGLISH"][0].values())
    chars = sum(len(items) for items in tables["HAN_CHARACTERS"][0].values())
    pairs = sum(len(items) for items in tables["HAN_PAIRS"][0].values())
    counts = f"{english:,} English terms, {chars:,} Han characters, {pairs:,} Han pairs"
    written = build.render_tables(
        v.MIN_PROBABILITY, v.UNLISTED_ENGLISH_PROBABILITY, tables, words, counts
    )
    assert written == v.DATA_FILE.read_text(encoding="utf-8")
    assert (english, chars, pairs) == (16_877, 6_031, 37_006)
