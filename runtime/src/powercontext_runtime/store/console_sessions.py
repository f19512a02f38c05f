"""The web console's server-side sessions: one row per live session (store/schema.py).

A row holds the SHA-256 of the session's secret, never the secret, so reading the table does
not give a usable session; the token it acts as, and its expiry (epoch milliseconds). The
policy — credential format, lifetime, the token's own checks — is http/console_auth.py's.
"""

from __future__ import annotations

from sqlalchemy import Connection, bindparam, delete, insert, select

from .database import Database
from .schema import console_sessions

__all__ = ["ConsoleSessionStore"]

_FIND = select(console_sessions.c.token_id, console_sessions.c.expires_at).where(
    console_sessions.c.secret_hash == bindparam("secret_hash")
)


class ConsoleSessionStore:
    def __init__(self, db: Database) -> None:
        self._db = db

    def add(self, secret_hash: str, token_id: str, now_ms: int, expires_ms: int) -> None:
        """Record a new session, deleting the expired ones in the same write: no sweeper is
        needed, and the table holds at most the sessions of the last lifetime."""

        def work(conn: Connection) -> None:
            conn.execute(delete(console_sessions).where(console_sessions.c.expires_at <= now_ms))
            conn.execute(
                insert(console_sessions).values(
                    secret_hash=secret_hash,
                    token_id=token_id,
                    created_at=now_ms,
                    expires_at=expires_ms,
                )
            )

        self._db.write(work)

    def find(self, secret_hash: str) -> tuple[str, int] | None:
        """The token id and expiry of the session with this secret hash; None when there is
        none (never issued, logged out, or swept). Read on every console request, never
        cached, on the prompt path's read connection like a token lookup."""
        with self._db.prompt_read() as conn:
            row = conn.execute(_FIND, {"secret_hash": secret_hash}).first()
        return None if row is None else (str(row.token_id), int(row.expires_at))

    def end(self, secret_hash: str) -> bool:
        """Delete the session (logout); whether there was one."""

        def work(conn: Connection) -> bool:
            done = conn.execute(
                delete(console_sessions).where(console_sessions.c.secret_hash == secret_hash)
            )
            return bool(done.rowcount)

        return self._db.write(work)
