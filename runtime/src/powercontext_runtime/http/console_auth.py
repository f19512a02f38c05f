"""Web console sessions: a secret the page keeps and sends in a header, checked server-side.

The whole security mechanism of the console (docs/ui.md § Security) is in this module and the
few lines of middleware.py that call it:

* ``POST /ui/login`` takes a token (the operator's local token, or one made with
  ``powercontext token create``), verifies it exactly as a bearer token is verified, and
  answers a new session credential ``pcs_<43 characters>`` (256 random bits) in its JSON body.
  No cookie is set. The page keeps the credential in ``sessionStorage`` — readable by pages of
  the console's own origin (scheme, host *and* port) only, and per tab — and sends it in
  ``X-PowerContext-Session`` with every request.
* A browser never adds that header by itself, and a page of another origin (another port on
  127.0.0.1 included) can neither read the credential nor make the browser send it: setting
  the header cross-origin needs a CORS preflight the daemon never grants. So a request that
  carries a valid credential was sent by the console's own page, and needs no CSRF token.
* Sessions are rows of ``console_sessions`` (store/console_sessions.py) holding the SHA-256
  of the credential, the token id and the expiry. Every request carrying a credential looks
  the row and then the token up in the database, as a bearer token is looked up: logout
  deletes the row, and revoking (or re-issuing) the token ends its sessions, on their next
  request, in every worker process and on every daemon sharing the database. A session also
  ends at its expiry (``SESSION_LIFETIME``, absolute).

A request carrying ``Authorization`` is a bearer request and never looks at the session
header, so the API behaves exactly as without the console; the header is honoured on
``/v1/…`` and ``/ui/…`` only (never on ``/mcp``).
"""

from __future__ import annotations

import hashlib
import re
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass

from ..errors import ForbiddenError
from ..services.auth import Authenticator, Principal
from ..store.console_sessions import ConsoleSessionStore
from ..store.database import Database
from ..store.tokens import TokenStore

__all__ = [
    "SESSION_HEADER",
    "SESSION_LIFETIME",
    "ConsoleSession",
    "ConsoleSessions",
    "session_credential",
]

#: The request header that carries a session's credential (lowercase, as ASGI gives headers).
SESSION_HEADER = "x-powercontext-session"
#: Seconds a session lives from its login (absolute, not sliding).
SESSION_LIFETIME = 12 * 3600

_CREDENTIAL = re.compile(r"^pcs_[A-Za-z0-9_-]{43}$")


@dataclass(frozen=True, slots=True)
class ConsoleSession:
    """A live session: whose token it is and when it ends (epoch seconds). Never holds the
    credential."""

    principal: Principal
    token_name: str
    expires_at: int


def session_credential(header: str | None) -> str | None:
    """The credential in an ``X-PowerContext-Session`` value; None when absent or not of the
    credential's shape (such a value cannot name a session, so it is not looked up)."""
    if header is None:
        return None
    value = header.strip()
    return value if _CREDENTIAL.match(value) else None


def _hash(credential: str) -> str:
    return hashlib.sha256(credential.encode("ascii")).hexdigest()


class ConsoleSessions:
    """Issues, checks and ends console sessions; their state is in the database only."""

    def __init__(
        self,
        db: Database,
        tokens: TokenStore,
        *,
        lifetime: int = SESSION_LIFETIME,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._store = ConsoleSessionStore(db)
        self._tokens = tokens
        self._authenticator = Authenticator(tokens)
        self._lifetime = lifetime
        self._clock = clock

    def login(self, token: str) -> tuple[str, ConsoleSession] | None:
        """A new session's credential and description for a valid ``token``; None for any
        invalid one. A token without ``read`` (the console cannot show it anything) gets a
        403 ``capability_forbidden`` and no session."""
        principal = self._authenticator.principal_for(token)
        if principal is None:
            return None
        found = self._tokens.active(principal.principal_id)
        if found is None:  # revoked between the two reads
            return None
        if not principal.can("read"):
            raise ForbiddenError(
                "this token lacks the read capability the console needs",
                code="capability_forbidden",
                details={"required": "read"},
            )
        info = found[0]
        now_ms = int(self._clock() * 1000)
        expires_ms = now_ms + self._lifetime * 1000
        credential = "pcs_" + secrets.token_urlsafe(32)
        self._store.add(_hash(credential), info.token_id, now_ms, expires_ms)
        return credential, ConsoleSession(principal, info.name, expires_ms // 1000)

    def resume(self, credential: str) -> ConsoleSession | None:
        """The session a credential stands for; None when it was never issued, was ended by
        logout, has expired, or its token is unknown or revoked."""
        found = self._store.find(_hash(credential))
        if found is None:
            return None
        token_id, expires_ms = found
        if expires_ms <= self._clock() * 1000:
            return None
        active = self._tokens.active(token_id)
        if active is None:
            return None
        info = active[0]
        principal = Principal(info.token_id, info.scopes, frozenset(info.capabilities))
        return ConsoleSession(principal, info.name, expires_ms // 1000)

    def logout(self, credential: str) -> bool:
        """End the session now, for every process; whether it was live."""
        return self._store.end(_hash(credential))
