"""Runtime configuration: command-line overrides, then ``POWERCONTEXT_*`` variables, then defaults.

A partial or wrong configuration is an error, never a silent fallback: an empty database URL
does not quietly become an in-memory database, and a non-loopback bind without auth refuses
to start. Every variable is documented in docs/configuration.md.
"""

from __future__ import annotations

import ipaddress
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal

import platformdirs

from .contract.limits import MAX_BODY_BYTES_DEFAULT
from .extraction import BUILTIN_EXTRACTORS, is_extractor_path
from .local_socket import SOCKET_NAME, unix_sockets_supported

__all__ = ["ConfigError", "Settings", "is_loopback", "read_token_file"]

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 7411


class ConfigError(ValueError):
    """The configuration cannot be used; the message says which setting and why."""


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def read_token_file(path: Path) -> str | None:
    try:
        value = path.read_text(encoding="utf-8").strip()
    except (FileNotFoundError, NotADirectoryError, PermissionError):
        return None
    return value or None


def _positive_float(value: object, name: str, *, allow_zero: bool = False) -> float:
    try:
        number = float(str(value))
    except ValueError:
        raise ConfigError(f"{name} must be a number of seconds") from None
    if number < 0 or (number == 0 and not allow_zero) or number != number:
        raise ConfigError(f"{name} must be a positive number of seconds")
    return number


def _int_between(value: object, name: str, low: int, high: int) -> int:
    text = str(value).strip()
    if not text.isdigit() or not low <= int(text) <= high:
        raise ConfigError(f"{name} must be an integer from {low} to {high}")
    return int(text)


_LABEL = r"[a-z0-9]([a-z0-9-]{0,62}[a-z0-9])?"
_HOST_NAME = re.compile(rf"^{_LABEL}(\.{_LABEL})*$")


def _host_names(values: object) -> tuple[str, ...]:
    """Allowed host names: DNS names or IP literals, lowercased; nothing with a port, a path
    or a wildcard (each name is one exact host the operator vouches for)."""
    if not isinstance(values, (tuple, list)):
        raise ConfigError("POWERCONTEXT_ALLOWED_HOSTS must be a comma-separated list of names")
    names = []
    for value in values:
        name = str(value).strip().lower()
        try:
            names.append(str(ipaddress.ip_address(name.strip("[]"))))
            continue
        except ValueError:
            pass
        if len(name) > 253 or not _HOST_NAME.match(name):
            raise ConfigError(
                "POWERCONTEXT_ALLOWED_HOSTS entries must be host names or IP addresses "
                "(no port, scheme or wildcard)"
            )
        names.append(name)
    return tuple(dict.fromkeys(names))


def default_home(env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    if env.get("POWERCONTEXT_HOME"):
        return Path(env["POWERCONTEXT_HOME"]).expanduser()
    return platformdirs.user_data_path("powercontext")


MAX_WORKERS = 64
#: Page cache of the SQLite connection that prepares context packs. At 100k entries a prompt's
#: hot pages (search documents, postings, term frequencies, cited versions) take ≈ 40 MiB; the
#: cache grows only as pages are read, so a small database costs only what it reads.
DEFAULT_PROMPT_CACHE_MIB = 64
#: The same cache's default with the semantic channel on, whose model and vector index take
#: ≈ 150 MiB of a 300 MiB budget at 100k (issue 33): the prompts' pages past it are read from
#: the OS page cache. Measured over HTTP at 100k, hybrid (docs/decisions/semantic-channel.md,
#: "The worker trims the heap, the prompt cache halves"): RSS after 600 prompts 276 against
#: 307 MiB, latency within noise.
SEMANTIC_PROMPT_CACHE_MIB = 32
MAX_PROMPT_CACHE_MIB = 4096

# Pre-authentication limits (docs/configuration.md § Connection limits): what a client that has
# not yet sent a whole request may hold. Generous for any real client, small for a flood.
DEFAULT_MAX_HEADER_BYTES = 64 * 1024
DEFAULT_HEADER_TIMEOUT = 10.0
DEFAULT_BODY_TIMEOUT = 30.0
DEFAULT_MAX_CONNECTIONS = 1024
DEFAULT_MAX_PENDING_CONNECTIONS = 128


def unix_socket_for(value: object, home: Path) -> Path | None:
    """The daemon's unix socket: ``value`` (a path, or ``off``) or ``<home>/powercontext.sock``.

    None means no socket: ``off``, or a platform without unix sockets (Windows) when nothing
    was asked for. Relative paths are made absolute, because the socket's URL must be.
    """
    if value is None:
        return home / SOCKET_NAME if unix_sockets_supported() else None
    text = str(value).strip()
    if not text:
        raise ConfigError("POWERCONTEXT_SOCKET is set but empty")
    if text.lower() == "off":
        return None
    if not unix_sockets_supported():
        raise ConfigError("unix sockets are not available here; set POWERCONTEXT_SOCKET=off")
    return Path(text).expanduser().absolute()


def default_unix_socket(env: Mapping[str, str] | None = None) -> Path | None:
    """The socket a local client should use: POWERCONTEXT_SOCKET, else the default data dir's.

    The same rule as the daemon's (:meth:`Settings.load`), so a client and a daemon that see
    the same environment meet at the same file.
    """
    env = os.environ if env is None else env
    return unix_socket_for(env.get("POWERCONTEXT_SOCKET"), default_home(env))


def _serving_settings(pick: Callable[[str, str, object], object], home: Path) -> dict[str, object]:
    """The transport and pre-auth limit fields of :meth:`Settings.load`."""
    return {
        "unix_socket": unix_socket_for(pick("unix_socket", "POWERCONTEXT_SOCKET", None), home),
        "max_header_bytes": _int_between(
            pick("max_header_bytes", "POWERCONTEXT_MAX_HEADER_BYTES", DEFAULT_MAX_HEADER_BYTES),
            "POWERCONTEXT_MAX_HEADER_BYTES",
            4096,
            16 * 1024 * 1024,
        ),
        "header_timeout": _positive_float(
            pick("header_timeout", "POWERCONTEXT_HEADER_TIMEOUT", DEFAULT_HEADER_TIMEOUT),
            "POWERCONTEXT_HEADER_TIMEOUT",
        ),
        "body_timeout": _positive_float(
            pick("body_timeout", "POWERCONTEXT_BODY_TIMEOUT", DEFAULT_BODY_TIMEOUT),
            "POWERCONTEXT_BODY_TIMEOUT",
        ),
        "max_connections": _int_between(
            pick("max_connections", "POWERCONTEXT_MAX_CONNECTIONS", DEFAULT_MAX_CONNECTIONS),
            "POWERCONTEXT_MAX_CONNECTIONS",
            16,
            1_000_000,
        ),
        "max_pending_connections": _int_between(
            pick(
                "max_pending_connections",
                "POWERCONTEXT_MAX_PENDING_CONNECTIONS",
                DEFAULT_MAX_PENDING_CONNECTIONS,
            ),
            "POWERCONTEXT_MAX_PENDING_CONNECTIONS",
            1,
            1_000_000,
        ),
    }


def _similarity(value: object, name: str) -> float | None:
    if value is None:
        return None
    try:
        number = float(str(value))
    except ValueError:
        number = float("nan")
    if not -1.0 <= number <= 1.0:
        raise ConfigError(f"{name} must be a number from -1 to 1")
    return number


MAX_EMBEDDING_DIMENSION = 4096  # OceanBase's VECTOR(n) limit is 16000; real models ≤ 4096


def _embedding_settings(
    pick: Callable[[str, str, object], object], env: Mapping[str, str]
) -> dict[str, object]:
    """The semantic channel's fields of :meth:`Settings.load`."""
    mode = str(pick("embeddings", "POWERCONTEXT_EMBEDDINGS", "off")).strip().lower()
    if mode not in ("off", "local", "openai"):
        raise ConfigError("POWERCONTEXT_EMBEDDINGS must be 'off', 'local' or 'openai'")
    base_url = pick("embeddings_base_url", "POWERCONTEXT_EMBEDDINGS_BASE_URL", None)
    model = pick("embeddings_model", "POWERCONTEXT_EMBEDDINGS_MODEL", None)
    dimension = pick("embeddings_dimension", "POWERCONTEXT_EMBEDDINGS_DIMENSION", None)
    return {
        "embeddings": mode,
        "embeddings_base_url": None if base_url is None else str(base_url),
        "embeddings_model": None if model is None else str(model),
        "embeddings_dimension": None
        if dimension is None
        else _int_between(
            dimension, "POWERCONTEXT_EMBEDDINGS_DIMENSION", 1, MAX_EMBEDDING_DIMENSION
        ),
        "embeddings_api_key": env.get("POWERCONTEXT_EMBEDDINGS_API_KEY") or None,
        "embeddings_timeout": _positive_float(
            pick("embeddings_timeout", "POWERCONTEXT_EMBEDDINGS_TIMEOUT", 10.0),
            "POWERCONTEXT_EMBEDDINGS_TIMEOUT",
        ),
        "embeddings_query_timeout": _positive_float(
            pick("embeddings_query_timeout", "POWERCONTEXT_EMBEDDINGS_QUERY_TIMEOUT", 0.05),
            "POWERCONTEXT_EMBEDDINGS_QUERY_TIMEOUT",
        ),
        "embeddings_min_similarity": _similarity(
            pick("embeddings_min_similarity", "POWERCONTEXT_EMBEDDINGS_MIN_SIMILARITY", None),
            "POWERCONTEXT_EMBEDDINGS_MIN_SIMILARITY",
        ),
        "embeddings_prepare_min_similarity": _similarity(
            pick(
                "embeddings_prepare_min_similarity",
                "POWERCONTEXT_EMBEDDINGS_PREPARE_MIN_SIMILARITY",
                None,
            ),
            "POWERCONTEXT_EMBEDDINGS_PREPARE_MIN_SIMILARITY",
        ),
        "embeddings_interval": _positive_float(
            pick("embeddings_interval", "POWERCONTEXT_EMBEDDINGS_INTERVAL", 1.0),
            "POWERCONTEXT_EMBEDDINGS_INTERVAL",
        ),
    }


#: The distillers ``POWERCONTEXT_DISTILL`` may name (services/distill.py).
DISTILLERS = ("offline", "openai-compatible")


def _distillers(value: object) -> tuple[str, ...]:
    """``POWERCONTEXT_DISTILL``: ``off``, or a comma list of :data:`DISTILLERS` (``offline``
    by default: it only proposes pending candidates, so it is safe to have on)."""
    names = [part.strip().lower() for part in str(value).split(",") if part.strip()]
    if names == ["off"]:
        return ()
    if not names or any(name not in DISTILLERS for name in names):
        raise ConfigError(
            "POWERCONTEXT_DISTILL must be 'off' or a comma-separated list of: "
            + ", ".join(DISTILLERS)
        )
    return tuple(dict.fromkeys(names))


def _distill_model_settings(
    pick: Callable[[str, str, object], object], env: Mapping[str, str]
) -> dict[str, object]:
    """The model distiller's endpoint (``openai-compatible`` in ``POWERCONTEXT_DISTILL``), in
    the extractor's style: base URL, model, a key from the environment only, a timeout. Its
    own variables, not the extractor's: a model for prompts must not also start receiving
    task results (commands, output tails) unless the operator names it here too."""
    base_url = pick("distill_base_url", "POWERCONTEXT_DISTILL_BASE_URL", None)
    model = pick("distill_model", "POWERCONTEXT_DISTILL_MODEL", None)
    return {
        "distill_base_url": None if base_url is None else str(base_url).strip(),
        "distill_model": None if model is None else str(model).strip(),
        "distill_api_key": env.get("POWERCONTEXT_DISTILL_API_KEY") or None,
        "distill_timeout": _positive_float(
            pick("distill_timeout", "POWERCONTEXT_DISTILL_TIMEOUT", 30.0),
            "POWERCONTEXT_DISTILL_TIMEOUT",
        ),
    }


@dataclass(frozen=True)
class Settings:
    home: Path
    database_url: str
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    auth: Literal["token", "none"] = "token"
    max_body_bytes: int = MAX_BODY_BYTES_DEFAULT
    log_format: Literal["json", "console"] = "json"
    log_level: str = "INFO"
    #: ``directives``, ``openai-compatible``, or ``package.module:Attribute`` — your own
    #: extractor, imported by the daemon (extraction.load_extractor, docs/flush.md).
    extractor: str = "directives"
    extractor_base_url: str | None = None
    extractor_model: str | None = None
    extractor_timeout: float = 20.0
    extractor_api_key: str | None = field(default=None, repr=False)
    flush_interval: float = 0.0
    #: HTTP worker processes (``serve --workers``). One is plenty for one developer; more let a
    #: busy team daemon use more than one core (the GIL caps a single process near one).
    workers: int = 1
    prompt_cache_mib: int = DEFAULT_PROMPT_CACHE_MIB
    #: Host names (besides localhost, 127.0.0.1, ::1 and the bind address) that requests may
    #: carry in ``Host``/``Origin`` (``POWERCONTEXT_ALLOWED_HOSTS``, comma-separated).
    allowed_hosts: tuple[str, ...] = ()
    #: The unix-domain socket served besides TCP (``POWERCONTEXT_SOCKET``, ``serve --socket``;
    #: ``<home>/powercontext.sock`` on POSIX, None when off or on Windows).
    unix_socket: Path | None = None
    #: Pre-auth limits, enforced by :mod:`powercontext_runtime.serving.limits`, per process:
    #: request line + headers (over → 431), seconds to send a request head (from accept or
    #: the previous response) and a body (from its head), connections per listener, and
    #: connections per listener that have not sent a whole request (oldest closed first).
    max_header_bytes: int = DEFAULT_MAX_HEADER_BYTES
    header_timeout: float = DEFAULT_HEADER_TIMEOUT
    body_timeout: float = DEFAULT_BODY_TIMEOUT
    max_connections: int = DEFAULT_MAX_CONNECTIONS
    max_pending_connections: int = DEFAULT_MAX_PENDING_CONNECTIONS
    #: The optional semantic recall channel (docs/configuration.md § Semantic recall): ``off``
    #: (the default: lexical search only, nothing loaded), ``local`` (the bundled
    #: USE-multilingual model) or ``openai`` (an OpenAI-compatible ``/v1/embeddings``).
    embeddings: Literal["off", "local", "openai"] = "off"
    embeddings_base_url: str | None = None
    embeddings_model: str | None = None
    embeddings_dimension: int | None = None
    embeddings_api_key: str | None = field(default=None, repr=False)
    #: Seconds a background embedding call may take (openai), and the deadline for embedding
    #: a query on the search path: past it the search falls back to lexical and says so.
    embeddings_timeout: float = 10.0
    embeddings_query_timeout: float = 0.05
    #: Seconds between the embedding worker's polls for new entry versions.
    embeddings_interval: float = 1.0
    #: Cosine similarity a vector-only candidate needs (None: the model's calibrated default).
    embeddings_min_similarity: float | None = None
    embeddings_prepare_min_similarity: float | None = None
    #: The model distiller's endpoint (used when ``distill`` names ``openai-compatible``):
    #: chat-completions base URL, model name, bearer key, seconds for one call.
    distill_base_url: str | None = None
    distill_model: str | None = None
    distill_api_key: str | None = field(default=None, repr=False)
    distill_timeout: float = 30.0
    #: The distillers the distill worker runs over recorded task results
    #: (``POWERCONTEXT_DISTILL``; empty: off). They only ever propose pending candidates.
    distill: tuple[str, ...] = ("offline",)

    @property
    def token_file(self) -> Path:
        """The operator's local token (CLI; may review)."""
        return self.home / "auth" / "token"

    @property
    def agent_token_file(self) -> Path:
        """The agents' local token (hooks, the plugins' MCP tools; may not review)."""
        return self.home / "auth" / "agent-token"

    @property
    def sqlite_file(self) -> Path | None:
        """The SQLite database file, when the database is one (not in memory, not OceanBase)."""
        prefix = "sqlite:///"
        if self.in_memory or not self.database_url.startswith(prefix):
            return None
        path = self.database_url[len(prefix) :].split("?", 1)[0]
        return Path(path) if path else None

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    @property
    def unix_url(self) -> str | None:
        """``unix:/…/powercontext.sock`` when the daemon serves a unix socket."""
        return None if self.unix_socket is None else f"unix:{self.unix_socket}"

    @property
    def in_memory(self) -> bool:
        return self.database_url in ("sqlite://", "sqlite:///:memory:")

    @classmethod
    def load(cls, env: Mapping[str, str] | None = None, **overrides: object) -> Settings:
        env = os.environ if env is None else env
        given = {k: v for k, v in overrides.items() if v is not None}
        home = Path(str(given.pop("home", default_home(env)))).expanduser()

        def pick(key: str, var: str, default: object) -> object:
            if key in given:
                return given.pop(key)
            if var in env:
                value = env[var]
                if not value.strip():
                    raise ConfigError(f"{var} is set but empty")
                return value
            return default

        database_url = str(
            pick(
                "database_url", "POWERCONTEXT_DATABASE_URL", f"sqlite:///{home / 'powercontext.db'}"
            )
        )
        port_text = pick("port", "POWERCONTEXT_PORT", DEFAULT_PORT)
        try:
            port = int(str(port_text))
        except ValueError:
            raise ConfigError("POWERCONTEXT_PORT must be an integer") from None
        if not 0 <= port <= 65535:
            raise ConfigError("the port must be between 0 and 65535")
        auth = str(pick("auth", "POWERCONTEXT_AUTH", "token")).lower()
        if auth not in ("token", "none"):
            raise ConfigError("POWERCONTEXT_AUTH must be 'token' or 'none'")
        max_body_text = pick(
            "max_body_bytes", "POWERCONTEXT_MAX_BODY_BYTES", MAX_BODY_BYTES_DEFAULT
        )
        try:
            max_body = int(str(max_body_text))
        except ValueError:
            raise ConfigError("POWERCONTEXT_MAX_BODY_BYTES must be an integer") from None
        log_format = str(pick("log_format", "POWERCONTEXT_LOG_FORMAT", "json")).lower()
        if log_format not in ("json", "console"):
            raise ConfigError("POWERCONTEXT_LOG_FORMAT must be 'json' or 'console'")
        extractor = str(pick("extractor", "POWERCONTEXT_EXTRACTOR", "directives")).strip()
        if extractor.lower() in BUILTIN_EXTRACTORS:
            extractor = extractor.lower()
        elif not is_extractor_path(extractor):  # an object path keeps its case
            raise ConfigError(
                "POWERCONTEXT_EXTRACTOR must be 'directives', 'openai-compatible' or "
                "package.module:Attribute (your own extractor, docs/flush.md)"
            )
        base_url = pick("extractor_base_url", "POWERCONTEXT_EXTRACTOR_BASE_URL", None)
        model = pick("extractor_model", "POWERCONTEXT_EXTRACTOR_MODEL", None)
        settings = cls(
            extractor=extractor,
            extractor_base_url=None if base_url is None else str(base_url),
            extractor_model=None if model is None else str(model),
            extractor_timeout=_positive_float(
                pick("extractor_timeout", "POWERCONTEXT_EXTRACTOR_TIMEOUT", 20.0),
                "POWERCONTEXT_EXTRACTOR_TIMEOUT",
            ),
            extractor_api_key=env.get("POWERCONTEXT_EXTRACTOR_API_KEY") or None,
            flush_interval=_positive_float(
                pick("flush_interval", "POWERCONTEXT_FLUSH_INTERVAL", 0.0),
                "POWERCONTEXT_FLUSH_INTERVAL",
                allow_zero=True,
            ),
            home=home,
            database_url=database_url,
            host=str(pick("host", "POWERCONTEXT_HOST", DEFAULT_HOST)),
            port=port,
            auth=auth,  # type: ignore[arg-type]
            max_body_bytes=max_body,
            log_format=log_format,  # type: ignore[arg-type]
            log_level=str(pick("log_level", "POWERCONTEXT_LOG_LEVEL", "INFO")).upper(),
            workers=_int_between(
                pick("workers", "POWERCONTEXT_WORKERS", 1), "POWERCONTEXT_WORKERS", 1, MAX_WORKERS
            ),
        )
        settings = replace(settings, **_embedding_settings(pick, env))  # type: ignore[arg-type]
        # Not given: the default for the channel's state.
        cache = pick("prompt_cache_mib", "POWERCONTEXT_PROMPT_CACHE_MIB", None)
        if cache is None:
            cache = (
                DEFAULT_PROMPT_CACHE_MIB
                if settings.embeddings == "off"
                else SEMANTIC_PROMPT_CACHE_MIB
            )
        settings = replace(
            settings,
            prompt_cache_mib=_int_between(
                cache, "POWERCONTEXT_PROMPT_CACHE_MIB", 1, MAX_PROMPT_CACHE_MIB
            ),
        )
        settings = replace(settings, **_distill_model_settings(pick, env))  # type: ignore[arg-type]
        hosts = pick("allowed_hosts", "POWERCONTEXT_ALLOWED_HOSTS", ())
        if isinstance(hosts, str):
            hosts = tuple(name.strip() for name in hosts.split(",") if name.strip())
        settings = replace(settings, allowed_hosts=_host_names(hosts))
        settings = replace(
            settings, distill=_distillers(pick("distill", "POWERCONTEXT_DISTILL", "offline"))
        )
        settings = replace(settings, **_serving_settings(pick, home))  # type: ignore[arg-type]
        if given:
            raise ConfigError(f"unknown settings: {', '.join(sorted(given))}")
        settings.validate()
        return settings

    def validate(self) -> None:
        if not (
            self.database_url.startswith("sqlite:")
            or self.database_url.startswith("mysql+pymysql://")
        ):
            raise ConfigError(
                "the database URL must start with sqlite:/// or mysql+pymysql:// "
                "(OceanBase in MySQL mode)"
            )
        if self.auth == "none" and not is_loopback(self.host):
            raise ConfigError(
                "refusing to disable auth on a non-loopback address; bind to 127.0.0.1 "
                "or turn auth on"
            )
        if self.max_body_bytes < 1024:
            raise ConfigError("the body size limit must be at least 1024 bytes")
        if self.extractor == "openai-compatible":
            if not self.extractor_model or not self.extractor_base_url:
                raise ConfigError(
                    "the openai-compatible extractor needs POWERCONTEXT_EXTRACTOR_BASE_URL "
                    "and POWERCONTEXT_EXTRACTOR_MODEL"
                )
            if not self.extractor_base_url.startswith(("http://", "https://")):
                raise ConfigError("POWERCONTEXT_EXTRACTOR_BASE_URL must be an http(s) URL")
        if "openai-compatible" in self.distill:
            if not self.distill_base_url or not self.distill_model:
                raise ConfigError(
                    "the openai-compatible distiller needs POWERCONTEXT_DISTILL_BASE_URL "
                    "and POWERCONTEXT_DISTILL_MODEL"
                )
            if not self.distill_base_url.startswith(("http://", "https://")):
                raise ConfigError("POWERCONTEXT_DISTILL_BASE_URL must be an http(s) URL")
        if self.embeddings == "openai":
            if (
                not self.embeddings_base_url
                or not self.embeddings_model
                or not self.embeddings_dimension
            ):
                raise ConfigError(
                    "POWERCONTEXT_EMBEDDINGS=openai needs POWERCONTEXT_EMBEDDINGS_BASE_URL, "
                    "POWERCONTEXT_EMBEDDINGS_MODEL and POWERCONTEXT_EMBEDDINGS_DIMENSION"
                )
            if not self.embeddings_base_url.startswith(("http://", "https://")):
                raise ConfigError("POWERCONTEXT_EMBEDDINGS_BASE_URL must be an http(s) URL")

    def with_changes(self, **changes: object) -> Settings:
        updated = replace(self, **changes)  # type: ignore[arg-type]
        updated.validate()
        return updated
