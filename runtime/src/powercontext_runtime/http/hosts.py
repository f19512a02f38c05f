"""Which ``Host`` and ``Origin`` a request may carry: the guard against DNS rebinding and
cross-site requests from a browser on the same machine.

A web page can make the browser send requests to ``127.0.0.1:7411`` (a cross-site request,
whose ``Origin`` names the page) or, by pointing a name it controls at 127.0.0.1 (DNS
rebinding), even read the answers (``Host`` then names the page's domain). Neither needs a
token when auth is off, and with auth on they would still reach every route that reads
nothing secret. So every request, on every route, must name this daemon: a loopback host
(``localhost``, ``127.0.0.1``, ``::1``), the address it is bound to, or a name the
operator lists in ``POWERCONTEXT_ALLOWED_HOSTS``; and a browser's ``Origin``, when present,
must name one of those too. A rebinding attacker cannot make a browser send an IP literal or
``localhost`` as the host of *its* page, and cannot forge ``Origin``.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mcp.server.transport_security import TransportSecuritySettings

__all__ = ["HostPolicy"]

_LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")


def _host_and_port(value: str) -> tuple[str, str] | None:
    """The host and port (``""`` when absent) of a ``Host`` header (``name``, ``name:port``,
    ``[v6]:port``), the host lowercased; None when it is malformed."""
    value = value.strip().lower()
    if not value:
        return None
    if value.startswith("["):
        end = value.find("]")
        if end == -1:
            return None
        host, rest = value[1:end], value[end + 1 :]
        if rest and not (rest.startswith(":") and rest[1:].isdigit()):
            return None
        return host, rest[1:]
    host, colon, port = value.partition(":")
    if colon and not port.isdigit():
        return None
    return (host, port) if host else None


def _split_host(value: str) -> str | None:
    """The host part of a ``Host`` header, lowercased; None when it is malformed."""
    found = _host_and_port(value)
    return None if found is None else found[0]


class HostPolicy:
    """The allowed host names; one instance per app, built from the settings."""

    def __init__(self, bind_host: str, extra: Iterable[str] = ()) -> None:
        names = {*_LOOPBACK_NAMES, *(name.strip().lower() for name in extra if name.strip())}
        bound = bind_host.strip("[]").lower()
        try:
            address = ipaddress.ip_address(bound)
        except ValueError:
            pass
        else:
            if not address.is_unspecified:  # 0.0.0.0 / :: are not names clients use
                names.add(str(address))
        self._names = frozenset(names)

    def allows_host(self, header: str | None) -> bool:
        """A request without ``Host`` (HTTP/1.0) is refused: it cannot show it means us."""
        if header is None:
            return False
        host = _split_host(header)
        return host is not None and host in self._names

    def allows_origin(self, header: str | None) -> bool:
        """No ``Origin`` (every non-browser client) passes; ``null`` and foreign ones do not."""
        if header is None:
            return True
        scheme, sep, rest = header.strip().partition("://")
        if not sep or scheme.lower() not in ("http", "https") or "/" in rest:
            return False
        return self.allows_host(rest)

    @staticmethod
    def same_origin(origin: str | None, host: str | None) -> bool:
        """Whether a browser's ``Origin`` is the origin the request was sent to: the same host
        and port as its ``Host`` (a port left out is the scheme's default), over http or
        https (https when a TLS proxy is in front; one port has one listener, so the scheme
        cannot name another server). Stricter than :meth:`allows_origin`, which ignores the
        port: the web console's login and session requests use it, so that a page served
        from another port of the same machine is refused (docs/ui.md § Security). No
        ``Origin`` passes: browsers send it on every POST, so its absence means a client
        that is not a browser, and such a client needs no browser's protection."""
        if origin is None:
            return True
        scheme, sep, rest = origin.strip().partition("://")
        scheme = scheme.lower()
        if not sep or scheme not in ("http", "https") or "/" in rest or host is None:
            return False
        sent, served = _host_and_port(rest), _host_and_port(host)
        if sent is None or served is None:
            return False
        default = "443" if scheme == "https" else "80"
        return sent[0] == served[0] and int(sent[1] or default) == int(served[1] or default)

    def mcp_settings(self) -> TransportSecuritySettings:
        """The same policy for the MCP SDK's own check, so it can never be looser than ours
        (RequestMiddleware has already applied it to every request, /mcp included).

        Called when the MCP endpoint first starts (``mcp/endpoint.py``), not before: the SDK
        is loaded only then."""
        from mcp.server.transport_security import TransportSecuritySettings

        every = sorted(f"[{h}]" if ":" in h else h for h in self._names)
        return TransportSecuritySettings(
            enable_dns_rebinding_protection=True,
            allowed_hosts=[*every, *(f"{h}:*" for h in every)],
            allowed_origins=[
                f"{scheme}://{h}{port}"
                for scheme in ("http", "https")
                for h in every
                for port in ("", ":*")
            ],
        )
