"""How commands print: human text by default, one JSON document with ``--json``."""

from __future__ import annotations

import json
import sys
from typing import Any

from pydantic import BaseModel


def emit(value: BaseModel | dict[str, Any] | list[Any], *, as_json: bool, human: str) -> None:
    if as_json:
        data = value.model_dump(mode="json") if isinstance(value, BaseModel) else value
        sys.stdout.write(json.dumps(data, ensure_ascii=False, indent=2) + "\n")
    else:
        sys.stdout.write(human.rstrip("\n") + "\n")


def fail(message: str) -> int:
    sys.stderr.write(f"powercontext: {message}\n")
    return 1
