"""Who is calling and which scopes they may touch (spec 03 § Authentication)."""

from __future__ import annotations

import hashlib
import os
import socket
import stat
from dataclasses import dataclass
from pathlib import Path

from ..errors import ForbiddenError
from ..settings import read_token_file
from ..store.tokens import TokenStore, scope_matches

__all__ = ["Authenticator", "Principal", "ensure_local_token"]


@dataclass(frozen=True, slots=True)
class Principal:
    """The caller's grants; ``require`` is the one scope check every operation uses."""

    scopes: tuple[str, ...]

    @classmethod
    def unrestricted(cls) -> Principal:
        return cls(("*",))

    def allows(self, scope_id: str) -> bool:
        return scope_matches(self.scopes, scope_id)

    def require(self, scope_id: str) -> None:
        if not self.allows(scope_id):
            raise ForbiddenError("this token is not granted the requested scope")


class Authenticator:
    """Turns a bearer token into the caller's grants (None when the token is not valid)."""

    def __init__(self, tokens: TokenStore) -> None:
        self._tokens = tokens

    def principal_for(self, token: str) -> Principal | None:
        info = self._tokens.verify(token)
        return None if info is None else Principal(info.scopes)


def local_token_name(path: Path) -> str:
    """One local token per data dir, so runtimes sharing a database never revoke each other's."""
    digest = hashlib.sha256(str(path.resolve()).encode("utf-8")).hexdigest()[:12]
    return f"local-{socket.gethostname()[:64]}-{digest}"


def ensure_local_token(tokens: TokenStore, path: Path) -> bool:
    """Make sure the local token file holds a valid all-scopes token; True if (re)issued.

    The secret is written to a 0600 file created with that mode from the start (never a
    world-readable moment), then moved into place atomically.
    """
    current = read_token_file(path)
    if current is not None and tokens.verify(current) is not None:
        _tighten(path)
        return False
    secret = tokens.rotate_local(local_token_name(path))
    path.parent.mkdir(parents=True, exist_ok=True)
    os.chmod(path.parent, 0o700)
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(secret + "\n")
    os.replace(tmp, path)
    return True


def _tighten(path: Path) -> None:
    if stat.S_IMODE(path.stat().st_mode) != 0o600:
        os.chmod(path, 0o600)
