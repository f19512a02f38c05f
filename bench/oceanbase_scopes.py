"""Filtered HNSW search with several scopes in one OceanBase vector table: recall and latency.

With the semantic channel on OceanBase, every scope's vectors share one table per dimension
(``memory_vectors_d512``, one HNSW index, ``lib=vsag``), and a prepare asks for the nearest
vectors *of one scope* (``WHERE scope_id = … AND model = … ORDER BY cosine_distance(…)
[APPROXIMATE] LIMIT k``). A team database holds one scope per repository, so a scope can be a
tiny or a large share of the index. This bench says, per scope size, whether the index's
filtered approximate search still returns the scope's true nearest neighbours, how fast it
is against scoring every row of the scope exactly, which plan the server chose for each, and
what the runtime's own search (exact up to ``OCEANBASE_EXACT_MAX`` rows in the scope, through
the index above: the threshold these numbers chose) returns.

Method:

1. The table is created by the runtime's own code (``for_backend("oceanbase", 512).create``),
   and rows are written with the runtime's own insert (``put``, batched executemany of the
   ``[x,y,…]`` literal), model ``bench-scopes``, scope ids ``bench:scopes/bg`` (one large
   background scope, ``--background`` rows) and ``bench:scopes/s<N>`` (``--sizes``), version
   ids from a range of their own (9.1e15…). Rows of the bench left by an earlier (crashed) run
   are deleted first.
2. Vectors are seeded and clustered, not uniform noise: ``CENTRES`` unit centres, themselves
   grouped around ``GROUPS`` super-centres, in 512 dimensions; a point is its centre plus
   Gaussian noise whose scale varies per cluster and per point, normalised, float32. Every
   scope draws its own rows from the same mixture, so scopes overlap in space (the hard case
   for a filter), and queries are fresh draws from it (never a stored row).
3. Per phase (right after the load, then after the runtime's ``rebuild_index``: optimizer
   statistics plus ``DBMS_VECTOR.REBUILD_INDEX``, what the embedding worker does after a
   backfill) and per scope: the server's plan cache emptied (the scope id is a bind parameter,
   so all scopes otherwise share the one plan compiled for whichever scope came first;
   ``--keep-plan-cache`` measures that instead), ``EXPLAIN`` of the exact statement ``nearest``
   sent (captured from the driver), a few untimed warm-up queries, then ``--queries`` timed
   calls of the runtime's ``nearest`` (``time.perf_counter`` around the call), the plan the
   server then holds cached for it; then both of its statements on the same queries, the
   index's (``APPROXIMATE``) and the exact one, whichever the runtime chose for the scope.
   ``--exact-max`` sets the runtime's threshold (default the runtime's). A whole-table search
   without any filter is the reference for what the index itself finds on this data.
4. Recall@k against an exact cosine top-k in numpy over that scope's own vectors (kept in
   memory): a returned row counts when it is in the scope and at least as similar as the
   true k-th (ties count), over min(k, scope size). Answers with fewer rows than that are
   counted too.
5. The bench's rows are deleted in statements of at most ``DELETE_BATCH`` rows (by version-id
   range, ``ob_query_timeout`` raised for the session: one DELETE of 20k indexed vectors once
   exceeded the server's default 10 s), unless ``--keep``; ``--reuse`` measures rows a
   ``--keep`` run with the same layout and seed left (checked against the generated vectors)
   instead of loading them again.

Run it on a database of its own (``tools/seekdb.py`` starts one), not a team's live one: a
daemon's embedding worker there prunes vector rows of any other model, the bench's included,
and the bench's rows would share that team's index and plans meanwhile.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from _common import (
    BenchError,
    command_line,
    log,
    machine_facts,
    markdown_table,
    run_and_publish,
    summarize_ms,
)

SECTION = "oceanbase-scopes"
DIMENSION = 512
MODEL = "bench-scopes"
SCOPE_PREFIX = "bench:scopes/"
BACKGROUND_SCOPE = SCOPE_PREFIX + "bg"
VERSION_BASE = 9_100_000_000_000_000  # far above any real entry version id
VERSION_STRIDE = 100_000_000  # version ids per scope: scope j uses [base + j·stride, …)
VERSION_END = VERSION_BASE + 1_000 * VERSION_STRIDE
INSERT_BATCH = 500
DELETE_BATCH = 2_000
LONG_STATEMENT_US = 3600 * 1_000_000
WARMUP = 5
CENTRES, GROUPS = 300, 16
DEFAULTS = {"background": 50_000, "sizes": "50,500,5000,20000", "queries": 50, "k": 64}
SMOKE = {"background": 2_000, "sizes": "20,300", "queries": 5, "k": 64, "exact_max": 1_000}
PHASES = ("after load", "after rebuild_index")
_OPERATOR_ROW = re.compile(r"^\|\s*(\d+)\s*\|([^|]*)\|([^|]*)\|\s*([^|]*?)\s*\|")


@dataclass(frozen=True, slots=True)
class Scope:
    """One scope of the bench: its rows' version ids are ``first … first + size - 1``."""

    name: str
    scope_id: str
    size: int
    first: int
    index: int  # position in the layout: seeds its vectors and its queries


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--database-url", required=True, help="SQLAlchemy URL of an OceanBase database")
    p.add_argument(
        "--background", type=int, help=f"rows of the background scope ({DEFAULTS['background']})"
    )
    p.add_argument("--sizes", help=f"comma-separated measured scope sizes ({DEFAULTS['sizes']})")
    p.add_argument("--queries", type=int, help=f"timed queries per scope ({DEFAULTS['queries']})")
    p.add_argument("--k", type=int, help=f"neighbours asked for ({DEFAULTS['k']}, a pack's)")
    p.add_argument("--ef-search", type=int, help="set the session's ob_hnsw_ef_search to this")
    p.add_argument(
        "--exact-max",
        type=int,
        help="the runtime's threshold: scopes of up to this many rows are scored exactly "
        f"(default the runtime's OCEANBASE_EXACT_MAX; smoke {SMOKE['exact_max']})",
    )
    p.add_argument("--seed", type=int, default=42, help="vector seed (default 42)")
    p.add_argument("--keep", action="store_true", help="do not delete the rows afterwards")
    p.add_argument(
        "--keep-plan-cache",
        action="store_true",
        help="do not empty the server's plan cache before each scope (then every scope runs "
        "the one plan cached for the statement, whichever scope compiled it)",
    )
    p.add_argument(
        "--reuse",
        action="store_true",
        help="measure the rows a --keep run with the same layout and seed left, if they are "
        "exactly those (otherwise delete and load as usual)",
    )
    p.add_argument(
        "--smoke",
        action="store_true",
        help=f"tiny run: background {SMOKE['background']}, sizes {SMOKE['sizes']}, "
        f"{SMOKE['queries']} queries",
    )
    p.add_argument("--json", action="store_true", help="print the results as JSON on stdout")
    p.add_argument(
        "--write-results", action="store_true", help="rewrite this section of bench/RESULTS.md"
    )
    args = p.parse_args(argv)
    preset = SMOKE if args.smoke else DEFAULTS
    for name in ("background", "queries", "k"):
        if getattr(args, name) is None:
            setattr(args, name, preset[name])
    try:
        args.sizes = sorted({int(s) for s in (args.sizes or preset["sizes"]).split(",") if s})
    except ValueError:
        p.error("--sizes must be comma-separated integers")
    if not args.sizes or args.sizes[0] < 1 or args.sizes[-1] >= VERSION_STRIDE:
        p.error(f"--sizes must be positive and below {VERSION_STRIDE:,}")
    if not 0 <= args.background < VERSION_STRIDE:
        p.error(f"--background must be within 0 … {VERSION_STRIDE - 1:,}")
    if args.queries < 1 or args.k < 1:
        p.error("--queries and --k must be positive")
    if args.ef_search is not None and args.ef_search < 1:
        p.error("--ef-search must be positive")
    if args.exact_max is None and args.smoke:
        args.exact_max = SMOKE["exact_max"]
    if args.exact_max is not None and args.exact_max < 0:
        p.error("--exact-max must be ≥ 0")
    if args.smoke and args.write_results:
        p.error("--write-results with --smoke would overwrite real numbers with smoke numbers")
    if not args.database_url.startswith("mysql"):
        p.error("--database-url must be an OceanBase (mysql+pymysql://…) URL")
    return args


def layout(background: int, sizes: Sequence[int]) -> list[Scope]:
    scopes = (
        [Scope("background", BACKGROUND_SCOPE, background, VERSION_BASE, 0)] if background else []
    )
    for j, size in enumerate(sizes, start=1):
        first = VERSION_BASE + j * VERSION_STRIDE
        scopes.append(Scope(f"s{size}", f"{SCOPE_PREFIX}s{size}", size, first, j))
    return scopes


# -- vectors -----------------------------------------------------------------------------------


class Mixture:
    """A seeded mixture of clusters on the 512-dimensional unit sphere.

    Centres are grouped around super-centres (neighbouring topics), each cluster has its own
    noise scale and each point a little more or less than that, so a query's neighbours are
    ranked by more than chance, and nearest-neighbour cosines land around 0.5–0.9 (reported)."""

    def __init__(self, seed: int) -> None:
        import numpy as np

        self._np = np
        self._seed = seed
        rng = np.random.default_rng([seed, 0])
        groups = _unit(rng.standard_normal((GROUPS, DIMENSION)))
        centres = groups[rng.integers(0, GROUPS, CENTRES)]
        centres = centres + 1.2 * rng.standard_normal((CENTRES, DIMENSION)) / DIMENSION**0.5
        self.centres = _unit(centres)
        self.scales = rng.uniform(0.45, 1.1, CENTRES)  # noise norm per cluster
        self.weights = rng.dirichlet(np.full(CENTRES, 2.0))

    def draw(self, stream: Sequence[int], count: int) -> Any:
        """``count`` unit float32 points from the random stream ``(seed, *stream)``."""
        np = self._np
        rng = np.random.default_rng([self._seed, *stream])
        which = rng.choice(CENTRES, size=count, p=self.weights)
        scale = self.scales[which] * rng.lognormal(0.0, 0.25, count)
        noise = rng.standard_normal((count, DIMENSION)) * (scale / DIMENSION**0.5)[:, None]
        return _unit(self.centres[which] + noise).astype(np.float32)


def _unit(x: Any) -> Any:
    import numpy as np

    return x / np.linalg.norm(x, axis=1, keepdims=True)


def scope_vectors(mixture: Mixture, scope: Scope) -> Any:
    return mixture.draw((1, scope.index), scope.size)


def scope_queries(mixture: Mixture, scope: Scope, count: int) -> Any:
    return mixture.draw((2, scope.index), count)


# -- the database ------------------------------------------------------------------------------


@contextlib.contextmanager
def long_statements(conn: Any) -> Iterator[None]:
    """Let this session's statements run up to an hour (the default is 10 s)."""
    conn.exec_driver_sql(f"SET SESSION ob_query_timeout = {LONG_STATEMENT_US}")
    if conn.in_transaction():
        conn.commit()  # the SET began one (SQLAlchemy's autobegin); the session keeps it
    yield


def stored_counts(engine: Any) -> dict[str, int]:
    """Rows of this bench's model per scope id of the bench (any run's)."""
    from sqlalchemy import text

    with engine.connect() as conn:
        rows = conn.execute(
            text(
                "SELECT scope_id, count(*) FROM memory_vectors_d512 WHERE model = :model"
                " AND version_id >= :lo AND version_id < :hi GROUP BY scope_id"
            ),
            {"model": MODEL, "lo": VERSION_BASE, "hi": VERSION_END},
        ).all()
        stray = conn.execute(
            text(
                "SELECT scope_id, count(*) FROM memory_vectors_d512 WHERE scope_id LIKE :prefix"
                " AND (version_id < :lo OR version_id >= :hi) GROUP BY scope_id"
            ),
            {"prefix": SCOPE_PREFIX + "%", "lo": VERSION_BASE, "hi": VERSION_END},
        ).all()
    if stray:
        raise BenchError(f"rows of the bench's scope ids outside its version range: {stray}")
    return {str(scope): int(n) for scope, n in rows}


def delete_bench_rows(engine: Any) -> tuple[int, float]:
    """Delete every row of the bench's model in its version range, ≤ ``DELETE_BATCH`` per
    statement and transaction; returns (rows, seconds)."""
    from sqlalchemy import text

    started, deleted, cursor = time.perf_counter(), 0, VERSION_BASE
    with engine.connect() as conn, long_statements(conn):
        while True:
            low = conn.execute(
                text(
                    "SELECT min(version_id) FROM memory_vectors_d512"
                    " WHERE version_id >= :lo AND version_id < :hi"
                ),
                {"lo": cursor, "hi": VERSION_END},
            ).scalar()
            conn.commit()
            if low is None:
                break
            cursor = min(int(low) + DELETE_BATCH, VERSION_END)
            with conn.begin():
                deleted += conn.execute(
                    text(
                        "DELETE FROM memory_vectors_d512 WHERE version_id >= :lo"
                        " AND version_id < :hi AND model = :model"
                    ),
                    {"lo": int(low), "hi": cursor, "model": MODEL},
                ).rowcount
    return deleted, time.perf_counter() - started


def load(engine: Any, store: Any, scopes: Sequence[Scope], vectors: dict[str, Any]) -> float:
    """Write every scope's rows with the runtime's insert, ``INSERT_BATCH`` rows a statement
    and a transaction, interleaving the scopes (as a team's writes would)."""
    from powercontext_runtime.store.vectors import PendingVersion

    started = time.perf_counter()
    offsets = {s.scope_id: 0 for s in scopes}
    total, done = sum(s.size for s in scopes), 0
    last_log = started
    with engine.connect() as conn, long_statements(conn):
        while done < total:
            for scope in scopes:
                at = offsets[scope.scope_id]
                if at >= scope.size:
                    continue
                # Rows in proportion to the scope's size: every scope ends at about the same time.
                step = max(1, round(INSERT_BATCH * scope.size / max(s.size for s in scopes)))
                end = min(at + step, scope.size)
                rows = [
                    PendingVersion(scope.first + i, scope.scope_id, "", "[]")
                    for i in range(at, end)
                ]
                with conn.begin():
                    store.put(conn, MODEL, rows, vectors[scope.scope_id][at:end])
                offsets[scope.scope_id] = end
                done += end - at
            if time.perf_counter() - last_log > 30:
                last_log = time.perf_counter()
                log(f"  loaded {done:,}/{total:,} rows ({done / (last_log - started):.0f}/s)")
    return time.perf_counter() - started


def matches_generated(engine: Any, scopes: Sequence[Scope], vectors: dict[str, Any]) -> bool:
    """True when the stored rows are this layout's (same counts, same first and last vector)."""
    import numpy as np
    from sqlalchemy import text

    counts = stored_counts(engine)
    if counts != {s.scope_id: s.size for s in scopes}:
        return False
    with engine.connect() as conn:
        for scope in scopes:
            for i in (0, scope.size - 1):
                stored = conn.execute(
                    text(
                        "SELECT embedding FROM memory_vectors_d512"
                        " WHERE version_id = :v AND model = :model"
                    ),
                    {"v": scope.first + i, "model": MODEL},
                ).scalar()
                if stored is None:
                    return False
                got = np.array([float(x) for x in str(stored).strip("[]").split(",")])
                if got.shape != (DIMENSION,) or not np.allclose(
                    got, vectors[scope.scope_id][i], atol=1e-5
                ):
                    return False
    return True


# -- measuring ---------------------------------------------------------------------------------


@contextlib.contextmanager
def captured_statements(conn: Any) -> Iterator[list[tuple[str, Any]]]:
    """The driver-level statements and parameters sent on ``conn`` meanwhile."""
    from sqlalchemy import event

    seen: list[tuple[str, Any]] = []

    def before(_conn: Any, _cursor: Any, statement: str, parameters: Any, *_: Any) -> None:
        seen.append((statement, parameters))

    event.listen(conn, "before_cursor_execute", before)
    try:
        yield seen
    finally:
        event.remove(conn, "before_cursor_execute", before)


def explain(conn: Any, statement: str, parameters: Any) -> dict[str, Any]:
    """The server's plan for a driver-level statement: its vector operator's line and a short
    label (PRE-FILTER, POST-ITERATIVE-FILTER, …) from that operator's name."""
    plan = "\n".join(
        str(row[0]) for row in conn.exec_driver_sql("EXPLAIN " + statement, parameters)
    )
    operators = []
    for line in plan.splitlines():
        match = _OPERATOR_ROW.match(line)
        if match:
            operators.append(
                (match.group(2).strip(), match.group(4), line.rstrip(), match.group(3).strip())
            )
    vector = [op for op in operators if "VECTOR" in op[0]]
    if vector:
        name, rows, line, reads = vector[0]
        inner = re.search(r"\(([^)]*)\)", name)
        label = inner.group(1) if inner else name
    else:
        label = "no vector index: " + ", ".join(op[0] for op in operators)
        name, rows, line, reads = operators[0] if operators else ("?", "?", plan[:200], "?")
    return {"label": label, "operator": name, "est_rows": rows, "line": line, "reads": reads}


def flush_plan_cache(conn: Any) -> bool:
    """Empty the server's plan cache (needs ALTER SYSTEM); False when not permitted.

    The scope id is a bind parameter, so every scope shares one cached plan: the one compiled
    for whichever scope ran the statement first after the cache was emptied or invalidated
    (statistics gathered, index rebuilt). Emptied before each scope, every scope runs the
    plan compiled for itself, which is what EXPLAIN shows."""
    try:
        conn.exec_driver_sql("ALTER SYSTEM FLUSH PLAN CACHE")
    except Exception:  # no privilege (an application user), or not OceanBase's syntax
        conn.rollback()
        return False
    conn.rollback()
    return True


def cached_plans(conn: Any) -> list[str] | None:
    """The plans the server has cached for the runtime's scope-filtered statement, each as
    its first operator and the object it reads (``PHY_TABLE_SCAN memory_vectors_d512(ix_…)``:
    through the scope index); None when the plan cache views cannot be read."""
    try:
        ids = conn.exec_driver_sql(
            "SELECT plan_id FROM oceanbase.V$OB_PLAN_CACHE_PLAN_STAT"
            " WHERE statement LIKE %(s)s ORDER BY plan_id",
            {"s": "SELECT version_id, cosine_distance(embedding, ?) AS d FROM memory_vectors_d512"
             " WHERE scope_id%"},
        ).all()  # fmt: skip
        plans = []
        for (plan_id,) in ids:
            first = conn.exec_driver_sql(
                "SELECT operator, name FROM oceanbase.__all_virtual_plan_cache_plan_explain"
                " WHERE plan_id = %(p)s ORDER BY plan_line_id LIMIT 1",
                {"p": int(plan_id)},
            ).first()
            if first is not None:
                plans.append(f"{str(first[0]).strip()} {str(first[1] or '').strip()}".strip())
    except Exception:
        conn.rollback()
        return None
    conn.rollback()
    return plans


def sent_statement(conn: Any, call: Callable[[], object]) -> tuple[str, Any]:
    """The one vector search (statement and parameters) ``call`` sends on ``conn``, as the
    driver got it (the runtime may count the scope's rows first: not a search)."""
    with captured_statements(conn) as seen:
        call()
    searches = [sent for sent in seen if "cosine_distance" in sent[0]]
    if len(searches) != 1:
        raise BenchError(f"the search sent {len(searches)} vector searches, expected one")
    return searches[0]


def measure(
    search: Callable[[Any], list[int]],
    position: Callable[[int], int | None],
    stored: Any,
    queries: Any,
    warmup: Any,
    k: int,
) -> dict[str, Any]:
    """Time ``search`` (a query vector → version ids) over ``queries`` after ``warmup``, and
    score each answer against the exact top-k of ``stored`` (``position``: a returned version
    id → its row in ``stored``, None when it is not one of them)."""
    import numpy as np

    for q in warmup:
        search(q)
    want = min(k, len(stored))
    durations, recalls, top1, short, foreign = [], [], [], 0, 0
    exact = stored.astype(np.float64)
    for q in queries:
        started = time.perf_counter()
        found = search(q)
        durations.append(time.perf_counter() - started)
        similarity = exact @ q.astype(np.float64)
        kth = -np.partition(-similarity, want - 1)[want - 1]
        good = 0
        for rowid in found[:want]:
            i = position(rowid)
            if i is None:
                foreign += 1
            elif similarity[i] >= kth - 1e-6:  # ties with the true k-th count
                good += 1
        recalls.append(good / want)
        top1.append(float(similarity.max()))
        short += len(found) < want
    return {
        "recall_mean": round(float(np.mean(recalls)), 4),
        "recall_min": round(float(np.min(recalls)), 4),
        "recall_share_perfect": round(sum(r == 1.0 for r in recalls) / len(recalls), 4),
        "short_answers": short,
        "foreign_rows": foreign,
        "latency_ms": summarize_ms(durations),
        "nearest_cosine_p50": round(float(np.median(top1)), 3),
    }


def measure_scope(
    conn: Any,
    store: Any,
    scope: Scope,
    stored: Any,
    queries: Any,
    warmup: Any,
    k: int,
    flush: bool,
) -> dict[str, Any]:
    """The runtime's own scope-filtered search (``nearest``) and the plan of its statement;
    then both statements it chooses between, the index's (``APPROXIMATE``) and the exact one
    (the server scoring every row of the scope), on the same queries."""
    from powercontext_runtime.store.vectors import _literal

    def search(q: Any) -> list[int]:
        return [hit.rowid for hit in store.nearest(conn, scope.scope_id, MODEL, q, k)]

    def position(rowid: int) -> int | None:
        i = rowid - scope.first
        return i if 0 <= i < scope.size else None

    flushed = flush and flush_plan_cache(conn)
    sql, parameters = sent_statement(conn, lambda: search(queries[0]))
    mode = "approximate" if " APPROXIMATE LIMIT " in sql else "exact"
    plan = explain(conn, sql, parameters)
    result = measure(search, position, stored, queries, warmup, k)
    plan["plan_cache_flushed"] = flushed
    plan["executed"] = cached_plans(conn)
    exact_sql = sql.replace(" APPROXIMATE LIMIT ", " LIMIT ")
    statements = {
        "approximate": exact_sql.replace(" LIMIT ", " APPROXIMATE LIMIT "),
        "exact": exact_sql,
    }
    variants: dict[str, Any] = {}
    for name, statement in statements.items():

        def run_statement(q: Any, statement: str = statement) -> list[int]:
            rows = conn.exec_driver_sql(statement, {**parameters, "q": _literal(q)}).all()
            return [int(row[0]) for row in rows]

        measured = measure(run_statement, position, stored, queries, warmup, k)
        measured["plan"] = explain(conn, statement, parameters)
        variants[name] = {
            key: measured[key]
            for key in ("recall_mean", "recall_min", "recall_share_perfect", "latency_ms", "plan")
        }
    return {
        "scope": scope.name,
        "scope_id": scope.scope_id,
        "rows": scope.size,
        "mode": mode,
        **result,
        "plan": plan,
        **variants,
    }


_WHOLE_TABLE_SQL = (
    "SELECT version_id, cosine_distance(embedding, :q) AS d FROM memory_vectors_d512"
    " ORDER BY cosine_distance(embedding, :q) APPROXIMATE LIMIT :k"
)


def measure_whole_table(
    conn: Any, scopes: Sequence[Scope], vectors: dict[str, Any], queries: Any, warmup: Any, k: int
) -> dict[str, Any]:
    """Reference: the same index searched without any filter, against the exact top-k of
    every row (the bench's rows must be the table's only ones): how far the HNSW search
    itself finds this data's neighbours, apart from what a scope filter costs."""
    import numpy as np
    from sqlalchemy import text

    from powercontext_runtime.store.vectors import _literal

    stored = np.concatenate([vectors[s.scope_id] for s in scopes])
    starts = np.cumsum([0] + [s.size for s in scopes[:-1]])
    by_index = {s.index: (s, int(start)) for s, start in zip(scopes, starts, strict=True)}

    def search(q: Any) -> list[int]:
        rows = conn.execute(text(_WHOLE_TABLE_SQL), {"q": _literal(q), "k": k}).all()
        return [int(rowid) for rowid, _ in rows]

    def position(rowid: int) -> int | None:
        found = by_index.get((rowid - VERSION_BASE) // VERSION_STRIDE)
        if found is None or rowid < VERSION_BASE:
            return None
        scope, start = found
        i = rowid - scope.first
        return start + i if 0 <= i < scope.size else None

    statement = sent_statement(conn, lambda: search(queries[0]))
    plan = explain(conn, *statement)
    result = measure(search, position, stored, queries, warmup, k)
    return {"scope": "whole table", "scope_id": None, "rows": len(stored), **result, "plan": plan}


def run(args: argparse.Namespace) -> dict[str, Any]:
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    import sqlalchemy

    from powercontext_runtime.store.vectors import OCEANBASE_EXACT_MAX, _OceanBaseVectors

    facts, command, load_before = machine_facts(), command_line(), os.getloadavg()
    scopes = layout(args.background, args.sizes)
    total = sum(s.size for s in scopes)
    mixture = Mixture(args.seed)
    vectors = {s.scope_id: scope_vectors(mixture, s) for s in scopes}
    exact_max = OCEANBASE_EXACT_MAX if args.exact_max is None else args.exact_max
    store = _OceanBaseVectors(DIMENSION, exact_max=exact_max)  # the runtime's, its threshold
    engine = sqlalchemy.create_engine(args.database_url, pool_pre_ping=True)
    report: dict[str, Any] = {
        "benchmark": "oceanbase_scopes",
        "machine": facts,
        "command": command,
        "config": {
            "background": args.background,
            "sizes": args.sizes,
            "queries": args.queries,
            "warmup": WARMUP,
            "k": args.k,
            "ef_search": args.ef_search,
            "exact_max": exact_max,
            "seed": args.seed,
            "smoke": args.smoke,
            "centres": CENTRES,
            "model": MODEL,
        },
        "rows": total,
    }
    try:
        with engine.begin() as conn:
            report["server"] = conn.exec_driver_sql("SELECT version()").scalar()
            store.create(conn)
        reused = args.reuse and matches_generated(engine, scopes, vectors)
        if reused:
            log(f"oceanbase_scopes: reusing the {total:,} rows a --keep run left")
            report["load"] = {"reused": True}
        else:
            leftovers = stored_counts(engine)
            removed, seconds = delete_bench_rows(engine) if leftovers else (0, 0.0)
            if leftovers:
                log(f"oceanbase_scopes: deleted {removed:,} leftover rows in {seconds:.1f} s")
            log(f"oceanbase_scopes: loading {total:,} rows ({', '.join(s.name for s in scopes)})")
            load_s = load(engine, store, scopes, vectors)
            log(f"  loaded in {load_s:.1f} s ({total / load_s:.0f} rows/s)")
            report["load"] = {
                "reused": False,
                "leftovers_deleted": removed,
                "seconds": round(load_s, 2),
                "rows_per_second": round(total / load_s, 1),
            }
        phases: list[dict[str, Any]] = []
        with engine.connect() as conn:
            if args.ef_search is not None:
                conn.exec_driver_sql(f"SET SESSION ob_hnsw_ef_search = {int(args.ef_search)}")
            report["ef_search_session"] = int(
                conn.exec_driver_sql("SELECT @@ob_hnsw_ef_search").scalar()
            )
            table_rows = int(
                conn.exec_driver_sql("SELECT count(*) FROM memory_vectors_d512").scalar()
            )
            report["table_rows"] = table_rows
            conn.rollback()
            for phase in PHASES:
                if phase == "after rebuild_index":
                    log("oceanbase_scopes: rebuild_index (statistics + DBMS_VECTOR.REBUILD_INDEX)")
                    rebuild_s = rebuild(engine, store)
                    report["rebuild_index_seconds"] = round(rebuild_s, 2)
                    log(f"  rebuild_index returned after {rebuild_s:.1f} s")
                elif reused:
                    continue  # the table is as the earlier run's rebuild left it
                results = []
                for scope in scopes:
                    queries = scope_queries(mixture, scope, args.queries + WARMUP)
                    stored = vectors[scope.scope_id]
                    timed, warm = queries[WARMUP:], queries[:WARMUP]
                    result = measure_scope(
                        conn, store, scope, stored, timed, warm, args.k, not args.keep_plan_cache
                    )
                    result["share_of_table"] = round(scope.size / table_rows, 4)
                    conn.rollback()  # no snapshot held between scopes
                    _log_result(phase, result, args.k)
                    results.append(result)
                whole = None
                if table_rows == total:  # only the bench's rows: the exact top-k is known
                    queries = mixture.draw((3, 0), args.queries + WARMUP)
                    timed, warm = queries[WARMUP:], queries[:WARMUP]
                    whole = measure_whole_table(conn, scopes, vectors, timed, warm, args.k)
                    whole["share_of_table"] = 1.0
                    conn.rollback()
                    _log_result(phase, whole, args.k)
                phases.append({"phase": phase, "scopes": results, "whole_table": whole})
        report["phases"] = phases
        if args.keep:
            report["cleanup"] = {"kept": True}
        else:
            deleted, seconds = delete_bench_rows(engine)
            report["cleanup"] = {"kept": False, "deleted": deleted, "seconds": round(seconds, 2)}
            log(f"oceanbase_scopes: deleted {deleted:,} rows in {seconds:.1f} s")
    except sqlalchemy.exc.SQLAlchemyError as exc:
        raise BenchError(f"{type(exc).__name__}: {exc}"[:2000]) from exc
    finally:
        engine.dispose()
    report["load_average_1m"] = {"start": load_before[0], "end": os.getloadavg()[0]}
    return report


def _log_result(phase: str, result: dict[str, Any], k: int) -> None:
    lat = result["latency_ms"]
    log(
        f"  {phase}, {result['scope']} ({result['rows']:,} rows): {result.get('mode', 'index')}"
        f", {result['plan']['label']}, recall@{k} mean {result['recall_mean']:.3f} min "
        f"{result['recall_min']:.3f}, p50 {lat['p50']:.1f} ms p95 {lat['p95']:.1f} ms"
    )
    if "approximate" in result:
        index, exact = result["approximate"], result["exact"]
        log(
            f"    index: recall {index['recall_mean']:.3f}, p50 {index['latency_ms']['p50']:.1f}"
            f" ms; exact: recall {exact['recall_mean']:.3f}, p50 "
            f"{exact['latency_ms']['p50']:.1f} ms"
        )
    log(f"    plan: {result['plan']['line']}")


def rebuild(engine: Any, store: Any) -> float:
    """The runtime's ``rebuild_index`` as the embedding worker runs it: a connection of its
    own, outside any transaction (``Database.maintain``)."""
    started = time.perf_counter()
    with engine.connect() as conn:
        conn = conn.execution_options(isolation_level="AUTOCOMMIT")
        with long_statements(conn):
            store.rebuild_index(conn)
    return time.perf_counter() - started


# -- report ------------------------------------------------------------------------------------


def _via(plan: dict[str, Any]) -> str:
    """How the plan reaches the rows: through the scope index, the vector index, or the table."""
    reads = plan.get("reads", "")
    if "(ix_" in reads:
        return " via the scope index"
    if "(vx_" in reads:
        return ""
    return " on the table"


def _variant_cell(variant: dict[str, Any] | None) -> str:
    if variant is None:
        return "—"
    lat = variant["latency_ms"]
    return f"{variant['recall_mean']:.3f} / {variant['recall_min']:.3f}, {lat['p50']:.1f} ms"


def _in_table_order(phase: dict[str, Any]) -> list[dict[str, Any]]:
    """Scopes by size, the whole-table reference last."""
    ordered = sorted(phase["scopes"], key=lambda s: s["rows"])
    return ordered + ([phase["whole_table"]] if phase.get("whole_table") else [])


def render_markdown(report: dict[str, Any]) -> str:
    m, cfg, k = report["machine"], report["config"], report["config"]["k"]
    rows = []
    for phase in report["phases"]:
        for s in _in_table_order(phase):
            lat = s["latency_ms"]
            what = f"{s['rows']:,}"
            if s["scope_id"] is None:
                what += " (whole table, no filter: reference)"
            elif s["scope_id"] == BACKGROUND_SCOPE:
                what += " (background scope)"
            index = s.get("approximate")
            rows.append([
                phase["phase"], what, f"{100 * s['share_of_table']:.1f} %",
                s.get("mode", "index (reference)"),
                f"**{s['recall_mean']:.3f}**", f"{s['recall_min']:.3f}",
                f"{100 * s['recall_share_perfect']:.0f} %", s["short_answers"],
                f"{lat['p50']:.1f}", f"{lat['p95']:.1f}", _variant_cell(index),
                f"`{(index or s)['plan']['label']}`{_via((index or s)['plan'])} "
                f"({(index or s)['plan']['est_rows']} est.)",
                _variant_cell(s.get("exact")), f"{s['nearest_cosine_p50']:.2f}",
            ])  # fmt: skip
    load = report["load"]
    loaded = (
        "reused from a `--keep` run"
        if load["reused"]
        else f"{load['seconds']:.1f} s ({load['rows_per_second']:,.0f} rows/s, runtime's "
        f"`put`, {INSERT_BATCH} rows a statement)"
    )
    rebuild = report.get("rebuild_index_seconds")
    cleanup = report["cleanup"]
    cleaned = (
        "kept (`--keep`)"
        if cleanup["kept"]
        else f"{cleanup['deleted']:,} rows deleted in {cleanup['seconds']:.1f} s "
        f"(≤ {DELETE_BATCH:,} a statement)"
    )
    lines = [
        "## Several scopes in one OceanBase vector table: filtered HNSW recall and latency",
        "",
        "Generated by `bench/oceanbase_scopes.py --write-results`; edit outside the markers only.",
        "",
        f"- Date: {m['date']}",
        f"- Machine: {m['cpu_count']} CPUs ({m['cpu_model']}), {m['platform']}, "
        f"Python {m['python']}",
        f"- Server: `{report['server']}`",
        f"- Command: `{report['command']}`",
        f"- 1-minute load average at start / end: {report['load_average_1m']['start']:.2f} / "
        f"{report['load_average_1m']['end']:.2f} (other processes share the cores)",
        f"- Table: `memory_vectors_d512` as the runtime creates it, {report['rows']:,} rows: "
        f"a background scope of {cfg['background']:,} and scopes of "
        f"{', '.join(f'{n:,}' for n in cfg['sizes'])} rows, all from one seeded mixture of "
        f"{cfg['centres']} clusters (seed {cfg['seed']}); load {loaded}; `rebuild_index` "
        + (f"{rebuild:.1f} s" if rebuild is not None else "not run")
        + f"; cleanup: {cleaned}.",
        f"- Queries: {cfg['queries']} fresh points of the mixture per scope ({cfg['warmup']} "
        f"more untimed first), the runtime's `nearest` with k = {k} (exact for a scope of up "
        f"to {cfg['exact_max']:,} rows, else through the index); "
        f"`ob_hnsw_ef_search` = {report['ef_search_session']}"
        + (" (set by `--ef-search`)" if cfg["ef_search"] is not None else " (server default)")
        + f". Recall@{k}: share of min(k, scope rows) returned rows that are in the scope's "
        "exact cosine top-k (numpy over the same vectors; ties count). The whole-table row "
        "is the same index searched without a filter (`ORDER BY cosine_distance(…) "
        "APPROXIMATE LIMIT k`, not the runtime's statement) against the exact top-k of all "
        "rows: the HNSW search's own recall on this data. The index and exact columns are "
        "the runtime's two statements (with and without `APPROXIMATE`) timed on the same "
        "queries right after, whichever it chose: recall mean / min, p50.",
        "",
        markdown_table(
            [
                "phase",
                "scope rows",
                "share of table",
                "runtime's search",
                f"recall@{k} mean",
                "min",
                "queries at 1.0",
                "short answers",
                "p50 ms",
                "p95 ms",
                "index (APPROXIMATE)",
                "index plan (EXPLAIN)",
                "exact",
                "top-1 cosine p50",
            ],
            rows,
        ),
        "",
        "Plan lines of the index's statement (the vector operator, per phase and scope):",
        "",
    ]
    for phase in report["phases"]:
        for s in _in_table_order(phase):
            line = re.sub(r"\s+", " ", s.get("approximate", s)["plan"]["line"])
            where = "whole table (no filter)" if s["scope_id"] is None else f"{s['rows']:,} rows"
            lines.append(f"- {phase['phase']}, {where}: `{line}`")
    executed = []
    for phase in report["phases"]:
        for s in sorted(phase["scopes"], key=lambda s: s["rows"]):
            plans = s["plan"].get("executed")
            flushed = (
                "plan cache emptied first"
                if s["plan"].get("plan_cache_flushed")
                else ("plan cache as it was")
            )
            shown = "; ".join(f"`{p}`" for p in plans) if plans else "unknown"
            executed.append(f"- {phase['phase']}, {s['rows']:,} rows ({flushed}): {shown}")
    lines += ["", "Plans the server had cached for the runtime's statement after each scope "
              "(`V$OB_PLAN_CACHE_PLAN_STAT`, first operator):", "", *executed]  # fmt: skip
    exact_plans = sorted({
        s["exact"]["plan"]["label"] for phase in report["phases"] for s in phase["scopes"]
    })  # fmt: skip
    lines += ["", "The exact statement's plan: "
              + ", ".join(f"`{name}`" for name in exact_plans) + "."]  # fmt: skip
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    return run_and_publish("oceanbase_scopes", args, run, render_markdown, SECTION)


if __name__ == "__main__":
    sys.exit(main())
