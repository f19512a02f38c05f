"""Full-text search with many scopes in one OceanBase database: does its cost follow the scope?

A team database holds one scope per repository in one full-text table per family (one
FULLTEXT index, space parser). Issue 32 measured, at 200 scopes / 200k entries, a candidate
query whose cost followed the whole table: a 73-entry scope 411 ms p50, the 40k scope 15 ms
(docs/decisions/oceanbase-fulltext.md: the runtime now indexes scope-prefixed tokens). This
bench loads a skewed multi-scope corpus through the runtime's own import and measures, per
scope size, the runtime's candidate query, its search and its prepare, and the plan the
server chose; with ``--legacy`` also the pre-#32 statement (``scope_id = ? AND MATCH(plain
terms)``) on a copy of the index in the old layout, in the same run, on the same prompts.

Method:

1. Layout (``_scopes.py``, shared with ``team_scale.py``; seeded, ``--scopes``, ``--large``,
   ``--small``, ``--skew``): a few large scopes (default 10k, 15k, 20k entries) and the rest
   small, ``min · (max/min)^(x^skew)`` for x evenly spread over 0…1 (default 50…5,000 with
   skew 5: half of them under 60 entries, a tenth over 1,000), ≈ 106k entries over 200
   scopes by default. Texts come from the benches' seeded generator
   (``_common.MemoryTextGenerator``, one seed per scope: English, Chinese, identifiers and
   paths over one shared vocabulary, so every common term is in every scope, the hard case
   for a scope filter applied after the index).
2. Load: each scope is written as a ``powercontext.export`` file (``_common``'s writer, as
   ``powercontext import`` reads) and imported in this process with the runtime's own
   ``import_file`` (one transaction per scope, the runtime's bulk full-text insert), the
   scopes interleaved by size so large and small ones share the table's history; then the
   runtime's ``compact_storage`` (a major compaction, what ``import`` tells an OceanBase user
   to run). A database given by ``--database-url`` keeps what was loaded: ``--reuse`` then
   measures what an earlier run of the same layout left (checked by each scope's head
   revision), after opening the runtime on it, whose start-up rebuilds a search index of an
   older layout (the time the opening took is reported).
3. Measured scopes: for each of ``--measure`` target sizes the small scope closest to it, and
   every large scope. Prompts per scope (``prepare_latency``'s seeded generator over the
   scope's own first 1,000 entries): ``--queries`` short (3–8 words; words of an entry,
   random vocabulary, unrelated words) and as many 2,000-character prompts, a few more
   untimed first. For each prompt, in this order: the runtime's ``MemoryService.search``
   (the whole search: head, term frequencies, candidates, ranking, rows), the candidate
   statement it sent (captured at the driver, re-executed alone: only searches that reached
   the candidate query count), and ``ContextService.prepare`` (the prompt path: Memory and
   Experience searches in one snapshot, the pack built), each timed with
   ``time.perf_counter``. The server's plan cache is left as the runtime leaves it: every
   scope runs the plan cached for the statement text (OceanBase parameterises literals, so
   all scopes share one plan), which is what a team's daemons get. ``EXPLAIN`` of the
   captured statement is recorded per scope.
4. ``--legacy``: a table ``bench_legacy_search`` in the pre-#32 layout (plain terms, FULLTEXT
   on them, scope index) filled from the runtime's index once the runtime's measurements are
   done (loading it keeps the server busy for a while) and compacted like it (unless
   ``--no-compact``), and the pre-#32 statement timed on
   it with the terms of the scope's first ``LEGACY_SAMPLE`` short and long prompts' candidate
   statements: as the server plans it (the plan cached for the statement text, compiled for
   whichever scope ran first; reported from the plan cache views), with the scope index
   forced, with the FULLTEXT index forced; and whether it returned exactly the runtime's rows.
   The table is dropped at the end.

Run it on a server of its own: without ``--database-url`` a seekdb is started
(``tools/seekdb.py``) in a temporary directory and removed at the end.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import re
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from _common import (
    BenchError,
    command_line,
    log,
    machine_facts,
    markdown_table,
    summarize_ms,
    write_memory_export,
)
from _scopes import (
    Scope,
    add_layout_arguments,
    interleaved,
    layout,
    measured_scopes,
    resolve_layout,
    run_and_publish,
    scope_items,
)
from prepare_latency import PromptGenerator

SECTION = "fulltext-scopes"
SCOPE_PREFIX = "bench:fulltext/"
WARMUP = 3
VOCAB_ENTRIES = 1_000
DEFAULTS: dict[str, Any] = {
    "scopes": 200,
    "large": "10000,15000,20000",
    "small": "50,5000",
    "skew": 5.0,
    "measure": "50,250,1000,5000",
    "queries": 20,
}
SMOKE: dict[str, Any] = {
    "scopes": 12,
    "large": "1500",
    "small": "20,300",
    "skew": 3.0,
    "measure": "20,300",
    "queries": 3,
}
LEGACY_TABLE = "bench_legacy_search"
_OPERATOR_ROW = re.compile(r"^\|\s*(\d+)\s*\|([^|]*)\|([^|]*)\|\s*([^|]*?)\s*\|")
LONG_STATEMENT_US = 3600 * 1_000_000


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--database-url",
        help="SQLAlchemy URL of an OceanBase database of its own (default: start a seekdb)",
    )
    add_layout_arguments(p, DEFAULTS)
    p.add_argument("--queries", type=int, help=f"timed prompts per kind ({DEFAULTS['queries']})")
    p.add_argument("--seed", type=int, default=32, help="text and prompt seed (default 32)")
    p.add_argument(
        "--legacy",
        action="store_true",
        help="also time the pre-#32 statement on a copy of the index in the old layout",
    )
    p.add_argument(
        "--legacy-table",
        default=LEGACY_TABLE,
        help=f"name of the pre-#32 copy (default {LEGACY_TABLE}; it is dropped and recreated)",
    )
    p.add_argument("--no-compact", action="store_true", help="skip the major compaction")
    p.add_argument(
        "--reuse",
        action="store_true",
        help="measure what an earlier run of this layout left in --database-url",
    )
    p.add_argument("--memory-budget", default="2G", help="seekdb memory_budget (started here)")
    p.add_argument("--smoke", action="store_true", help="tiny run (a CI check of the bench)")
    p.add_argument("--json", action="store_true", help="print the results as JSON on stdout")
    p.add_argument(
        "--write-results", action="store_true", help="rewrite this section of bench/RESULTS.md"
    )
    args = p.parse_args(argv)
    preset = SMOKE if args.smoke else DEFAULTS
    resolve_layout(p, args, preset)
    if args.queries is None:
        args.queries = preset["queries"]
    if args.queries < 1:
        p.error("--queries must be positive")
    if args.smoke and args.write_results:
        p.error("--write-results with --smoke would overwrite real numbers with smoke numbers")
    if args.database_url and not args.database_url.startswith("mysql"):
        p.error("--database-url must be an OceanBase (mysql+pymysql://…) URL")
    return args


# -- load -------------------------------------------------------------------------------------


def load(runtime: Any, scopes: Sequence[Scope], seed: int) -> dict[str, Any]:
    """Import every scope with the runtime's ``import_file`` (one export file per scope), in
    an order that interleaves sizes (largest, smallest, next largest, …)."""
    from powercontext_runtime.portability.importer import import_file
    from powercontext_runtime.search.analyzer import document_terms

    order = interleaved(scopes)
    started, last, done = time.perf_counter(), time.perf_counter(), 0
    total = sum(s.size for s in scopes)
    for scope in order:
        buffer = io.BytesIO()
        write_memory_export(buffer, scope.scope_id, scope_items(seed, scope), seed=seed)
        buffer.seek(0)
        import_file(runtime.db, buffer, document_terms)
        done += scope.size
        if time.perf_counter() - last > 30:
            last = time.perf_counter()
            log(f"  imported {done:,}/{total:,} entries ({done / (last - started):.0f}/s)")
    seconds = time.perf_counter() - started
    return {"seconds": round(seconds, 1), "entries_per_second": round(total / seconds, 1)}


def stored_heads(runtime: Any) -> dict[str, int]:
    from sqlalchemy import text

    with runtime.db.read() as conn:
        rows = conn.execute(
            text("SELECT scope_id, revision FROM memory_heads WHERE scope_id LIKE :p"),
            {"p": SCOPE_PREFIX + "%"},
        ).all()
    return {str(scope): int(revision) for scope, revision in rows}


# -- measuring --------------------------------------------------------------------------------


@contextlib.contextmanager
def candidate_statements(runtime: Any) -> Iterator[list[tuple[str, Any]]]:
    """The Memory candidate statements (``MATCH … AGAINST``) the runtime sends meanwhile, as
    the driver gets them, on any of its pools."""
    from sqlalchemy import event

    db = runtime.db
    engines = {db.engine, db._read_engine, db._prompt_engine}
    seen: list[tuple[str, Any]] = []

    def before(_conn: Any, _cursor: Any, statement: str, parameters: Any, *_: Any) -> None:
        if "AGAINST" in statement and "memory_" in statement:
            seen.append((statement, parameters))

    for engine in engines:
        event.listen(engine, "before_cursor_execute", before)
    try:
        yield seen
    finally:
        for engine in engines:
            event.remove(engine, "before_cursor_execute", before)


def explain(conn: Any, statement: str, parameters: Any) -> list[str]:
    """The plan's operators (name and object read), first to last, from ``EXPLAIN``."""
    plan = [str(row[0]) for row in conn.exec_driver_sql("EXPLAIN " + statement, parameters)]
    operators = []
    for line in "\n".join(plan).splitlines():
        match = _OPERATOR_ROW.match(line)
        if match:
            name = match.group(2).strip().lstrip("└─├│ ").strip()
            operators.append(f"{name} {match.group(3).strip()}".strip())
    return operators


def timed(call: Callable[[], Any]) -> tuple[float, Any]:
    started = time.perf_counter()
    result = call()
    return time.perf_counter() - started, result


def measure_scope(
    runtime: Any, reader: Any, scope: Scope, seed: int, queries: int
) -> dict[str, Any]:
    """One scope: the runtime's search, its candidate statement alone and prepare, per prompt."""
    from powercontext_runtime.contract.context import PrepareContextRequest
    from powercontext_runtime.contract.memory import SearchMemoryRequest
    from powercontext_runtime.errors import UnavailableError
    from powercontext_runtime.services.auth import Principal

    generator = PromptGenerator(seed, scope_items(seed, scope)[:VOCAB_ENTRIES])
    # Drawn in a fixed order, so every run and layout answers the same prompts.
    prompts = {
        kind: [make() for _ in range(queries + WARMUP)]
        for kind, make in (("short", generator.short), ("long", generator.long))
    }
    everyone = Principal.unrestricted()
    result: dict[str, Any] = {"scope": scope.scope_id, "rows": scope.size}
    statements: dict[str, list[tuple[str, Any]]] = {kind: [] for kind in prompts}
    for kind, texts in prompts.items():
        search_s, candidates_s, prepare_s, ready, hits, errors = [], [], [], 0, 0, 0
        for i, prompt in enumerate(texts):
            search = SearchMemoryRequest(scope_id=scope.scope_id, query=prompt.text)
            request = PrepareContextRequest(scope_id=scope.scope_id, query=prompt.text)
            try:
                with candidate_statements(runtime) as seen:
                    took, found = timed(lambda search=search: runtime.memory.search(search))
                alone = None
                if seen:
                    statement, parameters = seen[-1]
                    alone, _ = timed(
                        lambda s=statement, p=parameters: reader.exec_driver_sql(s, p).all()
                    )
                    reader.rollback()
                prepared, pack = timed(lambda r=request: runtime.context.prepare(r, everyone))
            except UnavailableError:  # a 503 (the prompt path's deadline): counted, not timed
                errors += i >= WARMUP
                continue
            if i < WARMUP:
                continue
            search_s.append(took)
            prepare_s.append(prepared)
            hits += bool(found.hits)
            ready += pack.status == "ready"
            if alone is not None:
                candidates_s.append(alone)
                statements[kind].append(seen[-1])
        if not search_s:
            raise BenchError(f"every {kind} prompt of the {scope.size:,}-entry scope failed")
        result[kind] = {
            "errors_503": errors,
            "prompts": len(search_s),
            "search_ms": summarize_ms(search_s),
            "candidates_ms": summarize_ms(candidates_s) if candidates_s else None,
            "candidate_queries": len(candidates_s),
            "prepare_ms": summarize_ms(prepare_s),
            "searches_with_hits": hits,
            "packs_ready": ready,
        }
    first = [sent for kind in prompts for sent in statements[kind][:1]]
    if first:
        result["plan"] = explain(reader, *first[0])
        reader.rollback()
    result["statements"] = statements
    return result


# -- the pre-#32 statement, on a copy of the index in the old layout ---------------------------

LEGACY_VARIANTS = ("as cached", "scope index", "FULLTEXT index")


def legacy_ddl(table: str) -> str:
    return (
        f"CREATE TABLE {table} ("
        " id BIGINT NOT NULL PRIMARY KEY,"
        " scope_id VARCHAR(256) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,"
        " terms LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,"
        f" KEY ix_{table}_scope (scope_id),"
        f" FULLTEXT INDEX ft_{table} (terms)"
        " WITH PARSER space PARSER_PROPERTIES=(min_token_size=1)"
        ") DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin"
    )


def legacy_match(table: str, variant: str) -> str:
    """The pre-#32 candidate statement on ``table``, with the variant's hint."""
    hint = {
        "as cached": "",
        "scope index": f"/*+ INDEX({table} ix_{table}_scope) */ ",
        "FULLTEXT index": f"/*+ INDEX({table} ft_{table}) */ ",
    }[variant]
    return (
        f"SELECT {hint}id, terms FROM {table} WHERE scope_id = %(scope_id)s"
        " AND MATCH(terms) AGAINST(%(q)s IN NATURAL LANGUAGE MODE) ORDER BY id DESC LIMIT %(limit)s"
    )


STATEMENT_TIMEOUT = 4012  # OceanBase: the statement ran past ob_query_timeout
LEGACY_SAMPLE = 6  # statements per prompt kind, scope and variant (slow ones take seconds)
COPY_BATCH = 1_000


@contextlib.contextmanager
def long_statements(conn: Any) -> Iterator[None]:
    """Let this session's statements run up to an hour (the default is 10 s)."""
    conn.exec_driver_sql(f"SET SESSION ob_query_timeout = {LONG_STATEMENT_US}")
    if conn.in_transaction():
        conn.commit()
    yield


def build_legacy(engine: Any, source: str, table: str) -> float:
    """The runtime's index copied into the pre-#32 layout (plain terms indexed)."""
    started = time.perf_counter()
    with engine.connect() as conn, long_statements(conn):
        conn.exec_driver_sql(f"DROP TABLE IF EXISTS {table}")
        conn.exec_driver_sql(legacy_ddl(table))
        low, high = conn.exec_driver_sql(f"SELECT min(id), max(id) FROM {source}").one()
        conn.commit()
        for first in range(int(low or 0), int(high or -1) + 1, COPY_BATCH):
            with conn.begin():
                conn.exec_driver_sql(
                    f"INSERT INTO {table} (id, scope_id, terms)"
                    f" SELECT id, scope_id, terms FROM {source}"
                    " WHERE id >= %(lo)s AND id < %(hi)s",
                    {"lo": first, "hi": first + COPY_BATCH},
                )
    return time.perf_counter() - started


def unprefixed(parameters: dict[str, Any]) -> dict[str, Any]:
    """The runtime's parameters with its scope-prefixed tokens back to plain terms."""
    terms = [token[16:] for token in str(parameters["q"]).split()]
    return {**parameters, "q": " ".join(terms)}


def measure_legacy(conn: Any, measured: dict[str, Any], table: str) -> dict[str, Any]:
    """The pre-#32 statement on the same prompts' terms, per variant, and whether it returned
    the runtime statement's rows. A statement the server cancels at its 10 s default
    (``ob_query_timeout``, error 4012: what a prompt got then) counts as a timeout, its
    duration as measured (a lower bound)."""
    statements = [sent for sent_by_kind in measured["statements"].values()
                  for sent in sent_by_kind[:LEGACY_SAMPLE]]  # fmt: skip
    out: dict[str, Any] = {"statements": len(statements)}
    if not statements:
        return out
    ours = []
    for runtime_sql, parameters in statements:
        ours.append([row[0] for row in conn.exec_driver_sql(runtime_sql, parameters).all()])
        conn.rollback()
    agree = [True] * len(statements)
    answered = [False] * len(statements)
    for name in LEGACY_VARIANTS:
        sql = legacy_match(table, name)
        durations, timeouts = [], 0
        for i, (_, parameters) in enumerate(statements):
            took, rows = run_legacy(conn, sql, unprefixed(parameters))
            durations.append(took)
            if rows is None:
                timeouts += 1
            else:
                answered[i] = True
                agree[i] = agree[i] and rows == ours[i]
        out[name] = {
            "ms": summarize_ms(durations),
            "timeouts": timeouts,
            "plan": explain(conn, sql, unprefixed(statements[0][1])),
        }
        conn.rollback()
        if name == "as cached":
            out[name]["executed"] = cached_plans(conn, table)
    out["same_rows"] = sum(a and b for a, b in zip(agree, answered, strict=True))
    out["compared"] = sum(answered)
    return out


def run_legacy(conn: Any, sql: str, parameters: dict[str, Any]) -> tuple[float, list[int] | None]:
    """Seconds and row ids of one statement; ``None`` for the rows when the server cancelled
    it at its statement timeout."""
    from sqlalchemy.exc import OperationalError

    started = time.perf_counter()
    try:
        rows: list[int] | None = [row[0] for row in conn.exec_driver_sql(sql, parameters).all()]
    except OperationalError as exc:
        if getattr(exc.orig, "args", (None,))[0] != STATEMENT_TIMEOUT:
            raise
        rows = None
    took = time.perf_counter() - started
    conn.rollback()
    return took, rows


def cached_plans(conn: Any, table: str) -> list[list[str]] | None:
    """The plans the server holds cached for the unhinted pre-#32 statement (every scope
    runs one of them: literals are parameters of the cached text), each as its operators;
    None when the plan cache views cannot be read."""
    try:
        ids = conn.exec_driver_sql(
            "SELECT plan_id FROM oceanbase.V$OB_PLAN_CACHE_PLAN_STAT"
            " WHERE statement LIKE %(s)s ORDER BY plan_id",
            {"s": f"SELECT id, terms FROM {table} WHERE scope_id%"},
        ).all()
        plans = []
        for (plan_id,) in ids:
            rows = conn.exec_driver_sql(
                "SELECT operator, name FROM oceanbase.__all_virtual_plan_cache_plan_explain"
                " WHERE plan_id = %(p)s ORDER BY plan_line_id",
                {"p": int(plan_id)},
            ).all()
            plans.append(
                [f"{str(op).strip()} {str(name or '').strip()}".strip() for op, name in rows]
            )
    except Exception:  # no privilege on the views (an application user)
        conn.rollback()
        return None
    conn.rollback()
    return plans


# -- run --------------------------------------------------------------------------------------


@contextlib.contextmanager
def database(args: argparse.Namespace) -> Iterator[tuple[str, str]]:
    """The database URL to use and what it is: the one given, or a seekdb started here."""
    if args.database_url:
        yield args.database_url, "given by --database-url"
        return
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from tools.seekdb import SeekdbServer

    log(f"fulltext_scopes: starting seekdb (memory_budget={args.memory_budget})")
    with SeekdbServer(database="bench_fulltext", memory_budget=args.memory_budget) as server:
        yield server.url, f"seekdb started by the bench (memory_budget={args.memory_budget})"


def open_runtime(url: str, home: Path) -> tuple[Any, float]:
    """The runtime on ``url`` as a daemon opens it (schema, index checks and rebuilds)."""
    from powercontext_runtime.composition import Runtime
    from powercontext_runtime.settings import Settings

    started = time.perf_counter()
    runtime = Runtime.open(Settings.load(env={}, home=home, database_url=url))
    return runtime, time.perf_counter() - started


def index_table(runtime: Any) -> str:
    """The runtime's Memory full-text table (its name tells the layout)."""
    from sqlalchemy import text

    with runtime.db.read() as conn:
        names = {
            str(row[0]).lower()
            for row in conn.execute(text("SHOW TABLES LIKE 'memory%search'")).all()
        }
    for name in ("memory_scoped_search", "memory_search"):
        if name in names:
            return name
    raise BenchError(f"no Memory full-text table found ({sorted(names)})")


def run(args: argparse.Namespace) -> dict[str, Any]:
    import sqlalchemy

    facts, command, load_before = machine_facts(), command_line(), os.getloadavg()
    scopes = layout(args.scopes, args.large, args.small, args.skew, SCOPE_PREFIX)
    expected = {s.scope_id: s.size for s in scopes}
    report: dict[str, Any] = {
        "benchmark": "fulltext_scopes",
        "machine": facts,
        "command": command,
        "config": {
            "scopes": args.scopes,
            "large": args.large,
            "small": args.small,
            "skew": args.skew,
            "measure": args.measure,
            "queries": args.queries,
            "warmup": WARMUP,
            "seed": args.seed,
            "smoke": args.smoke,
        },
        "entries": sum(expected.values()),
    }
    with (
        tempfile.TemporaryDirectory(prefix="bench-fulltext-") as tmp,
        database(args) as (
            url,
            origin,
        ),
    ):
        report["database"] = origin
        runtime, opened = open_runtime(url, Path(tmp) / "home")
        try:
            report["open_seconds"] = round(opened, 2)
            heads = stored_heads(runtime)
            reused = args.reuse and heads == expected
            if reused:
                log(f"fulltext_scopes: reusing {len(heads)} scopes (open took {opened:.1f} s)")
                report["load"] = {"reused": True}
            else:
                if heads:
                    raise BenchError(
                        "the database already holds scopes of this bench: --reuse measures "
                        "them (same layout only), or give a fresh database"
                    )
                log(f"fulltext_scopes: importing {report['entries']:,} entries")
                report["load"] = {"reused": False, **load(runtime, scopes, args.seed)}
                log(f"  imported in {report['load']['seconds']} s")
                if not args.no_compact:
                    compacted = runtime.compact_storage(1800)
                    report["load"]["compact_seconds"] = round(compacted.seconds, 1)
                    log(f"  major compaction {compacted.seconds:.1f} s")
            report["index_table"] = index_table(runtime)
            engine = sqlalchemy.create_engine(url, pool_pre_ping=True)
            try:
                with engine.connect() as conn:
                    report["server"] = conn.exec_driver_sql("SELECT version()").scalar()
                    conn.rollback()
                    if args.legacy and report["index_table"] == "memory_search":
                        raise BenchError("--legacy needs the runtime's scoped layout")
                    results = []
                    chosen = measured_scopes(scopes, args.measure, len(args.large))
                    for scope in chosen:
                        measured = measure_scope(runtime, conn, scope, args.seed, args.queries)
                        _log_scope(measured)
                        results.append(measured)
                    # The copy after the runtime's measurements: the server's background work
                    # after loading it (freezes, merges) would otherwise weigh on them.
                    if args.legacy:
                        table = args.legacy_table
                        copied = build_legacy(engine, report["index_table"], table)
                        report["legacy_copy_seconds"] = round(copied, 1)
                        log(f"  legacy copy of the index in {copied:.1f} s")
                        if not args.no_compact:  # compacted like the runtime's index
                            compacted = runtime.compact_storage(1800)
                            report["legacy_compact_seconds"] = round(compacted.seconds, 1)
                            log(f"  major compaction {compacted.seconds:.1f} s")
                        for measured in results:
                            measured["legacy"] = measure_legacy(conn, measured, table)
                            _log_legacy(measured)
                        conn.exec_driver_sql(f"DROP TABLE IF EXISTS {table}")
                    for measured in results:
                        del measured["statements"]
                    report["scopes"] = results
            finally:
                engine.dispose()
        finally:
            runtime.close()
    report["load_average_1m"] = {"start": load_before[0], "end": os.getloadavg()[0]}
    return report


def _log_scope(result: dict[str, Any]) -> None:
    def cell(stats: dict[str, float] | None) -> str:
        return "—" if stats is None else f"{stats['p50']:.1f}/{stats['p95']:.1f}"

    for kind in ("short", "long"):
        k = result[kind]
        log(
            f"  {result['rows']:>6,} entries, {kind}: candidates {cell(k['candidates_ms'])} ms"
            f", search {cell(k['search_ms'])} ms, prepare {cell(k['prepare_ms'])} ms (p50/p95)"
        )
    log(f"    plan: {' → '.join(result.get('plan', []))}")


def _log_legacy(result: dict[str, Any]) -> None:
    def cell(stats: dict[str, float] | None) -> str:
        return "—" if stats is None else f"{stats['p50']:.1f}/{stats['p95']:.1f}"

    legacy = result.get("legacy")
    if legacy and legacy["statements"]:
        variants = ", ".join(f"{n} {cell(legacy[n]['ms'])}" for n in LEGACY_VARIANTS)
        timeouts = sum(legacy[n]["timeouts"] for n in LEGACY_VARIANTS)
        log(f"  {result['rows']:>6,} entries, pre-#32 statement: {variants} ms ({timeouts} "
            f"timed out); same rows {legacy['same_rows']}/{legacy['compared']}")  # fmt: skip


# -- report -----------------------------------------------------------------------------------


def _cell(stats: dict[str, float] | None) -> str:
    return "—" if stats is None else f"{stats['p50']:,.1f} / {stats['p95']:,.1f}"


def _legacy_cell(variant: dict[str, Any] | None) -> str:
    if variant is None:
        return "—"
    timeouts = variant.get("timeouts", 0)
    return _cell(variant["ms"]) + (f" ({timeouts} timed out at 10 s)" if timeouts else "")


def _merged(result: dict[str, Any], key: str) -> str:
    return " · ".join(_cell(result[kind][key]) for kind in ("short", "long"))


def render_markdown(report: dict[str, Any]) -> str:
    m, cfg = report["machine"], report["config"]
    rows = []
    for s in report["scopes"]:
        legacy = s.get("legacy") or {}
        rows.append([
            f"{s['rows']:,}",
            _merged(s, "candidates_ms"),
            *(_legacy_cell(legacy.get(n)) for n in LEGACY_VARIANTS),
            f"{legacy['same_rows']}/{legacy['compared']}" if "same_rows" in legacy else "—",
            _merged(s, "search_ms"),
            _merged(s, "prepare_ms"),
            f"{s['short']['packs_ready'] + s['long']['packs_ready']}"
            f"/{s['short']['prompts'] + s['long']['prompts']}",
            s["short"]["errors_503"] + s["long"]["errors_503"],
        ])  # fmt: skip
    load = report["load"]
    loaded = (
        "reused from an earlier run (`--reuse`)"
        if load["reused"]
        else f"imported in {load['seconds']:.0f} s ({load['entries_per_second']:,.0f} entries/s, "
        "the runtime's `import_file`, one transaction per scope)"
        + (
            f", major compaction {load['compact_seconds']:.0f} s"
            if "compact_seconds" in load
            else ""
        )
    )
    plans = []
    for s in report["scopes"]:
        plans.append(f"- {s['rows']:,} entries, runtime: `{' → '.join(s.get('plan', []))}`")
        for name in LEGACY_VARIANTS:
            variant = (s.get("legacy") or {}).get(name)
            if not variant:
                continue
            if variant.get("executed"):
                cached = "; ".join(f"`{' → '.join(plan)}`" for plan in variant["executed"])
                plans.append(f"  - pre-#32, {name} (the plan cache afterwards): {cached}")
            else:
                plans.append(f"  - pre-#32, {name}: `{' → '.join(variant['plan'])}`")
    lines = [
        f"## Full-text search with many scopes in one OceanBase database ({cfg['scopes']:,} "
        "scopes)",
        "",
        "Generated by `bench/fulltext_scopes.py --write-results`; edit outside the markers only.",
        "",
        f"- Date: {m['date']}",
        f"- Machine: {m['cpu_count']} CPUs ({m['cpu_model']}), {m['platform']}, "
        f"Python {m['python']}",
        f"- Server: `{report['server']}` ({report['database']})",
        f"- Command: `{report['command']}`",
        f"- 1-minute load average at start / end: {report['load_average_1m']['start']:.2f} / "
        f"{report['load_average_1m']['end']:.2f} (other processes share the cores)",
        f"- Corpus: {report['entries']:,} entries over {cfg['scopes']} scopes (large: "
        f"{', '.join(f'{n:,}' for n in cfg['large'])}; the others {cfg['small'][0]:,}–"
        f"{cfg['small'][1]:,}, skew {cfg['skew']:g}), seed {cfg['seed']}; {loaded}. "
        f"Runtime opened in {report['open_seconds']:.1f} s; index table "
        f"`{report['index_table']}`"
        + (
            f"; the pre-#32 copy loaded in {report['legacy_copy_seconds']:.0f} s"
            + (
                f", then compacted ({report['legacy_compact_seconds']:.0f} s)"
                if "legacy_compact_seconds" in report
                else ", not compacted"
            )
            if "legacy_copy_seconds" in report
            else ""
        )
        + ".",
        f"- Prompts per measured scope: {cfg['queries']} short and {cfg['queries']} "
        f"2,000-character ({cfg['warmup']} more of each untimed first). Each cell is p50 / p95 "
        "in ms, short prompts · long prompts. *Candidates*: the runtime's candidate statement "
        "re-run alone (prompts whose search reached it). *Pre-#32*: the old statement "
        "(`scope_id = ? AND MATCH(plain terms)`) on a copy of the index in the old layout, on "
        f"the first {LEGACY_SAMPLE} of each kind's statements' terms: with the plan the server "
        "cached, with the scope index forced, with the FULLTEXT index forced (a statement the "
        "server cancelled at its 10 s `ob_query_timeout` counts with its duration and is "
        "named); *same rows*: statements where every variant that answered returned exactly "
        "the runtime's rows, of those with an answer. *Search*: "
        "`MemoryService.search`; *prepare*: `ContextService.prepare` (in process, no HTTP); "
        "*503s*: timed prompts whose search or prepare failed (not in the latencies).",
        "",
        markdown_table(
            [
                "scope entries",
                "candidates (runtime)",
                *(f"pre-#32, {name}" for name in LEGACY_VARIANTS),
                "same rows",
                "search",
                "prepare",
                "packs ready",
                "503s",
            ],
            rows,
        ),
        "",
        "Plans (`EXPLAIN`, operators first to last; for the pre-#32 statement as cached, the "
        "plans the server held in its plan cache for it after the scope's runs):",
        "",
        *plans,
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    return run_and_publish(
        "fulltext_scopes", SECTION, DEFAULTS, parse_args(argv), run, render_markdown
    )


if __name__ == "__main__":
    sys.exit(main())
