"""Crash safety (spec 08 § Reliability, issue 9): SIGKILL the daemon under write load, restart.

A write is one database transaction (memory rows, revision row, head, full-text document and
its term frequencies together), so a daemon killed at any instant must leave either all of a
write or none of it. This test kills a real ``powercontext serve`` process while several
clients are writing, restarts a daemon on the same data, and checks what a user would rely on:

* the database file is intact (SQLite ``PRAGMA integrity_check`` and the FTS5 self-check);
* every write the daemon *acknowledged* is there, at the revision and version it reported;
* each scope's revisions are gap-free and every revision is one whole write;
* writes that were in flight (never acknowledged) are either absent or whole;
* the derived search index and ``search_terms`` equal a fresh rebuild (``Runtime.reindex``),
  both as the crash left them and after the restart, and search finds every current entry.

Only the daemon is killed, never the database: on OceanBase the server lives on, so this is
the "client died mid-transaction" case; on SQLite the daemon *is* the database engine, so it
is the full process-crash case (WAL recovery on the next open).
"""

from __future__ import annotations

import random
import shutil
import signal
import sqlite3
import threading
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import httpx
import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.pool import NullPool

from powercontext_runtime.composition import Runtime
from powercontext_runtime.settings import Settings
from tests.e2e.helpers import (
    CHANGES,
    GET,
    REMEMBER,
    RETIRE,
    REVISE,
    SEARCH,
    citation,
    list_all,
)
from tests.support.backends import database_url_for
from tests.support.daemon import Daemon, start_daemon

pytestmark = pytest.mark.e2e

WRITERS = 6
SCOPES = 2  # writers share scopes, so they also race for the same head
ACKS_BEFORE_KILL = 150
MAX_STEPS_PER_WRITER = 2000  # a bound in case the kill never comes; never reached in practice
ACK_WAIT_SECONDS = 60

Operation = Literal["remember", "revise", "retire"]
PATHS: dict[Operation, str] = {"remember": REMEMBER, "revise": REVISE, "retire": RETIRE}


@dataclass
class Attempt:
    """One write request as the client sent it, and its answer if one ever came."""

    writer: int
    scope_id: str
    operation: Operation
    body: dict[str, Any]
    entry_id: str | None  # None for remember: the id is only known from the answer
    text: str | None  # the text the entry has after this write (None: unchanged, retire)
    result: dict[str, Any] | None = None  # the acknowledged MemoryWriteResult


class WriteLoad:
    """Writer threads that keep writing until the daemon dies, recording every answer.

    An attempt is recorded *before* its request is sent, so a request the kill cut off is
    still known (with ``result`` None) and its effect, if any, can be checked to be whole.
    """

    def __init__(self, daemon: Daemon, scopes: list[str]) -> None:
        self._daemon = daemon
        self._scopes = scopes
        self._changed = threading.Condition()
        self.attempts: list[Attempt] = []
        self.acks = 0
        self.failures: list[str] = []
        self.killed = threading.Event()
        self._threads = [
            threading.Thread(target=self._writer, args=(index,), name=f"crash-writer-{index}")
            for index in range(WRITERS)
        ]

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def wait_for_acks(self, count: int) -> None:
        """Block until ``count`` writes were acknowledged (or a writer failed)."""
        with self._changed:
            reached = self._changed.wait_for(
                lambda: self.acks >= count or bool(self.failures), timeout=ACK_WAIT_SECONDS
            )
        assert not self.failures, self.failures
        assert reached, f"only {self.acks} of {count} writes acknowledged"

    def stop(self) -> None:
        """Tell the writers the daemon is gone and wait for them to notice."""
        self.killed.set()
        for thread in self._threads:
            thread.join(timeout=60)
            assert not thread.is_alive(), "a writer did not stop after the kill"

    @property
    def lost(self) -> list[Attempt]:
        return [attempt for attempt in self.attempts if attempt.result is None]

    def _writer(self, index: int) -> None:
        try:
            self._write_until_killed(index)
        except Exception as exc:  # surfaced by wait_for_acks/the test, not lost in a thread
            self._fail(f"writer {index}: {exc!r}")

    def _write_until_killed(self, index: int) -> None:
        rng = random.Random(index)
        scope_id = self._scopes[index % len(self._scopes)]
        active: dict[str, dict[str, Any]] = {}  # entry id -> its last acknowledged entry
        with self._daemon.client() as client:
            for step in range(MAX_STEPS_PER_WRITER):
                if self.killed.is_set():
                    return
                attempt = _next_attempt(index, step, scope_id, active, rng)
                with self._changed:
                    self.attempts.append(attempt)
                try:
                    response = client.post(PATHS[attempt.operation], json=attempt.body)
                except httpx.TransportError as exc:
                    if not self.killed.is_set():
                        self._fail(f"writer {index}: {type(exc).__name__} before the kill")
                    return  # the kill cut this request off: it stays unacknowledged
                if response.status_code != 200:
                    self._fail(f"writer {index}: {response.status_code} {response.text[:300]}")
                    return
                result = response.json()
                attempt.result = result
                entry = result["entry"]
                entry_id = entry["citation"]["entry_id"]
                if entry["state"] == "active":
                    active[entry_id] = entry
                else:
                    active.pop(entry_id)
                with self._changed:
                    self.acks += 1
                    self._changed.notify_all()

    def _fail(self, message: str) -> None:
        with self._changed:
            self.failures.append(message)
            self._changed.notify_all()


def _marker(writer: int, step: int) -> str:
    """A word unique to one entry, kept through its revisions, so search can find it."""
    return f"w{writer}s{step}"


def _next_attempt(
    writer: int,
    step: int,
    scope_id: str,
    active: dict[str, dict[str, Any]],
    rng: random.Random,
) -> Attempt:
    """Mostly remember and revise, sometimes retire; shared words exercise ``df`` updates."""
    roll = rng.random()
    if not active or roll < 0.45:
        marker = _marker(writer, step)
        text_ = f"{marker} crash note about durable storage"
        body = {"scope_id": scope_id, "kind": "fact", "text": text_, "tags": ["drill"]}
        return Attempt(writer, scope_id, "remember", body, None, text_)
    entry_id = rng.choice(sorted(active))
    current = active[entry_id]
    if roll < 0.85:
        marker = current["text"].split()[0]
        text_ = f"{marker} revised in step {step} of the crash drill"
        body = {"scope_id": scope_id, "citation": current["citation"], "text": text_}
        return Attempt(writer, scope_id, "revise", body, entry_id, text_)
    body = {"scope_id": scope_id, "citation": current["citation"], "reason": "crash drill"}
    return Attempt(writer, scope_id, "retire", body, entry_id, None)


# -- storage-level checks (no daemon running) -----------------------------------------------


def _sqlite_path(database_url: str) -> Path:
    return Path(database_url.removeprefix("sqlite:///"))


def _crash_image(database_url: str, into: Path) -> str:
    """A copy of the SQLite files exactly as the crash left them (database, WAL, shared memory).

    Inspecting the copy keeps the originals untouched, so it is the restarted daemon, not this
    test, that has to recover the write-ahead log.
    """
    source = _sqlite_path(database_url)
    into.mkdir()
    for suffix in ("", "-wal", "-shm"):
        original = source.with_name(source.name + suffix)
        if original.exists():
            shutil.copyfile(original, into / original.name)
    return f"sqlite:///{into / source.name}"


def _check_sqlite_file(database_url: str) -> None:
    """The file the crash left behind opens (WAL recovery) and passes SQLite's own checks."""
    conn = sqlite3.connect(_sqlite_path(database_url))
    try:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
        for table in ("memory_search_index", "experience_search_index"):
            # Raises if the FTS5 inverted index is structurally damaged. (The index is
            # contentless, so its postings are compared with a fresh rebuild separately.)
            conn.execute(f"INSERT INTO {table}({table}) VALUES ('integrity-check')")
    finally:
        conn.close()


def _index_state(backend: str, database_url: str) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of the derived search index, of ``search_terms`` and of ``memory_facets``,
    in a stable order."""
    if backend == "sqlite":
        documents = {
            family: f"SELECT id, terms, repeats FROM {family}_search_docs"
            for family in ("memory", "experience")
        }
        # Every (token, rowid) posting of the contentless FTS5 index, via its vocabulary.
        documents |= {
            f"{family} postings": f"SELECT term, doc FROM temp.{family}_postings"
            for family in ("memory", "experience")
        }
    else:
        documents = {
            family: f"SELECT id, scope_id, terms, tokens FROM {family}_scoped_search"
            for family in ("memory", "experience")
        }
    engine = create_engine(database_url, poolclass=NullPool)
    try:
        with engine.connect() as conn:
            if backend == "sqlite":
                for family in ("memory", "experience"):
                    conn.execute(
                        text(
                            f"CREATE VIRTUAL TABLE temp.{family}_postings USING"
                            f" fts5vocab(main, {family}_search_index, 'instance')"
                        )
                    )
            state = {
                family: sorted(tuple(row) for row in conn.execute(text(query)))
                for family, query in documents.items()
            }
            state["search_terms"] = sorted(
                tuple(row)
                for row in conn.execute(text("SELECT scope_id, family, term, df FROM search_terms"))
            )
            state["memory_facets"] = sorted(
                tuple(row)
                for row in conn.execute(
                    text(
                        "SELECT scope_id, facet, value, created_revision, entry_id, state"
                        " FROM memory_facets"
                    )
                )
            )
    finally:
        engine.dispose()
    return state


def _fresh_rebuild(home: Path, database_url: str) -> dict[str, int]:
    """Rebuild every derived index from the authoritative tables, the way `reindex` does."""
    runtime = Runtime.open(Settings.load(env={}, home=home, database_url=database_url))
    try:
        return runtime.reindex()
    finally:
        runtime.close()


# -- API-level checks (against the restarted daemon) ----------------------------------------


def _post(client: httpx.Client, path: str, body: dict[str, Any]) -> dict[str, Any]:
    response = client.post(path, json=body)
    assert response.status_code == 200, (path, response.status_code, response.text[:500])
    return dict(response.json())


def _all_changes(client: httpx.Client, scope_id: str) -> tuple[int, list[dict[str, Any]]]:
    """The head revision and every change of the scope, oldest first."""
    changes: list[dict[str, Any]] = []
    while True:
        page = _post(
            client,
            CHANGES,
            {
                "scope_id": scope_id,
                "since_revision": changes[-1]["revision"] if changes else 0,
                "limit": 1000,
            },
        )
        changes += page["changes"]
        if not page["changes"]:
            return page["memory"]["revision"], changes


def _at(entry: dict[str, Any], revision: int) -> dict[str, Any]:
    """The same entry version as cited from another revision."""
    cited = {**entry["citation"], "memory_ref": {**entry["citation"]["memory_ref"]}}
    cited["memory_ref"]["revision"] = revision
    return {**entry, "citation": cited}


def _match_lost(
    change: dict[str, Any], entry: dict[str, Any], candidates: list[Attempt]
) -> Attempt | None:
    """The unacknowledged attempt this committed change is the whole effect of, if any."""
    for attempt in candidates:
        if attempt.operation != change["operation"]:
            continue
        if attempt.entry_id is not None and attempt.entry_id != change["entry_id"]:
            continue
        if attempt.operation == "retire":
            if entry["state"] == "inactive":
                return attempt
        elif entry["text"] == attempt.text and entry["state"] == "active":
            return attempt
    return None


def _verify_scope(client: httpx.Client, scope_id: str, load: WriteLoad) -> int:
    """Acknowledged writes present and exact; revisions gap-free and whole; search works.

    Returns the number of active entries (what a rebuild must index for this scope).
    """
    head, changes = _all_changes(client, scope_id)
    assert [change["revision"] for change in changes] == list(range(1, head + 1))
    by_revision = {change["revision"]: change for change in changes}

    # Every revision is readable by its exact citation (a whole version behind every change).
    versions: dict[int, dict[str, Any]] = {}
    for change in changes:
        cited = citation(change["revision"], change["entry_id"], change["entry_version_id"])
        versions[change["revision"]] = _post(client, GET, {"scope_id": scope_id, "citation": cited})

    # Every acknowledged write is there, at exactly the revision and version it reported.
    acked = [a for a in load.attempts if a.scope_id == scope_id and a.result is not None]
    acked_revisions = [a.result["memory"]["revision"] for a in acked if a.result]
    assert len(set(acked_revisions)) == len(acked_revisions), "two acks share a revision"
    for attempt in acked:
        assert attempt.result is not None
        revision = attempt.result["memory"]["revision"]
        entry = attempt.result["entry"]
        change = by_revision.get(revision)
        assert change is not None, f"acknowledged revision {revision} is missing"
        assert change["operation"] == attempt.operation
        assert change["entry_id"] == entry["citation"]["entry_id"]
        assert change["entry_version_id"] == entry["citation"]["entry_version_id"]
        assert versions[revision] == entry

    # Revisions nobody acknowledged are the whole effect of a request the kill cut off.
    lost = [a for a in load.lost if a.scope_id == scope_id]
    for revision in sorted(set(by_revision) - set(acked_revisions)):
        match = _match_lost(by_revision[revision], versions[revision], lost)
        assert match is not None, f"revision {revision} matches no write that was sent"
        lost.remove(match)

    # Each entry's history is one chain: remember, then consecutive versions, retire last.
    history: dict[str, list[int]] = defaultdict(list)
    for change in changes:
        history[change["entry_id"]].append(change["revision"])
    for revisions in history.values():
        chain = [versions[r] for r in revisions]
        assert [v["version"] for v in chain] == list(range(1, len(chain) + 1))
        assert by_revision[revisions[0]]["operation"] == "remember"
        assert all(by_revision[r]["operation"] != "retire" for r in revisions[:-1])
        assert all(v["state"] == "active" for v in chain[:-1])

    # The listing shows each entry's latest version, cited at the head.
    current = {entry_id: versions[revisions[-1]] for entry_id, revisions in history.items()}
    listed = list_all(client, scope_id, include_inactive=True)
    assert {e["citation"]["entry_id"]: e for e in listed} == {
        entry_id: _at(entry, head) for entry_id, entry in current.items()
    }
    active = {entry_id for entry_id, entry in current.items() if entry["state"] == "active"}
    assert {e["citation"]["entry_id"] for e in list_all(client, scope_id)} == active

    # Search finds every current entry by its own word, and nothing retired.
    for entry_id, entry in current.items():
        found = _post(client, SEARCH, {"scope_id": scope_id, "query": entry["text"].split()[0]})
        expected = [_at(entry, head)["citation"]] if entry_id in active else []
        assert [hit["citation"] for hit in found["hits"]] == expected, entry["text"]
    shared = _post(client, SEARCH, {"scope_id": scope_id, "query": "crash", "limit": 50})
    assert shared["hits"] and {h["citation"]["entry_id"] for h in shared["hits"]} <= active
    return len(active)


# -- the test -------------------------------------------------------------------------------


@pytest.fixture
def crash_database(
    backend: str, request: pytest.FixtureRequest, tmp_path: Path
) -> tuple[Path, str]:
    """The daemon's data dir and database URL (SQLite: the default file inside the data dir)."""
    home = tmp_path / "daemon-home"
    if backend == "sqlite":
        return home, f"sqlite:///{home / 'powercontext.db'}"
    return home, database_url_for(backend, request, tmp_path)


def test_sigkill_under_write_load_loses_no_acknowledged_write(
    backend: str, crash_database: tuple[Path, str]
) -> None:
    home, database_url = crash_database
    scopes = [f"e2e:crash/{backend}/{index}" for index in range(SCOPES)]

    with start_daemon(home, database_url=database_url) as daemon:
        load = WriteLoad(daemon, scopes)
        load.start()
        try:
            load.wait_for_acks(ACKS_BEFORE_KILL)
        finally:
            # Writers notice the flag only on their next request; until then they keep writing,
            # so the SIGKILL below lands while requests are in flight.
            load.killed.set()
            exit_code = daemon.stop(signal.SIGKILL)
            load.stop()
    assert exit_code == -signal.SIGKILL
    assert not load.failures, load.failures
    assert load.acks >= ACKS_BEFORE_KILL
    # The kill cut off requests that had been sent: it really happened mid-stream.
    assert load.lost, "no write was in flight when the daemon was killed"

    # The storage as the crash left it, before a restart gets any chance to repair it.
    crashed_url = database_url
    if backend == "sqlite":
        crashed_url = _crash_image(database_url, home.parent / "crash-image")
        _check_sqlite_file(crashed_url)
    after_crash = _index_state(backend, crashed_url)

    with start_daemon(home, database_url=database_url) as restarted, restarted.client() as client:
        active_counts = [_verify_scope(client, scope_id, load) for scope_id in scopes]
    after_restart = _index_state(backend, database_url)

    rebuilt_counts = _fresh_rebuild(home, database_url)
    rebuilt = _index_state(backend, database_url)
    assert rebuilt_counts == {
        "memory": sum(active_counts),
        "experience": 0,
        "memory_facets": len({row[4] for row in rebuilt["memory_facets"]}),  # every entry's
    }
    assert set(after_crash) == set(after_restart) == set(rebuilt)
    for table, rows in rebuilt.items():
        assert after_crash[table] == rows, f"{table} as the crash left it differs from a rebuild"
        assert after_restart[table] == rows, f"{table} after the restart differs from a rebuild"
    if backend == "sqlite":
        _check_sqlite_file(database_url)
