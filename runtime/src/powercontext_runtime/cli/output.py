"""Shared CLI plumbing: output (human text, or one JSON document with ``--json``), clients."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

if TYPE_CHECKING:
    import argparse

    from ..client import PowerContextClient


def emit(value: BaseModel | dict[str, Any] | list[Any], *, as_json: bool, human: str) -> None:
    if as_json:
        data = value.model_dump(mode="json") if isinstance(value, BaseModel) else value
        sys.stdout.write(json.dumps(data, ensure_ascii=False, indent=2) + "\n")
    else:
        sys.stdout.write(human.rstrip("\n") + "\n")


def fail(message: str) -> int:
    sys.stderr.write(f"powercontext: {message}\n")
    return 1


def scoped_client(args: argparse.Namespace) -> PowerContextClient:
    """A client for a scoped verb; a missing scope is a usage error (exit 2, spec 01)."""
    from ..client import PowerContextClient

    if not args.scope:
        sys.stderr.write("powercontext: --scope (or POWERCONTEXT_SCOPE_ID) is required\n")
        raise SystemExit(2)
    return PowerContextClient(args.url, token=args.token)


def json_argument(value: str, what: str) -> Any:
    """A JSON argument given inline, as ``@FILE``, or as ``-`` for standard input."""
    if value == "-":
        value = sys.stdin.read()
    elif value.startswith("@"):
        value = Path(value[1:]).read_text(encoding="utf-8")
    try:
        return json.loads(value)
    except json.JSONDecodeError:
        raise SystemExit(f"powercontext: {what} must be JSON") from None
