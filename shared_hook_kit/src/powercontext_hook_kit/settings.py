"""Hook settings: environment, then the user's ``plugins.toml``, then defaults.

Every setting has one key and three spellings, so precedence is the same for every setting:
``POWERCONTEXT_<KEY>`` (environment) → ``CLAUDE_PLUGIN_OPTION_<KEY>`` (Claude Code ``userConfig``,
only for the ``claude-code`` host) → ``<key>`` in the host's table of
``<user config dir>/powercontext/plugins.toml`` → default. Empty values count as unset because
hosts export blank ``userConfig`` fields as empty strings.

Anything invalid raises :class:`SettingsError`; the runner turns it into a diagnostic and fails
open.

Two defaults come from the runtime's data dir (``POWERCONTEXT_HOME``, else the platform user
data dir; :func:`runtime_data_dir`): the URL is its unix socket
``unix:<data dir>/powercontext.sock`` on POSIX (``http://127.0.0.1:7411`` on Windows), and the
token is the runtime's *agent* token ``<data dir>/auth/agent-token`` — read only when no token
is configured, and never the operator's ``auth/token``: a hook (and the agent it serves) may
read, write and propose, but only a person reviews.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping
from typing import Any, Literal

import msgspec

from .files import read_regular_file
from .transport import (
    UNIX_URL_PREFIX,
    RuntimeEndpoint,
    UnsafeUrl,
    parse_runtime_url,
    unix_sockets_supported,
)

__all__ = [
    "AGENT_TOKEN_FILE",
    "CONFIG_FILE_NAME",
    "DEFAULT_TCP_URL",
    "SOCKET_FILE_NAME",
    "HookSettings",
    "SettingsError",
    "agent_token_file",
    "check_scope_id",
    "config_file_path",
    "data_dir_variables",
    "debug_enabled",
    "default_url",
    "parse_bool",
    "plugin_data_dir",
    "runtime_data_dir",
    "runtime_socket_path",
    "user_dir",
]

#: The runtime's TCP listener: the default on Windows, and for MCP clients (which speak HTTP).
DEFAULT_TCP_URL = "http://127.0.0.1:7411"
#: The runtime's unix socket, in its data dir (the default transport on POSIX).
SOCKET_FILE_NAME = "powercontext.sock"
#: The agent token under the runtime's data dir (scopes ``*``; read, write, propose — no review).
AGENT_TOKEN_FILE = os.path.join("auth", "agent-token")
CONFIG_FILE_NAME = "plugins.toml"
_CONFIG_MAX_BYTES = 256 * 1024
_TOKEN_FILE_MAX_BYTES = 64 * 1024
_APP = "powercontext"
_SCOPE_ID_MAX_CHARS = 256
#: Unicode categories a scope id may not contain (the runtime's contract refuses the same):
#: controls, invisible/bidirectional formatting (U+200B, U+202E…), line and paragraph
#: separators, and lone surrogates.
_REFUSED_SCOPE_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})

_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off"})


class SettingsError(ValueError):
    """A setting cannot be used. The message names the setting and the rule, not its value."""


def parse_bool(value: str, name: str) -> bool:
    """``1/0``, ``true/false``, ``yes/no``, ``on/off`` in any case; anything else is an error."""
    lowered = value.strip().lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise SettingsError(f"{name} must be one of 1/0, true/false, yes/no, on/off")


def debug_enabled(env: Mapping[str, str]) -> bool:
    """``POWERCONTEXT_DEBUG``; read on its own so diagnostics work even when settings are broken."""
    try:
        return parse_bool(env.get("POWERCONTEXT_DEBUG", ""), "POWERCONTEXT_DEBUG")
    except SettingsError:
        return False


def check_scope_id(value: str, name: str) -> str:
    """Scope ids are opaque and compared byte-for-byte, so refuse what the runtime would refuse.

    Same rules as the runtime's contract: 1..256 characters, no surrounding whitespace, no
    control characters, and none of the characters that make two different ids look alike or
    reorder what is displayed — Unicode format characters (category Cf: zero-width space
    U+200B, right-to-left override U+202E, …), line/paragraph separators (Zl, Zp) and lone
    surrogates (Cs). Refusing early gives a clear diagnostic instead of a 422. ``unicodedata``
    is only imported for ids that are not plain ASCII (ASCII has none of these but controls).
    """
    if not value or len(value) > _SCOPE_ID_MAX_CHARS:
        raise SettingsError(f"{name} must be 1..{_SCOPE_ID_MAX_CHARS} characters")
    if value != value.strip():
        raise SettingsError(f"{name} must not start or end with whitespace")
    if any(ord(ch) < 0x20 or 0x7F <= ord(ch) < 0xA0 for ch in value):
        raise SettingsError(f"{name} must not contain control characters")
    if not value.isascii():
        import unicodedata  # lazy: ~0.3 ms, and most scope ids are ASCII

        if any(unicodedata.category(ch) in _REFUSED_SCOPE_CATEGORIES for ch in value):
            raise SettingsError(
                f"{name} must not contain invisible or bidirectional formatting characters, "
                "line or paragraph separators, or surrogates"
            )
    return value


def _check_token(value: str, name: str) -> str:
    """A bearer token goes into an HTTP header: visible ASCII only, so it cannot split headers."""
    if not all(0x21 <= ord(ch) <= 0x7E for ch in value):
        raise SettingsError(f"{name} must be printable ASCII without spaces")
    return value


_XDG_DEFAULTS = {
    "config": ("XDG_CONFIG_HOME", ".config"),
    "data": ("XDG_DATA_HOME", ".local/share"),
    "state": ("XDG_STATE_HOME", ".local/state"),
}


def user_dir(kind: Literal["config", "data", "state"]) -> str:
    """``platformdirs.user_<kind>_dir("powercontext")``, without importing it on Linux.

    Importing ``platformdirs`` costs the hook ~6 ms on every prompt. On Linux, when the XDG
    variable is an absolute path (or unset with an absolute ``HOME``), the answer is a plain
    join, computed here exactly as ``platformdirs`` does; every other case (macOS, Windows,
    a relative ``HOME``…) asks ``platformdirs``, so the runtime and the hook always agree.
    """
    variable, default = _XDG_DEFAULTS[kind]
    if sys.platform.startswith("linux"):
        configured = os.environ.get(variable, "")
        if os.path.isabs(configured):
            return os.path.join(configured, _APP)
        home = os.environ.get("HOME", "")
        if not configured and os.path.isabs(home):
            return os.path.join(home, default, _APP)
    import platformdirs

    return str(getattr(platformdirs, f"user_{kind}_dir")(_APP))


def config_file_path() -> str:
    """``<user config dir>/powercontext/plugins.toml`` (honours XDG on Linux)."""
    return os.path.join(user_dir("config"), CONFIG_FILE_NAME)


def runtime_data_dir(env: Mapping[str, str]) -> str:
    """The runtime's data dir: ``POWERCONTEXT_HOME`` (``~`` expanded), else the platform user
    data dir ``…/powercontext`` — the one place both the socket and the agent token live.

    Mirrors the runtime's own rule without importing it (the hook kit never imports the runtime).
    It must be absolute: a hook runs in the user's project, where a relative path would name a
    file of the project's choosing. Raises :class:`SettingsError` otherwise.
    """
    home = env.get("POWERCONTEXT_HOME", "").strip()
    try:
        base = os.path.expanduser(home) if home else user_dir("data")
    except (RuntimeError, OSError) as exc:  # platformdirs cannot place the home directory
        raise SettingsError("the runtime's data dir cannot be located") from exc
    if not os.path.isabs(base):
        raise SettingsError("the runtime's data dir (POWERCONTEXT_HOME) must be an absolute path")
    return base


def agent_token_file(env: Mapping[str, str]) -> str:
    """``<runtime data dir>/auth/agent-token``: the token a hook uses when none is configured.

    Never the operator's ``auth/token``, which can also review (approve Experience and Skills).
    """
    return os.path.join(runtime_data_dir(env), AGENT_TOKEN_FILE)


def runtime_socket_path(env: Mapping[str, str]) -> str:
    """``<runtime data dir>/powercontext.sock``: where the runtime's unix socket listens."""
    return os.path.join(runtime_data_dir(env), SOCKET_FILE_NAME)


def default_url(env: Mapping[str, str]) -> str:
    """The runtime URL when none is configured: ``unix:<runtime data dir>/powercontext.sock`` on
    POSIX, :data:`DEFAULT_TCP_URL` on Windows. An explicit ``http://`` URL still means TCP.

    ``POWERCONTEXT_SOCKET`` — the daemon's own setting for where it puts the socket — is
    honoured the way the runtime's client honours it, so hooks find the socket the daemon made:
    an absolute path (``~`` expanded), or ``off`` (the daemon serves no socket: TCP).
    """
    configured = env.get("POWERCONTEXT_SOCKET", "").strip()
    if configured.lower() == "off":
        return DEFAULT_TCP_URL
    if configured:
        path = os.path.expanduser(configured)
        if not os.path.isabs(path):
            raise SettingsError("POWERCONTEXT_SOCKET must be an absolute path or off")
        return UNIX_URL_PREFIX + path
    if os.name == "posix" and unix_sockets_supported():
        return UNIX_URL_PREFIX + runtime_socket_path(env)
    return DEFAULT_TCP_URL


def _inside(path: str, root: str) -> bool:
    path = os.path.realpath(path)
    root = os.path.realpath(root)
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def data_dir_variables(host: str) -> tuple[str, str]:
    """The variables through which a host tells a plugin hook its data directory, the host's
    own first (``CLAUDE_PLUGIN_DATA`` for Claude Code, ``PLUGIN_DATA`` for Codex), the other
    name as a fallback."""
    if host == "claude-code":
        return ("CLAUDE_PLUGIN_DATA", "PLUGIN_DATA")
    return ("PLUGIN_DATA", "CLAUDE_PLUGIN_DATA")


def plugin_data_dir(host: str, env: Mapping[str, str]) -> str:
    """The plugin's persistent data directory (diagnostic log, receipt store, capture spool).

    The host's variable wins (:func:`data_dir_variables`), else
    ``<user state dir>/powercontext/<host>``. A directory inside the plugin root is never used:
    hosts replace that folder on every update.
    """
    names = data_dir_variables(host)
    roots = [env[name] for name in ("PLUGIN_ROOT", "CLAUDE_PLUGIN_ROOT") if env.get(name)]
    for name in names:
        candidate = env.get(name, "").strip()
        if candidate and os.path.isabs(candidate):
            if any(_inside(candidate, root) for root in roots):
                continue
            return candidate
    return os.path.join(user_dir("state"), host)


def _read_config_table(path: str, host: str) -> dict[str, Any]:
    """The ``[<host>]`` table of ``plugins.toml``; a missing file is an empty table.

    Read without blocking (:func:`~.files.read_regular_file`): a FIFO or device in its place
    is an unreadable file, not a hung hook.
    """
    raw = read_regular_file(path, _CONFIG_MAX_BYTES)
    if raw is None:
        if not os.path.exists(path):  # missing (or a dangling symlink): no config
            return {}
        raise SettingsError(
            f"{CONFIG_FILE_NAME} cannot be read: it must be a readable regular file of at most "
            f"{_CONFIG_MAX_BYTES} bytes"
        )
    import tomllib  # lazy: most users have no config file

    try:
        document = tomllib.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise SettingsError(f"{CONFIG_FILE_NAME} is not valid TOML") from exc
    table = document.get(host, {})
    if not isinstance(table, dict):
        raise SettingsError(f"[{host}] in {CONFIG_FILE_NAME} must be a table")
    unknown = sorted(set(table) - set(_KEYS))
    if unknown:
        names = ", ".join(unknown)
        raise SettingsError(f"unknown key(s) in [{host}] of {CONFIG_FILE_NAME}: {names}")
    return table


def _read_token_file(path: str) -> str | None:
    """The token in ``path`` (a regular file, read without blocking), or ``None``."""
    raw = read_regular_file(path, _TOKEN_FILE_MAX_BYTES)
    if raw is None:
        return None
    value = raw.decode("utf-8", errors="replace").strip()
    return value or None


def _as_str(value: object, name: str) -> str:
    if not isinstance(value, str):
        raise SettingsError(f"{name} must be a string")
    return value


def _as_bool(value: object, name: str) -> bool:
    if isinstance(value, bool):
        return value
    return parse_bool(_as_str(value, name), name)


def _as_int(low: int, high: int) -> Callable[[object, str], int]:
    def convert(value: object, name: str) -> int:
        if isinstance(value, bool):
            raise SettingsError(f"{name} must be an integer")
        if isinstance(value, str):
            text = value.strip()
            if not text.isdigit():
                raise SettingsError(f"{name} must be an integer")
            value = int(text)
        if not isinstance(value, int) or not low <= value <= high:
            raise SettingsError(f"{name} must be an integer in {low}..{high}")
        return value

    return convert


def _as_seconds(value: object, name: str) -> float:
    if isinstance(value, bool):
        raise SettingsError(f"{name} must be a number of seconds")
    if isinstance(value, str):
        try:
            value = float(value.strip())
        except ValueError as exc:
            raise SettingsError(f"{name} must be a number of seconds") from exc
    if not isinstance(value, int | float) or not 0.05 <= value <= 30:
        raise SettingsError(f"{name} must be between 0.05 and 30 seconds")
    return float(value)


def _as_url(value: object, name: str) -> str:
    """``http://`` to loopback (TCP) or ``unix:/absolute/socket/path``."""
    text = _as_str(value, name).strip()
    try:
        parse_runtime_url(text)
    except UnsafeUrl as exc:
        raise SettingsError(f"{name}: {exc}") from exc
    return text


def _as_scope(value: object, name: str) -> str:
    return check_scope_id(_as_str(value, name), name)


def _as_token(value: object, name: str) -> str:
    return _check_token(_as_str(value, name).strip(), name)


_KEYS: dict[str, Callable[[object, str], Any]] = {
    "url": _as_url,
    "token": _as_token,
    "scope_id": _as_scope,
    "bootstrap": _as_bool,
    "capture_prompts": _as_bool,
    "capture_spool": _as_bool,
    "flush_after_capture": _as_bool,
    "record_task_results": _as_bool,
    "max_bytes": _as_int(512, 32768),
    "bootstrap_max_bytes": _as_int(512, 8192),
    "deadline_seconds": _as_seconds,
}


class HookSettings(msgspec.Struct, frozen=True):
    """Everything a hook needs to talk to the runtime, already validated."""

    host: str
    url: str
    endpoint: RuntimeEndpoint
    token: str | None
    scope_id: str | None
    bootstrap: bool
    capture_prompts: bool
    capture_spool: bool
    flush_after_capture: bool
    #: The Stop hook records each turn's bounded task result (issue #31). On by default: a
    #: task result is only evidence; nothing reaches a pack before a person reviews it.
    record_task_results: bool
    max_bytes: int
    bootstrap_max_bytes: int
    deadline_seconds: float

    @classmethod
    def load(
        cls,
        host: str,
        env: Mapping[str, str],
        *,
        config_path: str | None = None,
        installed: Mapping[str, object] | None = None,
    ) -> HookSettings:
        """Resolve every setting for ``host`` (``codex`` or ``claude-code``) from ``env``.

        ``config_path`` replaces the platform location of ``plugins.toml`` (tests, ``doctor``).
        ``installed`` is what ``install`` wrote into the hook command (``install
        --bootstrap``): below ``plugins.toml``, above the defaults.
        """
        try:
            table = _read_config_table(config_path or config_file_path(), host)
        except (RuntimeError, OSError) as exc:  # platformdirs cannot place the home directory
            raise SettingsError(f"{CONFIG_FILE_NAME} cannot be located") from exc

        def pick(key: str, default: Any) -> Any:
            convert = _KEYS[key]
            env_name = f"POWERCONTEXT_{key.upper()}"
            if env.get(env_name, "").strip():
                return convert(env[env_name], env_name)
            if host == "claude-code":
                option = f"CLAUDE_PLUGIN_OPTION_{key.upper()}"
                if env.get(option, "").strip():
                    return convert(env[option], option)
            if key in table:
                value = table[key]
                if isinstance(value, str) and not value.strip():
                    return default
                return convert(value, f"{key} in [{host}]")
            if installed and key in installed:
                return convert(installed[key], f"install --{key.replace('_', '-')}")
            return default

        url = pick("url", None)
        if url is None:
            url = default_url(env)
        try:
            endpoint = parse_runtime_url(url)
        except UnsafeUrl as exc:  # only a default can get here: configured URLs are checked
            raise SettingsError(f"the default runtime URL: {exc}") from exc
        token = pick("token", None)
        if token is None:
            token = _read_token_file(agent_token_file(env))
            if token is not None:
                token = _check_token(token, "the runtime's agent token file")
        return cls(
            host=host,
            url=url,
            endpoint=endpoint,
            token=token,
            scope_id=pick("scope_id", None),
            bootstrap=pick("bootstrap", False),
            capture_prompts=pick("capture_prompts", True),
            capture_spool=pick("capture_spool", True),
            flush_after_capture=pick("flush_after_capture", False),
            record_task_results=pick("record_task_results", True),
            max_bytes=pick("max_bytes", 8000),
            bootstrap_max_bytes=pick("bootstrap_max_bytes", 4096),
            deadline_seconds=pick("deadline_seconds", 2.0),
        )

    def __repr__(self) -> str:  # the token must never reach a log or a traceback
        return (
            f"HookSettings(host={self.host!r}, url={self.url!r}, token="
            f"{'<set>' if self.token else None}, scope_id={'<set>' if self.scope_id else None}, "
            f"bootstrap={self.bootstrap}, capture_prompts={self.capture_prompts}, "
            f"capture_spool={self.capture_spool}, "
            f"flush_after_capture={self.flush_after_capture}, "
            f"record_task_results={self.record_task_results}, "
            f"max_bytes={self.max_bytes}, bootstrap_max_bytes={self.bootstrap_max_bytes}, "
            f"deadline_seconds={self.deadline_seconds})"
        )
