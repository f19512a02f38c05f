"""Tests for the shared text analyzer (``powercontext_runtime.search.analyzer``).

Expected terms are derived from the documented encoding (class letter + literal word, UTF-8
hex, code points, SHA-1), computed here independently with ``hashlib``/``str.encode`` rather
than copied from the analyzer's output. Most checks are phrased as "a query meets a document",
which is what the search layer relies on.
"""

from __future__ import annotations

import hashlib
import random
import re
import timeit
import unicodedata
from itertools import pairwise

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from powercontext_runtime.search import analyzer
from powercontext_runtime.search.analyzer import MAX_TERM_LENGTH, document_terms, query_terms

TERM = re.compile(r"^[a-z0-9]+$")


def w(word: str) -> str:
    """Expected term of a plain ASCII word (already stemmed by the reader of the test)."""
    return "q" + word


def x(word: str) -> str:
    return "x" + word.encode("utf-8").hex()


def ident(identifier: str) -> str:
    return "i" + identifier.encode("utf-8").hex()


def han(char: str) -> str:
    return f"c{ord(char):04x}"


def han_pair(first: str, second: str) -> str:
    return f"b{ord(first):05x}{ord(second):05x}"


def kana_pair(first: str, second: str) -> str:
    return f"k{ord(first):05x}{ord(second):05x}"


def sha1_hex(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8")).hexdigest()


def meets(query: str, document: str) -> set[str]:
    return set(query_terms(query)) & set(document_terms(document))


# -- English -------------------------------------------------------------------------------


def test_english_sentence_and_plural_query() -> None:
    doc = document_terms("Run the backend contract tests")
    # "tests" folds to "test"; stop words stay in documents (document frequencies).
    assert doc == [w("run"), w("the"), w("backend"), w("contract"), w("test")]
    assert query_terms("test") == [w("test")]
    assert meets("test", "Run the backend contract tests") == {w("test")}


@pytest.mark.parametrize(
    "forms",
    [
        ("tests", "test", "testing", "tested"),
        ("images", "image", "imaging"),
        ("changing", "change", "changed", "changes"),
        ("queries", "query", "queried", "querying"),
        ("fixes", "fix", "fixed", "fixing"),
        ("running", "run", "runs"),
        ("processes", "process", "processing", "processed"),
        ("classes", "class"),
        ("coding", "code", "codes", "coded"),
        ("using", "use", "used", "uses"),
        ("embeds", "embed", "embedded", "embedding"),
        ("needs", "need", "needed"),
        ("matches", "match", "matching"),
        ("settings", "setting"),
        ("aliases", "alias"),
        ("statuses", "status"),
        ("caches", "cache", "cached", "caching"),
        ("updates", "update", "updated", "updating"),
    ],
)
def test_inflections_meet(forms: tuple[str, ...]) -> None:
    terms = {tuple(document_terms(form)) for form in forms}
    assert len(terms) == 1, terms
    (only,) = terms
    assert len(only) == 1 and only[0].startswith("q")


@pytest.mark.parametrize("word", ["this", "class", "bus", "process", "status", "analysis", "has"])
def test_words_ending_in_s_that_are_not_plurals_are_kept(word: str) -> None:
    assert document_terms(word) == [w(word)]


@pytest.mark.parametrize("word", ["run", "fix", "add", "use", "the", "api", "id", "ok"])
def test_short_words_are_not_stemmed(word: str) -> None:
    assert document_terms(word) == [w(word)]


@pytest.mark.parametrize(
    ("one", "other"),
    [("note", "not"), ("use", "us"), ("code", "cod"), ("tests", "text"), ("plan", "planet")],
)
def test_stemming_does_not_merge_different_words(one: str, other: str) -> None:
    assert set(document_terms(one)).isdisjoint(document_terms(other))


def test_single_character_ascii_words_are_dropped() -> None:
    assert document_terms("a x 1 I Z 9") == []
    assert query_terms("a b c") == []
    # ... but not single letters of other scripts, nor single CJK ideographs.
    assert document_terms("é π 中") == [x("é"), x("π"), han("中")]


def test_numbers_are_words() -> None:
    assert document_terms("2026 v2 42") == [w("2026"), w("v2"), w("42")]


# -- stop words ----------------------------------------------------------------------------


def test_query_drops_english_stop_words_documents_keep_them() -> None:
    text = "Please could you fix the failing tests for me"
    assert query_terms(text) == [w("fix"), w("fail"), w("test")]
    doc = document_terms(text)
    for word in ("pleas", "could", "you", "the", "for", "me"):
        assert w(word) in doc


def test_stop_words_are_compared_before_stemming() -> None:
    # "does" is a stop word; its stem must not remove a content word that stems alike, and
    # "using" (not a stop word) must survive although "us" is one.
    assert query_terms("does") == []
    assert query_terms("using") == [w("use")]


def test_query_drops_chinese_function_characters_and_the_non_words_they_form() -> None:
    text = "请修改的逻辑"
    doc = document_terms(text)
    query = query_terms(text)
    assert han("请") in doc and han("的") in doc and han_pair("改", "的") in doc
    assert han("请") not in query and han("的") not in query
    # "请修" and "改的" span a word boundary: no word, so no evidence.
    assert han_pair("请", "修") not in query and han_pair("改", "的") not in query
    assert han_pair("修", "改") in query and han_pair("逻", "辑") in query
    assert han("修") in query and han("逻") in query


@pytest.mark.parametrize("word", ["请求", "有效", "目的", "会话", "过期", "功能", "一致"])
def test_words_that_contain_a_function_character_are_kept(word: str) -> None:
    # 请 有 的 会 过 能 一 are function characters, but these pairs are words (request, valid,
    # purpose, session, expire, feature, consistent): a query must keep them.
    assert han_pair(*word) in query_terms(f"关于{word}的问题")


def _content_pairs(text: str) -> set[str]:
    return {t for t in query_terms(text) if t.startswith("b")}


@pytest.mark.parametrize(
    ("question", "content"),
    [
        ("登录流程有什么约定？", ["登录流程", "约定"]),
        ("合并前需要做哪些检查？", ["合并前需要做", "检查"]),
        ("数据库迁移要找谁评审呢", ["数据库迁移要找谁评审"]),
        ("token 多久会过期呢？", ["过期"]),
        ("是否可以直接连生产数据库？", ["直接连生产数据库"]),
        ("有没有办法回滚吧", ["办法回滚"]),
        ("怎么配置定时任务啊", ["配置定时任务"]),
    ],
)
def test_question_words_and_particles_are_separators_not_evidence(
    question: str, content: list[str]
) -> None:
    # Expected: the pairs of the content runs alone. Pairs that contain a function character
    # (要, 会, 的 …) survive only if they are words, so compare modulo those.
    expected = {han_pair(a, b) for run in content for a, b in pairwise(run)}
    got = _content_pairs(question)
    assert got <= expected
    function_pairs = {
        han_pair(a, b)
        for run in content
        for a, b in pairwise(run)
        if a in analyzer._CJK_STOP_CHARS or b in analyzer._CJK_STOP_CHARS
    }
    assert expected - function_pairs <= got
    # Nothing of the question words remains: no unigram of theirs, no pair across them.
    for word in ("什么", "哪些", "多久", "是否", "有没有", "怎么"):
        if word in question:
            assert han_pair(*word[:2]) not in query_terms(question)
            assert han(word[0]) not in query_terms(question) or word[0] in "".join(content)
    for particle in "吗呢吧啊":
        assert han(particle) not in query_terms(question)


def test_a_question_and_a_statement_about_the_same_thing_share_all_content_pairs() -> None:
    entry = "登录流程统一走 auth/login_flow.py，不要在各个页面里自己拼登录请求。"
    for question in ("登录流程有什么约定？", "登录流程是怎么约定的", "登录流程吗"):
        assert han_pair("登", "录") in meets(question, entry)
        assert han_pair("流", "程") in meets(question, entry)
        assert han_pair("录", "流") in meets(question, entry)


def test_short_numbers_and_question_words_do_not_split_words_around_them() -> None:
    # 什么 is removed as a whole: "有什么约定" must not leave "什" or a pair "有什".
    query = query_terms("有什么约定")
    assert han("什") not in query and han_pair("有", "什") not in query
    assert han_pair("么", "约") not in query


def test_query_terms_are_distinct_in_first_occurrence_order() -> None:
    assert document_terms("tests test testing") == [w("test")] * 3
    assert query_terms("tests run test running") == [w("test"), w("run")]


# -- identifiers ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "parts", "whole"),
    [
        # Joined by _ or -: parts, the whole identifier and the compact form.
        ("user_id", ["user", "id"], [ident("user_id"), w("userid")]),
        (
            "kebab-case-name",
            ["kebab", "case", "name"],
            [ident("kebab-case-name"), w("kebabcasenam")],  # compact "kebabcasename", stemmed
        ),
        # Joined by / . or :: paths and module names: no compact form.
        ("src/app/main.py", ["src", "app", "main", "py"], [ident("src/app/main.py")]),
        (
            "powercontext.store.memory",
            ["powercontext", "stor", "memori"],
            [ident("powercontext.store.memory")],
        ),
        ("std::vector", ["std", "vector"], [ident("std::vector")]),
        # CamelCase-only identifiers: the whole form is the plain word a user would type.
        ("HttpClient", ["http", "client"], [w("httpclient")]),
        ("HTTPServer", ["http", "server"], [w("httpserver")]),
        ("getHTTPResponse", ["get", "http", "respons"], [w("gethttprespons")]),
        ("utf8Decoder", ["utf8", "decoder"], [w("utf8decoder")]),
    ],
)
def test_identifier_parts_and_whole(text: str, parts: list[str], whole: list[str]) -> None:
    doc = document_terms(text)
    assert doc == [w(part) for part in parts] + whole
    query = query_terms(f"where is {text} defined")
    # The query names the whole identifier; every term it has, the document has.
    assert set(whole) <= set(query) <= set(doc) | {w("defin")}


def test_whole_identifier_is_casefolded_and_not_stemmed() -> None:
    assert ident("user_settings.py") in document_terms("User_Settings.py")
    assert w("set") in document_terms("User_Settings.py")  # parts are stemmed


def test_camel_case_meets_the_lowercase_spelling() -> None:
    assert meets("httpclient", "use the HttpClient here") == {w("httpclient")}
    assert meets("http client", "HttpClient") == {w("http"), w("client")}


def test_camel_parts_inside_a_joined_identifier() -> None:
    doc = document_terms("src/HttpClient.py")
    whole = ident("src/httpclient.py")
    assert doc == [w("src"), w("http"), w("client"), w("httpclient"), w("py"), whole]


def test_acronym_plurals_meet_the_singular() -> None:
    # The singular only the capitals reveal, then the plain casefolded word (what any
    # spelling of the query gives).
    # ("urls" stems to "url" anyway; "apis" and "ids" do not: "-is" and three letters.)
    assert document_terms("APIs URLs IDs") == [w("api"), w("apis"), w("url"), w("id"), w("ids")]
    assert meets("API", "list the APIs") == {w("api")}
    assert meets("APIs", "list the APIs") == {w("apis")}
    assert meets("apis", "list the APIs") == {w("apis")}


def test_trailing_and_leading_punctuation_is_not_part_of_an_identifier() -> None:
    doc = document_terms("Edit main.py. Then (see `foo_bar`), also foo_bar, and --verbose!")
    assert ident("main.py") in doc and ident("main.py.") not in doc
    assert doc.count(ident("foo_bar")) == 2
    assert w("verbos") in doc  # "verbose" loses its final e like any 5+ letter word
    assert ident("--verbose") not in doc and ident("verbose") not in doc


def test_identifier_query_meets_document_that_ends_a_sentence_with_it() -> None:
    assert ident("src/app/main.py") in meets("src/app/main.py", "The bug is in src/app/main.py.")


def test_long_identifier_is_hashed_with_marker() -> None:
    identifier = "powercontext_runtime.search.analyzer.document_terms"
    assert len(ident(identifier)) > MAX_TERM_LENGTH
    doc = document_terms(identifier)
    assert doc[-1] == "ih" + sha1_hex(identifier)
    assert len(doc[-1]) == 42
    assert doc[-1] in query_terms(f"see {identifier}")


def test_identifier_length_boundary() -> None:
    fits = "a" * 15 + "_" + "b" * 15  # 31 bytes -> "i" + 62 hex = 63 characters
    too_long = "a" * 16 + "_" + "b" * 15  # 32 bytes -> 65 characters -> hashed
    # The whole identifier, then its compact form (a word: "a" * 15 + "b" * 15).
    assert document_terms(fits)[-2:] == [ident(fits), w("a" * 15 + "b" * 15)]
    assert document_terms(too_long)[-2] == "ih" + sha1_hex(too_long)


def test_long_ascii_word_is_hashed_in_hex_class_not_word_class() -> None:
    fits = "q1" * 31 + "z"  # 63 characters: "q" + body = 64
    too_long = "q1" * 32  # 64 characters
    assert document_terms(fits) == [w(fits)]
    assert document_terms(too_long) == ["xh" + sha1_hex(too_long)]
    # A genuine word that happens to look like "h" + 40 hex characters stays a plain word and
    # cannot be mistaken for a hashed term: hashed terms never live in the "q" class.
    lookalike = "h" + sha1_hex(too_long)
    assert document_terms(lookalike) == [w(lookalike)]
    assert document_terms(lookalike) != document_terms(too_long)


# -- non-Latin scripts ---------------------------------------------------------------------


def test_chinese_unigrams_and_bigrams() -> None:
    doc = document_terms("修改数据库持久化逻辑")
    chars = "修改数据库持久化逻辑"
    assert len(doc) == 2 * len(chars) - 1
    assert doc[:3] == [han("修"), han_pair("修", "改"), han("改")]
    assert query_terms("数据库") == [
        han("数"),
        han_pair("数", "据"),
        han("据"),
        han_pair("据", "库"),
        han("库"),
    ]
    assert meets("数据库", "修改数据库持久化逻辑") == set(query_terms("数据库"))
    assert meets("网络请求", "修改数据库持久化逻辑") == set()


def test_mixed_chinese_and_identifier() -> None:
    doc = document_terms("修改 user_id 的逻辑")
    assert doc == [
        han("修"),
        han_pair("修", "改"),
        han("改"),
        w("user"),
        w("id"),
        ident("user_id"),
        w("userid"),
        han("的"),
        han_pair("的", "逻"),
        han("逻"),
        han_pair("逻", "辑"),
        han("辑"),
    ]
    # Without spaces the identifier is still separated from the ideographs.
    assert document_terms("修改user_id的逻辑") == doc
    assert ident("user_id") in meets("user_id", "修改user_id的逻辑")


def test_kana_bigrams_including_prolonged_mark() -> None:
    doc = document_terms("データベース")
    assert doc == [kana_pair(a, b) for a, b in pairwise("データベース")]
    assert meets("データ", "データベースを使う") == {kana_pair("デ", "ー"), kana_pair("ー", "タ")}


def test_mixed_han_and_kana_run() -> None:
    doc = document_terms("使う")
    # One run: the Han character's unigram plus the cross-script bigram; no kana unigram.
    assert doc == [han("使"), kana_pair("使", "う")]


def test_single_kana_or_hangul_character_is_a_unigram() -> None:
    assert document_terms("を") == [f"k{ord('を'):04x}"]
    assert document_terms("한") == [f"k{ord('한'):04x}"]


def test_hangul_bigrams() -> None:
    assert document_terms("한국어 처리") == [
        kana_pair("한", "국"),
        kana_pair("국", "어"),
        kana_pair("처", "리"),
    ]
    assert meets("한국", "한국어") == {kana_pair("한", "국")}


def test_accented_latin_is_distinct_from_ascii() -> None:
    assert document_terms("café") == ["x636166c3a9"]  # UTF-8 of "café": 63 61 66 c3 a9
    assert set(document_terms("café")).isdisjoint(document_terms("cafe"))
    # NFC: the decomposed spelling, and casefolding, give the same term.
    assert document_terms("cafe\u0301") == document_terms("café") == document_terms("CAFÉ")


def test_casefold_beyond_lowercase() -> None:
    # "ß" casefolds to "ss", so "Straße" and "STRASSE" meet.
    assert document_terms("Straße") == document_terms("STRASSE")


def test_cyrillic_words() -> None:
    assert document_terms("Привет мир") == [x("привет"), x("мир")]


def test_combining_marks_do_not_split_words() -> None:
    # Devanagari vowel signs are combining marks (Mc/Mn): the word must stay whole.
    word = "हिन्दी"
    assert any(unicodedata.category(c).startswith("M") for c in word)
    assert document_terms(word) == [x(word)]
    # A mark NFC cannot compose stays inside the word too.
    assert document_terms("q\u0338rs") == [x("q\u0338rs")]


def test_bigram_encoding_is_unambiguous_across_code_point_widths() -> None:
    # With variable-width code points both bigrams would read "300724e2d".
    first = document_terms("〇\U00024e2d")
    second = document_terms("\U00030072中")
    assert first[1] != second[1]
    assert first[1] == "b0300724e2d" and second[1] == "b3007204e2d"


def test_emoji_and_symbols_separate() -> None:
    assert document_terms("deploy🚀now ✓ done") == [w("deploy"), w("now"), w("done")]


# -- properties ----------------------------------------------------------------------------

_INTERESTING = (
    "aZ09_-./: \t\n,;()`'\"!?"
    "éßİıǅ\u0301\u0338\u200d\ufe0f"
    "中文数据库的请〇\U00024e2d\U00030072"
    "データベースをー・゠"
    "한국어ㅋ"
    "Привет"
    "😀🚀\x00\x1b\u2028"
)

any_text = st.one_of(
    st.text(st.characters(codec=None, categories=None, exclude_categories=())),
    st.text(st.sampled_from(_INTERESTING), max_size=80),
    st.text(st.sampled_from("aAbBzZ0_.-/"), max_size=80),
)


@settings(max_examples=400, deadline=None)
@given(any_text)
def test_every_term_is_an_engine_safe_ascii_token(text: str) -> None:
    for term in document_terms(text):
        assert TERM.match(term), term
        assert 2 <= len(term) <= MAX_TERM_LENGTH
        assert term[0] in "qxicbk"


@settings(max_examples=300, deadline=None)
@given(any_text)
def test_query_terms_are_distinct_and_a_subset_of_document_terms(text: str) -> None:
    query = query_terms(text)
    assert len(query) == len(set(query))
    assert set(query) <= set(document_terms(text))


@settings(max_examples=300, deadline=None)
@given(any_text)
def test_deterministic_and_independent_of_the_cache(text: str) -> None:
    first = document_terms(text)
    assert document_terms(text) == first
    analyzer._cached_segment_terms.cache_clear()
    analyzer._cached_cjk_terms.cache_clear()
    assert document_terms(text) == first
    assert query_terms(text) == query_terms(text)


@settings(max_examples=300, deadline=None)
@given(any_text)
def test_canonically_equivalent_texts_give_the_same_terms(text: str) -> None:
    assert document_terms(unicodedata.normalize("NFD", text)) == document_terms(text)


@settings(max_examples=300, deadline=None)
@given(any_text, any_text)
def test_whitespace_separated_texts_are_analysed_independently(left: str, right: str) -> None:
    # Nothing (identifier, CJK run, word) spans whitespace, so analysis is local.
    assert document_terms(f"{left} {right}") == document_terms(left) + document_terms(right)


@settings(max_examples=200, deadline=None)
@given(st.text(st.characters(min_codepoint=0x4E00, max_codepoint=0x9FFF), min_size=1))
def test_pure_han_run_yields_unigrams_and_bigrams(run: str) -> None:
    doc = document_terms(run)
    assert doc[0::2] == [han(c) for c in run]
    assert doc[1::2] == [han_pair(a, b) for a, b in pairwise(run)]


@settings(max_examples=200, deadline=None)
@given(st.from_regex(r"[a-z]{2,12}", fullmatch=True), st.from_regex(r"[a-z]{2,12}", fullmatch=True))
def test_snake_case_identifier_meets_its_whole_form(left: str, right: str) -> None:
    identifier = f"{left}_{right}"
    doc = document_terms(f"call {identifier}.")
    assert ident(identifier) in doc
    assert set(query_terms(identifier)) <= set(doc)


@settings(max_examples=500, deadline=None)
@given(st.characters(categories=["L", "N"]))
def test_every_letter_or_digit_is_a_word_character(char: str) -> None:
    # Doubling the character avoids the single-ASCII-character rule; NFC may rewrite a few
    # compatibility characters, so compare with the normalised form's own analysis.
    text = unicodedata.normalize("NFC", char * 2)
    assert len(document_terms(text)) >= 1


@settings(max_examples=500, deadline=None)
@given(st.characters(categories=["M"]))
def test_combining_marks_inside_a_word_keep_it_whole(mark: str) -> None:
    text = unicodedata.normalize("NFC", f"ж{mark}ж")  # Cyrillic "ж", no compositions
    assert document_terms(text) == [x(text.casefold())]


# -- speed ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "a" + "\u0301" * 8191,
        "a._" * 2730,
        "aA" * 4096,
        "中" * 8192,
        "x" * 8192,
        ("Fix the HttpClient in src/app/main.py, 修改数据库持久化逻辑。 " * 200)[:8192],
    ],
    ids=["marks", "joiners", "camel", "han", "long-word", "mixed"],
)
def test_worst_case_inputs_stay_linear(text: str) -> None:
    # A generous bound: catastrophic regex backtracking would take seconds, not milliseconds.
    elapsed = min(timeit.repeat(lambda: document_terms(text), number=1, repeat=3))
    assert elapsed < 0.05


# OceanBase's full-text engine drops these (InnoDB's default list) even with the space parser.
_INNODB_STOP_WORDS = frozenset(
    [
        "a",
        "about",
        "an",
        "are",
        "as",
        "at",
        "be",
        "by",
        "com",
        "de",
        "en",
        "for",
        "from",
        "how",
        "i",
        "in",
        "is",
        "it",
        "la",
        "of",
        "on",
        "or",
        "that",
        "the",
        "this",
        "to",
        "was",
        "what",
        "when",
        "where",
        "who",
        "will",
        "with",
        "und",
        "www",
    ]
)


@given(st.text(max_size=200))
def test_no_term_is_an_oceanbase_stop_word(text: str) -> None:
    assert not set(document_terms(text)) & _INNODB_STOP_WORDS


def test_words_that_would_spell_stop_words_with_a_w_prefix_survive() -> None:
    for word in ("as", "hat", "hen", "here", "ho", "ill", "ith", "ww"):
        assert document_terms(word) and not set(document_terms(word)) & _INNODB_STOP_WORDS


# -- symmetric compound identifiers (issue 17) -------------------------------------------------

_WORDS = st.lists(st.from_regex(r"[a-z]{2,8}", fullmatch=True), min_size=1, max_size=4)
_STYLES = ("snake", "kebab", "screaming", "camel", "pascal", "lower", "upper")


def spell(words: list[str], style: str) -> str:
    """One name in one of the spellings people and code use for it."""
    if style == "snake":
        return "_".join(words)
    if style == "kebab":
        return "-".join(words)
    if style == "screaming":
        return "_".join(words).upper()
    if style == "camel":
        return words[0] + "".join(w.capitalize() for w in words[1:])
    if style == "pascal":
        return "".join(w.capitalize() for w in words)
    if style == "lower":
        return "".join(words)
    return "".join(words).upper()


@settings(max_examples=400, deadline=None)
@given(_WORDS, st.sampled_from(_STYLES), st.sampled_from(_STYLES))
def test_every_spelling_of_a_name_meets_every_other(
    words: list[str], query_style: str, document_style: str
) -> None:
    """``expireOnCommit`` finds ``expire_on_commit`` and the other way round, for every pair of
    spellings: both sides share the name's compact form, whatever case or joiner they use."""
    query, doc = spell(words, query_style), spell(words, document_style)
    compact = analyzer._word_term("".join(words))
    if compact is None or "".join(words) in analyzer._STOP_WORDS:
        return
    assert compact in query_terms(f"where is {query} used")
    assert compact in document_terms(f"see {doc} for details")


@settings(max_examples=400, deadline=None)
@given(
    st.lists(st.from_regex(r"[A-Za-z][A-Za-z0-9]{0,9}", fullmatch=True), min_size=1, max_size=4),
    st.sampled_from(["_", "-", ".", "/", "::", ""]),
    st.randoms(use_true_random=False),
)
def test_query_terms_do_not_depend_on_letter_case(
    parts: list[str], joiner: str, rng: random.Random
) -> None:
    """A query is analysed as its casefolded self: ``OpenAPI``, ``openapi`` and ``OPENAPI``
    give the same terms, and they are a subset of the document terms of every case variant."""
    text = joiner.join(parts)
    variant = "".join(c.upper() if rng.random() < 0.5 else c.lower() for c in text)
    assert query_terms(text) == query_terms(variant) == query_terms(text.lower())
    assert set(query_terms(text)) <= set(document_terms(variant))


def test_openapi_query_no_longer_splits_into_open_and_api() -> None:
    # The measured failure: "OpenAPI" in a query also looked for "api", so every entry that
    # mentions an API outranked the one about openapi/powercontext.yaml.
    assert query_terms("OpenAPI") == [w("openapi")]
    assert w("openapi") in meets("Where is the OpenAPI spec?", "openapi/powercontext.yaml")
    assert not meets("OpenAPI", "The API listens on 127.0.0.1:7411")
    # A document's CamelCase still meets a query that names one part in prose.
    assert meets("which api client", "the OpenAPI client") == {w("api"), w("client")}


def test_joined_identifier_parts_are_never_stop_words_in_a_query() -> None:
    # "is" and "has" alone are stop words; inside is_valid / has_many they are part of a name.
    assert w("is") not in query_terms("is it valid") and w("is") in query_terms("is_valid")
    assert w("has") in query_terms("orm.has_many")
