"""The Python clients (sync and async) against a real daemon: flows and typed errors."""

from __future__ import annotations

import asyncio

import pytest

from powercontext_runtime.client import (
    AsyncPowerContextClient,
    ConflictError,
    ForbiddenError,
    InvalidRequestError,
    NotFoundError,
    PowerContextClient,
    UnauthorizedError,
    UnavailableError,
)
from powercontext_runtime.contract.common import MemoryCitation, MemoryRef
from powercontext_runtime.contract.memory import RememberMemoryRequest
from tests.e2e.helpers import create_token, new_scope
from tests.support.daemon import Daemon, free_port

pytestmark = pytest.mark.e2e


def test_sync_client_full_flow(module_daemon: Daemon) -> None:
    scope = new_scope("sync")
    with PowerContextClient(module_daemon.url, token=module_daemon.token) as client:
        assert client.get_liveness().status == "ok"
        assert client.get_readiness().database == "sqlite"
        assert "memory" in client.get_capabilities().artifact_families

        first = client.remember_memory(
            scope_id=scope, kind="decision", text="Use SQLite WAL mode.", tags=["db"]
        )
        assert first.memory == MemoryRef.at(1)
        assert first.entry.version == 1 and first.entry.tags == ["db"]
        # A ready request model is accepted too.
        second = client.remember_memory(
            RememberMemoryRequest(scope_id=scope, kind="fact", text="Backups run nightly.")
        )
        assert second.memory == MemoryRef.at(2)

        hits = client.search_memory(scope_id=scope, query="WAL mode").hits
        assert [h.citation.entry_id for h in hits] == [first.entry.citation.entry_id]

        listed = client.list_memory_entries(scope_id=scope, limit=1)
        assert [e.text for e in listed.entries] == ["Use SQLite WAL mode."]
        assert listed.next_cursor is not None
        rest = client.list_memory_entries(scope_id=scope, limit=1, cursor=listed.next_cursor)
        assert [e.text for e in rest.entries] == ["Backups run nightly."]
        assert rest.next_cursor is None

        revised = client.revise_memory_entry(
            scope_id=scope, citation=first.entry.citation, text="Use SQLite WAL mode always."
        )
        assert revised.memory == MemoryRef.at(3) and revised.entry.version == 2
        old = client.get_memory_entry(scope_id=scope, citation=first.entry.citation)
        assert old.text == "Use SQLite WAL mode."

        retired = client.retire_memory_entry(scope_id=scope, citation=revised.entry.citation)
        assert retired.entry.state == "inactive" and retired.memory == MemoryRef.at(4)

        changes = client.list_memory_changes(scope_id=scope, since_revision=0)
        assert [(c.revision, c.operation) for c in changes.changes] == [
            (1, "remember"),
            (2, "remember"),
            (3, "revise"),
            (4, "retire"),
        ]

        captured = client.capture_content_source(
            scope_id=scope, source_id="s1", content="hello", metadata={"host": "test"}
        )
        assert captured.status == "accepted" and captured.position == 1
        again = client.capture_content_source(
            scope_id=scope, source_id="s1", content="hello", metadata={"host": "test"}
        )
        assert again.position == 1


def test_sync_client_typed_errors(module_daemon: Daemon) -> None:
    scope = new_scope("sync-errors")
    with PowerContextClient(module_daemon.url, token=module_daemon.token) as client:
        entry = client.remember_memory(scope_id=scope, kind="fact", text="Original text.").entry
        client.revise_memory_entry(scope_id=scope, citation=entry.citation, text="Newer text.")

        with pytest.raises(ConflictError) as stale:
            client.revise_memory_entry(scope_id=scope, citation=entry.citation, text="Lost.")
        assert stale.value.code == "revision_conflict"
        assert stale.value.status == 409
        current = stale.value.details["current"]
        assert current["entry_id"] == entry.citation.entry_id
        assert current["entry_version_id"] != entry.citation.entry_version_id

        missing = MemoryCitation(
            memory_ref=MemoryRef.at(1), entry_id="mem_ent_none", entry_version_id="mem_ver_none"
        )
        with pytest.raises(NotFoundError) as not_found:
            client.get_memory_entry(scope_id=scope, citation=missing)
        assert not_found.value.code == "memory_not_found"

        assert client.capture_content_source(scope_id=scope, source_id="x", content="one")
        with pytest.raises(ConflictError) as source_conflict:
            client.capture_content_source(scope_id=scope, source_id="x", content="two")
        assert source_conflict.value.code == "source_conflict"

        # The client validates with the server's models before sending anything.
        with pytest.raises(InvalidRequestError):
            client.remember_memory(scope_id=scope, kind="fact", text="   ")

    with PowerContextClient(module_daemon.url, token="pc_000000000000_wrong") as wrong:
        with pytest.raises(UnauthorizedError) as unauthorized:
            wrong.list_memory_entries(scope_id=scope)
        assert unauthorized.value.code == "unauthorized"

    limited = create_token(module_daemon, "sync-client-limited", "git:acme/*")
    with PowerContextClient(module_daemon.url, token=limited) as client:
        allowed = client.remember_memory(scope_id="git:acme/sync", kind="fact", text="Allowed.")
        assert allowed.memory == MemoryRef.at(1)
        with pytest.raises(ForbiddenError) as forbidden:
            client.list_memory_entries(scope_id=scope)
        assert forbidden.value.code == "scope_forbidden"

    with PowerContextClient(f"http://127.0.0.1:{free_port()}", token="x", timeout=5) as dead:
        with pytest.raises(UnavailableError) as unreachable:
            dead.get_liveness()
        assert unreachable.value.code == "runtime_unreachable"


def test_async_client_full_flow_and_typed_errors(module_daemon: Daemon) -> None:
    scope = new_scope("async")
    limited = create_token(module_daemon, "async-client-limited", "git:acme/*")

    async def scenario() -> None:
        async with AsyncPowerContextClient(module_daemon.url, token=module_daemon.token) as c:
            assert (await c.get_liveness()).status == "ok"
            assert (await c.get_readiness()).status == "ready"
            assert "fts" in (await c.get_capabilities()).search_modes

            # Concurrent writes from one async client: each gets its own revision.
            results = await asyncio.gather(
                *(
                    c.remember_memory(scope_id=scope, kind="fact", text=f"async note {i}")
                    for i in range(5)
                )
            )
            assert sorted(r.memory.revision for r in results) == [1, 2, 3, 4, 5]
            first = min(results, key=lambda r: r.memory.revision).entry

            hits = (await c.search_memory(scope_id=scope, query="async note")).hits
            assert {h.citation.entry_id for h in hits} == {
                r.entry.citation.entry_id for r in results
            }

            listed = await c.list_memory_entries(scope_id=scope)
            assert len(listed.entries) == 5 and listed.memory == MemoryRef.at(5)

            revised = await c.revise_memory_entry(
                scope_id=scope, citation=first.citation, tags=["async"]
            )
            assert revised.entry.tags == ["async"] and revised.entry.text == first.text
            exact = await c.get_memory_entry(scope_id=scope, citation=first.citation)
            assert exact.tags == [] and exact.version == 1

            with pytest.raises(ConflictError) as stale:
                await c.retire_memory_entry(scope_id=scope, citation=first.citation)
            assert stale.value.code == "revision_conflict"
            assert stale.value.details["current"] == revised.entry.citation.model_dump()

            retired = await c.retire_memory_entry(scope_id=scope, citation=revised.entry.citation)
            assert retired.entry.state == "inactive"
            with pytest.raises(ConflictError) as inactive:
                await c.revise_memory_entry(
                    scope_id=scope, citation=retired.entry.citation, text="revived"
                )
            assert inactive.value.code == "memory_entry_inactive"

            changes = await c.list_memory_changes(scope_id=scope, since_revision=5)
            assert [ch.operation for ch in changes.changes] == ["revise", "retire"]

            captured = await c.capture_content_source(scope_id=scope, source_id="a", content="x")
            assert captured.position == 1

            missing = MemoryCitation(
                memory_ref=MemoryRef.at(2),
                entry_id=first.citation.entry_id,
                entry_version_id="mem_ver_missing",
            )
            with pytest.raises(NotFoundError) as not_found:
                await c.get_memory_entry(scope_id=scope, citation=missing)
            assert not_found.value.code == "memory_not_found"

        async with AsyncPowerContextClient(module_daemon.url, token="not-a-token") as wrong:
            with pytest.raises(UnauthorizedError):
                await wrong.search_memory(scope_id=scope, query="async")

        async with AsyncPowerContextClient(module_daemon.url, token=limited) as c:
            ok = await c.search_memory(scope_id="git:acme/async", query="anything")
            assert ok.hits == []
            with pytest.raises(ForbiddenError) as forbidden:
                await c.search_memory(scope_id=scope, query="async")
            assert forbidden.value.code == "scope_forbidden"

    asyncio.run(scenario())


def test_clients_read_the_console_operations(module_daemon: Daemon) -> None:
    scope = new_scope("console-ops")
    with PowerContextClient(module_daemon.url, token=module_daemon.token) as client:
        written = client.remember_memory(
            scope_id=scope, kind="decision", text="Run make lint before pushing", tags=["ci"]
        )
        client.revise_memory_entry(
            scope_id=scope, citation=written.entry.citation, text="Run make lint first"
        )
        explained = client.explain_context(scope_id=scope, query="should I run make lint?")
        pack = client.prepare_context(scope_id=scope, query="should I run make lint?")
        assert explained.pack == pack and explained.candidates[0].outcome == "taken"
        listed = client.list_memory_entries(scope_id=scope, kind="decision", tag="ci")
        assert [e.text for e in listed.entries] == ["Run make lint first"]
        history = client.list_memory_entry_versions(
            scope_id=scope, entry_id=written.entry.citation.entry_id
        )
        assert [v.version for v in history.versions] == [2, 1]
        assert client.get_bootstrap_overview(scope_id=scope).scopes[0].status == "read"
        assert client.get_activity(scope_id=scope, days=2).totals.remembered == 1
        client.capture_content_source(scope_id=scope, source_id="src-read", content="a prompt")
        source = client.get_source(scope_id=scope, source_id="src-read")
        assert (source.content, source.position, source.flushed) == ("a prompt", 1, False)
        with pytest.raises(NotFoundError) as missing:
            client.get_source(scope_id=scope, source_id="src-none")
        assert missing.value.code == "source_not_found"

    async def scenario() -> None:
        async with AsyncPowerContextClient(module_daemon.url, token=module_daemon.token) as aio:
            history = await aio.list_memory_entry_versions(
                scope_id=scope, entry_id=written.entry.citation.entry_id
            )
            assert len(history.versions) == 2
            assert (await aio.get_activity(scope_id=scope)).memory.active == 1
            assert (await aio.explain_context(scope_id=scope, query="lint")).pack.status
            assert (await aio.get_bootstrap_overview(scope_id=scope)).receipts == []
            assert (await aio.get_source(scope_id=scope, source_id="src-read")).position == 1

    asyncio.run(scenario())
