"""Write the committed OpenAPI document (``make openapi``); a test fails when it drifts."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from ..composition import Runtime
from ..settings import Settings
from .app import create_app

__all__ = ["render_openapi"]


def render_openapi() -> str:
    settings = Settings.load(env={}, home="/nonexistent", database_url="sqlite://")
    runtime = Runtime.open(settings, prepare=False)
    try:
        document: dict[str, Any] = create_app(runtime).openapi()
    finally:
        runtime.close()
    return json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


if __name__ == "__main__":
    Path(sys.argv[1]).write_text(render_openapi(), encoding="utf-8")
