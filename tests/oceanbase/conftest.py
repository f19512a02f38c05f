"""Make the repository root importable so the tests can use ``tools.seekdb``."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

try:
    _found = importlib.util.find_spec("tools.seekdb") is not None
except ModuleNotFoundError:
    _found = False
if not _found:
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
