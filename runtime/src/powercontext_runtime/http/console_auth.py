"""Web console sessions: a signed cookie that names a token, and the CSRF secret it implies.

The whole security mechanism of the console (docs/ui.md § Security) is in this module:

* ``POST /ui/login`` takes a token (the operator's local token, or one made with
  ``powercontext token create``), verifies it exactly as a bearer token is verified, and sets
  the cookie ``powercontext_session`` (HttpOnly, SameSite=Strict, Path=/). Its value is
  ``v1.<token id>.<expiry>.<nonce>.<mac>``: the MAC is HMAC-SHA256 under a 256-bit key kept in
  ``<data dir>/auth/console-key`` (0600) over the other fields *and the token's stored secret
  hash*. The secret itself is never in the cookie.
* Every request the cookie authenticates looks the token up in the database, as a bearer
  token is looked up, and gets the principal of that token: a revoked (or rotated) token ends
  its sessions on their next request, in every worker process, without any server-side
  session state. A session also ends at its expiry (``SESSION_LIFETIME``), and logout clears
  the cookie.
* The CSRF secret is a second HMAC of the cookie value: the page reads it from
  ``GET /ui/session`` (same origin only) and sends it in ``X-PowerContext-CSRF`` with every
  request that is not a GET or HEAD; a cookie-authenticated request without it is refused
  with 403 ``csrf_failed`` before anything is read.

A request carrying ``Authorization`` is a bearer request and never looks at the cookie, so the
API behaves exactly as without the console; the cookie is honoured on ``/v1/…`` and ``/ui/…``
only (never on ``/mcp``).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import logging
import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..files import FILE_MODE, private_dir
from ..services.auth import Authenticator, Principal
from ..store.tokens import TokenStore

__all__ = [
    "COOKIE_NAME",
    "CSRF_HEADER",
    "KEY_FILE",
    "SESSION_LIFETIME",
    "ConsoleSession",
    "ConsoleSessions",
    "console_key",
    "cookie_value",
    "load_or_create_key",
]

COOKIE_NAME = "powercontext_session"
CSRF_HEADER = "x-powercontext-csrf"
KEY_FILE = "console-key"
#: Seconds a session lives from its login (absolute, not sliding).
SESSION_LIFETIME = 12 * 3600
#: The methods that change nothing and so need no CSRF header.
SAFE_METHODS = frozenset({"GET", "HEAD"})

_VALUE = re.compile(
    r"^v1\.([A-Za-z0-9-]{1,64})\.([0-9]{1,12})\.([A-Za-z0-9_-]{22})\.([A-Za-z0-9_-]{43})$"
)
_log = logging.getLogger("powercontext.console")
_SESSION_DOMAIN = b"powercontext-console-session-v1"
_CSRF_DOMAIN = b"powercontext-console-csrf-v1"


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def _mac(key: bytes, domain: bytes, *parts: str) -> str:
    message = b"\x00".join([domain, *(part.encode("utf-8") for part in parts)])
    return _b64(hmac.new(key, message, hashlib.sha256).digest())


@dataclass(frozen=True, slots=True)
class ConsoleSession:
    """A valid session: whose token it is, the CSRF secret its page must echo, when it ends."""

    principal: Principal
    token_name: str
    csrf: str
    expires_at: int


class ConsoleSessions:
    """Issues and checks console cookies; stateless apart from the key and the token table."""

    def __init__(
        self,
        tokens: TokenStore,
        key: bytes,
        *,
        lifetime: int = SESSION_LIFETIME,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if len(key) < 32:
            raise ValueError("the console key must have at least 256 bits")
        self._tokens = tokens
        self._authenticator = Authenticator(tokens)
        self._key = key
        self._lifetime = lifetime
        self._clock = clock

    def login(self, token: str) -> tuple[str, ConsoleSession] | None:
        """The cookie value and session for a valid ``token``; None for any invalid one."""
        principal = self._authenticator.principal_for(token)
        if principal is None:
            return None
        found = self._tokens.active(principal.principal_id)
        if found is None:  # revoked between the two reads
            return None
        info, secret_hash = found
        expires = int(self._clock()) + self._lifetime
        nonce = _b64(os.urandom(16))
        mac = _mac(self._key, _SESSION_DOMAIN, info.token_id, str(expires), nonce, secret_hash)
        value = f"v1.{info.token_id}.{expires}.{nonce}.{mac}"
        return value, self._session(value, principal, info.name, expires)

    def resume(self, value: str) -> ConsoleSession | None:
        """The session a cookie value stands for; None when it is malformed, forged, expired,
        or its token is unknown, revoked or was re-issued with another secret."""
        match = _VALUE.match(value)
        if match is None:
            return None
        token_id, expires_text, nonce, mac = match.groups()
        expires = int(expires_text)
        if expires <= self._clock():
            return None
        found = self._tokens.active(token_id)
        if found is None:
            return None
        info, secret_hash = found
        expected = _mac(self._key, _SESSION_DOMAIN, token_id, expires_text, nonce, secret_hash)
        if not hmac.compare_digest(expected, mac):
            return None
        principal = Principal(info.token_id, info.scopes, frozenset(info.capabilities))
        return self._session(value, principal, info.name, expires)

    def _session(self, value: str, principal: Principal, name: str, expires: int) -> ConsoleSession:
        return ConsoleSession(principal, name, _mac(self._key, _CSRF_DOMAIN, value), expires)

    @staticmethod
    def csrf_ok(session: ConsoleSession, header: str | None) -> bool:
        return header is not None and hmac.compare_digest(
            session.csrf.encode("ascii"), header.encode("utf-8", "replace")
        )

    def set_cookie(self, value: str) -> bytes:
        """The ``Set-Cookie`` header value for a new session. No ``Secure``: the daemon speaks
        plain HTTP on loopback (a browser would drop a Secure cookie there)."""
        return (
            f"{COOKIE_NAME}={value}; Max-Age={self._lifetime}; Path=/; HttpOnly; SameSite=Strict"
        ).encode("ascii")

    @staticmethod
    def clear_cookie() -> bytes:
        return f"{COOKIE_NAME}=; Max-Age=0; Path=/; HttpOnly; SameSite=Strict".encode("ascii")


def cookie_value(header: str | None) -> str | None:
    """The session cookie's value in a ``Cookie`` header (the first one, if repeated)."""
    if not header:
        return None
    for part in header.split(";"):
        name, sep, value = part.strip().partition("=")
        if sep and name == COOKIE_NAME:
            return value.strip()
    return None


def load_or_create_key(auth_dir: Path) -> bytes:
    """The data dir's console key (``auth/console-key``, 0600), made on first use.

    Created under a temporary name and linked into place, so worker processes starting
    together agree on one key (the loser of the race reads the winner's). Deleting the file
    and restarting ends every console session.
    """
    path = auth_dir / KEY_FILE
    if not path.exists():
        private_dir(auth_dir)
        tmp = auth_dir / f".{KEY_FILE}.{os.getpid()}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, FILE_MODE)
        try:
            os.fchmod(fd, FILE_MODE)
            os.write(fd, os.urandom(32).hex().encode("ascii") + b"\n")
        finally:
            os.close(fd)
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass
        finally:
            tmp.unlink()
    key = bytes.fromhex(path.read_text(encoding="ascii").strip())
    if len(key) < 32:
        raise ValueError(f"{path} holds no console key: delete it and restart")
    return key


def console_key(auth_dir: Path) -> bytes:
    """The data dir's key, or — when it cannot be read or made (a read-only data dir) — a key
    of this process alone, logged: the daemon still serves, and console sessions then last as
    long as the process (and, with several workers, hold only in the one that issued them)."""
    try:
        return load_or_create_key(auth_dir)
    except (OSError, ValueError) as exc:
        _log.warning("console_key_unavailable", extra={"error_type": type(exc).__name__})
        return os.urandom(32)
