"""``powercontext serve``: the daemon (uvicorn; one process, or a supervisor and N workers).

The daemon listens on TCP (``--host``/``--port``) and, on POSIX, on the unix-domain socket
``<data dir>/powercontext.sock`` (``--socket``), which local hooks and the CLI use by default
(:mod:`powercontext_runtime.local_socket`). Both sockets are bound here, before the runtime
opens the database and before the ready line is printed (:mod:`..serving.listeners`), and
every connection runs uvicorn's httptools protocol with the pre-auth limits of
:mod:`..serving.limits`.

With ``--workers 1`` (the default) one process serves HTTP. With more, this process keeps its
own runtime for start-up checks, the local token and the background jobs (periodic flush,
search-index compaction), and uvicorn's supervisor runs N worker processes that share both
sockets; each worker opens its own runtime from the same settings (passed through the
environment, see :func:`_export_settings`). Every write is a database transaction (SQLite WAL
or OceanBase), so workers need no other coordination; MCP is stateless, so any worker can
answer any request.
"""

from __future__ import annotations

import argparse
import gc
import logging
import os
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import uvicorn
from fastapi import FastAPI
from uvicorn.supervisors.multiprocess import Multiprocess

from ..composition import Runtime
from ..files import check_data_dir
from ..http import create_app
from ..logs import configure_logging
from ..metrics import prepare_multiprocess_dir
from ..services.distill import DistillWorker
from ..services.periodic import Periodic
from ..services.semantic import EmbeddingWorker
from ..serving.limits import ConnectionLimits, ServingConfig
from ..serving.listeners import ListenError, Listeners, open_listeners, raise_file_limit
from ..settings import Settings
from .output import fail

__all__ = ["run", "tune_garbage_collector", "worker_app"]

_log = logging.getLogger("powercontext.serve")
_UVICORN_OPTIONS: dict[str, object] = {
    "access_log": False,
    "log_config": None,
    "server_header": False,
    "timeout_graceful_shutdown": 10,
}
#: Connections the kernel queues per listening socket before the server accepts them.
BACKLOG = 2048
_YOUNG_GENERATION_THRESHOLD = 10_000  # CPython's default is 700
# Seconds between search-index compactions (SQLite): a round with nothing to merge is one
# short write transaction per indexed family.
COMPACT_INTERVAL = 10.0


def run(args: argparse.Namespace) -> int:
    settings = Settings.load(
        home=args.home,
        host=args.host,
        port=args.port,
        database_url=args.database_url,
        workers=args.workers,
        unix_socket=getattr(args, "socket", None),
    )
    configure_logging(settings.log_level, settings.log_format)
    # Before the socket is bound in it or anything else is written: another user's data dir
    # is refused with one sentence (exit 1).
    check_data_dir(settings.home, settings.sqlite_file, settings.unix_socket)
    nofile = raise_file_limit()
    try:
        listeners = open_listeners(settings.host, settings.port, settings.unix_socket, BACKLOG)
    except ListenError as exc:
        return fail(str(exc))
    # Until the server installs its own handler, SIGTERM unwinds through the finally blocks
    # (closing the runtime, removing the socket file) instead of killing the process.
    signal.signal(signal.SIGTERM, _exit_cleanly)
    try:
        limits = ConnectionLimits.from_settings(
            settings, listeners=len(listeners.sockets), nofile=nofile
        )
        _serve(settings, listeners, limits)
    finally:
        listeners.close()
    return 0


def _exit_cleanly(*_: object) -> None:
    raise SystemExit(0)


def _serve(settings: Settings, listeners: Listeners, limits: ConnectionLimits) -> None:
    runtime = Runtime.open(settings)
    try:
        runtime.ensure_local_token()
        sys.stdout.write(_ready_line(settings, listeners))
        sys.stdout.flush()
        _log.info(
            "runtime_starting",
            extra={
                "backend": runtime.backend,
                "host": settings.host,
                "port": settings.port,
                "workers": settings.workers,
            },
        )
        _log.info("connection_budget", extra={"count": limits.max_connections})
        jobs = _background_jobs(runtime, settings)
        for job in jobs:
            job.start()
        try:
            if settings.workers == 1:
                _serve_in_process(runtime, listeners, limits)
            else:
                _serve_with_workers(settings, listeners, limits)
        finally:
            for job in jobs:
                job.stop()
    finally:
        runtime.close()


def _ready_line(settings: Settings, listeners: Listeners) -> str:
    """``PowerContext runtime: <tcp url> and <unix url>  (token file …)``, printed once both
    sockets accept connections."""
    where = listeners.tcp_url
    if listeners.unix_url is not None:
        where += f" and {listeners.unix_url}"
    token_note = f"token file: {settings.token_file}" if settings.auth == "token" else "auth: none"
    workers_note = f", {settings.workers} workers" if settings.workers > 1 else ""
    return f"PowerContext runtime: {where}  ({token_note}{workers_note})\n"


def _background_jobs(
    runtime: Runtime, settings: Settings
) -> list[Periodic | EmbeddingWorker | DistillWorker]:
    """This process's jobs: with ``--workers N`` it is the supervisor, so each runs once per
    data dir, never once per worker."""
    jobs: list[Periodic | EmbeddingWorker | DistillWorker] = []
    if settings.flush_interval > 0:
        flush = runtime.flush.flush_pending
        jobs.append(Periodic("periodic_flush", settings.flush_interval, flush))
    if runtime.backend == "sqlite":
        compact = runtime.compact_search_index
        jobs.append(Periodic("search_index_compacted", COMPACT_INTERVAL, compact))
    worker = runtime.embedding_worker()  # the semantic channel's queue (None when off)
    if worker is not None:
        jobs.append(worker)
    distill = runtime.distill_worker()  # task results -> pending candidates (None when off)
    if distill is not None:
        jobs.append(distill)
    return jobs


def _serve_in_process(runtime: Runtime, listeners: Listeners, limits: ConnectionLimits) -> None:
    config = ServingConfig(create_app(runtime), limits=limits, **_UVICORN_OPTIONS)
    if runtime.semantic is not None:
        runtime.semantic.warm()
    server = uvicorn.Server(config)
    tune_garbage_collector()
    # uvicorn re-raises a captured SIGTERM after its graceful shutdown; under the default
    # disposition that kills the process (exit -15) before the pool is closed. This handler
    # only asks the server to stop, so SIGTERM ends in a clean exit 0.
    signal.signal(signal.SIGTERM, lambda *_: setattr(server, "should_exit", True))
    server.run(sockets=listeners.sockets)


def _serve_with_workers(settings: Settings, listeners: Listeners, limits: ConnectionLimits) -> None:
    _export_settings(settings)
    # Every worker records into its own files there; /metrics on any worker sums them all.
    prepare_multiprocess_dir(settings.home)
    config = ServingConfig(
        f"{__name__}:worker_app",
        factory=True,
        workers=settings.workers,
        limits=limits,
        **_UVICORN_OPTIONS,
    )
    # uvicorn's supervisor starts the workers, hands each both bound sockets, and handles
    # SIGINT/SIGTERM itself: it stops every worker, then returns here.
    Multiprocess(config, sockets=listeners.sockets).run()


def _export_settings(settings: Settings) -> None:
    """Hand the settings this process resolved (command line over environment) to the workers.

    Workers are fresh interpreters started by uvicorn; they see only the environment, so the
    values that may have come from the command line are written back into it.
    """
    os.environ.update(
        POWERCONTEXT_HOME=str(settings.home),
        POWERCONTEXT_DATABASE_URL=settings.database_url,
        POWERCONTEXT_HOST=settings.host,
        POWERCONTEXT_PORT=str(settings.port),
        POWERCONTEXT_WORKERS=str(settings.workers),
        POWERCONTEXT_SOCKET=str(settings.unix_socket) if settings.unix_socket else "off",
    )


def worker_app() -> FastAPI:
    """One worker's application (uvicorn calls this factory inside each worker process)."""
    settings = Settings.load()
    configure_logging(settings.log_level, settings.log_format)
    runtime = Runtime.open(settings)
    app = create_app(runtime)
    if runtime.semantic is not None:
        runtime.semantic.warm()  # each worker process has its own model
    serve_lifespan = app.router.lifespan_context

    @asynccontextmanager
    async def lifespan(instance: FastAPI) -> AsyncIterator[object]:
        try:
            async with serve_lifespan(instance) as state:
                yield state
        finally:
            runtime.close()

    app.router.lifespan_context = lifespan
    tune_garbage_collector()
    return app


def tune_garbage_collector() -> None:
    """Fewer, cheaper collections in a long-running server process.

    Everything alive once the app is built (modules, routes, SQLAlchemy's and pydantic's
    structures) is moved out of the collector's generations, so a full collection no longer
    walks it; and the youngest generation is collected after 10,000 new containers instead
    of 700, because a prepare creates a few thousand short-lived ones (the candidates' term
    lists) that die with the request. Measured on 100k entries: +4 % one-worker throughput in
    two interleaved runs each way (bench/RESULTS.md notes).
    """
    gc.collect()
    gc.freeze()
    gc.set_threshold(_YOUNG_GENERATION_THRESHOLD, *gc.get_threshold()[1:])
