"""What both clients share: defaults, the endpoint, request building and envelope decoding.

Where a client goes by default (:func:`default_url`): ``POWERCONTEXT_URL`` when set; else, on
POSIX, the daemon's unix socket in the data dir — the same path the daemon derives from the
same environment (:func:`~powercontext_runtime.settings.default_unix_socket`); only where there
are no unix sockets (Windows), ``http://127.0.0.1:7411``. A missing socket is a typed
``runtime_unreachable`` error and never a quiet retry over TCP: whoever holds the port while
the daemon is down would get the all-scopes token (:mod:`powercontext_runtime.local_socket`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, TypeVar

import httpx
from pydantic import BaseModel, ValidationError

from ..errors import (
    InvalidRequestError,
    PowerContextError,
    UnavailableError,
    error_class_for_status,
)
from ..local_socket import (
    SocketAddress,
    SocketPathError,
    parse_unix_url,
    unix_sockets_supported,
    unix_url,
)
from ..settings import (
    DEFAULT_HOST,
    DEFAULT_PORT,
    ConfigError,
    default_home,
    read_token_file,
    unix_socket_for,
)

M = TypeVar("M", bound=BaseModel)

DEFAULT_TIMEOUT = 30.0


#: The authority sent over a unix socket (the socket has no host name; the daemon expects it).
UNIX_BASE_URL = "http://localhost"


def default_url(home: Path | None = None) -> str:
    """``POWERCONTEXT_URL``, else ``unix:<data dir>/powercontext.sock`` (POSIX), else TCP.

    ``home`` is the data dir to use instead of ``POWERCONTEXT_HOME``/the platform default
    (``--data-dir``); ``POWERCONTEXT_SOCKET`` names another socket, or ``off`` for TCP.
    """
    explicit = os.environ.get("POWERCONTEXT_URL")
    if explicit:
        return explicit
    socket_path = unix_socket_for(os.environ.get("POWERCONTEXT_SOCKET"), home or default_home())
    if socket_path is not None:
        return unix_url(socket_path)
    return f"http://{DEFAULT_HOST}:{DEFAULT_PORT}"


def default_token(home: Path | None = None, *, agent: bool = False) -> str | None:
    """``POWERCONTEXT_TOKEN``, else a local token file the runtime wrote on first start (in
    ``home``, else the same data dir :func:`default_url` takes the socket from): the
    operator's ``auth/token``, or with ``agent=True`` the agents' ``auth/agent-token`` (read,
    write, propose; never review) — what an agent's own MCP or API client should use.
    None when neither exists (the runtime never ran with that data dir)."""
    name = "agent-token" if agent else "token"
    return os.environ.get("POWERCONTEXT_TOKEN") or read_token_file(
        (home or default_home()) / "auth" / name
    )


class Endpoint:
    """Where one client sends requests: ``url`` as given (or :func:`default_url`), the base URL
    httpx is given, and for ``unix:`` URLs the socket address to connect to.

    An over-long socket path is reached through its directory (``SocketAddress``), whose
    descriptor stays open until :meth:`close`.
    """

    def __init__(self, url: str | None) -> None:
        self.url = url or default_url()
        self._socket: SocketAddress | None = None
        try:
            path = parse_unix_url(self.url)
            if path is not None:
                if not unix_sockets_supported():
                    raise ConfigError("unix: runtime URLs need a POSIX system")
                self._socket = SocketAddress(path, missing_ok=True)
        except SocketPathError as exc:
            raise ConfigError(str(exc)) from None
        self.base_url = self.url if self._socket is None else UNIX_BASE_URL

    @property
    def uds(self) -> str | None:
        """The address for httpx's ``uds=`` (None for TCP)."""
        return None if self._socket is None else self._socket.address

    def close(self) -> None:
        if self._socket is not None:
            self._socket.close()


def headers_for(token: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"} if token else {}


def build(model: type[M], request: M | None, fields: dict[str, Any]) -> M:
    if request is not None:
        if fields:
            raise TypeError("pass either a request model or keyword fields, not both")
        return request
    try:
        return model.model_validate(fields)
    except ValidationError as exc:
        errors = [
            {"loc": [str(p) for p in e["loc"]], "msg": e["msg"], "type": e["type"]}
            for e in exc.errors(include_input=False, include_url=False)
        ]
        raise InvalidRequestError("the request is invalid", details={"errors": errors}) from None


def body_of(request: BaseModel) -> dict[str, Any]:
    # Only what the caller set (an explicit null such as a first Handoff's `base` is kept).
    return request.model_dump(mode="json", by_alias=True, exclude_unset=True)


def decode(response: httpx.Response, model: type[M]) -> M:
    if response.is_success:
        return model.model_validate_json(response.content, strict=False)
    raise error_from(response)


def error_from(response: httpx.Response) -> PowerContextError:
    cls = error_class_for_status(response.status_code)
    try:
        error = response.json()["error"]
        return cls(str(error["message"]), code=str(error["code"]), details=error.get("details"))
    except (ValueError, KeyError, TypeError):
        return cls(f"unexpected HTTP {response.status_code} from the runtime")


def unreachable(exc: httpx.HTTPError, url: str) -> UnavailableError:
    kind = "timed out" if isinstance(exc, httpx.TimeoutException) else "is not reachable"
    return UnavailableError(f"the runtime {kind} at {url}", code="runtime_unreachable")
