"""``powercontext export|import|backup|migrate``: move a database's data (docs/portability.md).

They work on the configured database directly, like ``token`` and ``reindex``: no daemon is
needed, and a running one may keep serving (export and backup read one snapshot; import
writes one transaction per scope). Progress goes to stderr (a bar on a TTY); results to
stdout, or with ``--json`` as one JSON document.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from ..errors import ConflictError, NotFoundError, UnavailableError
from ..settings import Settings
from .output import UsageError, compaction_pending, emit, visible
from .progress import Progress

if TYPE_CHECKING:
    from ..composition import Runtime
    from ..store.database import Database

_STDIO = "-"


def add_parsers(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:  # type: ignore[type-arg]
    db_args = argparse.ArgumentParser(add_help=False)
    db_args.add_argument("--data-dir", dest="home", help="data directory (POWERCONTEXT_HOME)")
    db_args.add_argument("--database-url", help="override POWERCONTEXT_DATABASE_URL")

    p = sub.add_parser(
        "export",
        help="write scopes' data as JSON Lines (every family and version; no tokens)",
        description="Write every record of the chosen scopes (default: all) as one "
        "powercontext.export file: Memory entries with every version, Experience, Skills, "
        "candidates, Handoffs and their delivery, Context References, captured sources "
        "and the flush history. "
        "Tokens and derived indexes are not exported. The same data always gives the same "
        "bytes.",
        parents=[common, db_args],
    )
    p.add_argument(
        "--scope",
        action="append",
        dest="scopes",
        metavar="SCOPE",
        help="export only this scope (repeatable; default: every scope)",
    )
    p.add_argument(
        "--output", "-o", metavar="FILE", help="write to FILE (created 0600) instead of stdout"
    )
    p.add_argument("--force", action="store_true", help="replace an existing --output FILE")
    p.set_defaults(handler=_export)

    p = sub.add_parser(
        "import",
        help="load an export file (ids, revisions and citations kept)",
        description="Load a powercontext.export file. Scopes the database does not have are "
        "imported whole, one transaction each; scopes it has with exactly the same records "
        "are skipped (so importing again is safe); a scope it has with anything else refuses "
        "the whole import before anything is written. The search index is built for the "
        "imported scopes; vectors (POWERCONTEXT_EMBEDDINGS) are computed by the embedding "
        "worker afterwards.",
        parents=[common, db_args],
    )
    p.add_argument("file", metavar="FILE", help="the export file, or - for standard input")
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="check the file and the database, write nothing",
    )
    _add_jobs(p)
    p.set_defaults(handler=_import)

    p = sub.add_parser(
        "backup",
        help="consistent online copy of the SQLite database",
        description="Copy the SQLite database to PATH with SQLite's online backup API: "
        "consistent while the daemon keeps writing, checked (integrity_check) before it is "
        "moved into place, created 0600. On OceanBase use the database's own backup tools.",
        parents=[common, db_args],
    )
    p.add_argument("path", metavar="PATH", help="the backup file to write")
    p.add_argument("--force", action="store_true", help="replace an existing PATH")
    p.set_defaults(handler=_backup)

    p = sub.add_parser(
        "migrate",
        help="copy this database into another (e.g. SQLite to OceanBase) and verify it",
        description="Export the configured database (or --scope), import it into the --to "
        "database, then verify: counts, every scope's records exported again, and prepared "
        "packs for a sample of scopes and queries, byte for byte. Tokens are not copied: "
        "create them on the new database (local tokens are issued when the daemon starts).",
        parents=[common, db_args],
    )
    p.add_argument(
        "--to",
        required=True,
        metavar="URL",
        help="the target database: mysql+pymysql://user:pass@host:port/db?charset=utf8mb4 "
        "(OceanBase/seekdb) or sqlite:///path",
    )
    p.add_argument(
        "--scope", action="append", dest="scopes", metavar="SCOPE", help="only this scope"
    )
    p.add_argument(
        "--sample-scopes",
        type=int,
        default=5,
        metavar="N",
        help="scopes whose prepared packs are compared (the largest; default 5)",
    )
    p.add_argument(
        "--sample-queries",
        type=int,
        default=5,
        metavar="N",
        help="queries per sampled scope, made from its entries (default 5, plus one unrelated)",
    )
    _add_jobs(p)
    p.set_defaults(handler=_migrate)


#: More scopes at once than the write pool's steady connections would only queue.
MAX_JOBS = 8


def _add_jobs(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--jobs",
        type=int,
        metavar="N",
        help=f"OceanBase: scopes written at once, each in its own transaction (1-{MAX_JOBS}, "
        "default 2); SQLite has one writer at a time and always writes one",
    )


def _jobs(args: argparse.Namespace) -> int | None:
    if args.jobs is not None and not 1 <= args.jobs <= MAX_JOBS:
        raise UsageError(f"--jobs must be 1 to {MAX_JOBS}", details={"argument": "--jobs"})
    return args.jobs


# -- opening the database ------------------------------------------------------------------------


def _settings(args: argparse.Namespace, database_url: str | None = None) -> Settings:
    settings = Settings.load(home=args.home, database_url=database_url or args.database_url)
    # Moving data never needs the semantic channel (vectors are derived and rebuilt later),
    # and loading a model for it would only slow the command down.
    return settings.with_changes(embeddings="off")


def _runtime(settings: Settings) -> Runtime:
    from ..composition import Runtime  # the database stack loads only for these verbs

    return Runtime.open(settings)


def _reader(settings: Settings) -> Database:
    """The database, opened for reading only: an export must work on a database that cannot
    be written (a full disk, a read-only file), which ``Runtime.open`` refuses."""
    from ..store.database import Database

    if settings.sqlite_file is not None and not settings.sqlite_file.is_file():
        raise NotFoundError(f"no database at {settings.sqlite_file}", code="database_not_found")
    db = Database(settings.database_url)
    try:
        db.check_server()
    except BaseException:
        db.dispose()
        raise
    return db


def _progress(args: argparse.Namespace, label: str, done_label: str) -> Progress:
    return Progress(sys.stderr, quiet=args.json, label=label, done_label=done_label, unit="records")


# -- export ----------------------------------------------------------------------------------------


@contextlib.contextmanager
def _output(path: str | None, force: bool) -> Iterator[IO[bytes]]:
    """Standard output, or a private file written under a temporary name and moved into place
    when complete (a failed export never leaves a partial file, nor replaces an old one)."""
    if path is None or path == _STDIO:
        yield sys.stdout.buffer
        sys.stdout.flush()
        return
    target = Path(path).expanduser()
    if target.is_dir():
        raise UsageError(f"--output {path} is a directory", details={"argument": "--output"})
    if target.exists() and not force:
        raise ConflictError(
            f"{path} already exists; pass --force to replace it", code="output_exists"
        )
    folder = target.parent
    if not folder.is_dir():
        raise UsageError(f"--output: no folder {folder}", details={"argument": "--output"})
    fd, partial = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".partial", dir=folder)
    try:
        with os.fdopen(fd, "wb") as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(partial, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(partial)
        raise


def _counts_text(counts: dict[str, int]) -> str:
    return (
        f"{counts['memory_entries']:,} memory entries ({counts['memory_versions']:,} versions), "
        f"{counts['artifact_revisions']:,} artifact revisions "
        f"({counts['artifact_heads']:,} artifacts), {counts['candidates']:,} candidates, "
        f"{counts['sources']:,} captured sources"
    )


def _export(args: argparse.Namespace) -> int:
    from ..portability.exporter import export

    to_stdout = args.output in (None, _STDIO)
    if to_stdout and sys.stdout.isatty():
        raise UsageError(
            "export writes JSON Lines: redirect it to a file or use --output FILE",
            details={"argument": "--output"},
        )
    db = _reader(_settings(args))
    try:
        with _output(args.output, args.force) as handle:
            summary = export(db, handle, args.scopes, _progress(args, "exporting", "exported"))
    finally:
        db.dispose()
    result = {
        "output": None if to_stdout else str(Path(args.output)),
        "scopes": len(summary.scopes),
        "counts": summary.counts,
        "bytes": summary.bytes,
    }
    human = (
        f"exported {len(summary.scopes):,} scope(s) to {visible(str(args.output))}: "
        f"{_counts_text(summary.counts)} ({summary.bytes:,} bytes)"
    )
    if to_stdout:
        # Standard output is the export itself: the summary goes to stderr, or nowhere.
        if not args.json:
            sys.stderr.write(human.replace(f" to {visible(str(args.output))}", "") + "\n")
        return 0
    emit(result, as_json=args.json, human=human)
    return 0


# -- import ----------------------------------------------------------------------------------------


@contextlib.contextmanager
def _input(path: str) -> Iterator[IO[bytes]]:
    """The file, or standard input spooled to a private temporary file (the import reads it
    twice: once to check everything, once to write)."""
    if path == _STDIO:
        with tempfile.TemporaryFile(prefix="powercontext-import-") as spool:
            while chunk := sys.stdin.buffer.read(1 << 20):
                spool.write(chunk)
            spool.seek(0)
            yield spool
        return
    try:
        handle = open(path, "rb")  # noqa: SIM115 (closed below)
    except FileNotFoundError:
        raise UsageError(f"{path}: no such file", details={"argument": "FILE"}) from None
    except IsADirectoryError:
        raise UsageError(f"{path} is a directory", details={"argument": "FILE"}) from None
    except OSError as exc:
        raise UsageError(
            f"{path}: cannot read it ({exc.strerror or type(exc).__name__})",
            details={"argument": "FILE"},
        ) from None
    with handle:
        yield handle


def _import(args: argparse.Namespace) -> int:
    from ..portability.importer import import_file
    from ..search.analyzer import document_terms

    jobs = _jobs(args)
    with _input(args.file) as handle:
        runtime = _runtime(_settings(args))
        backend = runtime.backend
        try:
            summary = import_file(
                runtime.db,
                handle,
                document_terms,
                dry_run=args.dry_run,
                check_progress=_progress(args, "checking", "checked"),
                write_progress=_progress(args, "importing", "imported"),
                jobs=jobs,
            )
        finally:
            runtime.close()
    verb = "would import" if summary.dry_run else "imported"
    human = f"{verb} {summary.imported:,} of {summary.scopes:,} scope(s): " + _counts_text(
        summary.counts
    )
    if summary.identical:
        human += f"; {summary.identical:,} already here with the same records (skipped)"
    if not summary.dry_run and summary.imported:
        human += (
            "\nthe search index was built for them; with POWERCONTEXT_EMBEDDINGS on, the "
            "daemon's embedding worker computes their vectors (or run `powercontext reindex "
            "--embeddings`)"
        ) + compaction_pending(backend)
    emit(
        {
            "dry_run": summary.dry_run,
            "scopes": summary.scopes,
            "imported": summary.imported,
            "identical": summary.identical,
            "counts": summary.counts,
        },
        as_json=args.json,
        human=human,
    )
    return 0


# -- backup ----------------------------------------------------------------------------------------


def _backup(args: argparse.Namespace) -> int:
    from ..portability.backup import backup_sqlite, unsupported_on_oceanbase

    settings = _settings(args)
    if settings.database_url.startswith("mysql"):
        raise unsupported_on_oceanbase()
    if settings.sqlite_file is None:
        raise UsageError("an in-memory database has nothing to back up")
    result = backup_sqlite(settings.sqlite_file, Path(args.path), force=args.force)
    emit(
        {
            "path": str(result.path),
            "bytes": result.bytes,
            "pages": result.pages,
            "integrity_check": "ok",
            "scopes_with_memory": result.scopes,
            "memory_entries": result.memory_entries,
        },
        as_json=args.json,
        human=(
            f"backed up {visible(str(settings.sqlite_file))} to {visible(str(result.path))} "
            f"({result.bytes:,} bytes; "
            f"integrity check ok; {result.scopes:,} scope(s) with memory, "
            f"{result.memory_entries:,} memory entries)"
        ),
    )
    return 0


# -- migrate ---------------------------------------------------------------------------------------


def _migrate(args: argparse.Namespace) -> int:
    from sqlalchemy.engine import make_url

    from ..portability.migrate import migrate

    if args.sample_scopes < 0 or args.sample_queries < 0:
        raise UsageError("--sample-scopes and --sample-queries must be 0 or more")
    jobs = _jobs(args)
    source_settings = _settings(args)
    target_settings = _settings(args, database_url=args.to)
    shown = make_url(args.to).render_as_string(hide_password=True)
    labels = {
        "exporting": ("exporting", "exported"),
        "checking": ("checking ", "checked"),
        "importing": ("importing", "imported"),
        "verifying": ("verifying", "verified"),
    }

    def progress(step: str) -> Progress:
        label, done = labels[step]
        unit = "scopes" if step == "verifying" else "records"
        return Progress(sys.stderr, quiet=args.json, label=label, done_label=done, unit=unit)

    source = _runtime(source_settings)
    try:
        try:
            target = _runtime(target_settings)
        except UnavailableError as exc:
            # The store's message names the kind of failure only; say which database it is.
            raise UnavailableError(
                f"the target database (--to) cannot be used: {exc.message}", code=exc.code
            ) from None
        target_backend = target.backend
        try:
            report = migrate(
                source,
                target,
                scopes=args.scopes,
                sample_scopes=args.sample_scopes,
                sample_queries=args.sample_queries,
                progress=progress,
                work_dir=source_settings.home,
                jobs=jobs,
            )
        finally:
            target.close()
    finally:
        source.close()
    seconds = report.seconds
    result: dict[str, Any] = {"to": shown, **report.as_json()}
    again = f" ({report.identical:,} were already there, identical)" if report.identical else ""
    human = "\n".join(
        [
            f"migrated {report.imported:,} of {report.scopes:,} scope(s) to {visible(shown)}"
            + again,
            f"  {_counts_text(report.counts)}",
            f"  export {seconds['export']:.1f} s, check {seconds['check']:.1f} s, "
            f"import {seconds['import']:.1f} s, verify {seconds['verify']:.1f} s",
            f"verified: counts match; {report.records_verified:,} scope(s) with identical "
            f"records; {report.packs_compared:,} sampled packs identical",
            f"next: powercontext serve --database-url '{visible(shown)}'  (tokens were not "
            "copied: "
            "create them there with `powercontext token create`)",
        ]
    )
    if report.imported:
        human += compaction_pending(target_backend)
    emit(result, as_json=args.json, human=human)
    return 0
