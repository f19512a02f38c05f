"""API tokens: stored only as hashes, each granted scope patterns and capabilities (spec 03).

A token reads ``pc_<token id>_<secret>``. The id locates the row; the secret's SHA-256 is
compared in constant time. The secret carries 256 random bits, so a fast hash is enough: there
is nothing to brute-force.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
from collections import namedtuple
from dataclasses import dataclass

from sqlalchemy import Connection, bindparam, insert, select, update

from ..contract.capabilities import AGENT_CAPABILITIES
from ..errors import ConflictError, NotFoundError
from ._sqlite import sqlite_driver
from .database import Database, now_ms
from .schema import tokens

__all__ = ["LEGACY_CAPABILITIES", "TokenInfo", "TokenStore", "scope_matches"]

#: What a token created before capabilities existed may do: an agent's share, never review.
LEGACY_CAPABILITIES: tuple[str, ...] = AGENT_CAPABILITIES


@dataclass(frozen=True, slots=True)
class TokenInfo:
    token_id: str
    name: str
    scopes: tuple[str, ...]
    capabilities: tuple[str, ...]
    created_at: int
    revoked: bool
    #: Made before capabilities existed (NULL in the database): ``capabilities`` is then
    #: :data:`LEGACY_CAPABILITIES`, until start-up upgrades a local token in place.
    legacy: bool = False


def scope_matches(patterns: tuple[str, ...], scope_id: str) -> bool:
    """Exact ids, or a trailing ``*`` for a prefix (``*`` alone grants every scope)."""
    for pattern in patterns:
        if pattern.endswith("*"):
            if scope_id.startswith(pattern[:-1]):
                return True
        elif pattern == scope_id:
            return True
    return False


_COLUMNS = ("token_id", "name", "secret_hash", "scopes", "capabilities", "created_at", "revoked_at")
_VERIFY = select(*(tokens.c[name] for name in _COLUMNS)).where(
    tokens.c.token_id == bindparam("token_id")
)
_SQLITE_VERIFY = f"SELECT {', '.join(_COLUMNS)} FROM tokens WHERE token_id = ?"
_Row = namedtuple("_Row", _COLUMNS)  # the shape of a driver row, by name
#: What ``rotate_local`` puts in the name of the local token it replaces.
_REPLACED = "-replaced-"


def _hash(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


def _parse(token: str) -> tuple[str, str] | None:
    parts = token.split("_", 2)
    if len(parts) != 3 or parts[0] != "pc" or not parts[1] or not parts[2]:
        return None
    return parts[1], parts[2]


class TokenStore:
    def __init__(self, db: Database) -> None:
        self._db = db

    def create(self, name: str, scopes: list[str], capabilities: list[str]) -> str:
        """Create a token and return its secret (shown once, never stored)."""
        token_id = secrets.token_hex(6)
        secret = secrets.token_urlsafe(32)

        def work(conn: Connection) -> None:
            if self._by_name(conn, name) is not None:
                raise ConflictError("a token with this name already exists", code="token_exists")
            conn.execute(
                insert(tokens).values(
                    token_id=token_id,
                    name=name,
                    secret_hash=_hash(secret),
                    scopes=json.dumps(scopes),
                    capabilities=json.dumps(capabilities),
                    created_at=now_ms(),
                    revoked_at=None,
                )
            )

        self._db.write(work)
        return f"pc_{token_id}_{secret}"

    def verify(self, token: str) -> TokenInfo | None:
        parsed = _parse(token)
        if parsed is None:
            return None
        token_id, secret = parsed
        row = self._active_row(token_id)
        if row is None or not hmac.compare_digest(row.secret_hash, _hash(secret)):
            return None
        return _info(row)

    def was_replaced(self, token: str) -> bool:
        """Whether ``token`` (its exact secret) is a local token that start-up replaced
        (``rotate_local``: an upgrade by a release that re-issued older local tokens, or a
        token file that did not match its role), so a refusal can say what happened and what
        to do instead of a bare 401. Only read when a token has already been refused."""
        parsed = _parse(token)
        if parsed is None:
            return False
        token_id, secret = parsed
        with self._db.read() as conn:
            row = conn.execute(_VERIFY, {"token_id": token_id}).first()
        return (
            row is not None
            and row.revoked_at is not None
            and _REPLACED in row.name
            and hmac.compare_digest(row.secret_hash, _hash(secret))
        )

    def active(self, token_id: str) -> tuple[TokenInfo, str] | None:
        """The token with this id and its secret's hash, unless it is unknown or revoked.

        For the web console's sessions (http/console_auth.py), which name a token by its id
        and are checked against the database on every request like a bearer token, so that
        revoking the token ends them at once; the hash lets a session bind itself to exactly
        that secret."""
        row = self._active_row(token_id)
        return None if row is None else (_info(row), row.secret_hash)

    def _active_row(self, token_id: str) -> _Row | None:
        # Every request verifies its token (revocation is immediate, in every worker and on
        # every daemon sharing the database), so this is on every request's path: the prompt
        # path's own read connection, and on SQLite the driver cursor with fixed SQL (building
        # and running a SQLAlchemy select cost ≈ 4× the lookup itself).
        with self._db.prompt_read() as conn:
            if self._db.backend == "sqlite":
                found = sqlite_driver(conn).execute(_SQLITE_VERIFY, (token_id,)).fetchone()
                row = None if found is None else _Row(*found)
            else:
                row = conn.execute(_VERIFY, {"token_id": token_id}).first()
        if row is None or row.revoked_at is not None:
            return None
        return row

    def list(self) -> list[TokenInfo]:
        with self._db.read() as conn:
            rows = conn.execute(select(tokens).order_by(tokens.c.created_at)).all()
        return [_info(row) for row in rows]

    def revoke(self, name: str) -> None:
        def work(conn: Connection) -> None:
            row = self._by_name(conn, name)
            if row is None:
                raise NotFoundError("no token with this name", code="token_not_found")
            if row.revoked_at is None:
                conn.execute(
                    update(tokens)
                    .where(tokens.c.token_id == row.token_id)
                    .values(revoked_at=now_ms())
                )

        self._db.write(work)

    def rotate_local(self, name: str, capabilities: tuple[str, ...]) -> str:
        """(Re)issue one of a data dir's local all-scopes tokens, revoking only its
        predecessor of the same name."""
        token_id = secrets.token_hex(6)
        secret = secrets.token_urlsafe(32)

        def work(conn: Connection) -> None:
            existing = self._by_name(conn, name)
            if existing is not None:
                conn.execute(
                    update(tokens)
                    .where(tokens.c.token_id == existing.token_id)
                    .values(
                        name=f"{name}{_REPLACED}{existing.token_id}",
                        revoked_at=now_ms(),
                    )
                )
            conn.execute(
                insert(tokens).values(
                    token_id=token_id,
                    name=name,
                    secret_hash=_hash(secret),
                    scopes=json.dumps(["*"]),
                    capabilities=json.dumps(list(capabilities)),
                    created_at=now_ms(),
                    revoked_at=None,
                )
            )

        self._db.write(work)
        return f"pc_{token_id}_{secret}"

    def upgrade_legacy(self, token_id: str, capabilities: tuple[str, ...]) -> bool:
        """Give a token made before capabilities existed the ``capabilities`` its use implies,
        keeping its secret (services/auth.py: the operator's local token of an older release);
        False if it is no longer such a token (revoked, or upgraded meanwhile)."""

        def work(conn: Connection) -> bool:
            done = conn.execute(
                update(tokens)
                .where(
                    tokens.c.token_id == token_id,
                    tokens.c.capabilities.is_(None),
                    tokens.c.revoked_at.is_(None),
                )
                .values(capabilities=json.dumps(list(capabilities)))
            )
            return bool(done.rowcount)

        return bool(self._db.write(work))

    @staticmethod
    def _by_name(conn: Connection, name: str):  # type: ignore[no-untyped-def]
        return conn.execute(select(tokens).where(tokens.c.name == name)).first()


def _info(row) -> TokenInfo:  # type: ignore[no-untyped-def]
    return TokenInfo(
        token_id=row.token_id,
        name=row.name,
        scopes=tuple(json.loads(row.scopes)),
        capabilities=(
            LEGACY_CAPABILITIES if row.capabilities is None else tuple(json.loads(row.capabilities))
        ),
        created_at=row.created_at,
        revoked=row.revoked_at is not None,
        legacy=row.capabilities is None,
    )
