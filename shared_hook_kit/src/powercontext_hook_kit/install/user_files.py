"""The user's files: atomic replacement and strict JSON.

These files belong to the user, so a write is all or nothing (temporary file in the same
folder, fsync, ``os.replace``, permissions kept) and a file that cannot be parsed exactly is
never rewritten. What a file looked like before we changed it is :mod:`.ledger`'s business.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from .report import InstallError

__all__ = ["atomic_write", "dump_json", "load_json_object"]


def atomic_write(path: Path, data: bytes, *, new_file_mode: int = 0o644) -> None:
    """Replace ``path`` with ``data`` so readers see the old or the new file, never a torn one.

    An existing file keeps its permission bits; a new one gets ``new_file_mode``.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        mode = path.stat().st_mode & 0o7777
    except FileNotFoundError:
        mode = new_file_mode
    fd, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temporary, mode)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


def load_json_object(path: Path) -> dict[str, Any] | None:
    """The JSON object in ``path``; ``None`` if there is no file. Anything else is an error,
    because a file we cannot read exactly is a file we must not rewrite."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise InstallError(f"cannot read {path}: {exc.strerror}") from exc
    if not raw.strip():
        return {}
    try:
        document = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise InstallError(f"{path} is not valid JSON; fix or move it, then retry") from exc
    if not isinstance(document, dict):
        raise InstallError(f"{path} does not hold a JSON object; fix or move it, then retry")
    return document


def dump_json(document: Any) -> bytes:
    """Stable, readable JSON (2-space indent, UTF-8, trailing newline), like the hosts write."""
    return (json.dumps(document, indent=2, ensure_ascii=False) + "\n").encode("utf-8")
