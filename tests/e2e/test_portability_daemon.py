"""``powercontext backup``, ``export`` and ``import`` as real processes beside real daemons."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import threading
from contextlib import closing
from pathlib import Path

import httpx
import pytest

from powercontext_runtime.portability.records import COUNT_KEYS
from powercontext_runtime.store.memory import content_hash
from tests.e2e.helpers import PREPARE, REMEMBER, new_scope, run_cli
from tests.support.daemon import Daemon, start_daemon

pytestmark = pytest.mark.e2e

CLI = [sys.executable, "-m", "powercontext_runtime.cli.main"]


class Writer(threading.Thread):
    """Remembers distinct entries through the daemon until told to stop; records every write
    the daemon acknowledged."""

    def __init__(self, daemon: Daemon, scope: str, warm: int) -> None:
        super().__init__(daemon=True)
        self.daemon_ = daemon
        self.scope = scope
        self.acknowledged: list[str] = []
        self.lock = threading.Lock()
        self.warmed = threading.Event()  # ``warm`` writes acknowledged
        self.stop = threading.Event()
        self.error: BaseException | None = None
        self._warm = warm

    def snapshot(self) -> list[str]:
        with self.lock:
            return list(self.acknowledged)

    def run(self) -> None:
        try:
            with self.daemon_.client() as client:
                number = 0
                while not self.stop.is_set():
                    text = f"Entry {number}: the build step {number} runs after lint"
                    response = client.post(
                        REMEMBER, json={"scope_id": self.scope, "kind": "fact", "text": text}
                    )
                    if response.status_code == 200:  # a 503 busy is not acknowledged
                        with self.lock:
                            self.acknowledged.append(text)
                    number += 1
                    if number >= self._warm:
                        self.warmed.set()
        except BaseException as exc:  # reported by the test
            self.error = exc
            self.warmed.set()


def test_backup_is_consistent_while_the_daemon_writes(
    module_daemon: Daemon, tmp_path: Path
) -> None:
    d = module_daemon
    scope = new_scope("backup")
    writer = Writer(d, scope, warm=40)
    writer.start()
    try:
        assert writer.warmed.wait(120)
        before = writer.snapshot()
        backup = tmp_path / "copy.db"
        done = run_cli(d, "backup", str(backup), "--json")
        after = writer.snapshot()
    finally:
        writer.stop.set()
        writer.join(60)
    assert writer.error is None
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["integrity_check"] == "ok" and report["path"] == str(backup)
    assert len(after) > len(before)  # the daemon kept taking writes meanwhile
    assert backup.stat().st_mode & 0o777 == 0o600
    assert not list(tmp_path.glob(".copy.db.*"))  # no partial file left behind

    with closing(sqlite3.connect(backup)) as copy:
        assert copy.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        assert copy.execute("PRAGMA journal_mode").fetchone() == ("delete",)
        texts = {
            row[0]
            for row in copy.execute("SELECT text FROM memory_versions WHERE scope_id = ?", (scope,))
        }
        (head,) = copy.execute(
            "SELECT revision FROM memory_heads WHERE scope_id = ?", (scope,)
        ).fetchone()
        revisions = [
            row[0]
            for row in copy.execute(
                "SELECT revision FROM memory_revisions WHERE scope_id = ? ORDER BY revision",
                (scope,),
            )
        ]
    assert set(before) <= texts  # every write acknowledged before the backup started
    assert revisions == list(range(1, head + 1))  # one consistent state, no torn revision
    assert len(texts) == head


def test_backup_refuses_to_overwrite_and_oceanbase(module_daemon: Daemon, tmp_path: Path) -> None:
    d = module_daemon
    existing = tmp_path / "old.db"
    existing.write_bytes(b"an older backup")
    refused = run_cli(d, "backup", str(existing))
    assert refused.returncode == 1
    assert "pass --force" in refused.stderr and "Traceback" not in refused.stderr
    assert existing.read_bytes() == b"an older backup"
    live = run_cli(d, "backup", str(d.home / "powercontext.db"), "--force")
    assert live.returncode == 1 and "live database" in live.stderr
    forced = run_cli(d, "backup", str(existing), "--force", "--json")
    assert forced.returncode == 0, forced.stderr

    url = "mysql+pymysql://someone@127.0.0.1:1/none?charset=utf8mb4"
    ob = run_cli(d, "backup", str(tmp_path / "ob.db"), "--database-url", url, "--json")
    assert ob.returncode == 1
    error = json.loads(ob.stderr)["error"]
    assert error["code"] == "backup_unsupported" and "export" in error["message"]


def _seed_file(path: Path, scope: str, n: int) -> None:
    """An export holding one scope of ``n`` remembered entries (what the daemon would store),
    to give the export below enough to read that the daemon's writes land while it does."""
    counts = dict.fromkeys(COUNT_KEYS, 0)
    counts.update(memory_entries=n, memory_versions=n)
    at = 1_767_225_600_000

    def line(record: dict) -> str:
        return json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n"

    with path.open("w", encoding="utf-8") as out:
        out.write(
            line(
                {
                    "format": "powercontext.export",
                    "version": 2,
                    "runtime": "test",
                    "backend": "sqlite",
                    "scopes": [scope],
                    "counts": counts,
                }
            )
        )
        out.write(line({"type": "scope", "scope_id": scope, "counts": counts}))
        out.write(line({"type": "memory_head", "scope_id": scope, "revision": n, "updated_at": at}))
        for revision in range(1, n + 1):
            text = f"Seeded entry {revision}: module m{revision} imports library l{revision}"
            out.write(
                line(
                    {
                        "type": "memory_version",
                        "scope_id": scope,
                        "revision": revision,
                        "operation": "remember",
                        "revision_created_at": at + revision,
                        "entry_id": f"mem_ent_seed{revision:08d}",
                        "entry_version_id": f"mem_ver_seed{revision:08d}",
                        "version": 1,
                        "state": "active",
                        "kind": "fact",
                        "text": text,
                        "tags": [],
                        "reason": None,
                        "source_refs": [],
                        "artifact_refs": [],
                        "content_hash": content_hash("fact", text, []),
                        "valid_to": None,
                        "created_at": at + revision,
                    }
                )
            )


def test_export_is_one_consistent_snapshot_while_the_daemon_writes(
    module_daemon: Daemon, tmp_path: Path
) -> None:
    """The daemon keeps remembering into the very scope being exported: the export holds one
    state of it — the head, every version up to it and the counts agree — with every write
    acknowledged before the export started, and it imports (its own counts and order checked)
    and re-exports byte for byte elsewhere."""
    d = module_daemon
    scope = new_scope("export-live")
    seed = tmp_path / "seed.jsonl"
    seeded = 20_000
    _seed_file(seed, scope, seeded)
    loaded = run_cli(d, "import", str(seed), "--json")
    assert loaded.returncode == 0, loaded.stderr

    writer = Writer(d, scope, warm=40)
    writer.start()
    try:
        assert writer.warmed.wait(120)
        before = writer.snapshot()
        out = tmp_path / "live.jsonl"
        done = run_cli(d, "export", "--scope", scope, "-o", str(out), "--json")
        after = writer.snapshot()
    finally:
        writer.stop.set()
        writer.join(60)
    assert writer.error is None
    assert done.returncode == 0, done.stderr
    assert len(after) > len(before)  # the daemon kept taking writes meanwhile

    records = [json.loads(line) for line in out.read_bytes().splitlines()]
    header, section = records[0], records[1:]
    assert header["scopes"] == [scope] and section[0]["counts"] == header["counts"]
    versions = [r for r in section if r["type"] == "memory_version"]
    (head,) = (r["revision"] for r in section if r["type"] == "memory_head")
    # One point in time: the head read first and the versions streamed after agree, and so do
    # the counts taken before either.
    assert [r["revision"] for r in versions] == list(range(1, head + 1))
    assert header["counts"]["memory_versions"] == len(versions) == head
    assert header["counts"]["memory_entries"] == len({r["entry_id"] for r in versions}) == head
    texts = {r["text"] for r in versions}
    assert set(before) <= texts  # every write acknowledged before the export started
    assert head - seeded < len(writer.acknowledged)
    with closing(sqlite3.connect(f"file:{d.home / 'powercontext.db'}?mode=ro", uri=True)) as db:
        (now,) = db.execute(
            "SELECT revision FROM memory_heads WHERE scope_id = ?", (scope,)
        ).fetchone()
    assert now > head  # writes committed after the snapshot are not in it

    home = tmp_path / "elsewhere"
    env = {k: v for k, v in d.env().items() if not k.startswith("POWERCONTEXT_")}
    imported = subprocess.run(
        [*CLI, "import", str(out), "--data-dir", str(home), "--json"],
        env=env, capture_output=True, timeout=120,
    )  # fmt: skip
    assert imported.returncode == 0, imported.stderr
    assert json.loads(imported.stdout)["counts"]["memory_entries"] == head
    again = tmp_path / "again.jsonl"
    reexported = subprocess.run(
        [*CLI, "export", "--data-dir", str(home), "-o", str(again)],
        env=env, capture_output=True, timeout=120,
    )  # fmt: skip
    assert reexported.returncode == 0, reexported.stderr
    assert again.read_bytes() == out.read_bytes()


def _prepare(client: httpx.Client, scope: str, query: str) -> dict:
    response = client.post(PREPARE, json={"scope_id": scope, "query": query})
    assert response.status_code == 200, response.text
    return response.json()


def test_export_piped_into_import_elsewhere_serves_the_same_packs(
    module_daemon: Daemon, tmp_path: Path
) -> None:
    d = module_daemon
    scope = new_scope("pipe")
    texts = [
        "Run make lint before pushing; CI fails otherwise",
        "修改数据库持久化逻辑前先跑契约测试",
        "The API listens on port 9191 behind the gateway",
        "The billing worker retries load_invoice three times",
    ]
    with d.client() as client:
        for text in texts:
            assert (
                client.post(
                    REMEMBER, json={"scope_id": scope, "kind": "fact", "text": text}
                ).status_code
                == 200
            )
    exported = subprocess.run(
        [*CLI, "export", "--scope", scope], env=d.env(), capture_output=True, timeout=60
    )
    assert exported.returncode == 0, exported.stderr
    assert exported.stdout.startswith(b'{"format":"powercontext.export","version":3,')
    assert b"exported 1 scope(s)" in exported.stderr

    home = tmp_path / "elsewhere"
    env = {k: v for k, v in d.env().items() if not k.startswith("POWERCONTEXT_")}
    imported = subprocess.run(
        [*CLI, "import", "-", "--data-dir", str(home), "--json"],
        input=exported.stdout,
        env=env,
        capture_output=True,
        timeout=60,
    )
    assert imported.returncode == 0, imported.stderr
    assert json.loads(imported.stdout)["imported"] == 1

    queries = ["what do I run before pushing?", "持久化", "which port?", "weather garden"]
    with start_daemon(home) as other, d.client() as here, other.client() as there:
        for query in queries:
            assert _prepare(there, scope, query) == _prepare(here, scope, query)

    # A damaged file: one line on stderr, exit 1, no traceback, nothing written.
    damaged = exported.stdout.replace(b"port 9191", b"port 9292")
    again = subprocess.run(
        [*CLI, "import", "-", "--data-dir", str(tmp_path / "third")],
        input=damaged,
        env=env,
        capture_output=True,
        timeout=60,
    )
    assert again.returncode == 1
    message = again.stderr.decode()
    assert message.startswith("powercontext: line ") and "(import_invalid;" in message
    assert "Traceback" not in message and "9292" not in message
