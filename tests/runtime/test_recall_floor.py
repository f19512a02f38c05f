"""The failures issue 17 measured, reproduced against the real service on a SQLite store.

Each case is what a user would expect from the product: the README's own demo, a question
followed by a ``remember:`` line, short Chinese questions, an identifier spelled differently in
the question and in the entry, and prompts about things the project never mentions. The
OceanBase backend shares the analyzer, the scoring and the plan; only candidate retrieval is
its own SQL (covered by test_backend_parity.py).
"""

from __future__ import annotations

import json

import pytest

from powercontext_runtime.composition import Runtime
from powercontext_runtime.contract.context import PrepareContextRequest
from powercontext_runtime.contract.memory import RememberMemoryRequest, SearchMemoryRequest
from powercontext_runtime.services.auth import Principal

EVERYTHING = Principal.unrestricted()

# Exactly what README.md's "Use it" section stores.
README_LINT = "Run make lint before pushing"
README_PERSISTENCE = "修改数据库持久化逻辑前先跑契约测试"

LOGIN = [
    "登录流程统一走 `auth/login_flow.py`，不要在各个页面里自己拼登录请求。",
    "登录流程里的图形验证码由风控服务决定要不要弹出，前端只负责展示。",
    "改登录流程要同时更新 `docs/auth.md` 里的时序图。",
    "登录流程的埋点事件名以 `login_` 开头，产品看板依赖这些名字，不能随便改。",
]
CHINESE_OTHERS = [
    "合并前必须有一位后端同事 review，并且 CI 全绿才能点合并。",
    "发布窗口是每周二和周四下午，其余时间只发紧急修复。",
    "数据库表名用复数 snake_case，比如 `user_sessions`。",
    "日志里不能打印身份证号，要先脱敏。",
    "会话 token 有效期 7 天，过期后要重新登录。",
]

OPENAPI = (
    "`openapi/powercontext.yaml` is the source of truth for every route; change it in the same "
    "commit as the handler and run `make contract`."
)
API_ENTRIES = [
    "API tokens are stored hashed (SHA-256); the plain token is shown once.",
    'Every API error uses the envelope {"error": {"code", "message", "details"}}.',
    "The API listens on 127.0.0.1:7411 and on a unix socket in the data dir.",
    "API requests without a bearer token get 401; a token lacking the scope gets 403.",
    "The MCP endpoint exposes the same operations as the HTTP API, except prepare_context.",
    "API request bodies above 1 MiB are rejected with 413 before they are parsed.",
    "Any change to the public API needs a line in docs/api.md and a contract test.",
    "The hook's API client uses http.client and msgspec, not httpx.",
    "The API has no rate limiting: the daemon only listens locally.",
]

UNRELATED_LONG = (
    "I'm planning a two-week trip to Japan in late March with my partner. We land in Tokyo and "
    "want to see the cherry blossoms, spend a few days in Kyoto and Nara, and maybe go to "
    "Hiroshima. We'd like to keep the budget around 4,000 euros for both of us, flights "
    "excluded. Could you suggest a day-by-day itinerary, tell us whether the rail pass is worth "
    "it for this route, and recommend a couple of ryokan that are not too expensive? My partner "
    "is vegetarian, so restaurant tips that work for that would be great. We also want one day "
    "of easy hiking with a view, and we need to know what to pack for the weather at that time "
    "of year and how early to get to the temples to avoid the crowds on the weekend."
)


def remember(rt: Runtime, scope: str, text: str, tags: list[str] | None = None) -> None:
    rt.memory.remember(
        RememberMemoryRequest(scope_id=scope, kind="convention", text=text, tags=tags or [])
    )


def pack(rt: Runtime, scope: str, prompt: str) -> list[str] | None:
    """The memory items' texts of the prepared pack, in order; ``None`` for ``empty``."""
    prepared = rt.context.prepare(PrepareContextRequest(scope_id=scope, query=prompt), EVERYTHING)
    if prepared.status == "empty":
        assert prepared.content is None
        return None
    assert prepared.content is not None
    block = json.loads(prepared.content.split("\n")[4])
    return [item["content"] for item in block["items"] if "entry_id" in item["citation"]]


@pytest.fixture
def readme_scope(sqlite_runtime: Runtime) -> tuple[Runtime, str]:
    scope = "git:github.com/acme/shop"
    remember(sqlite_runtime, scope, README_LINT)
    remember(sqlite_runtime, scope, README_PERSISTENCE, ["persistence"])
    return sqlite_runtime, scope


def test_the_readme_demo_prepares_the_entry_memory_search_finds(
    readme_scope: tuple[Runtime, str],
) -> None:
    rt, scope = readme_scope
    found = rt.memory.search(
        SearchMemoryRequest(scope_id=scope, query="what do I run before pushing?", limit=5)
    )
    assert [hit.text for hit in found.hits] == [README_LINT]
    prompt = "I am changing the persistence layer, what should I know?"
    assert pack(rt, scope, prompt) == [README_PERSISTENCE]


def test_a_remember_line_or_another_line_does_not_empty_the_pack(
    readme_scope: tuple[Runtime, str],
) -> None:
    rt, scope = readme_scope
    question = "What should I know before pushing?"
    assert pack(rt, scope, question) == [README_LINT]
    for extra in (
        "remember: release notes go into CHANGELOG.md under Unreleased",
        "- 记住：发布说明写在 CHANGELOG.md 里",
        "Also, the build takes ages lately.",
    ):
        assert pack(rt, scope, f"{question}\n{extra}") == [README_LINT], extra


def test_unrelated_questions_in_the_readme_scope_get_nothing(
    readme_scope: tuple[Runtime, str],
) -> None:
    rt, scope = readme_scope
    for prompt in (
        "What should I know before visiting Iceland?",
        "How do I make a good cup of pour-over coffee?",
        "去日本旅游之前要准备什么？",
        "给我推荐一部好看的电影",
        UNRELATED_LONG,
    ):
        assert pack(rt, scope, prompt) is None, prompt


def test_short_chinese_questions_recall_entries_with_the_phrase(sqlite_runtime: Runtime) -> None:
    scope = "git:example.com/acme/login"
    for text in [*LOGIN, *CHINESE_OTHERS]:
        remember(sqlite_runtime, scope, text)
    got = pack(sqlite_runtime, scope, "登录流程有什么约定？")
    assert got is not None and set(LOGIN) <= set(got)
    got = pack(sqlite_runtime, scope, "合并前需要做哪些检查？")
    assert got is not None and got[0] == CHINESE_OTHERS[0]
    got = pack(sqlite_runtime, scope, "token 多久会过期呢？")
    assert got is not None and got[0] == CHINESE_OTHERS[4]
    for prompt in ("周末去哪里爬山比较好？", "怎么提高英语口语？", "明天北京会下雨吗？"):
        assert pack(sqlite_runtime, scope, prompt) is None, prompt


@pytest.mark.parametrize(
    "prompt",
    [
        "Where is the OpenAPI spec?",
        "I added a new route, do I have to touch the OpenAPI file too?",
        "OPENAPI",
        "openapi/powercontext.yaml",
    ],
)
def test_an_identifier_meets_its_lowercase_spelling_and_outranks_mere_mentions(
    sqlite_runtime: Runtime, prompt: str
) -> None:
    scope = "git:example.com/acme/powercontext"
    for text in [OPENAPI, *API_ENTRIES]:
        remember(sqlite_runtime, scope, text)
    got = pack(sqlite_runtime, scope, prompt)
    assert got is not None and got[0] == OPENAPI


def test_a_long_prompt_recalls_through_one_rare_term(sqlite_runtime: Runtime) -> None:
    scope = "git:example.com/acme/long"
    for text in [OPENAPI, *API_ENTRIES, README_LINT]:
        remember(sqlite_runtime, scope, text)
    assert pack(sqlite_runtime, scope, UNRELATED_LONG) is None
    prompt = f"{UNRELATED_LONG}\nUnrelated, but: who owns openapi/powercontext.yaml?\n"
    got = pack(sqlite_runtime, scope, prompt * 2)
    assert got is not None and OPENAPI in got
