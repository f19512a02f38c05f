"""Which scope a host's working directory belongs to — identical for every host.

Both plugins must put the same repository's memory in the same scope, so this is the only place
the rule lives: explicit override → the repository's private binding file → the normalised
``origin`` URL → a hash of the repository root (or, outside git, of the directory). A hook that
got no working directory from its host is unscoped and does nothing: the hook process's own
current directory is the plugin's, never the user's project.

The repository is found by walking up to ``.git`` and reading its ``config`` directly rather than
spawning ``git`` (one process start costs more than the whole lookup); ``git`` is only asked
when the config uses ``include`` directives, with a short timeout and a clean environment.

The hook has a hard deadline and the project is not ours to trust, so nothing here may block:
every file read (``.git`` pointer files, ``commondir``, ``config``, the binding file) is a
non-blocking open checked to be a regular file before a bounded read
(:func:`~.files.read_regular_file`) — a FIFO, socket or device in any of those places reads as
"not there" (or, for the binding, as a corrupt binding) — the directory walk only calls
``stat`` and checks the deadline at every level, and ``git`` gets at most half of what remains
of it.
"""

from __future__ import annotations

import contextlib
import os
from typing import Literal

import msgspec

from .digest import sha256
from .files import read_regular_file
from .settings import SettingsError, check_scope_id
from .transport import Deadline

__all__ = [
    "BINDING_SCHEMA",
    "Repository",
    "ScopeError",
    "ScopeSource",
    "bind",
    "binding_path",
    "explain_scope",
    "find_repository",
    "normalize_remote_url",
    "resolve_scope",
    "unbind",
]

BINDING_SCHEMA = "powercontext.workspace.v1"
_SCOPE_MAX_CHARS = 256
_SMALL_FILE_BYTES = 64 * 1024
_CONFIG_MAX_BYTES = 1024 * 1024
_GIT_TIMEOUT_SECONDS = 0.5
#: ``git`` is not worth starting with less than this left for it.
_GIT_MIN_SECONDS = 0.02


class ScopeError(ValueError):
    """The scope cannot be determined safely (e.g. a corrupt binding file); nothing is sent."""


class Repository(msgspec.Struct, frozen=True):
    """A git checkout found from a working directory.

    ``worktree`` holds the ``.git`` entry; ``git_dir`` is that checkout's git directory and
    ``common_dir`` the one shared by all linked worktrees (binding file and config live there).
    ``root`` is the repository's identity for the local-hash fallback: the main checkout for
    every linked worktree, so parallel agent worktrees of one repository share one scope.
    """

    worktree: str
    git_dir: str
    common_dir: str

    @property
    def root(self) -> str:
        if os.path.basename(self.common_dir) == ".git":
            return os.path.dirname(self.common_dir)
        return self.worktree


class _Binding(msgspec.Struct, forbid_unknown_fields=True):
    schema: Literal["powercontext.workspace.v1"]
    scope_id: str


def _sha256_hex(text: str) -> str:
    return sha256(text.encode("utf-8", "surrogateescape")).hexdigest()


def _read_small(
    path: str, limit: int = _SMALL_FILE_BYTES, *, follow_symlinks: bool = True
) -> bytes | None:
    """A regular file's bytes (≤ ``limit``), read without blocking; ``None`` for anything else.

    git's own files are followed through symlinks, as git does; only their target's type counts.
    """
    return read_regular_file(path, limit, follow_symlinks=follow_symlinks)


def _check_deadline(deadline: Deadline | None) -> None:
    if deadline is not None and deadline.expired:
        raise ScopeError("the hook's deadline passed while resolving the scope")


def _pointer(path: str, base: str, *, prefix: str = "") -> str | None:
    """Follow a one-line pointer file (``.git`` → ``gitdir: …``, or ``commondir``)."""
    data = _read_small(path, 4096)
    if data is None:
        return None
    text = data.decode("utf-8", "surrogateescape").strip()
    if prefix:
        if not text.startswith(prefix):
            return None
        text = text[len(prefix) :].strip()
    if not text:
        return None
    target = os.path.realpath(os.path.join(base, text))
    return target if os.path.isdir(target) else None


def find_repository(directory: str, deadline: Deadline | None = None) -> Repository | None:
    """Walk up from ``directory`` to the nearest checkout (``.git`` directory or file).

    Only ``stat`` calls and non-blocking reads of regular files; with a ``deadline``, an expired
    one raises :class:`ScopeError` at the next level instead of walking on.
    """
    current = os.path.realpath(directory)
    while True:
        _check_deadline(deadline)
        entry = os.path.join(current, ".git")
        git_dir: str | None = None
        if os.path.isdir(entry):
            if os.path.exists(os.path.join(entry, "HEAD")):
                git_dir = entry
        elif os.path.isfile(entry):
            git_dir = _pointer(entry, current, prefix="gitdir:")
        if git_dir is not None:
            common = _pointer(os.path.join(git_dir, "commondir"), git_dir) or git_dir
            return Repository(worktree=current, git_dir=git_dir, common_dir=common)
        parent = os.path.dirname(current)
        if parent == current:
            return None
        current = parent


# --- git config ------------------------------------------------------------------------------


def _parse_value(text: str, i: int) -> tuple[str | None, int]:
    """Parse a config value the way git does (quotes, escapes, comments, continuations)."""
    out: list[str] = []
    quoted = False
    spaces = 0
    n = len(text)
    while i < n:
        ch = text[i]
        i += 1
        if ch == "\n":
            if quoted:
                return None, i
            break
        if not quoted and ch in " \t":
            if out:
                spaces += 1
            continue
        if not quoted and ch in ";#":
            end = text.find("\n", i)
            i = n if end == -1 else end + 1
            break
        if spaces:
            out.append(" " * spaces)
            spaces = 0
        if ch == "\\":
            if i >= n:
                return None, i
            escaped = text[i]
            i += 1
            if escaped == "\n":
                continue
            mapped = {"t": "\t", "b": "\b", "n": "\n", "\\": "\\", '"': '"'}.get(escaped)
            if mapped is None:
                return None, i
            out.append(mapped)
            continue
        if ch == '"':
            quoted = not quoted
            continue
        out.append(ch)
    return "".join(out), i


def _parse_header(text: str, i: int) -> tuple[tuple[str, str | None] | None, int]:
    """Parse ``[section]``, ``[section "sub"]`` or the old ``[section.sub]`` (``i`` after ``[``)."""
    n = len(text)
    start = i
    while i < n and (text[i].isalnum() or text[i] in "-."):
        i += 1
    name = text[start:i]
    if i < n and text[i] == "]":
        section, dot, sub = name.partition(".")
        return (section.lower(), sub.lower() if dot else None), i + 1
    while i < n and text[i] in " \t":
        i += 1
    if i >= n or text[i] != '"':
        return None, i
    i += 1
    sub_chars: list[str] = []
    while i < n and text[i] != '"':
        if text[i] == "\n":
            return None, i
        if text[i] == "\\" and i + 1 < n:
            i += 1
        sub_chars.append(text[i])
        i += 1
    if text[i : i + 2] != '"]':
        return None, i
    return (name.lower(), "".join(sub_chars)), i + 2


def _origin_url_from_config(text: str) -> tuple[str | None, bool]:
    """``remote.origin.url`` (last one wins, like ``git config --get``) and whether includes exist.

    A malformed file stops the parse where it breaks; what was read before still counts.
    """
    text = text.replace("\r\n", "\n")
    section: tuple[str, str | None] | None = None
    url: str | None = None
    includes = False
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch in " \t\n":
            i += 1
        elif ch in "#;":
            end = text.find("\n", i)
            i = n if end == -1 else end + 1
        elif ch == "[":
            section, i = _parse_header(text, i + 1)
            if section is None:
                break
            if section[0] in ("include", "includeif"):
                includes = True
        elif ch.isalpha():
            start = i
            while i < n and (text[i].isalnum() or text[i] == "-"):
                i += 1
            key = text[start:i].lower()
            while i < n and text[i] in " \t":
                i += 1
            value: str | None = None
            if i < n and text[i] == "=":
                value, i = _parse_value(text, i + 1)
                if value is None:
                    break
            if section == ("remote", "origin") and key == "url" and value is not None:
                url = value
        else:
            break
    return url, includes


def _git_timeout(deadline: Deadline | None) -> float:
    """0.5 s, and at most half of what remains of the hook's deadline (the request after the
    scope needs the other half)."""
    if deadline is None:
        return _GIT_TIMEOUT_SECONDS
    return min(_GIT_TIMEOUT_SECONDS, deadline.remaining() / 2)


def _git_origin_url(repo: Repository, deadline: Deadline | None = None) -> str | None:
    """Ask ``git`` (includes resolved), bounded by :func:`_git_timeout`.

    ``None`` when git is missing or fails (the directly parsed value is used then). A git that
    does not answer in time — an include that is a FIFO, a stalled disk, a deadline already
    mostly spent — raises :class:`ScopeError`: the scope would otherwise depend on timing, and
    a prompt captured into the wrong scope is worse than one prompt without memory.
    """
    import subprocess  # lazy: only for configs with include directives

    timeout = _git_timeout(deadline)
    if timeout < _GIT_MIN_SECONDS:
        raise ScopeError("no time left to ask git for the remote")
    env = {key: value for key, value in os.environ.items() if not key.startswith("GIT_")}
    env["GIT_TERMINAL_PROMPT"] = "0"
    try:
        completed = subprocess.run(
            [
                "git",
                "-C",
                repo.worktree,
                "config",
                "--local",
                "--includes",
                "--get",
                "remote.origin.url",
            ],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=timeout,
            env=env,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise ScopeError("git did not answer in time") from exc
    except (OSError, subprocess.SubprocessError):
        return None
    if completed.returncode != 0:
        return None
    value = completed.stdout.decode("utf-8", "surrogateescape").strip()
    return value or None


def _origin_url(repo: Repository, deadline: Deadline | None = None) -> str | None:
    """``remote.origin.url``; an unreadable, oversized or non-regular ``config`` has none."""
    data = _read_small(os.path.join(repo.common_dir, "config"), _CONFIG_MAX_BYTES)
    if data is None:
        return None
    url, includes = _origin_url_from_config(data.decode("utf-8", "surrogateescape"))
    if includes:
        return _git_origin_url(repo, deadline) or url
    return url


# --- normalisation ---------------------------------------------------------------------------


def _is_valid_scope(value: str) -> bool:
    try:
        check_scope_id(value, "scope")
    except SettingsError:
        return False
    return True


def _split_remote(url: str) -> tuple[str, str] | None:
    """``(authority, path)`` of a URL or scp-style remote; ``None`` for local paths."""
    scheme, sep, rest = url.partition("://")
    if sep:
        if not scheme or scheme.lower() == "file":
            return None
        authority, _, path = rest.partition("/")
        return authority, path
    # scp-like "[user@]host:path": a colon before any slash. "C:/x" is a Windows path.
    bracket_end = url.find("]:") if url.startswith("[") or "@[" in url else -1
    colon = bracket_end + 1 if bracket_end != -1 else url.find(":")
    slash = url.find("/")
    if colon <= 0 or (slash != -1 and slash < colon) or (colon == 1 and url[0].isalpha()):
        return None
    return url[:colon], url[colon + 1 :]


def normalize_remote_url(url: str) -> str | None:
    """``git:<host lowercased>/<path as written, .git stripped>``; ``None`` if not a network remote.

    Credentials and ports are dropped (the same repository is reached many ways) while the
    path keeps its case (it is case-sensitive on most forges). Results that would not be a
    valid scope id (over 256 characters, control characters, invisible or bidirectional
    formatting characters such as U+200B or U+202E, line/paragraph separators, undecodable
    bytes) become ``git:sha256:<hex>`` of the whole would-be id: still one stable scope per
    remote, shared by every clone, but one that cannot pass for another repository's name.
    Such characters are never stripped — ``pay<U+200B>ments`` must not become ``payments``.
    """
    parts = _split_remote(url.strip())
    if parts is None:
        return None
    authority, path = parts
    host = authority.rpartition("@")[2]
    if host.startswith("["):
        end = host.find("]")
        if end == -1:
            return None
        host = host[: end + 1]
    else:
        host = host.partition(":")[0]
    host = host.lower()
    path = path.strip("/")
    path = path.removesuffix(".git").rstrip("/")
    if not host or not path:
        return None
    scope = f"git:{host}/{path}"
    if len(scope) > _SCOPE_MAX_CHARS or not _is_valid_scope(scope):
        return f"git:sha256:{_sha256_hex(scope)}"
    return scope


# --- binding ---------------------------------------------------------------------------------


def binding_path(repo: Repository) -> str:
    """``<common git dir>/powercontext/workspace.json``: private to the clone, shared by
    its worktrees, never committed."""
    return os.path.join(repo.common_dir, "powercontext", "workspace.json")


def _read_binding(repo: Repository) -> str | None:
    """The bound scope, ``None`` without a binding; :class:`ScopeError` for anything present
    that is not a valid binding — including a symlink, FIFO or other non-regular file (``bind``
    only ever writes regular files)."""
    path = binding_path(repo)
    data = _read_small(path, follow_symlinks=False)
    if data is None:
        if not os.path.lexists(path):
            return None
        raise ScopeError("the workspace binding file cannot be read")
    try:
        binding = msgspec.json.decode(data, type=_Binding)
        return check_scope_id(binding.scope_id, "scope_id in the workspace binding")
    except (msgspec.MsgspecError, SettingsError) as exc:
        raise ScopeError("the workspace binding file is invalid") from exc


def bind(directory: str, scope_id: str) -> str:
    """Bind the repository containing ``directory`` to ``scope_id``; returns the file written.

    Written atomically (temporary file, fsync, rename) so a concurrent hook reads either the
    old binding or the new one, never a torn file.
    """
    try:
        check_scope_id(scope_id, "scope_id")
    except SettingsError as exc:
        raise ScopeError(str(exc)) from exc
    repo = find_repository(os.path.abspath(directory))
    if repo is None:
        raise ScopeError("not inside a git repository")
    path = binding_path(repo)
    folder = os.path.dirname(path)
    os.makedirs(folder, mode=0o700, exist_ok=True)
    payload = msgspec.json.encode({"schema": BINDING_SCHEMA, "scope_id": scope_id}) + b"\n"
    temporary = os.path.join(folder, f".workspace.{os.getpid()}.tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(payload)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
    return path


def unbind(directory: str) -> bool:
    """Remove the binding of the repository containing ``directory``; whether one existed."""
    repo = find_repository(os.path.abspath(directory))
    if repo is None:
        return False
    try:
        os.unlink(binding_path(repo))
    except FileNotFoundError:
        return False
    return True


# --- resolution ------------------------------------------------------------------------------

ScopeSource = Literal["override", "binding", "remote", "local"]


def explain_scope(
    cwd: str | None, override: str | None = None, *, deadline: Deadline | None = None
) -> tuple[str, ScopeSource] | None:
    """:func:`resolve_scope` plus which rule produced the scope (for ``doctor`` and ``bind``)."""
    if override:
        return override, "override"
    if not cwd or not os.path.isabs(cwd):
        return None
    directory = os.path.realpath(cwd)
    if not os.path.isdir(directory):
        return None
    repo = find_repository(directory, deadline)
    if repo is None:
        return f"local:sha256:{_sha256_hex(directory)}", "local"
    _check_deadline(deadline)
    bound = _read_binding(repo)
    if bound is not None:
        return bound, "binding"
    url = _origin_url(repo, deadline)
    if url:
        normalized = normalize_remote_url(url)
        if normalized is not None:
            return normalized, "remote"
    return f"local:sha256:{_sha256_hex(os.path.realpath(repo.root))}", "local"


def resolve_scope(
    cwd: str | None, override: str | None = None, *, deadline: Deadline | None = None
) -> str | None:
    """The scope for the host-reported ``cwd``; ``None`` means unscoped (the hook skips).

    ``override`` is the configured ``scope_id`` (``POWERCONTEXT_SCOPE_ID`` and friends, already
    validated) and wins over everything. Raises :class:`ScopeError` for a corrupt binding
    rather than silently falling back to another scope, and when ``deadline`` runs out (or
    ``git`` does not answer within it) before the scope is certain.
    """
    explained = explain_scope(cwd, override, deadline=deadline)
    return None if explained is None else explained[0]
