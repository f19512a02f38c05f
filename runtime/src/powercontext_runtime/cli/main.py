"""Entry point: parse, dispatch, and map typed errors to exit code 1 (usage errors are 2)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from .. import __version__
from ..errors import PowerContextError
from ..settings import ConfigError
from . import admin, bootstrap, context, memory, review, service
from .output import fail


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--json", action="store_true", help="machine-readable output")
    common.add_argument(
        "--url",
        help="runtime URL: http://HOST:PORT or unix:/path/to/powercontext.sock (default: "
        "POWERCONTEXT_URL, else the data dir's unix socket; http://127.0.0.1:7411 on Windows)",
    )
    common.add_argument("--token", help="API token (default: POWERCONTEXT_TOKEN or token file)")
    parser = argparse.ArgumentParser(
        prog="powercontext", description="PowerContext runtime and operator commands."
    )
    parser.add_argument("--version", action="version", version=f"powercontext {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _add_serve_parser(sub)
    memory.add_parser(sub, common)
    context.add_parser(sub, common)
    review.add_parsers(sub, common)
    bootstrap.add_parsers(sub, common)
    admin.add_parsers(sub, common)
    service.add_parsers(sub, common)
    return parser


def _add_serve_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    # The server stack (FastAPI, uvicorn) is imported only by `serve` itself: every other
    # verb is a short-lived client process and should start fast.
    p = sub.add_parser("serve", help="run the runtime daemon in the foreground")
    p.add_argument("--host", help="bind address (default 127.0.0.1)")
    p.add_argument("--port", type=int, help="port (default 7411)")
    p.add_argument("--data-dir", dest="home", help="data directory (POWERCONTEXT_HOME)")
    p.add_argument("--database-url", help="sqlite:///… or mysql+pymysql://… (OceanBase)")
    p.add_argument(
        "--socket",
        metavar="PATH|off",
        help="unix socket for local clients (default <data dir>/powercontext.sock on POSIX; "
        "POWERCONTEXT_SOCKET); off serves TCP only",
    )
    p.add_argument(
        "--workers",
        type=int,
        help="HTTP worker processes (default 1; POWERCONTEXT_WORKERS); more use more cores",
    )
    p.set_defaults(handler=_serve)


def _serve(args: argparse.Namespace) -> int:
    from .serve import run

    return run(args)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.handler(args))
    except PowerContextError as exc:
        return fail(f"{exc.message} ({exc.code})")
    except ConfigError as exc:
        return fail(f"configuration: {exc}")
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
