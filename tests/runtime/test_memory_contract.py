"""Memory storage contract, run on every backend through the service layer (spec 02)."""

from __future__ import annotations

import pytest

from powercontext_runtime.composition import Runtime
from powercontext_runtime.contract.common import MemoryCitation, MemoryRef
from powercontext_runtime.contract.memory import (
    CaptureSourceRequest,
    GetMemoryEntryRequest,
    ListMemoryChangesRequest,
    ListMemoryEntriesRequest,
    MemoryWriteResult,
    RememberMemoryRequest,
    RetireMemoryEntryRequest,
    ReviseMemoryEntryRequest,
    SearchMemoryRequest,
)
from powercontext_runtime.errors import ConflictError, InvalidRequestError, NotFoundError

SCOPE = "git:example.com/acme/app"


def remember(rt: Runtime, text: str, scope: str = SCOPE, **extra: object) -> MemoryWriteResult:
    fields = {"scope_id": scope, "kind": "fact", "text": text, **extra}
    return rt.memory.remember(RememberMemoryRequest.model_validate(fields))


def search(rt: Runtime, query: str, scope: str = SCOPE, limit: int = 10) -> list[str]:
    result = rt.memory.search(SearchMemoryRequest(scope_id=scope, query=query, limit=limit))
    return [hit.text for hit in result.hits]


def get(rt: Runtime, citation: MemoryCitation, scope: str = SCOPE) -> str:
    return rt.memory.get(GetMemoryEntryRequest(scope_id=scope, citation=citation)).text


def revise(rt: Runtime, citation: MemoryCitation, **fields: object) -> MemoryWriteResult:
    return rt.memory.revise(
        ReviseMemoryEntryRequest.model_validate(
            {"scope_id": SCOPE, "citation": citation.model_dump(), **fields}
        )
    )


def test_revisions_are_gap_free_and_each_write_cites_its_revision(runtime: Runtime) -> None:
    results = [remember(runtime, f"fact number {i}") for i in range(1, 6)]
    assert [r.memory.revision for r in results] == [1, 2, 3, 4, 5]
    assert all(r.entry.citation.memory_ref == r.memory for r in results)
    assert [r.entry.version for r in results] == [1] * 5
    assert len({r.entry.citation.entry_id for r in results}) == 5


def test_identical_remember_is_a_no_op_returning_the_existing_entry(runtime: Runtime) -> None:
    first = remember(runtime, "Use uv to manage dependencies", tags=["python", "tools"])
    remember(runtime, "Something else entirely")
    again = remember(runtime, "  Use uv to manage dependencies \n", tags=["tools", "python"])
    assert again.entry.citation.entry_id == first.entry.citation.entry_id
    assert again.memory.revision == 2  # the head, not a new revision
    different_kind = remember(
        runtime, "Use uv to manage dependencies", kind="decision", tags=["python", "tools"]
    )
    assert different_kind.memory.revision == 3


def test_expected_revision_is_a_compare_and_swap_on_the_head(runtime: Runtime) -> None:
    assert remember(runtime, "first", expected_revision=0).memory.revision == 1
    with pytest.raises(ConflictError) as caught:
        remember(runtime, "second", expected_revision=0)
    assert caught.value.code == "revision_conflict"
    assert caught.value.details == {"current": MemoryRef.at(1).model_dump()}
    assert remember(runtime, "second", expected_revision=1).memory.revision == 2


def test_revise_then_exact_get_of_the_old_version(runtime: Runtime) -> None:
    original = remember(runtime, "The API listens on port 8080")
    remember(runtime, "unrelated entry moves the head")
    revised = revise(
        runtime, original.entry.citation, text="The API listens on port 9090", reason="port changed"
    )
    assert revised.memory.revision == 3
    assert revised.entry.version == 2
    assert revised.entry.citation.entry_id == original.entry.citation.entry_id
    assert revised.entry.citation.entry_version_id != original.entry.citation.entry_version_id
    assert get(runtime, original.entry.citation) == "The API listens on port 8080"
    # The old version was still current in revision 2, so citing it there works too.
    at_two = original.entry.citation.model_copy(update={"memory_ref": MemoryRef.at(2)})
    assert get(runtime, at_two) == "The API listens on port 8080"
    assert get(runtime, revised.entry.citation) == "The API listens on port 9090"
    # ... but the old version is not part of revision 3.
    at_three = original.entry.citation.model_copy(update={"memory_ref": MemoryRef.at(3)})
    with pytest.raises(NotFoundError) as caught:
        get(runtime, at_three)
    assert caught.value.code == "memory_not_found"


def test_get_rejects_revisions_that_do_not_exist_yet(runtime: Runtime) -> None:
    written = remember(runtime, "only entry")
    future = written.entry.citation.model_copy(update={"memory_ref": MemoryRef.at(2)})
    with pytest.raises(NotFoundError):
        get(runtime, future)
    with pytest.raises(NotFoundError):
        get(runtime, written.entry.citation, scope=SCOPE + "-other")


def test_stale_citation_is_a_typed_conflict_naming_the_current_version(runtime: Runtime) -> None:
    original = remember(runtime, "Deploys happen on Tuesdays")
    current = revise(runtime, original.entry.citation, text="Deploys happen on Thursdays")
    with pytest.raises(ConflictError) as caught:
        revise(runtime, original.entry.citation, text="Deploys happen on Fridays")
    assert caught.value.code == "revision_conflict"
    assert caught.value.details == {"current": current.entry.citation.model_dump()}
    with pytest.raises(ConflictError):
        runtime.memory.retire(
            RetireMemoryEntryRequest(scope_id=SCOPE, citation=original.entry.citation)
        )


def test_writes_to_other_entries_never_make_a_citation_stale(runtime: Runtime) -> None:
    a = remember(runtime, "entry A")
    for i in range(3):
        remember(runtime, f"entry B{i}")
    revised = revise(runtime, a.entry.citation, tags=["important"])
    assert revised.entry.tags == ["important"]
    assert revised.entry.text == "entry A"
    assert revised.memory.revision == 5


def test_evidence_accumulates_across_versions(runtime: Runtime) -> None:
    first = remember(
        runtime, "CI runs on two cores", source_refs=[{"name": "content", "source_id": "s1"}]
    )
    second = revise(
        runtime,
        first.entry.citation,
        text="CI runs on 2 cores",
        source_refs=[
            {"name": "content", "source_id": "s2"},
            {"name": "content", "source_id": "s1"},
        ],
    )
    assert [r.source_id for r in second.entry.source_refs] == ["s1", "s2"]


def test_retire_hides_the_entry_and_keeps_history(runtime: Runtime) -> None:
    kept = remember(runtime, "Keep the flaky integration test quarantined")
    gone = remember(runtime, "The integration test suite uses a flaky mock server")
    assert len(search(runtime, "integration test")) == 2
    retired = runtime.memory.retire(
        RetireMemoryEntryRequest(scope_id=SCOPE, citation=gone.entry.citation, reason="fixed")
    )
    assert retired.entry.state == "inactive"
    assert retired.memory.revision == 3
    assert search(runtime, "integration test flaky mock server") == [kept.entry.text]
    assert get(runtime, gone.entry.citation) == gone.entry.text  # history stays readable
    listed = runtime.memory.list(ListMemoryEntriesRequest(scope_id=SCOPE))
    assert [e.text for e in listed.entries] == [kept.entry.text]
    everything = runtime.memory.list(
        ListMemoryEntriesRequest(scope_id=SCOPE, include_inactive=True)
    )
    assert {e.state for e in everything.entries} == {"active", "inactive"}
    # Retiring again is a no-op; revising a retired entry is a typed conflict.
    again = runtime.memory.retire(
        RetireMemoryEntryRequest(scope_id=SCOPE, citation=retired.entry.citation)
    )
    assert again.memory.revision == 3
    with pytest.raises(ConflictError) as caught:
        revise(runtime, retired.entry.citation, text="resurrected")
    assert caught.value.code == "memory_entry_inactive"


def test_unknown_entry_is_not_found(runtime: Runtime) -> None:
    remember(runtime, "something")
    ghost = MemoryCitation(
        memory_ref=MemoryRef.at(1), entry_id="mem_ent_nope", entry_version_id="mem_ver_nope"
    )
    with pytest.raises(NotFoundError):
        revise(runtime, ghost, text="x")


def test_list_pages_in_creation_order(runtime: Runtime) -> None:
    texts = [f"paged entry {i:02d}" for i in range(7)]
    for text in texts:
        remember(runtime, text)
    seen: list[str] = []
    cursor = None
    while True:
        page = runtime.memory.list(ListMemoryEntriesRequest(scope_id=SCOPE, limit=3, cursor=cursor))
        assert page.memory == MemoryRef.at(7)
        seen += [e.text for e in page.entries]
        cursor = page.next_cursor
        if cursor is None:
            break
    assert seen == texts
    with pytest.raises(InvalidRequestError):
        runtime.memory.list(ListMemoryEntriesRequest(scope_id=SCOPE, cursor="garbage!"))


def test_empty_scope_reads(runtime: Runtime) -> None:
    assert runtime.memory.list(ListMemoryEntriesRequest(scope_id="empty")).memory is None
    result = runtime.memory.search(SearchMemoryRequest(scope_id="empty", query="anything"))
    assert result.memory is None and result.hits == []
    changes = runtime.memory.changes(ListMemoryChangesRequest(scope_id="empty"))
    assert changes.memory is None and changes.changes == []


def test_changes_summarise_each_revision(runtime: Runtime) -> None:
    a = remember(runtime, "alpha")
    b = revise(runtime, a.entry.citation, text="alpha two")
    runtime.memory.retire(RetireMemoryEntryRequest(scope_id=SCOPE, citation=b.entry.citation))
    changes = runtime.memory.changes(ListMemoryChangesRequest(scope_id=SCOPE, since_revision=1))
    assert [(c.revision, c.operation) for c in changes.changes] == [(2, "revise"), (3, "retire")]
    assert {c.entry_id for c in changes.changes} == {a.entry.citation.entry_id}


ENGLISH = "Run the backend contract tests after changing persistence behavior."
CHINESE = "修改数据库持久化逻辑之前先备份"
MIXED = "在 user_id 字段上加索引"
IDENT_CLIENT = "Always reuse one HttpClient per process"
IDENT_PATH = "The entry point is src/app/main.py"
UNRELATED = [
    "Deploy previews expire after seven days",
    "The design system uses an eight pixel grid",
    "Release notes are drafted by the on-call engineer",
]


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("test persistence changes", ENGLISH),
        ("how do the contract tests work", ENGLISH),
        ("数据库持久化", CHINESE),
        ("修改数据库", CHINESE),
        ("user_id 索引", MIXED),
        ("user_id", MIXED),
        ("HttpClient", IDENT_CLIENT),
        ("src/app/main.py", IDENT_PATH),
        ("where is main.py", IDENT_PATH),
    ],
)
def test_search_finds_the_entry_a_query_is_about(
    runtime: Runtime, query: str, expected: str
) -> None:
    for text in [ENGLISH, CHINESE, MIXED, IDENT_CLIENT, IDENT_PATH, *UNRELATED]:
        remember(runtime, text)
    hits = search(runtime, query)
    assert hits, query
    assert hits[0] == expected


def test_unrelated_queries_find_nothing(runtime: Runtime) -> None:
    for text in [ENGLISH, CHINESE, MIXED, IDENT_CLIENT, IDENT_PATH, *UNRELATED]:
        remember(runtime, text)
    assert search(runtime, "bake sourdough bread at home") == []
    assert search(runtime, "烤面包的温度") == []
    assert search(runtime, "the and of to") == []


def test_search_is_deterministic_and_bounded(runtime: Runtime) -> None:
    for i in range(12):
        remember(runtime, f"pytest fixture number {i} sets up the database")
    first = runtime.memory.search(
        SearchMemoryRequest(scope_id=SCOPE, query="pytest fixture database", limit=5)
    )
    second = runtime.memory.search(
        SearchMemoryRequest(scope_id=SCOPE, query="pytest fixture database", limit=5)
    )
    assert first == second
    assert len(first.hits) == 5
    keys = [(-h.score, h.citation.entry_id.encode()) for h in first.hits]
    assert keys == sorted(keys)
    assert all(0.0 <= h.score <= 1.0 for h in first.hits)
    assert all(h.citation.memory_ref == first.memory for h in first.hits)


def test_revised_text_is_what_search_sees(runtime: Runtime) -> None:
    written = remember(runtime, "Staging database is postgres")
    revise(runtime, written.entry.citation, text="Staging database is OceanBase")
    assert search(runtime, "postgres") == []
    assert search(runtime, "oceanbase staging") == ["Staging database is OceanBase"]


def test_reindex_rebuilds_an_equivalent_index(runtime: Runtime) -> None:
    for text in [ENGLISH, CHINESE, MIXED, IDENT_CLIENT, IDENT_PATH, *UNRELATED]:
        remember(runtime, text)
    before = [search(runtime, q) for q in ("contract tests", "数据库", "HttpClient")]
    assert runtime.memory.reindex() == 8
    assert runtime.memory.index_is_consistent()
    assert [search(runtime, q) for q in ("contract tests", "数据库", "HttpClient")] == before


def test_capture_is_idempotent_with_gap_free_positions(runtime: Runtime) -> None:
    def capture(source_id: str, content: str, scope: str = SCOPE, **meta: object) -> int:
        request = CaptureSourceRequest.model_validate(
            {
                "scope_id": scope,
                "source_id": source_id,
                "content": content,
                "metadata": meta or None,
            }
        )
        return runtime.sources.capture(request).position

    assert capture("p1", "first prompt") == 1
    assert capture("p2", "second prompt", turn=2) == 2
    assert capture("p1", "first prompt") == 1
    assert capture("p2", "second prompt", turn=2) == 2
    assert capture("p3", "third prompt") == 3
    assert capture("p1", "elsewhere", scope="other-scope") == 1
    with pytest.raises(ConflictError) as caught:
        capture("p1", "a different payload")
    assert caught.value.code == "source_conflict"
    with pytest.raises(ConflictError):
        capture("p2", "second prompt", turn=3)
    assert capture("p4", "fourth prompt") == 4
