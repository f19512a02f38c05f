"""Memory and source capture over raw HTTP against a real ``powercontext serve`` process.

Expectations come from the spec (02 § Memory/§ Sources/§ Search, 03 § Operations) and from
the inputs each test writes, never from earlier output of the operation under test.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.e2e.helpers import (
    CHANGES,
    GET,
    LIST,
    RETIRE,
    REVISE,
    SEARCH,
    SOURCES,
    assert_envelope,
    list_all,
    memory_ref,
    new_scope,
    remember,
)
from tests.support.daemon import Daemon

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def http(module_daemon: Daemon) -> Iterator[httpx.Client]:
    with module_daemon.client() as client:
        yield client


def _changes(http: httpx.Client, scope_id: str, since: int = 0) -> dict[str, Any]:
    response = http.post(CHANGES, json={"scope_id": scope_id, "since_revision": since})
    assert response.status_code == 200, response.text
    return response.json()


def _search(http: httpx.Client, scope_id: str, query: str, **fields: Any) -> dict[str, Any]:
    response = http.post(SEARCH, json={"scope_id": scope_id, "query": query, **fields})
    assert response.status_code == 200, response.text
    body = response.json()
    scores = [hit["score"] for hit in body["hits"]]
    assert all(0.0 <= s <= 1.0 for s in scores), scores
    assert scores == sorted(scores, reverse=True), scores
    for hit in body["hits"]:
        # Every hit cites the head revision that was searched (spec 02 § Search consistency).
        assert hit["citation"]["memory_ref"] == body["memory"]
        assert hit["matched_by"] == "fts"
    return body


# -- health and capabilities ----------------------------------------------------------------


def test_health_endpoints_answer_without_a_token(module_daemon: Daemon) -> None:
    with httpx.Client(base_url=module_daemon.url, timeout=10) as anonymous:
        live = anonymous.get("/health/live")
        ready = anonymous.get("/health/ready")
    assert live.status_code == 200 and live.json() == {"status": "ok"}
    assert ready.status_code == 200, ready.text
    assert ready.json()["status"] == "ready" and ready.json()["database"] == "sqlite"
    assert ready.json()["embeddings"]["state"] == "off"
    assert live.headers["x-request-id"] and ready.headers["x-request-id"]


def test_capabilities_are_a_subset_of_the_closed_values(http: httpx.Client) -> None:
    response = http.get("/v1/capabilities")
    assert response.status_code == 200
    caps = response.json()
    closed = {
        "context_versions": {"powercontext.prepared-context.v1"},
        "bootstrap_versions": {"powercontext.bootstrap-context.v1"},
        "bootstrap_profiles": {"powercontext.scope-bootstrap.v1"},
        "artifact_families": {"memory", "experience", "skill", "handoff"},
        "source_types": {"content", "task-result"},
        "search_modes": {"auto", "fts"},
    }
    assert set(caps) == {*closed, "memory_extraction"}
    for key, allowed in closed.items():
        assert set(caps[key]) <= allowed, key
    # What this runtime serves for sure: Memory, content sources and task results, both modes.
    assert "memory" in caps["artifact_families"]
    assert caps["source_types"] == ["content", "task-result"]
    assert set(caps["search_modes"]) == {"auto", "fts"}
    assert isinstance(caps["memory_extraction"], bool)


# -- remember / get / list / changes --------------------------------------------------------


def test_remember_normalises_and_reads_back_exactly(http: httpx.Client) -> None:
    scope = new_scope("remember")
    raw_text = "  Cafe\u0301 menus are cached per locale.\n"
    written = remember(
        http,
        scope,
        raw_text,
        kind=" convention ",
        tags=["cache", "api", "cache"],
        reason="seen in review",
        source_refs=[{"name": "content", "source_id": "prompt-1"}],
    )
    entry = written["entry"]
    assert written["memory"] == memory_ref(1)
    assert entry["citation"]["memory_ref"] == memory_ref(1)
    assert entry["citation"]["entry_id"].startswith("mem_ent_")
    assert entry["citation"]["entry_version_id"].startswith("mem_ver_")
    assert entry["version"] == 1
    assert entry["kind"] == "convention"
    assert entry["text"] == unicodedata.normalize("NFC", raw_text).strip()
    assert entry["tags"] == ["api", "cache"]
    assert entry["state"] == "active"
    assert entry["reason"] == "seen in review"
    assert entry["source_refs"] == [{"name": "content", "source_id": "prompt-1"}]
    assert entry["artifact_refs"] == []

    got = http.post(GET, json={"scope_id": scope, "citation": entry["citation"]})
    assert got.status_code == 200
    assert got.json() == entry

    changes = _changes(http, scope)
    assert changes["memory"] == memory_ref(1)
    assert [
        (c["revision"], c["operation"], c["entry_id"], c["entry_version_id"])
        for c in changes["changes"]
    ] == [(1, "remember", entry["citation"]["entry_id"], entry["citation"]["entry_version_id"])]


def test_empty_scope_reads_as_no_memory(http: httpx.Client) -> None:
    scope = new_scope("empty")
    listed = http.post(LIST, json={"scope_id": scope}).json()
    assert listed == {"memory": None, "entries": [], "next_cursor": None}
    assert _search(http, scope, "anything at all") == {"memory": None, "mode": "fts", "hits": []}
    assert _changes(http, scope) == {"memory": None, "changes": []}


def test_list_pages_through_every_entry_with_the_cursor(http: httpx.Client) -> None:
    scope = new_scope("paging")
    texts = [f"paging fact number {i} about module {chr(97 + i)}" for i in range(7)]
    ids = [remember(http, scope, t)["entry"]["citation"]["entry_id"] for t in texts]

    pages: list[list[dict[str, Any]]] = []
    body: dict[str, Any] = {"scope_id": scope, "limit": 3}
    while True:
        response = http.post(LIST, json=body)
        assert response.status_code == 200
        page = response.json()
        assert page["memory"] == memory_ref(len(texts))
        pages.append(page["entries"])
        if page["next_cursor"] is None:
            break
        assert isinstance(page["next_cursor"], str)
        body["cursor"] = page["next_cursor"]
        assert len(pages) <= 3, "the cursor must terminate"

    assert [len(p) for p in pages] == [3, 3, 1]
    flat = [e for p in pages for e in p]
    # Creation order, each entry exactly once, each citing the head it was listed from.
    assert [e["citation"]["entry_id"] for e in flat] == ids
    assert [e["text"] for e in flat] == texts
    assert {e["citation"]["memory_ref"]["revision"] for e in flat} == {len(texts)}


def test_changes_since_a_revision(http: httpx.Client) -> None:
    scope = new_scope("changes")
    for i in range(4):
        remember(http, scope, f"changes fact {i} zeta{i}")
    later = _changes(http, scope, since=2)
    assert [c["revision"] for c in later["changes"]] == [3, 4]
    assert later["memory"] == memory_ref(4)
    assert _changes(http, scope, since=4)["changes"] == []
    assert _changes(http, scope, since=2**63 - 1)["changes"] == []
    # Revisions are 64-bit: beyond that a cursor cannot exist, and saying so beats a 500.
    too_far = http.post(CHANGES, json={"scope_id": scope, "since_revision": 2**63})
    assert_envelope(too_far, 422, "invalid_request")


# -- revise / retire semantics --------------------------------------------------------------


def test_revise_moves_the_head_and_old_citation_still_reads_old_text(http: httpx.Client) -> None:
    scope = new_scope("revise")
    first = remember(
        http,
        scope,
        "Deploys happen on Tuesdays.",
        source_refs=[{"name": "content", "source_id": "a"}],
    )["entry"]
    response = http.post(
        REVISE,
        json={
            "scope_id": scope,
            "citation": first["citation"],
            "text": "Deploys happen on Thursdays.",
            "tags": ["deploy"],
            "source_refs": [{"name": "content", "source_id": "b"}],
        },
    )
    assert response.status_code == 200, response.text
    revised = response.json()
    second = revised["entry"]
    assert revised["memory"] == memory_ref(2)
    assert second["citation"]["entry_id"] == first["citation"]["entry_id"]
    assert second["citation"]["entry_version_id"] != first["citation"]["entry_version_id"]
    assert second["version"] == 2
    assert second["text"] == "Deploys happen on Thursdays."
    assert second["kind"] == "fact"  # unchanged fields carry over
    assert second["tags"] == ["deploy"]
    # Evidence accumulates across versions.
    assert second["source_refs"] == [
        {"name": "content", "source_id": "a"},
        {"name": "content", "source_id": "b"},
    ]

    old = http.post(GET, json={"scope_id": scope, "citation": first["citation"]})
    assert old.status_code == 200
    assert old.json()["text"] == "Deploys happen on Tuesdays."
    assert old.json()["version"] == 1
    new = http.post(GET, json={"scope_id": scope, "citation": second["citation"]})
    assert new.status_code == 200 and new.json() == second

    # A version is readable only in the revisions that contained it.
    v2_at_r1 = dict(second["citation"], memory_ref=memory_ref(1))
    v1_at_r2 = dict(first["citation"], memory_ref=memory_ref(2))
    for cited in (v2_at_r1, v1_at_r2):
        missing = http.post(GET, json={"scope_id": scope, "citation": cited})
        assert_envelope(missing, 404, "memory_not_found")

    listed = list_all(http, scope)
    assert [e["text"] for e in listed] == ["Deploys happen on Thursdays."]


def test_stale_citation_conflicts_and_names_the_current_one(http: httpx.Client) -> None:
    scope = new_scope("stale")
    first = remember(http, scope, "Use tabs in Makefiles.")["entry"]
    second = http.post(
        REVISE, json={"scope_id": scope, "citation": first["citation"], "kind": "convention"}
    ).json()["entry"]

    for path, extra in ((REVISE, {"text": "Use spaces."}), (RETIRE, {})):
        stale = http.post(path, json={"scope_id": scope, "citation": first["citation"], **extra})
        error = assert_envelope(stale, 409, "revision_conflict")
        assert error["details"]["current"] == second["citation"]
    # Nothing was written by the rejected requests.
    assert [c["revision"] for c in _changes(http, scope)["changes"]] == [1, 2]


def test_writes_to_other_entries_do_not_make_a_citation_stale(http: httpx.Client) -> None:
    scope = new_scope("independent")
    a = remember(http, scope, "Entry A: the queue is durable.")["entry"]
    remember(http, scope, "Entry B: the cache is volatile.")
    # A's citation names revision 1 while the head is 2: still its current version.
    revised = http.post(REVISE, json={"scope_id": scope, "citation": a["citation"], "text": "A2"})
    assert revised.status_code == 200, revised.text
    assert revised.json()["memory"] == memory_ref(3)


def test_identical_remember_returns_the_same_entry_without_a_revision(http: httpx.Client) -> None:
    scope = new_scope("dedupe")
    first = remember(http, scope, "Prefer pathlib over os.path.", tags=["python"])
    again = remember(http, scope, "  Prefer pathlib over os.path.  ", tags=["python", "python"])
    assert again["memory"] == first["memory"] == memory_ref(1)
    assert again["entry"]["citation"] == first["entry"]["citation"]
    assert len(_changes(http, scope)["changes"]) == 1
    # Different tags are different content: a new entry and a new revision.
    other = remember(http, scope, "Prefer pathlib over os.path.", tags=["style"])
    assert other["memory"] == memory_ref(2)
    assert other["entry"]["citation"]["entry_id"] != first["entry"]["citation"]["entry_id"]


def test_expected_revision_is_a_cas_on_the_head(http: httpx.Client) -> None:
    scope = new_scope("cas")
    assert remember(http, scope, "first", expected_revision=0)["memory"] == memory_ref(1)
    conflict = http.post(
        "/v1/memory/remember",
        json={"scope_id": scope, "kind": "fact", "text": "second", "expected_revision": 0},
    )
    error = assert_envelope(conflict, 409, "revision_conflict")
    assert error["details"]["current"] == memory_ref(1)
    assert remember(http, scope, "second", expected_revision=1)["memory"] == memory_ref(2)
    assert len(_changes(http, scope)["changes"]) == 2


def test_retired_entries_leave_search_and_list_and_cannot_be_revised(http: httpx.Client) -> None:
    scope = new_scope("retire")
    keep = remember(http, scope, "Kafka topics are partitioned by tenant.")["entry"]
    gone = remember(http, scope, "Redis keys expire after one hour.")["entry"]
    assert [h["citation"]["entry_id"] for h in _search(http, scope, "redis keys")["hits"]] == [
        gone["citation"]["entry_id"]
    ]

    response = http.post(
        RETIRE, json={"scope_id": scope, "citation": gone["citation"], "reason": "obsolete"}
    )
    assert response.status_code == 200, response.text
    retired = response.json()
    assert retired["memory"] == memory_ref(3)
    assert retired["entry"]["state"] == "inactive"
    assert retired["entry"]["citation"]["entry_id"] == gone["citation"]["entry_id"]

    assert _search(http, scope, "redis keys")["hits"] == []
    active = list_all(http, scope)
    assert [e["citation"]["entry_id"] for e in active] == [keep["citation"]["entry_id"]]
    everything = list_all(http, scope, include_inactive=True)
    assert {e["citation"]["entry_id"]: e["state"] for e in everything} == {
        keep["citation"]["entry_id"]: "active",
        gone["citation"]["entry_id"]: "inactive",
    }
    # The version cited before retirement is still readable, as it was.
    old = http.post(GET, json={"scope_id": scope, "citation": gone["citation"]}).json()
    assert old["state"] == "active" and old["text"] == "Redis keys expire after one hour."

    # Retiring again is a no-op: no new revision.
    again = http.post(RETIRE, json={"scope_id": scope, "citation": retired["entry"]["citation"]})
    assert again.status_code == 200
    assert again.json()["memory"] == memory_ref(3)
    assert again.json()["entry"]["state"] == "inactive"
    assert [c["operation"] for c in _changes(http, scope)["changes"]] == [
        "remember",
        "remember",
        "retire",
    ]

    revise = http.post(
        REVISE,
        json={"scope_id": scope, "citation": retired["entry"]["citation"], "text": "back"},
    )
    assert_envelope(revise, 409, "memory_entry_inactive")


def test_unknown_entry_is_not_found(http: httpx.Client) -> None:
    scope = new_scope("missing")
    entry = remember(http, scope, "Something real.")["entry"]
    ghost = dict(entry["citation"], entry_id="mem_ent_ghost", entry_version_id="mem_ver_ghost")
    assert_envelope(
        http.post(GET, json={"scope_id": scope, "citation": ghost}), 404, "memory_not_found"
    )
    assert_envelope(
        http.post(REVISE, json={"scope_id": scope, "citation": ghost, "text": "x"}),
        404,
        "memory_not_found",
    )
    future = dict(entry["citation"], memory_ref=memory_ref(99))
    assert_envelope(
        http.post(GET, json={"scope_id": scope, "citation": future}), 404, "memory_not_found"
    )


# -- sources --------------------------------------------------------------------------------


def test_source_capture_positions_are_gap_free_and_idempotent(http: httpx.Client) -> None:
    scope = new_scope("sources")

    def capture(source_id: str, content: str, metadata: dict | None = None) -> httpx.Response:
        body: dict[str, Any] = {"scope_id": scope, "source_id": source_id, "content": content}
        if metadata is not None:
            body["metadata"] = metadata
        return http.post(SOURCES, json=body)

    positions = []
    for i, source_id in enumerate(("turn-a", "turn-b", "turn-c")):
        response = capture(source_id, f"prompt {i}", {"turn": i})
        assert response.status_code == 202, response.text
        assert response.json() == {
            "status": "accepted",
            "source": {"name": "content", "source_id": source_id},
            "position": i + 1,
        }
        positions.append(response.json()["position"])
    assert positions == [1, 2, 3]

    again = capture("turn-b", "prompt 1", {"turn": 1})
    assert again.status_code == 202 and again.json()["position"] == 2

    assert_envelope(capture("turn-b", "a different prompt", {"turn": 1}), 409, "source_conflict")
    assert_envelope(capture("turn-b", "prompt 1", {"turn": 99}), 409, "source_conflict")

    # Neither the re-capture nor the conflicts consumed a position.
    assert capture("turn-d", "prompt 3").json()["position"] == 4
    # Positions are per scope.
    other = http.post(
        SOURCES,
        json={"scope_id": new_scope("sources"), "source_id": "turn-a", "content": "prompt 0"},
    )
    assert other.status_code == 202 and other.json()["position"] == 1


# -- search ---------------------------------------------------------------------------------

ENGLISH = "Run the backend contract tests after changing persistence behavior."
CHINESE = "修改数据库持久化逻辑"
MIXED = "在 user_id 字段上加索引"
CLIENT = "Wrap outgoing calls in the shared HttpClient with retries."
PATH = "The entry point lives in src/app/main.py."
UNRELATED = (
    "Deploy previews run on every pull request.",
    "Timestamps in logs are UTC.",
    "Prefer small focused commits.",
    "The docs site builds with mkdocs.",
    "Cache invalidation happens on write.",
    "Cache invalidation: the cache layer evicts cache keys and refills the cache on a miss.",
)


@pytest.fixture(scope="module")
def search_scope(http: httpx.Client) -> tuple[str, dict[str, str]]:
    scope = new_scope("search")
    ids = {
        text: remember(http, scope, text)["entry"]["citation"]["entry_id"]
        for text in (ENGLISH, CHINESE, MIXED, CLIENT, PATH, *UNRELATED)
    }
    return scope, ids


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        pytest.param("test persistence changes", ENGLISH, id="english-paraphrase"),
        pytest.param("数据库持久化", CHINESE, id="chinese"),
        pytest.param("给 user_id 加索引", MIXED, id="mixed"),
        pytest.param("字段索引", MIXED, id="mixed-by-chinese-part"),
        pytest.param("user_id", MIXED, id="snake-identifier"),
        pytest.param("HttpClient", CLIENT, id="camel-identifier"),
        pytest.param("src/app/main.py", PATH, id="path-identifier"),
    ],
)
def test_search_finds_the_entry_it_is_about(
    http: httpx.Client, search_scope: tuple[str, dict[str, str]], query: str, expected: str
) -> None:
    scope, ids = search_scope
    body = _search(http, scope, query)
    assert body["mode"] == "fts"
    assert body["memory"] == memory_ref(len(ids))
    hit_ids = [hit["citation"]["entry_id"] for hit in body["hits"]]
    # The entry is found, and nothing that shares no term with the query is admitted.
    assert hit_ids == [ids[expected]], [hit["text"] for hit in body["hits"]]
    assert body["hits"][0]["text"] == expected


def test_unrelated_query_finds_nothing(
    http: httpx.Client, search_scope: tuple[str, dict[str, str]]
) -> None:
    scope, _ = search_scope
    assert _search(http, scope, "bake sourdough bread at home")["hits"] == []


def test_search_ranks_by_score_and_honours_the_limit(
    http: httpx.Client, search_scope: tuple[str, dict[str, str]]
) -> None:
    scope, ids = search_scope
    both = _search(http, scope, "cache invalidation")
    hit_ids = [hit["citation"]["entry_id"] for hit in both["hits"]]
    assert sorted(hit_ids) == sorted([ids[UNRELATED[4]], ids[UNRELATED[5]]])
    # The entry that says "cache" four times outranks the one that says it once.
    assert hit_ids[0] == ids[UNRELATED[5]]
    assert both["hits"][0]["score"] > both["hits"][1]["score"]
    limited = _search(http, scope, "cache invalidation", limit=1)
    assert [h["citation"]["entry_id"] for h in limited["hits"]] == hit_ids[:1]


# -- scopes ---------------------------------------------------------------------------------


def test_scope_ids_compare_byte_for_byte(http: httpx.Client) -> None:
    suffix = new_scope("bytes").rsplit("/", 1)[1]
    nfc = unicodedata.normalize("NFC", "café")
    nfd = unicodedata.normalize("NFD", "café")
    assert nfc != nfd
    scopes = [
        f"PC-x-Alpha-{suffix}",
        f"pc-x-alpha-{suffix}",
        f"{nfc}-{suffix}",
        f"{nfd}-{suffix}",
        f"cafe-{suffix}",
    ]
    written = {}
    for i, scope in enumerate(scopes):
        text = f"zebrafish marker {i} lives only in its own scope"
        written[scope] = (remember(http, scope, text)["entry"]["citation"]["entry_id"], text)
    for scope, (entry_id, text) in written.items():
        listed = list_all(http, scope)
        assert [(e["citation"]["entry_id"], e["text"]) for e in listed] == [(entry_id, text)]
        assert listed[0]["citation"]["memory_ref"] == memory_ref(1)
        hits = _search(http, scope, "zebrafish marker")["hits"]
        assert [h["citation"]["entry_id"] for h in hits] == [entry_id]
        assert len(_changes(http, scope)["changes"]) == 1
    # A citation from one scope is not readable through a case variant of it.
    entry_id, _ = written[scopes[0]]
    entry = list_all(http, scopes[0])[0]
    cross = http.post(GET, json={"scope_id": scopes[1], "citation": entry["citation"]})
    assert_envelope(cross, 404, "memory_not_found")
    assert entry["citation"]["entry_id"] == entry_id
