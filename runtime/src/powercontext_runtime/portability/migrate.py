"""``powercontext migrate --to URL``: export the current database, import it into another,
and prove the copy is the same.

The export goes to a private temporary file in the data dir (one read snapshot of the
source), the import is the ordinary two-pass import (so a target that already holds some of
the scopes identically — a migration run again — skips them, and one that holds any of them
otherwise is refused before anything is written), and the verification has three parts:

* **counts** per record family, source snapshot against target;
* **records**: every migrated scope exported again from the target gives exactly the
  canonical records of the file (the same check that makes a repeated import a no-op);
* **packs**: for a sample of scopes (the largest first) and queries made from their own
  entries, ``prepare_context`` on the target returns byte for byte the pack the source
  returns. Both sides run the lexical channel: vectors are rebuilt on the target later.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import func, select

from ..composition import Runtime
from ..contract.context import PrepareContextRequest
from ..errors import InvalidRequestError, PowerContextError
from ..search.analyzer import document_terms
from ..services.auth import Principal
from ..store.schema import memory_versions
from .exporter import count_scopes, export
from .importer import check_against, mismatched_sections, plan_import, summarize, write_plan
from .records import COUNT_KEYS, zero_counts

__all__ = ["MigrationReport", "migrate"]

ProgressFactory = Callable[[str], Callable[[int, int], None] | None]

#: A query no entry should match: its pack must be empty on both sides.
UNRELATED_QUERY = "weather garden bicycle holiday umbrella"


class VerificationFailedError(PowerContextError):
    status = 500
    default_code = "migrate_verify_failed"


@dataclass(slots=True)
class MigrationReport:
    scopes: int = 0
    imported: int = 0
    identical: int = 0
    counts: dict[str, int] = field(default_factory=zero_counts)  # of the whole source
    target_counts: dict[str, int] = field(default_factory=zero_counts)
    seconds: dict[str, float] = field(default_factory=dict)
    export_bytes: int = 0
    records_verified: int = 0  # scopes whose records match exactly
    packs_compared: int = 0
    pack_mismatches: int = 0

    def as_json(self) -> dict[str, Any]:
        return {
            "scopes": self.scopes,
            "imported": self.imported,
            "identical": self.identical,
            "counts": {"source": self.counts, "target": self.target_counts},
            "export_bytes": self.export_bytes,
            "seconds": {k: round(v, 2) for k, v in self.seconds.items()},
            "verified": {
                "counts": self.counts == self.target_counts,
                "records": self.records_verified,
                "packs": self.packs_compared,
                "pack_mismatches": self.pack_mismatches,
            },
        }


def migrate(
    source: Runtime,
    target: Runtime,
    *,
    scopes: list[str] | None = None,
    sample_scopes: int = 5,
    sample_queries: int = 5,
    progress: ProgressFactory = lambda _: None,
    work_dir: Path | None = None,
    jobs: int | None = None,
) -> MigrationReport:
    """Copy ``scopes`` (default all) from ``source`` into ``target`` and verify the copy."""
    if _same_database(source, target):
        raise InvalidRequestError("the target is the database being migrated")
    report = MigrationReport()
    with tempfile.TemporaryFile(dir=work_dir, prefix=".powercontext-migrate-") as handle:
        started = time.perf_counter()
        exported = export(source.db, handle, scopes, progress("exporting"))
        report.export_bytes = exported.bytes
        report.seconds["export"] = time.perf_counter() - started
        handle.flush()

        started = time.perf_counter()
        plan = plan_import(handle, progress("checking"))
        check_against(target.db, handle, plan)
        report.seconds["check"] = time.perf_counter() - started
        summary = summarize(plan)
        report.scopes, report.imported, report.identical = (
            summary.scopes,
            summary.imported,
            summary.identical,
        )
        report.counts = dict(plan.header.counts)

        started = time.perf_counter()
        write_plan(target.db, handle, plan, document_terms, progress("importing"), jobs=jobs)
        report.seconds["import"] = time.perf_counter() - started

        started = time.perf_counter()
        with target.db.read() as conn:
            stored = count_scopes(conn, plan.header.scopes)
        totals = zero_counts()
        for counts in stored.values():
            for key in COUNT_KEYS:
                totals[key] += counts[key]
        report.target_counts = totals
        wrong = mismatched_sections(target.db, handle, plan, progress("verifying"))
        report.records_verified = len(plan.sections) - len(wrong)
        biggest = sorted(
            plan.sections, key=lambda s: (-s.counts["memory_entries"], s.scope_id.encode())
        )[:sample_scopes]
        for section in biggest:
            for query in _sample_queries(source, section.scope_id, sample_queries):
                report.packs_compared += 1
                if _pack(source, section.scope_id, query) != _pack(target, section.scope_id, query):
                    report.pack_mismatches += 1
        report.seconds["verify"] = time.perf_counter() - started
    if wrong or report.pack_mismatches or report.counts != report.target_counts:
        raise VerificationFailedError(
            "the target does not match the source after the import: "
            f"{len(wrong)} scope(s) with other records, "
            f"{report.pack_mismatches} of {report.packs_compared} sampled packs differ",
            details={
                "scopes": [{"scope_index": s.index, "line": s.line} for s in wrong[:10]],
                "pack_mismatches": report.pack_mismatches,
            },
        )
    return report


def _same_database(a: Runtime, b: Runtime) -> bool:
    files = [rt.settings.sqlite_file for rt in (a, b)]
    if files[0] is not None and files[1] is not None:
        return files[0].resolve() == files[1].resolve()
    render = [rt.db.url.render_as_string(hide_password=False) for rt in (a, b)]
    return render[0] == render[1]


def _sample_queries(rt: Runtime, scope_id: str, count: int) -> list[str]:
    """Prompts made of the scope's own current entries, spread over it, and one unrelated."""
    v = memory_versions
    current = (
        select(v.c.text)
        .where(v.c.scope_id == scope_id, v.c.valid_to.is_(None), v.c.state == "active")
        .order_by(v.c.id)
    )
    queries = []
    with rt.db.read() as conn:
        total = conn.execute(
            select(func.count())
            .select_from(v)
            .where(v.c.scope_id == scope_id, v.c.valid_to.is_(None), v.c.state == "active")
        ).scalar_one()
        for i in range(min(count, total)):
            text = conn.execute(current.offset(i * total // count).limit(1)).scalar_one()
            queries.append(" ".join(text.split()[:12]))
    return [*queries, UNRELATED_QUERY]


def _pack(rt: Runtime, scope_id: str, query: str) -> dict[str, Any]:
    request = PrepareContextRequest(scope_id=scope_id, query=query)
    return rt.context.prepare(request, Principal.unrestricted()).to_wire()
