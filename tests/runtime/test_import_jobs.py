"""Several scopes imported at once (``--jobs``): the same database as one at a time.

On OceanBase an import writes two scopes at once by default, each in its own transaction on
its own connection; the row ids each scope gets are reserved up front, so two open
transactions never pick the same ones. These tests hold the result to the serial import's:
the same export bytes, the same packs, a complete search index, each scope's rows in the
file's order, and a failure that leaves every scope whole or absent.
"""

from __future__ import annotations

import io
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from powercontext_runtime.composition import Runtime
from powercontext_runtime.contract.memory import ListMemoryEntriesRequest, RememberMemoryRequest
from powercontext_runtime.errors import InvalidRequestError
from powercontext_runtime.portability import importer
from powercontext_runtime.portability.exporter import PROGRESS_KEYS, export
from powercontext_runtime.portability.records import ExportFormatError
from powercontext_runtime.search.analyzer import document_terms
from powercontext_runtime.settings import Settings
from powercontext_runtime.store.database import RetryableConflict
from tests.support.backends import database_url_for
from tests.support.realistic_scope import packs, populate

SCOPES = [f"git:example.com/acme/repo-{n}" for n in range(4)]


def open_runtime(backend: str, request: pytest.FixtureRequest, where: Path) -> Runtime:
    where.mkdir(parents=True, exist_ok=True)
    url = database_url_for(backend, request, where)
    return Runtime.open(Settings.load(env={}, home=where / "home", database_url=url))


def exported(rt: Runtime, scopes: list[str] | None = None) -> bytes:
    out = io.BytesIO()
    export(rt.db, out, scopes)
    return out.getvalue()


def body(data: bytes) -> bytes:
    """The export without its header (which names the backend)."""
    return data.split(b"\n", 1)[1]


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Runtime, bytes]]:
    """A SQLite database of four realistic scopes, and its export."""
    where = tmp_path_factory.mktemp("source")
    rt = Runtime.open(Settings.load(env={}, home=where / "home"))
    for scope in SCOPES:
        populate(rt, scope)
    try:
        yield rt, exported(rt)
    finally:
        rt.close()


def write(rt: Runtime, data: bytes, **kwargs: Any) -> importer.ImportSummary:
    return importer.import_file(rt.db, io.BytesIO(data), document_terms, **kwargs)


def version_order(rt: Runtime, scope: str) -> list[str]:
    with rt.db.read() as conn:
        rows = conn.exec_driver_sql(
            "SELECT entry_version_id FROM memory_versions WHERE scope_id = %s ORDER BY id"
            if rt.backend == "oceanbase"
            else "SELECT entry_version_id FROM memory_versions WHERE scope_id = ? ORDER BY id",
            (scope,),
        ).all()
    return [row[0] for row in rows]


def file_order(data: bytes, scope: str) -> list[str]:
    records = (json.loads(line) for line in data.splitlines()[1:])
    return [
        r["entry_version_id"]
        for r in records
        if r["type"] == "memory_version" and r["scope_id"] == scope
    ]


def assert_imported_as_written(target: Runtime, origin: Runtime, data: bytes) -> None:
    """The file's scopes are in ``target`` as in ``origin``: the same records (exported again),
    the same packs, each scope's versions in the file's order, the search index complete."""
    assert body(exported(target, SCOPES)) == body(data)
    for scope in SCOPES:
        assert packs(target, scope) == packs(origin, scope)
        assert version_order(target, scope) == file_order(data, scope)
    assert target.stale_indexes() == []


@pytest.mark.parametrize("backend", ["sqlite", "oceanbase"])
def test_scopes_written_at_once_give_the_database_one_at_a_time_gives(
    backend: str,
    source: tuple[Runtime, bytes],
    request: pytest.FixtureRequest,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    origin, data = source
    target = open_runtime(backend, request, tmp_path / "target")
    meeting = threading.Barrier(2, timeout=120)
    real_finish = importer._ScopeWriter.finish

    def finish(writer: importer._ScopeWriter) -> None:
        # OceanBase: the first two scopes meet here, both inside their open transactions, or
        # the barrier breaks and the import fails. SQLite has one writer at a time.
        if backend == "oceanbase" and writer.scope_id in SCOPES[:2]:
            meeting.wait()
        real_finish(writer)

    monkeypatch.setattr(importer._ScopeWriter, "finish", finish)
    try:
        summary = write(target, data, jobs=3)
        assert summary.imported == len(SCOPES)
        assert_imported_as_written(target, origin, data)
        assert write(target, data, jobs=3).identical == len(SCOPES)  # a rerun skips them all
    finally:
        target.close()


def test_a_failed_scope_stops_the_rest_and_leaves_each_scope_whole_or_absent(
    source: tuple[Runtime, bytes], request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    origin, data = source
    target = open_runtime("oceanbase", request, tmp_path / "target")
    try:
        handle = io.BytesIO(data)
        plan = importer.plan_import(handle)
        importer.check_against(target.db, handle, plan)
        plan.sections[1].raw_digest = "0" * 64  # as if its bytes changed since pass 1
        with pytest.raises(InvalidRequestError) as caught:
            importer.write_plan(target.db, handle, plan, document_terms, jobs=2)
        assert caught.value.code == "import_file_changed"
        assert caught.value.details == {"line": plan.sections[1].line}
        stored = exported(target)
        present = json.loads(stored.split(b"\n", 1)[0])["scopes"]
        assert SCOPES[1] not in present
        for scope in present:  # each whole: exactly the source's records
            assert body(exported(target, [scope])) == body(exported(origin, [scope]))
        assert write(target, data).imported == len(SCOPES) - len(present)
        assert body(exported(target)) == body(data)
    finally:
        target.close()


@pytest.mark.parametrize("jobs", [1, 2])
def test_an_import_beside_a_live_writer_loses_nothing(
    jobs: int,
    source: tuple[Runtime, bytes],
    request: pytest.FixtureRequest,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A daemon keeps remembering while the import writes (docs/portability.md: "a running
    one may keep serving"). On OceanBase a daemon's row takes the table's next
    ``AUTO_INCREMENT`` value, which the server moves past each id the import inserts: the
    daemon's row once took the id the import's next batch needed, and the import failed on
    every retry. Here a remember commits after every batch of versions the import inserts."""
    origin, data = source
    target = open_runtime("oceanbase", request, tmp_path / "target")
    live = "git:example.com/acme/live"
    written: list[str] = []
    monkeypatch.setattr(importer, "_BATCH", {"sqlite": 5, "oceanbase": 5})
    real_flush = importer._Rows.flush
    lock = threading.Lock()

    def flush(rows: importer._Rows) -> None:
        pending = bool(rows._rows)
        real_flush(rows)
        if pending and " memory_versions " in rows._sql:
            with lock:
                text = f"live note {len(written)}"
                written.append(text)
            target.memory.remember(RememberMemoryRequest(scope_id=live, kind="fact", text=text))

    monkeypatch.setattr(importer._Rows, "flush", flush)
    try:
        assert write(target, data, jobs=jobs).imported == len(SCOPES)
        assert len(written) >= 2 * len(SCOPES)  # several batches per scope, a remember each
        assert_imported_as_written(target, origin, data)
        page = target.memory.list(ListMemoryEntriesRequest(scope_id=live, limit=100))
        assert sorted(e.text for e in page.entries) == sorted(written)
        assert target.stale_indexes() == []
    finally:
        target.close()


@pytest.mark.parametrize("backend", ["sqlite", "oceanbase"])
def test_a_retried_scope_is_written_whole_in_fresh_ids(
    backend: str,
    source: tuple[Runtime, bytes],
    request: pytest.FixtureRequest,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A scope whose transaction fails after some of its rows went in (a deadlock, a lock
    timeout) is written again from the start; on OceanBase in a block of its own, since a
    daemon's row may since have taken an id of the first one."""
    origin, data = source
    target = open_runtime(backend, request, tmp_path / "target")
    monkeypatch.setattr(importer, "_BATCH", {"sqlite": 5, "oceanbase": 5})
    real_finish = importer._ScopeWriter.finish
    attempts: list[str] = []

    def finish(writer: importer._ScopeWriter) -> None:
        attempts.append(writer.scope_id)
        if attempts.count(SCOPES[2]) == 1 and writer.scope_id == SCOPES[2]:
            raise RetryableConflict  # after its first batches were inserted
        real_finish(writer)

    monkeypatch.setattr(importer._ScopeWriter, "finish", finish)
    progress: list[int] = []
    try:
        summary = write(target, data, jobs=2, write_progress=lambda done, _: progress.append(done))
        assert summary.imported == len(SCOPES) and attempts.count(SCOPES[2]) == 2
        assert_imported_as_written(target, origin, data)
        assert progress[-1] == summary_total(data)  # progress ends at the file's total
    finally:
        target.close()


def summary_total(data: bytes) -> int:
    header = json.loads(data.split(b"\n", 1)[0])
    return sum(header["counts"][key] for key in PROGRESS_KEYS)


@pytest.mark.parametrize("block", [1, 2, 3, 7, 1 << 20])
def test_lines_are_the_files_lines_whatever_the_block_size(
    block: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(importer, "_BLOCK", block)
    data = b'{"a":1}\n\n{"b":"\xe6\x95\xb0"}\r\nlast'
    handle = io.BytesIO(data)
    lines = list(importer._lines(handle, 0, 1))
    assert lines == [
        (1, 0, b'{"a":1}\n'),
        (2, 8, b"\n"),
        (3, 9, b'{"b":"\xe6\x95\xb0"}\r\n'),
        (4, 22, b"last"),
    ]
    handle.seek(0)  # wherever the handle was left, a reader starts at its own offset
    assert list(importer._lines(handle, 8, 2)) == lines[1:]


@pytest.mark.parametrize("block", [4, 1 << 20])
def test_an_over_long_line_is_refused_at_its_number(
    block: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(importer, "_BLOCK", block)
    monkeypatch.setattr(importer, "MAX_LINE_BYTES", 10)
    for data, line in ((b"short\n" + b"x" * 11, 2), (b"ok\n" + b"y" * 10 + b"\nz\n", 2)):
        with pytest.raises(ExportFormatError) as caught:
            list(importer._lines(io.BytesIO(data), 0, 1))
        assert caught.value.details == {"line": line}
    exactly = b"a" * 9 + b"\n"  # ten bytes with its newline: allowed
    assert [raw for _, _, raw in importer._lines(io.BytesIO(exactly), 0, 1)] == [exactly]
