"""The Memory browser's reads on every backend: list filters (kind, tag, state) and an entry's
version history with exact citations (docs/ui.md § Memory).

Filters are answered from ``memory_facets`` and the entries' state index, never by reading
the whole scope: every expectation is checked against a naive reference (all entries, filtered
here), and on SQLite the query plans are checked for scans and sorts.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from pydantic import ValidationError
from sqlalchemy import delete, event, text

from powercontext_runtime.composition import Runtime
from powercontext_runtime.contract.common import MemoryCitation
from powercontext_runtime.contract.memory import (
    GetMemoryEntryRequest,
    ListMemoryEntriesRequest,
    ListMemoryEntryVersionsRequest,
    RememberMemoryRequest,
    RetireMemoryEntryRequest,
    ReviseMemoryEntryRequest,
)
from powercontext_runtime.errors import NotFoundError
from powercontext_runtime.settings import Settings
from powercontext_runtime.store.schema import _index_names, memory_facets

SCOPE = "git:example.com/acme/browse"
OTHER = "git:example.com/acme/elsewhere"
KINDS = ("fact", "decision", "convention", "Décision")
TAGS = ("db", "ci", "bootstrap-context")


def remember(rt: Runtime, text_: str, kind: str = "fact", tags: list[str] | None = None,
             scope: str = SCOPE) -> Any:  # fmt: skip
    request = RememberMemoryRequest(scope_id=scope, kind=kind, text=text_, tags=tags or [])
    return rt.memory.remember(request).entry


def listed(rt: Runtime, **fields: Any) -> list[Any]:
    """Every entry of the filtered list, page by page (small pages: the cursor is tested)."""
    body: dict[str, Any] = {"scope_id": SCOPE, "limit": 3, **fields}
    entries: list[Any] = []
    for _ in range(100):
        page = rt.memory.list(ListMemoryEntriesRequest.model_validate(body))
        entries.extend(page.entries)
        if page.next_cursor is None:
            return entries
        body["cursor"] = page.next_cursor
    raise AssertionError("the list never ended")


def seed(rt: Runtime) -> list[Any]:
    written = []
    for n, (kind, tags) in enumerate(
        itertools.islice(
            itertools.cycle(
                itertools.product(KINDS, [[], ["db"], ["ci", "db"], ["bootstrap-context"]])
            ),
            20,
        )
    ):
        written.append(remember(rt, f"entry {n}: {kind} {' '.join(tags)}", kind, list(tags)))
    remember(rt, "another scope's db fact", "fact", ["db"], scope=OTHER)
    for entry in written[::5]:  # retire some
        rt.memory.retire(RetireMemoryEntryRequest(scope_id=SCOPE, citation=entry.citation))
    return written


def ids(entries: list[Any]) -> list[str]:
    return [e.citation.entry_id for e in entries]


def test_filters_give_exactly_the_matching_entries_in_creation_order(runtime: Runtime) -> None:
    seed(runtime)
    everything = listed(runtime, state="any")
    assert len(everything) == 20
    assert ids(listed(runtime)) == ids([e for e in everything if e.state == "active"])
    assert ids(listed(runtime, include_inactive=True)) == ids(everything)
    for state in ("active", "inactive", "any"):
        for kind, tag in itertools.product((None, *KINDS), (None, *TAGS)):
            fields = {"state": state, **({"kind": kind} if kind else {}),
                      **({"tag": tag} if tag else {})}  # fmt: skip
            expected = [
                e for e in everything
                if (state == "any" or e.state == state)
                and (kind is None or e.kind == kind)
                and (tag is None or tag in e.tags)
            ]  # fmt: skip
            got = listed(runtime, **fields)
            assert ids(got) == ids(expected), fields
            assert all(e.citation.memory_ref.revision == got[0].citation.memory_ref.revision
                       for e in got)  # fmt: skip


def test_a_revision_moves_the_entry_between_filters(runtime: Runtime) -> None:
    entry = remember(runtime, "Lint before pushing", "fact", ["ci"])
    assert ids(listed(runtime, tag="ci")) == [entry.citation.entry_id]
    revised = runtime.memory.revise(
        ReviseMemoryEntryRequest(
            scope_id=SCOPE, citation=entry.citation, kind="convention", tags=["db", "lint"]
        )
    ).entry
    assert listed(runtime, tag="ci") == [] and listed(runtime, kind="fact") == []
    assert ids(listed(runtime, kind="convention", tag="lint")) == [entry.citation.entry_id]
    assert listed(runtime, kind="convention")[0].citation == revised.citation
    runtime.memory.retire(RetireMemoryEntryRequest(scope_id=SCOPE, citation=revised.citation))
    assert listed(runtime, tag="db") == []
    assert [e.state for e in listed(runtime, tag="db", state="inactive")] == ["inactive"]
    assert runtime.memory.facets_are_consistent()


def test_state_and_include_inactive_are_one_switch() -> None:
    with pytest.raises(ValidationError):
        ListMemoryEntriesRequest.model_validate(
            {"scope_id": SCOPE, "state": "any", "include_inactive": False}
        )
    with pytest.raises(ValidationError):
        ListMemoryEntriesRequest.model_validate({"scope_id": SCOPE, "tag": "Not A Tag"})
    kind = ListMemoryEntriesRequest.model_validate({"scope_id": SCOPE, "kind": " De\u0301cision "})
    assert kind.kind == "Décision"  # normalised exactly as stored kinds are


def test_history_lists_every_version_newest_first_with_exact_citations(runtime: Runtime) -> None:
    first = remember(runtime, "Port 9090", "fact", ["net"])
    remember(runtime, "an unrelated entry")
    second = runtime.memory.revise(
        ReviseMemoryEntryRequest(
            scope_id=SCOPE, citation=first.citation, text="Port 9191", reason="moved"
        )
    ).entry
    third = runtime.memory.retire(
        RetireMemoryEntryRequest(scope_id=SCOPE, citation=second.citation, reason="gone")
    ).entry
    history = runtime.memory.versions(
        ListMemoryEntryVersionsRequest(scope_id=SCOPE, entry_id=first.citation.entry_id)
    )
    assert history.memory is not None and history.memory.revision == 4
    assert [(v.version, v.operation, v.state) for v in history.versions] == [
        (3, "retire", "inactive"), (2, "revise", "active"), (1, "remember", "active"),
    ]  # fmt: skip
    assert [(v.valid_from_revision, v.valid_to_revision) for v in history.versions] == [
        (4, None), (3, 4), (1, 3),
    ]  # fmt: skip
    assert [v.reason for v in history.versions] == ["gone", "moved", None]
    for version, written in zip(history.versions, (third, second, first), strict=True):
        assert version.citation.entry_version_id == written.citation.entry_version_id
        exact = runtime.memory.get(GetMemoryEntryRequest(scope_id=SCOPE, citation=version.citation))
        assert exact.text == version.text and exact.version == version.version
        assert version.created_at.endswith("Z")
    paged = runtime.memory.versions(
        ListMemoryEntryVersionsRequest(scope_id=SCOPE, entry_id=first.citation.entry_id, limit=2)
    )
    assert [v.version for v in paged.versions] == [3, 2] and paged.next_cursor
    rest = runtime.memory.versions(
        ListMemoryEntryVersionsRequest(
            scope_id=SCOPE, entry_id=first.citation.entry_id, limit=2, cursor=paged.next_cursor
        )
    )
    assert [v.version for v in rest.versions] == [1] and rest.next_cursor is None
    for scope, entry_id in ((SCOPE, "mem_ent_unknown"), (OTHER, first.citation.entry_id)):
        with pytest.raises(NotFoundError) as caught:
            runtime.memory.versions(
                ListMemoryEntryVersionsRequest(scope_id=scope, entry_id=entry_id)
            )
        assert caught.value.code == "memory_not_found"


def test_missing_facets_and_indexes_are_rebuilt_at_start_up(runtime: Runtime) -> None:
    """A database from before the facets: no facet rows, no new indexes. The next start adds
    the index and rebuilds the rows; nothing else changes."""
    seed(runtime)
    before = {state: ids(listed(runtime, tag="db", state=state)) for state in ("active", "any")}
    with runtime.db.engine.begin() as conn:
        conn.execute(delete(memory_facets))
        on = "" if runtime.backend == "sqlite" else " ON sources"
        conn.execute(text("DROP INDEX ix_sources_named" + on))
        # What the release before task results had instead: replaced at the next start.
        conn.execute(text("CREATE INDEX ix_sources_created" + (on or " ON sources") +
                          " (scope_id, created_at)"))  # fmt: skip
    assert not runtime.memory.facets_are_consistent()
    assert "memory_facets" in runtime.stale_indexes()
    settings = runtime.settings
    again = Runtime.open(
        Settings.load(env={}, home=settings.home, database_url=settings.database_url)
    )
    try:
        assert again.memory.facets_are_consistent() and again.stale_indexes() == []
        after = {state: ids(listed(again, tag="db", state=state)) for state in ("active", "any")}
        assert after == before
        assert again.reindex()["memory_facets"] == 21  # both scopes' entries
        with again.db.engine.connect() as conn:
            present = _index_names(conn, "sources")
            assert "ix_sources_named" in present and "ix_sources_created" not in present
    finally:
        again.close()


# -- query plans (SQLite): every browse query reads an index range, never the scope ---------


@contextmanager
def statements(rt: Runtime) -> Iterator[list[tuple[str, Any]]]:
    seen: list[tuple[str, Any]] = []

    def record(conn: Any, cursor: Any, statement: str, parameters: Any, context: Any,
               executemany: bool) -> None:  # fmt: skip
        if statement.lstrip().upper().startswith("SELECT"):
            seen.append((statement, parameters))

    for engine in {rt.db.engine, rt.db._read_engine}:
        event.listen(engine, "before_cursor_execute", record)
    try:
        yield seen
    finally:
        for engine in {rt.db.engine, rt.db._read_engine}:
            event.remove(engine, "before_cursor_execute", record)


def assert_indexed(rt: Runtime, seen: list[tuple[str, Any]]) -> None:
    """No statement scans a table or an index from its start, or sorts in a temporary tree."""
    assert seen
    with rt.db.engine.connect() as conn:
        for statement, parameters in seen:
            plan = conn.exec_driver_sql("EXPLAIN QUERY PLAN " + statement, parameters).all()
            details = [row[-1] for row in plan]
            bad = [d for d in details if d.startswith("SCAN") or "TEMP B-TREE" in d]
            assert not bad, (statement, details)


def test_browse_queries_are_index_ranges(sqlite_runtime: Runtime) -> None:
    seed(sqlite_runtime)
    entry = listed(sqlite_runtime)[0]
    with statements(sqlite_runtime) as seen:
        for fields in ({}, {"state": "inactive"}, {"state": "any"}, {"kind": "fact"},
                       {"tag": "db", "state": "active"}, {"tag": "db", "kind": "fact"},
                       {"tag": "ci", "state": "any"}):  # fmt: skip
            listed(sqlite_runtime, **fields)
        sqlite_runtime.memory.versions(
            ListMemoryEntryVersionsRequest(scope_id=SCOPE, entry_id=entry.citation.entry_id)
        )
        sqlite_runtime.memory.get(
            GetMemoryEntryRequest(
                scope_id=SCOPE, citation=MemoryCitation.model_validate(entry.citation.model_dump())
            )
        )
    assert_indexed(sqlite_runtime, seen)
    # A later page starts its range at the cursor, rather than walking from the scope's first
    # entry (what `a > x OR (a = x AND b > y)` alone made SQLite do).
    paged = [(st, p) for st, p in seen if "created_revision >=" in st]
    assert len(paged) >= 7  # every filter above was read in pages of 3
    with sqlite_runtime.db.engine.connect() as conn:
        for statement, parameters in paged:
            plan = [r[-1] for r in conn.exec_driver_sql("EXPLAIN QUERY PLAN " + statement,
                                                        parameters)]  # fmt: skip
            assert "created_revision>?" in plan[0], (statement, plan)


def test_writes_look_up_one_entry_not_the_scope(sqlite_runtime: Runtime) -> None:
    """remember's duplicate check reads the (scope, content hash) index: an index added for a
    list once made SQLite answer it by walking every active entry of the scope, a write cost
    that grew with the scope. Every read of a write is a point or key-range lookup."""
    rt = sqlite_runtime
    seed(rt)
    with statements(rt) as seen:
        entry = remember(rt, "a new entry", "fact", ["db"])
        rt.memory.revise(
            ReviseMemoryEntryRequest(scope_id=SCOPE, citation=entry.citation, tags=["ci"])
        )
        remember(rt, "entry 1: fact db", "fact", ["db"])  # a duplicate: the check answers
    assert_indexed(rt, seen)
    (check,) = {s for s, _ in seen if "content_hash" in s and "memory_entries" in s}
    params = next(p for s, p in seen if s == check)
    with rt.db.engine.connect() as conn:
        plan = [r[-1] for r in conn.exec_driver_sql("EXPLAIN QUERY PLAN " + check, params)]
    assert any("content_hash=?" in line for line in plan), plan
