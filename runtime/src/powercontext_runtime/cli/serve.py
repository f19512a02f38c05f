"""``powercontext serve``: the daemon (uvicorn, one process)."""

from __future__ import annotations

import argparse
import logging
import signal
import sys

import uvicorn

from ..composition import Runtime
from ..http import create_app
from ..logs import configure_logging
from ..services.flush import PeriodicFlush
from ..settings import Settings

_log = logging.getLogger("powercontext.serve")


def run(args: argparse.Namespace) -> int:
    settings = Settings.load(
        home=args.home, host=args.host, port=args.port, database_url=args.database_url
    )
    configure_logging(settings.log_level, settings.log_format)
    runtime = Runtime.open(settings)
    try:
        runtime.ensure_local_token()
        app = create_app(runtime)
        config = uvicorn.Config(
            app,
            host=settings.host,
            port=settings.port,
            access_log=False,
            log_config=None,
            server_header=False,
            timeout_graceful_shutdown=10,
        )
        server = uvicorn.Server(config)
        token_note = (
            f"token file: {settings.token_file}" if settings.auth == "token" else "auth: none"
        )
        sys.stdout.write(f"PowerContext runtime: {settings.url}  ({token_note})\n")
        sys.stdout.flush()
        _log.info(
            "runtime_starting",
            extra={"backend": runtime.backend, "host": settings.host, "port": settings.port},
        )
        # uvicorn re-raises a captured SIGTERM after its graceful shutdown; under the default
        # disposition that kills the process (exit -15) before the pool below is closed. This
        # handler only asks the server to stop, so SIGTERM ends in a clean exit 0.
        signal.signal(signal.SIGTERM, lambda *_: setattr(server, "should_exit", True))
        periodic = None
        if settings.flush_interval > 0:
            periodic = PeriodicFlush(runtime.flush, settings.flush_interval)
            periodic.start()
        try:
            server.run()
        finally:
            if periodic is not None:
                periodic.stop()
    finally:
        runtime.close()
    return 0
