"""Entry point: parse, dispatch, and map typed errors to exit code 1 (usage errors are 2)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from .. import __version__
from ..errors import PowerContextError
from ..settings import ConfigError
from . import admin, memory, serve
from .output import fail


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--json", action="store_true", help="machine-readable output")
    common.add_argument("--url", help="runtime URL (default: POWERCONTEXT_URL or :7411)")
    common.add_argument("--token", help="API token (default: POWERCONTEXT_TOKEN or token file)")
    parser = argparse.ArgumentParser(
        prog="powercontext", description="PowerContext runtime and operator commands."
    )
    parser.add_argument("--version", action="version", version=f"powercontext {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    serve.add_parser(sub)
    memory.add_parser(sub, common)
    admin.add_parsers(sub, common)
    return parser


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
