"""Helpers shared by the benchmarks in ``bench/`` (spec 08).

Why a shared module: every benchmark needs the same four things and they must behave the same
way everywhere, or numbers from different scripts stop being comparable:

* a **seeded workload** (:class:`MemoryTextGenerator`): same seed, same texts, on any machine,
  so runs can be compared and another implementation can be fed the identical data;
* a **target** (:func:`open_target`): either any base URL + token (to measure another
  implementation side by side) or a daemon started here in a temp dir for a local run;
* **loading and timing** over HTTP with keep-alive clients (:func:`load_memories`,
  :func:`remember`, :func:`summarize_ms`), because the budgets are end-to-end HTTP figures;
* **reporting** (:func:`machine_facts`, :func:`markdown_table`, :func:`replace_section`) so each
  script rewrites only its own section of ``bench/RESULTS.md``.

Benchmarks are run as scripts (``python bench/<name>.py``), so this module is imported as
``_common`` from the script's own directory. It needs only httpx (a runtime dependency).
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import hashlib
import json
import os
import platform
import random
import shlex
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import httpx

BENCH_DIR = Path(__file__).resolve().parent
RESULTS_PATH = BENCH_DIR / "RESULTS.md"
REMEMBER_PATH = "/v1/memory/remember"


class BenchError(RuntimeError):
    """A benchmark cannot produce trustworthy numbers (failed request, daemon died, ...)."""


# -- seeded workload -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class MemoryItem:
    """One memory entry to write: the body of a remember request minus ``scope_id``."""

    kind: str
    text: str
    tags: tuple[str, ...] = ()

    def payload(self, scope_id: str) -> dict[str, Any]:
        body: dict[str, Any] = {"scope_id": scope_id, "kind": self.kind, "text": self.text}
        if self.tags:
            body["tags"] = list(self.tags)
        return body


_KINDS = (
    ("fact", 35),
    ("convention", 20),
    ("decision", 15),
    ("preference", 10),
    ("constraint", 10),
    ("working_note", 10),
)
_TAGS = (
    "api", "auth", "build", "ci", "cli", "db", "deploy", "docs", "hooks", "perf", "search",
    "security", "style", "testing",
)  # fmt: skip
_ROOTS = ("src", "lib", "app", "runtime/src", "services", "packages/core", "tests", "scripts")
_PKGS = (
    "app", "api", "auth", "billing", "cache", "cli", "config", "db", "http", "jobs", "search",
    "storage", "sync", "ui", "utils", "worker",
)  # fmt: skip
_MODULES = (
    "client", "handlers", "main", "models", "routes", "schema", "service", "settings", "store",
    "tasks", "views", "x", "parser", "session", "retry", "queue",
)  # fmt: skip
_EXTS = ("py", "py", "py", "ts", "tsx", "go", "rs", "sql", "toml", "yaml")
_NOUNS = (
    "user", "order", "session", "token", "invoice", "tenant", "request", "cache", "job",
    "event", "report", "account", "payload", "index", "batch", "config",
)  # fmt: skip
_FIELDS = ("id", "key", "name", "count", "at", "ms", "hash", "status", "url", "limit")
_VERBS = (
    "load", "save", "fetch", "parse", "build", "resolve", "sync", "flush", "render", "retry",
    "validate", "encode",
)  # fmt: skip
_LIBS = (
    "httpx", "requests", "sqlalchemy", "pydantic", "msgspec", "orjson", "pytest", "hypothesis",
    "uvicorn", "alembic", "click", "typer", "structlog", "tenacity",
)  # fmt: skip
_COMPONENTS = (
    "the API gateway", "the billing worker", "the search indexer", "the CLI", "the sync job",
    "the auth middleware", "the migration runner", "the web client", "the cache layer",
    "the report exporter", "the webhook handler", "the rate limiter",
)  # fmt: skip
_REASONS = (
    "it keeps the hot path allocation-free", "the old one leaked connections",
    "it is already a dependency", "it handles retries for us", "startup time matters here",
    "the team already knows it", "it has typed errors", "benchmarks showed it 3x faster",
)  # fmt: skip
_STYLES = (
    "early returns over nested ifs", "dataclasses over dicts", "small pure functions",
    "explicit type hints on public functions", "f-strings for logging context",
    "table-driven tests", "one assertion per behaviour", "absolute imports",
)  # fmt: skip
_PEOPLE = ("Alice", "Bo", "Chen Wei", "Dana", "the reviewer", "the maintainer", "Li Na", "Omar")
_CN_COMPONENTS = ("网关服务", "计费模块", "搜索索引", "同步任务", "认证中间件", "缓存层", "前端")
_CN_RULES = (
    "提交前必须运行全部单元测试",
    "数据库迁移只能向前，不允许回滚脚本",
    "日志里不要打印用户的手机号",
    "新接口一律返回统一的错误信封",
    "配置项统一放在环境变量里",
    "代码评审至少需要一位同事批准",
    "接口超时时间默认设为三秒",
)
_CN_REASONS = ("否则线上会出现重复扣费", "因为旧版本有内存泄漏", "这样排查问题更快", "客户要求")

_TEMPLATES_EN = (
    "Run `{cmd}` before pushing; CI fails on {path} otherwise.",
    "{component} reads `{env}` at startup; the default is {n}.",
    "{person} prefers {style} in {path}.",
    "Decision: use {lib} for {noun} handling instead of {lib2} because {reason}.",
    "`{func}` in {path} returns None when `{ident}` is missing; callers must check it.",
    "Never log `{ident}` values from {component}; they can contain customer data.",
    "Tests for {path} live in {test_path}; use the `{fixture}` fixture, not a real server.",
    "The {noun}s table is keyed by ({ident}, {ident2}); {ident2} is unique per {noun2}.",
    "{component} retries `{func}` {n_small} times with backoff; do not add retries on top.",
    "Bug #{n}: `{func}` double-counts `{ident}` when {noun} is empty; fixed in {path}.",
    "Keep `{ident}` in sync between {path} and {path2}.",
    "The {noun} cache TTL is {n_small} minutes; raise it only with a load test.",
)
_TEMPLATES_CN = (
    "{cn_component}的配置在 {path}，修改后要重启服务。",
    "团队约定：{cn_rule}，{cn_reason}。",
    "不要在 {path} 里直接调用 `{func}`，要通过{cn_component}。",
    "`{ident}` 字段表示{cn_component}里的编号，第 {n} 号问题就是它引起的。",
    "{person} 说 {lib} 比 {lib2} 更适合{cn_component}，{cn_reason}。",
)


class MemoryTextGenerator:
    """Realistic, distinct short memory entries from a seeded RNG.

    Texts mix English, Chinese (in about a quarter of them, often around identifiers) and
    identifiers such as ``src/app/x.py`` or ``user_id``, at about 20-260 characters (median ~90),
    like what coding agents store.
    Distinctness is guaranteed (a duplicate is a no-op write in the runtime, so it would
    silently shrink N); the sequence depends only on the seed and on the call order.
    """

    def __init__(self, seed: int) -> None:
        self._rng = random.Random(seed)
        self._seen: set[str] = set()
        self._kinds = [k for k, _ in _KINDS]
        self._kind_weights = [w for _, w in _KINDS]

    def take(self, count: int) -> list[MemoryItem]:
        return [self.next() for _ in range(count)]

    def next(self) -> MemoryItem:
        rng = self._rng
        while True:
            text = self._sentence()
            if rng.random() < 0.2:  # some entries carry two facts
                text = f"{text} {self._sentence()}"
            if text not in self._seen:
                self._seen.add(text)
                break
        kind = rng.choices(self._kinds, self._kind_weights)[0]
        tags = tuple(sorted(rng.sample(_TAGS, rng.choice((0, 0, 1, 1, 2)))))
        return MemoryItem(kind=kind, text=text, tags=tags)

    def _sentence(self) -> str:
        rng = self._rng
        lib, lib2 = rng.sample(_LIBS, 2)
        templates = _TEMPLATES_CN if rng.random() < 0.25 else _TEMPLATES_EN
        fields = {
            "path": self._path(),
            "path2": self._path(),
            "test_path": f"tests/{rng.choice(_PKGS)}/test_{rng.choice(_MODULES)}.py",
            "ident": self._ident(),
            "ident2": self._ident(),
            "func": f"{rng.choice(_VERBS)}_{rng.choice(_NOUNS)}",
            "fixture": f"{rng.choice(_NOUNS)}_{rng.choice(('factory', 'client', 'db'))}",
            "cmd": rng.choice(("make lint", "make test", "npm run build", "cargo fmt"))
            + rng.choice(("", f" -k {rng.choice(_NOUNS)}", f" {self._path()}")),
            "env": f"{rng.choice(_PKGS).upper()}_{rng.choice(_FIELDS).upper()}",
            "n": rng.randint(2, 9999),
            "n_small": rng.randint(2, 30),
            "noun": rng.choice(_NOUNS),
            "noun2": rng.choice(_NOUNS),
            "lib": lib,
            "lib2": lib2,
            "component": rng.choice(_COMPONENTS),
            "reason": rng.choice(_REASONS),
            "style": rng.choice(_STYLES),
            "person": rng.choice(_PEOPLE),
            "cn_component": rng.choice(_CN_COMPONENTS),
            "cn_rule": rng.choice(_CN_RULES),
            "cn_reason": rng.choice(_CN_REASONS),
        }
        sentence = rng.choice(templates).format(**fields)
        return sentence[0].upper() + sentence[1:]

    def _path(self) -> str:
        rng = self._rng
        return (
            f"{rng.choice(_ROOTS)}/{rng.choice(_PKGS)}/{rng.choice(_MODULES)}.{rng.choice(_EXTS)}"
        )

    def _ident(self) -> str:
        rng = self._rng
        if rng.random() < 0.15:  # camelCase, as in TS/Java code
            return f"{rng.choice(_NOUNS)}{rng.choice(_FIELDS).capitalize()}"
        return f"{rng.choice(_NOUNS)}_{rng.choice(_FIELDS)}"


# -- statistics --------------------------------------------------------------------------------


def percentile(values: Sequence[float], pct: float) -> float:
    """Linear-interpolated percentile (the common "type 7" definition, like numpy's default).

    Written out rather than imported so the bench needs no numpy and the definition is explicit.
    """
    if not values:
        raise ValueError("percentile of no values")
    if not 0 <= pct <= 100:
        raise ValueError("pct must be within 0..100")
    ordered = sorted(values)
    rank = (len(ordered) - 1) * pct / 100
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def summarize_ms(seconds: Sequence[float]) -> dict[str, float]:
    """p50/p95/p99/mean/min/max in milliseconds, rounded to µs, from durations in seconds."""
    ms = [s * 1000 for s in seconds]
    stats = {
        "p50": percentile(ms, 50),
        "p95": percentile(ms, 95),
        "p99": percentile(ms, 99),
        "mean": sum(ms) / len(ms),
        "min": min(ms),
        "max": max(ms),
    }
    return {k: round(v, 3) for k, v in stats.items()}


# -- target: any base URL, or a daemon started here --------------------------------------------


@dataclass(frozen=True, slots=True)
class Target:
    """Where requests go. ``description`` says what was measured, for the report."""

    url: str
    token: str
    description: str
    pid: int | None = None  # the daemon's process id when it runs on this machine
    home: Path | None = None  # a self-started daemon's data dir
    log: Path | None = None  # a self-started daemon's stderr (its access log, JSON lines)

    def client(self, timeout: float = 60) -> httpx.Client:
        """A keep-alive client: connection setup must not be part of any timed request."""
        return httpx.Client(
            base_url=self.url,
            headers={"Authorization": f"Bearer {self.token}"},
            timeout=timeout,
            limits=httpx.Limits(max_connections=1, max_keepalive_connections=1),
        )


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_ready(url: str, process: subprocess.Popen[bytes], log: Path, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            tail = log.read_text(errors="replace")[-2000:]
            raise BenchError(f"daemon exited early (rc={process.returncode}):\n{tail}")
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(url + "/health/ready", timeout=1).status_code == 200:
                return
        time.sleep(0.05)
    raise BenchError(f"daemon at {url} not ready after {timeout:.0f} s")


@dataclass(slots=True)
class Embeddings:
    """How a bench's runtime embeds: the local model, or an OpenAI-compatible endpoint (a user's
    own local server: docs/embeddings.md). Shared by ``locomo.py`` (in process) and
    ``recall_quality.py`` (a self-started daemon), so both take the same flags."""

    url: str | None = None
    model: str | None = None
    dimension: int | None = None

    @property
    def label(self) -> str:
        return "local model" if self.url is None else f"{self.model} at {self.url}"

    def env(self, query_timeout: str) -> dict[str, str]:
        """The runtime's settings: the caller's ``POWERCONTEXT_EMBEDDINGS_*`` (floors, key)
        and ours on top, with ``query_timeout`` as the query deadline."""
        env = {k: v for k, v in os.environ.items() if k.startswith("POWERCONTEXT_EMBEDDINGS_")}
        env["POWERCONTEXT_EMBEDDINGS_QUERY_TIMEOUT"] = query_timeout
        if self.url is None:
            return env | {"POWERCONTEXT_EMBEDDINGS": "local"}
        return env | {
            "POWERCONTEXT_EMBEDDINGS": "openai",
            "POWERCONTEXT_EMBEDDINGS_BASE_URL": self.url,
            "POWERCONTEXT_EMBEDDINGS_MODEL": str(self.model),
            "POWERCONTEXT_EMBEDDINGS_DIMENSION": str(self.dimension or self.probe()),
        }

    def probe(self) -> int:
        """The endpoint's vector size, from one embedding of a short text."""
        key = os.environ.get("POWERCONTEXT_EMBEDDINGS_API_KEY")
        answer = httpx.post(
            self.url.rstrip("/") + "/embeddings",  # type: ignore[union-attr]
            json={"model": self.model, "input": ["dimension probe"]},
            headers={"Authorization": f"Bearer {key}"} if key else {},
            timeout=30,
        )
        answer.raise_for_status()
        self.dimension = len(answer.json()["data"][0]["embedding"])
        log(f"  the endpoint answers vectors of {self.dimension} dimensions")
        return self.dimension


def serve_process(
    home: Path, database_url: str | None, log_path: Path, ready_timeout: float = 60
) -> tuple[subprocess.Popen[bytes], str]:
    """``powercontext serve`` on a free port with ``home`` as its data dir, started as
    :func:`local_daemon` starts it (no ``POWERCONTEXT_*`` of the caller), stderr to
    ``log_path``; returned once ready, with its base URL. The caller owns the process: a
    bench running several daemons on one database, or killing one on purpose, needs that."""
    port = _free_port()
    args = [sys.executable, "-m", "powercontext_runtime.cli.main", "serve",
            "--port", str(port), "--data-dir", str(home)]  # fmt: skip
    if database_url:
        args += ["--database-url", database_url]
    env = {k: v for k, v in os.environ.items() if not k.startswith("POWERCONTEXT_")}
    with open(log_path, "ab") as stderr:
        process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=stderr, env=env)
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_ready(url, process, log_path, ready_timeout)
    except BaseException:
        process.kill()
        process.wait()
        raise
    return process, url


@contextlib.contextmanager
def local_daemon(
    database_url: str | None = None,
    ready_timeout: float = 60,
    data_dir: Path | None = None,
    workers: int = 1,
    embeddings: str = "off",
    embeddings_env: dict[str, str] | None = None,
) -> Iterator[Target]:
    """Run ``powercontext serve`` from this interpreter's environment in a fresh temp dir.

    The bench keeps its own small launcher instead of importing ``tests/support/daemon.py``:
    benchmarks must run as plain scripts from the venv, without the test package on sys.path.
    ``POWERCONTEXT_*`` variables are dropped so the caller's config cannot leak into a run.
    With ``data_dir`` the daemon's home (database, token) is that directory instead and is
    kept afterwards, so a scope loaded once (minutes at 100k) can be measured again later.
    ``embeddings`` (``local``) turns the semantic recall channel on; see :func:`wait_embedded`.
    ``embeddings_env`` (``Embeddings.env``) sets it up instead, e.g. for a user's endpoint.
    """
    with tempfile.TemporaryDirectory(prefix="powercontext-bench-") as tmp:
        home = Path(data_dir) if data_dir is not None else Path(tmp) / "home"
        log = Path(tmp) / "daemon-stderr.log"
        port = _free_port()
        args = [sys.executable, "-m", "powercontext_runtime.cli.main", "serve",
                "--port", str(port), "--data-dir", str(home)]  # fmt: skip
        if database_url:
            args += ["--database-url", database_url]
        if workers != 1:
            args += ["--workers", str(workers)]
        env = {k: v for k, v in os.environ.items() if not k.startswith("POWERCONTEXT_")}
        if embeddings != "off":
            env["POWERCONTEXT_EMBEDDINGS"] = embeddings
        env.update(embeddings_env or {})
        with open(log, "wb") as stderr:
            process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=stderr, env=env)
        url = f"http://127.0.0.1:{port}"
        try:
            _wait_ready(url, process, log, ready_timeout)
            token = (home / "auth" / "token").read_text().strip()
            backend = "sqlite" if not database_url else database_url.split(":", 1)[0]
            where = "fresh data dir" if data_dir is None else f"data dir {data_dir}"
            if workers != 1:
                where += f", {workers} workers"
            if embeddings != "off":
                where += f", embeddings {embeddings}"
            description = f"self-started daemon ({backend}, {where})"
            yield Target(url, token, description, process.pid, home, log)
            if process.poll() is not None:
                raise BenchError("daemon died during the run:\n" + log.read_text()[-2000:])
        finally:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
                try:
                    process.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()


@contextlib.contextmanager
def open_target(
    url: str | None,
    token: str | None,
    database_url: str | None = None,
    data_dir: Path | None = None,
    workers: int = 1,
    embeddings: str = "off",
    embeddings_env: dict[str, str] | None = None,
) -> Iterator[Target]:
    """The given base URL (token from ``--token`` or POWERCONTEXT_TOKEN), else a local daemon."""
    if url:
        if database_url:
            raise BenchError("--database-url only applies to a self-started daemon (no --url)")
        if data_dir:
            raise BenchError("--data-dir only applies to a self-started daemon (no --url)")
        if embeddings != "off":
            raise BenchError("--embeddings only applies to a self-started daemon (no --url)")
        token = token or os.environ.get("POWERCONTEXT_TOKEN")
        if not token:
            raise BenchError("--url needs --token or POWERCONTEXT_TOKEN")
        yield Target(url.rstrip("/"), token, f"external runtime at {url}")
        return
    daemon = local_daemon(
        database_url, data_dir=data_dir, workers=workers, embeddings=embeddings,
        embeddings_env=embeddings_env,
    )  # fmt: skip
    with daemon as target:
        yield target if token is None else dataclasses.replace(target, token=token)


def wait_embedded(target: Target, timeout: float = 900, database_url: str | None = None) -> int:
    """Wait until the self-started daemon's embedding worker has a vector for every current,
    active entry version; the count. The runtime has no API for its queue, so this reads its
    database: the SQLite file read-only, or the OceanBase/seekdb ``database_url`` the daemon
    was started on (its ``memory_vectors_d512``). A bench measuring hybrid recall must not
    start before the backfill is done (the worker embeds ≈ 150 entries/s on one core)."""
    if database_url:
        return _wait_embedded_oceanbase(database_url, timeout)
    if target.home is None:
        raise BenchError("waiting for embeddings needs a self-started daemon")
    uri = f"file:{target.home / 'powercontext.db'}?mode=ro"
    deadline = time.monotonic() + timeout
    while True:
        with contextlib.closing(sqlite3.connect(uri, uri=True, timeout=30)) as db:
            (pending,) = db.execute(_PENDING_SQL.format(table="memory_vectors")).fetchone()
            (done,) = db.execute("SELECT count(DISTINCT version_id) FROM memory_vectors").fetchone()
        if pending == 0:
            return int(done)
        if time.monotonic() > deadline:
            raise BenchError(f"{pending} entry versions still without a vector after {timeout} s")
        time.sleep(0.2)  # polling the worker's progress, not synchronising on time


_PENDING_SQL = (
    "SELECT count(*) FROM memory_versions v WHERE v.valid_to IS NULL"
    " AND v.state = 'active' AND NOT EXISTS"
    " (SELECT 1 FROM {table} x WHERE x.version_id = v.id)"
)
_HAS_VECTOR_SQL = (
    "SELECT 1 FROM memory_versions v JOIN {table} x ON x.version_id = v.id"
    " WHERE v.entry_version_id = {version}"
)
OCEANBASE_VECTOR_TABLE = "memory_vectors_d512"  # the local model's 512 dimensions


def _wait_embedded_oceanbase(database_url: str, timeout: float) -> int:
    """:func:`wait_embedded` on OceanBase: the same anti-join over SQL, polled every 2 s (each
    count scans the versions, and the server is busy inserting into the HNSW index)."""
    import sqlalchemy

    engine = sqlalchemy.create_engine(database_url, pool_pre_ping=True)
    deadline = time.monotonic() + timeout
    last_log = 0.0
    try:
        while True:
            with engine.connect() as conn:
                table = OCEANBASE_VECTOR_TABLE
                exists = conn.exec_driver_sql(f"SHOW TABLES LIKE '{table}'").first()
                pending = done = None
                if exists is not None:
                    pending = conn.exec_driver_sql(_PENDING_SQL.format(table=table)).scalar_one()
                    done = conn.exec_driver_sql(
                        f"SELECT count(DISTINCT version_id) FROM {table}"
                    ).scalar_one()
            if pending == 0:
                return int(done or 0)
            if time.monotonic() > deadline:
                raise BenchError(
                    f"{pending} entry versions still without a vector after {timeout} s"
                )
            if time.monotonic() - last_log > 60:
                last_log = time.monotonic()
                log(f"  embedding: {done or 0:,} vectors, {pending if pending is not None else '?'}"
                    " versions pending")  # fmt: skip
            time.sleep(2.0)  # polling the worker's progress, not synchronising on time
    finally:
        engine.dispose()


@contextlib.contextmanager
def vector_probe(
    target: Target, database_url: str | None = None
) -> Iterator[Callable[[str], bool]]:
    """``has_vector(entry_version_id)``: whether the self-started daemon's embedding worker
    has stored that version's vector yet, read from its database as :func:`wait_embedded`
    reads it (each call sees the latest commit)."""
    if database_url:
        import sqlalchemy

        engine = sqlalchemy.create_engine(database_url, pool_pre_ping=True)
        query = sqlalchemy.text(
            _HAS_VECTOR_SQL.format(table=OCEANBASE_VECTOR_TABLE, version=":version")
        )
        try:
            with engine.connect() as conn:

                def has_vector_oceanbase(version: str) -> bool:
                    found = conn.execute(query, {"version": version}).first() is not None
                    conn.rollback()  # a new snapshot for the next look
                    return found

                yield has_vector_oceanbase
        finally:
            engine.dispose()
        return
    if target.home is None:
        raise BenchError("probing the embedding worker needs a self-started daemon")
    uri = f"file:{target.home / 'powercontext.db'}?mode=ro"
    with contextlib.closing(sqlite3.connect(uri, uri=True, timeout=30, isolation_level=None)) as db:
        query = _HAS_VECTOR_SQL.format(table="memory_vectors", version="?")

        def has_vector_sqlite(version: str) -> bool:
            return db.execute(query, (version,)).fetchone() is not None

        yield has_vector_sqlite


# -- writing memories ---------------------------------------------------------------------------


def remember(client: httpx.Client, scope_id: str, item: MemoryItem) -> httpx.Response:
    """One remember call; raises :class:`BenchError` on anything but 200."""
    response = client.post(REMEMBER_PATH, json=item.payload(scope_id))
    if response.status_code != 200:
        raise BenchError(f"remember -> HTTP {response.status_code}: {response.text[:300]}")
    return response


@dataclass(slots=True)
class LoadStats:
    entries: int = 0
    seconds: float = 0.0
    retries: int = 0
    errors: list[str] = field(default_factory=list)

    @property
    def per_second(self) -> float:
        return self.entries / self.seconds if self.seconds > 0 else 0.0


def load_memories(
    target: Target, scope_id: str, items: Sequence[MemoryItem], *, concurrency: int
) -> LoadStats:
    """Write ``items`` with a bounded pool of ``concurrency`` threads, one keep-alive client each.

    Loading over HTTP (not straight into the database) is what makes the bench usable against
    any implementation. 503 (database busy) is retried a few times because loading is setup,
    not measurement; any other failure stops all workers and raises.
    """
    stats = LoadStats()
    lock = threading.Lock()
    failed = threading.Event()
    done = [0]
    report_every = max(1000, len(items) // 10)  # long loads take minutes: show they progress
    started = time.perf_counter()

    def write_one(client: httpx.Client, item: MemoryItem) -> None:
        for attempt in range(5):
            response = client.post(REMEMBER_PATH, json=item.payload(scope_id))
            if response.status_code != 503:
                break
            with lock:
                stats.retries += 1
            time.sleep(0.05 * (attempt + 1))
        if response.status_code != 200:
            raise BenchError(f"load remember -> HTTP {response.status_code}: {response.text[:300]}")

    def worker(chunk: Sequence[MemoryItem]) -> None:
        try:
            with target.client() as client:
                for item in chunk:
                    if failed.is_set():
                        return
                    write_one(client, item)
                    with lock:
                        done[0] += 1
                        if done[0] % report_every == 0 and done[0] < len(items):
                            rate = done[0] / (time.perf_counter() - started)
                            log(f"  ... {done[0]:,}/{len(items):,} loaded ({rate:.0f}/s)")
        except BaseException:
            failed.set()
            raise

    chunks = [items[i::concurrency] for i in range(concurrency) if items[i::concurrency]]
    with ThreadPoolExecutor(max_workers=max(1, concurrency)) as pool:
        futures = [pool.submit(worker, chunk) for chunk in chunks]
        for future in futures:
            exc = future.exception()
            if exc is not None:
                stats.errors.append(str(exc))
    stats.seconds = time.perf_counter() - started
    if stats.errors:
        raise BenchError(stats.errors[0])
    stats.entries = len(items)
    return stats


# -- bulk loading through an export file ---------------------------------------------------------

EXPORT_FORMAT = "powercontext.export"
EXPORT_VERSION = 1
_COUNT_KEYS = (
    "memory_entries", "memory_versions", "artifact_revisions", "artifact_heads", "candidates",
    "candidate_versions", "sources",
)  # fmt: skip
_EPOCH_MS = 1_767_225_600_000  # 2026-01-01 UTC: synthetic timestamps, one ms per write


def _synthetic_id(prefix: str, seed: int, scope_id: str, index: int) -> str:
    digest = hashlib.sha256(f"{seed}\0{scope_id}\0{index}".encode()).hexdigest()
    return prefix + digest[:20]


def write_memory_export(
    out: BinaryIO,
    scope_id: str,
    items: Sequence[MemoryItem],
    *,
    seed: int,
    epoch_ms: int = _EPOCH_MS,
) -> int:
    """Write a ``powercontext.export`` file (docs/portability.md) holding one scope whose
    memory is ``items`` remembered in order: what loading them over HTTP would store, with
    deterministic ids and timestamps (write ``i`` at ``epoch_ms + i``: by default 2026-01-01;
    a bench whose reads count recent writes, such as the console's Activity, passes a recent
    one). Returns the bytes written.

    The content hash is the runtime's own function (imported lazily: only bulk loads need the
    runtime installed in this interpreter, which a self-started daemon does anyway).
    """
    return write_scopes_export(out, [(scope_id, items)], seed=seed, epoch_ms=epoch_ms)


def write_scopes_export(
    out: BinaryIO,
    scopes: Sequence[tuple[str, Sequence[MemoryItem]]],
    *,
    seed: int,
    epoch_ms: int = _EPOCH_MS,
) -> int:
    """:func:`write_memory_export` for several scopes in one file (one ``powercontext
    import`` process loads them all, one transaction each). The format lists scopes in byte
    order, so the sections are written in that order whatever order ``scopes`` has."""
    from powercontext_runtime.store.memory import content_hash

    def line(record: dict[str, Any]) -> bytes:
        return (json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n").encode()

    def counts_of(n: int) -> dict[str, int]:
        counts = dict.fromkeys(_COUNT_KEYS, 0)
        counts.update(memory_entries=n, memory_versions=n)
        return counts

    ordered = sorted(scopes, key=lambda scope: scope[0].encode())
    ids = [scope_id for scope_id, _ in ordered]
    if len(set(ids)) != len(ids):
        raise BenchError("an export lists each scope once")
    total = sum(len(items) for _, items in ordered)
    written = out.write(line({"format": EXPORT_FORMAT, "version": EXPORT_VERSION,
                              "runtime": "bench", "backend": "sqlite", "scopes": ids,
                              "counts": counts_of(total)}))  # fmt: skip
    for scope_id, items in ordered:
        n = len(items)
        written += out.write(line({"type": "scope", "scope_id": scope_id, "counts": counts_of(n)}))
        written += out.write(line({"type": "memory_head", "scope_id": scope_id, "revision": n,
                                   "updated_at": epoch_ms + n}))  # fmt: skip
        for revision, item in enumerate(items, start=1):
            tags = list(item.tags)
            record = {
                "type": "memory_version", "scope_id": scope_id, "revision": revision,
                "operation": "remember", "revision_created_at": epoch_ms + revision,
                "entry_id": _synthetic_id("mem_ent_", seed, scope_id, revision),
                "entry_version_id": _synthetic_id("mem_ver_", seed, scope_id, revision),
                "version": 1, "state": "active", "kind": item.kind, "text": item.text,
                "tags": tags, "reason": None, "source_refs": [], "artifact_refs": [],
                "content_hash": content_hash(item.kind, item.text, tags), "valid_to": None,
                "created_at": epoch_ms + revision,
            }  # fmt: skip
            written += out.write(line(record))
    return written


@dataclass(slots=True)
class BulkLoad:
    entries: int
    seconds: float  # the import command, start to exit
    write_seconds: float  # writing the export file

    @property
    def per_second(self) -> float:
        return self.entries / self.seconds if self.seconds > 0 else 0.0


def run_cli(
    home: Path, database_url: str | None, *command: str, what: str
) -> tuple[subprocess.CompletedProcess[str], float]:
    """``powercontext <command> --json`` on the daemon's home (and database), as a user runs
    it, in a fresh process without the bench's ``POWERCONTEXT_*`` environment; its result
    and seconds, or :class:`BenchError` with its stderr's tail."""
    args = [sys.executable, "-m", "powercontext_runtime.cli.main", *command,
            "--data-dir", str(home), "--json"]  # fmt: skip
    if database_url:
        args += ["--database-url", database_url]
    env = {k: v for k, v in os.environ.items() if not k.startswith("POWERCONTEXT_")}
    started = time.perf_counter()
    done = subprocess.run(args, capture_output=True, text=True, env=env, check=False)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise BenchError(f"{what} failed (exit {done.returncode}): {done.stderr[-2000:]}")
    return done, seconds


def cli_json(home: Path, database_url: str | None, *command: str, what: str) -> Any:
    """``powercontext <command> --json`` run as a user runs it (see :func:`run_cli`); its
    JSON answer. For the administrative verbs a bench needs (``token create``, ``token
    revoke``) on the same database as its daemons."""
    done, _ = run_cli(home, database_url, *command, what=what)
    return json.loads(done.stdout)


def bulk_load(
    home: Path,
    database_url: str | None,
    scope_id: str,
    items: Sequence[MemoryItem],
    *,
    seed: int,
    epoch_ms: int = _EPOCH_MS,
) -> BulkLoad:
    """Load ``items`` into a new scope with ``powercontext import`` (the bulk path) instead of
    one HTTP remember per entry: the scope is the same as :func:`load_memories` would make
    (same texts in the same order, one revision each), at thousands of entries per second.

    The daemon may be running on that database: the import is one transaction per scope.
    """
    with tempfile.TemporaryDirectory(prefix="powercontext-bulk-") as tmp:
        path = Path(tmp) / "load.jsonl"
        started = time.perf_counter()
        with open(path, "wb") as out:
            write_memory_export(out, scope_id, items, seed=seed, epoch_ms=epoch_ms)
        written = time.perf_counter() - started
        _, seconds = run_cli(home, database_url, "import", str(path), what="bulk import")
    return BulkLoad(len(items), seconds, written)


def bulk_load_scopes(
    home: Path,
    database_url: str | None,
    scopes: Sequence[tuple[str, Sequence[MemoryItem]]],
    *,
    seed: int,
    epoch_ms: int = _EPOCH_MS,
    jobs: int | None = None,
) -> BulkLoad:
    """:func:`bulk_load` of several new scopes with one ``powercontext import`` (one process
    start for all of them, still one transaction per scope; ``jobs`` scopes at a time, the
    command's default unless given): how a many-scope team database is filled in minutes."""
    with tempfile.TemporaryDirectory(prefix="powercontext-bulk-") as tmp:
        path = Path(tmp) / "load.jsonl"
        started = time.perf_counter()
        with open(path, "wb") as out:
            write_scopes_export(out, scopes, seed=seed, epoch_ms=epoch_ms)
        written = time.perf_counter() - started
        command = ["import", str(path)] + ([] if jobs is None else ["--jobs", str(jobs)])
        _, seconds = run_cli(home, database_url, *command, what="bulk import")
    return BulkLoad(sum(len(items) for _, items in scopes), seconds, written)


def compact_storage(home: Path, database_url: str | None, wait: float = 900) -> float:
    """``powercontext compact`` on the daemon's database, waited for: what ``import`` tells an
    OceanBase user to run after a bulk load (the server's major compaction merges the loaded
    rows now instead of in the background later, under the timed work). Seconds it took."""
    wait_arg = str(int(wait))
    done, seconds = run_cli(home, database_url, "compact", "--wait", wait_arg, what="compact")
    if not json.loads(done.stdout).get("finished"):
        raise BenchError(f"compact did not finish within {wait:g} s")
    return seconds


# -- reporting ----------------------------------------------------------------------------------


def machine_facts() -> dict[str, Any]:
    """Facts that make a number interpretable later (spec 08: machine, date, command)."""
    cpu_model = platform.processor() or ""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu_model = line.split(":", 1)[1].strip()
                break
    return {
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC"),
        "cpu_count": os.cpu_count(),
        "cpu_model": cpu_model,
        "platform": platform.platform(),
        "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version,
        "httpx": httpx.__version__,
    }


def command_line() -> str:
    """The exact invocation, with the script path relative to the repository when possible."""
    argv = list(sys.argv)
    with contextlib.suppress(ValueError):
        argv[0] = str(Path(argv[0]).resolve().relative_to(BENCH_DIR.parent))
    return shlex.join([Path(sys.executable).name, *argv])


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join("---" for _ in header) + " |"]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def replace_section(name: str, body: str, path: Path = RESULTS_PATH) -> None:
    """Rewrite only the block between this benchmark's markers, keeping everything else.

    Each benchmark owns one marked block, so scripts never clobber each other's numbers or the
    hand-written analysis around them. A missing block is appended.
    """
    start, end = f"<!-- bench:{name}:start -->", f"<!-- bench:{name}:end -->"
    block = f"{start}\n{body.strip()}\n{end}"
    text = path.read_text(encoding="utf-8") if path.exists() else "# Benchmark results\n"
    if start in text and end in text:
        before, rest = text.split(start, 1)
        after = rest.split(end, 1)[1]
        text = before + block + after
    else:
        text = text.rstrip("\n") + "\n\n" + block + "\n"
    path.write_text(text, encoding="utf-8")


def publish(report: dict[str, Any], markdown: str, section: str | None, *, as_json: bool) -> None:
    """What every bench does with its result: its block of bench/RESULTS.md rewritten (when
    ``section`` is given: ``--write-results``), then the report on stdout, as JSON for
    ``run_all.py`` (``--json``) or as the same markdown."""
    if section is not None:
        replace_section(section, markdown)
        log(f"  bench/RESULTS.md updated (section {section})")
    print(json.dumps(report, indent=2, ensure_ascii=False) if as_json else markdown)


def run_and_publish(
    name: str,
    args: Any,
    run: Callable[[Any], dict[str, Any]],
    render: Callable[[dict[str, Any]], str],
    section: str | Callable[[dict[str, Any]], str | None] | None,
) -> int:
    """A bench's ``main`` once its arguments are parsed: run it, then :func:`publish` its
    report, into ``section`` with ``--write-results`` (a name, or a function of the report
    that may decline with None). A :class:`BenchError` is the bench's failure: logged, exit 1.
    """
    try:
        report = run(args)
    except BenchError as exc:
        log(f"{name} failed: {exc}")
        return 1
    chosen = section(report) if callable(section) else section
    publish(report, render(report), chosen if args.write_results else None, as_json=args.json)
    return 0


def process_memory_kib(pid: int) -> dict[str, int]:
    """``VmRSS`` (resident now) and ``VmHWM`` (peak resident) of a local process, in KiB.

    Read from ``/proc/<pid>/status`` (Linux); raises :class:`BenchError` when unavailable.
    """
    wanted = {"VmRSS": "rss_kib", "VmHWM": "hwm_kib"}
    found: dict[str, int] = {}
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            key, _, value = line.partition(":")
            if key in wanted:
                found[wanted[key]] = int(value.split()[0])
    except (OSError, ValueError, IndexError) as exc:
        raise BenchError(f"cannot read the memory of process {pid}: {exc}") from exc
    if len(found) != len(wanted):
        raise BenchError(f"/proc/{pid}/status has no VmRSS/VmHWM")
    return found


def process_tree(pid: int) -> list[int]:
    """``pid`` and its live descendants (``serve --workers`` runs a supervisor and workers)."""
    found, pending = [], [pid]
    while pending:
        current = pending.pop()
        found.append(current)
        try:
            for task in Path(f"/proc/{current}/task").iterdir():
                pending += [int(child) for child in (task / "children").read_text().split()]
        except OSError:
            continue  # exited meanwhile
    return found


def tree_memory_kib(pid: int) -> dict[str, int]:
    """:func:`process_memory_kib` summed over the process tree (each peak summed: an upper
    bound of the tree's peak)."""
    total = {"rss_kib": 0, "hwm_kib": 0}
    for member in process_tree(pid):
        for key, value in process_memory_kib(member).items():
            total[key] += value
    return total


def tree_cpu_seconds(pid: int) -> float:
    """:func:`process_cpu_seconds` summed over the live process tree."""
    return sum(process_cpu_seconds(member) for member in process_tree(pid))


def process_cpu_seconds(pid: int) -> float:
    """User + system CPU time a local process has used so far (``/proc/<pid>/stat``, Linux)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        # Field 2 (comm) may contain spaces; utime/stime are fields 14/15, counted after ")".
        fields = stat[stat.rindex(")") + 2 :].split()
        ticks = int(fields[11]) + int(fields[12])
    except (OSError, ValueError, IndexError) as exc:
        raise BenchError(f"cannot read the CPU time of process {pid}: {exc}") from exc
    return ticks / os.sysconf("SC_CLK_TCK")


def system_busy_cpu_seconds() -> float:
    """CPU seconds the whole machine has spent busy (all cores, ``/proc/stat``, Linux).

    Subtracting the bench's own processes from a delta of this gives the CPU other work used
    meanwhile: on shared 2-core machines that is what explains a surprising number.
    """
    try:
        fields = Path("/proc/stat").read_text().splitlines()[0].split()
        # cpu user nice system idle iowait irq softirq steal ...: busy = all but idle, iowait.
        ticks = [int(v) for v in fields[1:9]]
    except (OSError, ValueError, IndexError) as exc:
        raise BenchError(f"cannot read /proc/stat: {exc}") from exc
    busy = sum(ticks) - ticks[3] - ticks[4]
    return busy / os.sysconf("SC_CLK_TCK")


NOISY_CORES = 0.25  # other processes using more than this while timing taints the numbers


def cpu_snapshot(daemon_pid: int | None) -> tuple[float, float, float] | None:
    """(machine busy, this process, daemon) CPU seconds; None off Linux or without a pid."""
    if daemon_pid is None:
        return None
    try:
        return (
            system_busy_cpu_seconds(),
            process_cpu_seconds(os.getpid()),
            process_cpu_seconds(daemon_pid),
        )
    except BenchError:
        return None


def other_cores(
    before: tuple[float, float, float], after: tuple[float, float, float], wall: float
) -> float:
    """Cores used by processes other than this one and the daemon between two snapshots."""
    busy, own, daemon = (a - b for a, b in zip(after, before, strict=True))
    return max(0.0, busy - own - daemon) / wall


def settle(daemon_pid: int | None, limit: float) -> float | None:
    """Wait until other processes use under ``NOISY_CORES`` for one whole second (at most
    ``limit`` seconds); the seconds waited, or ``None`` when it never got that quiet.

    Right after a fast load a database server keeps working on its own (seekdb merges its
    indexes for a minute or more after 20k writes and used 1.5 of 2 cores meanwhile), which
    says nothing about how the runtime scales; timing then made the OceanBase ratio swing
    between 1.1 and 1.9 on unchanged code. Each one-second window is a CPU sample, not a
    synchronisation: the timed phase starts either way and the report says how long it waited.
    """
    if limit <= 0:
        return 0.0
    started = time.perf_counter()
    while True:
        before, window = cpu_snapshot(daemon_pid), time.perf_counter()
        if before is None:
            return 0.0  # nothing to observe (not Linux, or a remote daemon)
        time.sleep(1.0)
        after, window = cpu_snapshot(daemon_pid), time.perf_counter() - window
        if after is None:
            return 0.0
        if other_cores(before, after, window) < NOISY_CORES:
            return round(time.perf_counter() - started, 1)
        if time.perf_counter() - started >= limit:
            return None


def log(message: str) -> None:
    """Progress goes to stderr so ``--json`` output on stdout stays machine-readable."""
    print(message, file=sys.stderr, flush=True)
