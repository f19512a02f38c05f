"""The ``export``, ``import`` and ``migrate`` commands (in process), migrate also to seekdb."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Connection, delete, update

from powercontext_runtime.cli.main import main as cli_main
from powercontext_runtime.cli.progress import Progress
from powercontext_runtime.composition import Runtime
from powercontext_runtime.contract.memory import RememberMemoryRequest
from powercontext_runtime.portability import importer
from powercontext_runtime.portability import migrate as migrate_module
from powercontext_runtime.portability.exporter import PROGRESS_KEYS
from powercontext_runtime.settings import Settings
from powercontext_runtime.store.activity import DAY_MS, ActivityStore
from powercontext_runtime.store.database import now_ms
from powercontext_runtime.store.schema import flush_runs, memory_versions
from tests.support.backends import database_url_for
from tests.support.realistic_scope import packs, populate

ROOT = Path(__file__).resolve().parents[2]
SHOP = "git:example.com/acme/shop"
LIB = "git:example.com/acme/lib"


@pytest.fixture
def home(tmp_path: Path) -> Iterator[Path]:
    """A data dir whose SQLite database holds two realistic scopes."""
    home = tmp_path / "home"
    rt = Runtime.open(Settings.load(env={}, home=home))
    try:
        populate(rt, SHOP, referenced=(LIB,))
        populate(rt, LIB)
    finally:
        rt.close()
    yield home


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    try:
        code = cli_main(list(args))
    except SystemExit as exc:  # usage errors exit 2 through argparse's path
        code = int(exc.code or 0)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_export_to_a_file_then_import(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "scopes.jsonl"
    code, stdout, stderr = run(capsys, "export", "--data-dir", str(home), "-o", str(out), "--json")
    assert code == 0, stderr
    report = json.loads(stdout)
    assert report["scopes"] == 2 and report["counts"]["memory_entries"] == 34
    assert report["bytes"] == out.stat().st_size
    assert out.stat().st_mode & 0o777 == 0o600
    assert stderr == ""  # --json: no progress lines

    code, _, stderr = run(capsys, "export", "--data-dir", str(home), "-o", str(out))
    assert code == 1 and "pass --force" in stderr and "(output_exists)" in stderr
    code, stdout, _ = run(capsys, "export", "--data-dir", str(home), "-o", str(out), "--force")
    assert code == 0 and stdout.startswith("exported 2 scope(s) to ")

    other = tmp_path / "other"
    code, stdout, stderr = run(capsys, "import", str(out), "--data-dir", str(other))
    assert code == 0, stderr
    assert stdout.startswith("imported 2 of 2 scope(s): 34 memory entries (42 versions)")
    assert "checked " in stderr and "imported " in stderr  # progress lines (not a TTY)
    code, stdout, _ = run(capsys, "import", str(out), "--data-dir", str(other), "--json")
    assert code == 0 and json.loads(stdout)["identical"] == 2

    code, stdout, _ = run(
        capsys, "import", str(out), "--data-dir", str(tmp_path / "dry"), "--dry-run"
    )
    assert code == 0 and stdout.startswith("would import 2 of 2 scope(s)")


def test_bad_arguments_and_files(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, stderr = run(
        capsys, "import", str(tmp_path / "missing.jsonl"), "--data-dir", str(home)
    )
    assert code == 2 and "no such file" in stderr
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"format":"powercontext.export","version":7}\n')
    code, _, stderr = run(capsys, "import", str(bad), "--data-dir", str(home), "--json")
    assert code == 1
    error = json.loads(stderr)["error"]
    assert error["code"] == "import_unsupported_version"
    assert error["details"] == {"line": 1, "field": "version", "supported": [1, 2, 3]}
    # The unknown scope is named as typed, counted from 1 like the command line (not by a
    # 0-based index), and the message says which scopes the database has.
    code, _, stderr = run(
        capsys, "export", "--data-dir", str(home), "--scope", LIB, "--scope", f"{SHOP}s",
        "-o", str(tmp_path / "x"),
    )  # fmt: skip
    assert code == 1
    assert stderr == (
        f"powercontext: --scope number 2 ('{SHOP}s') names no scope of this database; it has 2: "
        f"'{LIB}', '{SHOP}' (scope_not_found; scope_number=2, scopes_in_database=2)\n"
    )
    assert stderr in (ROOT / "docs" / "portability.md").read_text(encoding="utf-8")
    assert not (tmp_path / "x").exists()
    code, _, stderr = run(
        capsys, "export", "--data-dir", str(tmp_path / "empty"), "-o", str(tmp_path / "y")
    )
    assert code == 1 and "(database_not_found)" in stderr
    out = tmp_path / "scopes.jsonl"
    assert run(capsys, "export", "--data-dir", str(home), "-o", str(out))[0] == 0
    other = tmp_path / "other"
    for command in (["import", str(out)], ["migrate", "--to", f"sqlite:///{tmp_path / 'm.db'}"]):
        for jobs in ("0", "9"):
            code, stdout, stderr = run(
                capsys, *command, "--data-dir", str(other), "--jobs", jobs, "--json"
            )
            assert code == 2 and stdout == ""
            error = json.loads(stderr)["error"]
            assert error["message"] == "--jobs must be 1 to 8", error
            assert error["details"] == {"argument": "--jobs"}
    assert not other.exists() and not (tmp_path / "m.db").exists()  # nothing was opened


@pytest.mark.parametrize("backend", ["sqlite", "oceanbase"])
def test_migrate_copies_and_verifies(
    backend: str,
    home: Path,
    tmp_path: Path,
    request: pytest.FixtureRequest,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    url = database_url_for(backend, request, tmp_path)
    at_once: list[int] = []
    concurrently = importer._write_concurrently

    def spy(write: Any, sections: Any, workers: int) -> None:
        at_once.append(workers)
        concurrently(write, sections, workers)

    monkeypatch.setattr(importer, "_write_concurrently", spy)
    code, stdout, stderr = run(
        capsys, "migrate", "--data-dir", str(home), "--to", url, "--json", "--jobs", "3"
    )
    assert code == 0, stderr
    # Two scopes, so two at once on OceanBase; SQLite writes one at a time whatever --jobs.
    assert at_once == ([2] if backend == "oceanbase" else [])
    report = json.loads(stdout)
    assert (report["scopes"], report["imported"], report["identical"]) == (2, 2, 0)
    assert report["counts"]["source"] == report["counts"]["target"]
    assert report["verified"] == {"counts": True, "records": 2, "packs": 12, "pack_mismatches": 0}
    assert report["counts"]["target"]["flush_runs"] == 2  # one per scope, verified too
    assert not list(home.glob(".powercontext-migrate-*"))  # the temporary export is gone

    source = Runtime.open(Settings.load(env={}, home=home))
    target = Runtime.open(Settings.load(env={}, home=tmp_path / "t", database_url=url))
    try:
        assert packs(target, SHOP) == packs(source, SHOP)
        for scope in (SHOP, LIB):  # the Activity page counts the same flushes
            assert activity(target, scope) == activity(source, scope)
            assert sum(day.get("flush_runs", 0) for day in activity(source, scope)) == 1
        # Migrating again is safe: everything is there, identically.
        code, stdout, stderr = run(capsys, "migrate", "--data-dir", str(home), "--to", url)
        assert code == 0, stderr
        assert stdout.startswith("migrated 0 of 2 scope(s)") and "(2 were already there" in stdout
        assert "verified: counts match; 2 scope(s) with identical records" in stdout
        # A target whose copy of a scope has moved on refuses the migration.
        target.memory.remember(RememberMemoryRequest(scope_id=LIB, kind="fact", text="new"))
        code, _, stderr = run(capsys, "migrate", "--data-dir", str(home), "--to", url, "--json")
        assert code == 1
        assert json.loads(stderr.splitlines()[-1])["error"]["code"] == "import_conflict"
    finally:
        source.close()
        target.close()


def test_migrate_never_shows_the_password(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = "mysql+pymysql://root:hunter2@127.0.0.1:1/none?charset=utf8mb4"
    code, stdout, stderr = run(capsys, "migrate", "--data-dir", str(home), "--to", url)
    assert code == 1
    assert "hunter2" not in stdout + stderr
    assert "target database" in stderr
    code, _, stderr = run(
        capsys, "migrate", "--data-dir", str(home), "--to", f"sqlite:///{home / 'powercontext.db'}"
    )
    assert code == 1 and "is the database being migrated" in stderr


def activity(rt: Runtime, scope: str) -> list[dict[str, int]]:
    today = now_ms() // DAY_MS
    days = ActivityStore(rt.db).activity(scope, today - 13, 14, 0).days
    return [dict(days[day]) for day in sorted(days)]


def _progress_total(path: Path) -> int:
    counts = json.loads(path.read_bytes().split(b"\n", 1)[0])["counts"]
    return sum(counts[key] for key in PROGRESS_KEYS)


def test_export_and_migrate_print_progress_on_stderr(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Not a terminal (capsys): one plain line at every tenth, on stderr; stdout is the
    result alone."""
    out = tmp_path / "scopes.jsonl"
    code, stdout, stderr = run(capsys, "export", "--data-dir", str(home), "-o", str(out))
    assert code == 0, stderr
    total = _progress_total(out)
    assert total > 0
    assert stderr.splitlines() == [
        f"exported 0/{total} records",
        f"exported {total}/{total} records",
    ]
    assert stdout.startswith("exported 2 scope(s) to ") and "records" not in stdout

    url = f"sqlite:///{tmp_path / 'target.db'}"
    code, stdout, stderr = run(capsys, "migrate", "--data-dir", str(home), "--to", url)
    assert code == 0, stderr
    lines = stderr.splitlines()
    finals = [
        f"exported {total}/{total} records",
        f"checked {total}/{total} records",
        f"imported {total}/{total} records",
        "verified 2/2 scopes",
    ]
    assert lines[0] == f"exported 0/{total} records"
    assert all(line in lines for line in finals), lines
    assert [lines.index(line) for line in finals] == sorted(lines.index(line) for line in finals)
    assert lines[-1] == "verified 2/2 scopes"
    assert all(
        line.split(" ")[0] in {"exported", "checked", "imported", "verified"} for line in lines
    )
    assert stdout.startswith("migrated 2 of 2 scope(s)") and "records" not in stdout.split("\n")[0]


def _lose_flush_history(conn: Connection) -> None:
    conn.execute(delete(flush_runs).where(flush_runs.c.scope_id == LIB))


def _change_texts(conn: Connection) -> None:
    v = memory_versions
    conn.execute(
        update(v)
        .where(v.c.scope_id == SHOP, v.c.valid_to.is_(None))
        .values(text=v.c.text + " (tampered)")
    )


#: Stored texts of the realistic scopes: none may reach an error or a log line.
CONTENT = ("listens", "billing", "persistence", "数据库", "chatter", "tampered", "acme", "lint")


@pytest.mark.parametrize(
    ("tamper", "scope_index", "packs_differ"),
    [(_lose_flush_history, 0, False), (_change_texts, 1, True)],
    ids=["flush history lost", "texts changed"],
)
def test_migrate_reports_a_copy_that_does_not_verify(
    tamper: Callable[[Connection], None],
    scope_index: int,
    packs_differ: bool,
    home: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The target changes between the copy and the verification (as a damaged copy would):
    the real verification finds it, and says so without quoting any stored content."""
    real_write = migrate_module.write_plan

    def write_then_tamper(db: Any, *args: Any, **kwargs: Any) -> None:
        real_write(db, *args, **kwargs)
        db.write(tamper)

    monkeypatch.setattr(migrate_module, "write_plan", write_then_tamper)
    caplog.set_level(logging.DEBUG)
    url = f"sqlite:///{tmp_path / 'target.db'}"
    code, stdout, stderr = run(capsys, "migrate", "--data-dir", str(home), "--to", url, "--json")
    assert code == 1 and stdout == ""
    error = json.loads(stderr.splitlines()[-1])["error"]
    assert error["code"] == "migrate_verify_failed"
    assert error["message"].startswith("the target does not match the source after the import")
    assert [s["scope_index"] for s in error["details"]["scopes"]] == [scope_index]
    assert (error["details"]["pack_mismatches"] > 0) is packs_differ
    assert "1 scope(s) with other records" in error["message"]

    code, _, human = run(capsys, "migrate", "--data-dir", str(home), "--to", url)
    # Run again, the copy that failed is not taken for a good one: its scope conflicts.
    assert code == 1 and "(import_conflict" in human
    assert "Traceback" not in stderr + human
    logged = [
        " ".join([record.getMessage(), *map(str, record.__dict__.values())])
        for record in caplog.records
    ]
    for text in CONTENT:
        assert text not in stderr and text not in human
        assert not [line for line in logged if text in line], text
    assert not list(home.glob(".powercontext-migrate-*"))  # the temporary export is gone


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_is_a_bar_on_a_terminal_and_tenths_elsewhere() -> None:
    tty = _Terminal()
    bar = Progress(tty, quiet=False, label="importing", done_label="imported", unit="records")
    for done in (0, 5_000, 10_000):
        bar(done, 10_000)
    bar(10_000, 10_000)  # a repeated final call draws nothing more
    frames = tty.getvalue().split("\r")[1:]
    assert frames[0] == "importing [------------------------------] 0/10,000 records"
    assert frames[1].startswith("importing [###############---------------] 5,000/10,000")
    assert frames[-1] == "importing [##############################] 10,000/10,000 records\n"
    assert len(frames) == 3

    plain = io.StringIO()
    lines = Progress(plain, quiet=False, label="importing", done_label="imported", unit="records")
    for done in range(0, 10_001, 500):
        lines(done, 10_000)
    assert plain.getvalue().splitlines() == [
        f"imported {n}/10000 records" for n in range(0, 10_001, 1000)
    ]
    quiet = io.StringIO()
    Progress(quiet, quiet=True)(1, 2)
    assert quiet.getvalue() == ""
