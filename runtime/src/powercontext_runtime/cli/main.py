"""Entry point: parse, dispatch, and report errors (exit 1 for an operation error, 2 for a
usage error; as JSON on stderr with ``--json``: see :mod:`.output`)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from .. import __version__
from ..errors import PowerContextError
from ..settings import ConfigError
from . import admin, bootstrap, context, memory, portability, review, service, task_results
from .output import Parser, UsageError, operation_failed, usage_failed, wants_json

_EPILOG = """\
--json, --url and --token may come before or after the command:
  powercontext --json memory list --scope S   ==   powercontext memory list --scope S --json

exit status: 0 success; 1 the operation failed (the runtime refused it or could not be
reached); 2 usage error (the command line could not be used; nothing was sent).

Errors go to stderr: one line "powercontext: MESSAGE (CODE…)", or with --json one JSON line,
the HTTP API's envelope {"error": {"code", "message", "details"}} ("usage_error" for exit 2).
"""


def _global_options(parser: argparse.ArgumentParser, *, defaults: bool) -> None:
    """``--json``, ``--url``, ``--token``: on the top-level parser with their defaults, and on
    every command (``defaults=False``) without, so a value given before the command is not
    reset by the command's parser."""

    def default(value: object) -> object:
        return value if defaults else argparse.SUPPRESS

    parser.add_argument(
        "--json",
        action="store_true",
        default=default(False),
        help="machine-readable output: one JSON document on stdout; errors as one JSON line "
        "on stderr",
    )
    parser.add_argument(
        "--url",
        default=default(None),
        help="runtime URL: http://HOST:PORT or unix:/path/to/powercontext.sock (default: "
        "POWERCONTEXT_URL, else the data dir's unix socket; http://127.0.0.1:7411 on Windows)",
    )
    parser.add_argument(
        "--token",
        default=default(None),
        help="API token (default: POWERCONTEXT_TOKEN or token file)",
    )


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    _global_options(common, defaults=False)
    parser = Parser(
        prog="powercontext",
        description="PowerContext runtime and operator commands.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"powercontext {__version__}")
    _global_options(parser, defaults=True)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _add_serve_parser(sub)
    memory.add_parser(sub, common)
    context.add_parser(sub, common)
    review.add_parsers(sub, common)
    task_results.add_parsers(sub, common)
    bootstrap.add_parsers(sub, common)
    admin.add_parsers(sub, common)
    portability.add_parsers(sub, common)
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
    arguments = list(sys.argv[1:] if argv is None else argv)
    as_json = wants_json(arguments)  # for errors of the command line itself
    try:
        args = build_parser().parse_args(arguments)
        as_json = bool(args.json)
        return int(args.handler(args))
    except UsageError as exc:
        usage_failed(exc, as_json=as_json)  # exit 2
    except PowerContextError as exc:
        return operation_failed(exc.code, exc.message, exc.details, as_json=as_json)
    except ConfigError as exc:
        message = str(exc) if as_json else f"configuration: {exc}"
        return operation_failed("configuration_error", message, None, as_json=as_json)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
