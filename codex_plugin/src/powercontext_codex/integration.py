"""How PowerContext is installed into, removed from and checked against Codex CLI.

Only what is specific to Codex lives here; the flows are the kit's
(:class:`powercontext_hook_kit.install.HostIntegration`). What Codex 0.169.0 does, as verified
against the real CLI (``docs/decisions/real-host-facts.md``, ``plugin-install.md``):

* Plugin hooks run only with the ``plugins`` feature on; with it off, ``install`` falls back to a
  user hook in ``$CODEX_HOME/hooks.json``.
* Every hook starts *untrusted* and ``codex exec`` then skips it silently. Installing is the
  user's explicit decision to run this hook, so ``install`` trusts exactly the hooks it
  installed — through Codex's own app-server (``hooks/list`` for the key and hash,
  ``config/batchWrite`` to store ``hooks.state."<key>".trusted_hash``), never by editing
  ``config.toml`` as text. ``--no-trust`` leaves that to the user (``/hooks`` in Codex).
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import shutil
import signal
import subprocess
import threading
import time
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from powercontext_hook_kit.install import (
    HOOK_EVENTS,
    Change,
    Check,
    HookRegistration,
    HostIntegration,
    InstallContext,
    InstallError,
    hook_events_text,
    load_json_object,
    same_tree,
)

from . import __version__

__all__ = ["AppServer", "CodexIntegration"]

_APP_SERVER_TIMEOUT = 30.0
_TRUSTED = "trusted"
_HOOKS_FILE_KEYS = frozenset({"description", "hooks"})
#: ``hooks/list`` spells events in camelCase: host event name → Codex's ``eventName``.
_EVENT_NAMES = {
    "SessionStart": "sessionStart",
    "UserPromptSubmit": "userPromptSubmit",
    "Stop": "stop",
}
_EVENT_LABELS = {listed: event for event, listed in _EVENT_NAMES.items()}


class AppServer:
    """A short-lived ``codex app-server`` session (JSON-RPC, one JSON object per line).

    The only supported way to read Codex's hook trust state without a TTY (``hooks/list``) and
    to change ``config.toml`` with Codex's own writer (``config/batchWrite``).
    """

    def __init__(self, executable: str, env: Mapping[str, str], cwd: str) -> None:
        self._next_id = 1
        self._lines: queue.Queue[str | None] = queue.Queue()
        try:
            self._process = subprocess.Popen(
                [executable, "app-server"],
                env=dict(env),
                cwd=cwd,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                text=True,
                encoding="utf-8",
                start_new_session=True,
            )
        except OSError as exc:
            raise InstallError(f"cannot start `codex app-server`: {exc.strerror}") from exc
        threading.Thread(target=self._read, daemon=True).start()
        self.request(
            "initialize", {"clientInfo": {"name": "powercontext-codex", "version": __version__}}
        )
        self._send({"method": "initialized"})

    def _read(self) -> None:
        assert self._process.stdout is not None
        for line in self._process.stdout:
            self._lines.put(line)
        self._lines.put(None)

    def _send(self, message: Mapping[str, Any]) -> None:
        assert self._process.stdin is not None
        try:
            self._process.stdin.write(json.dumps(message) + "\n")
            self._process.stdin.flush()
        except OSError as exc:
            raise InstallError("`codex app-server` stopped unexpectedly") from exc

    def request(self, method: str, params: Mapping[str, Any]) -> Any:
        request_id = self._next_id
        self._next_id += 1
        self._send({"id": request_id, "method": method, "params": dict(params)})
        deadline = time.monotonic() + _APP_SERVER_TIMEOUT
        while True:
            remaining = deadline - time.monotonic()
            try:
                line = self._lines.get(timeout=max(remaining, 0.01))
            except queue.Empty:
                raise InstallError(f"`codex app-server` did not answer {method}") from None
            if line is None:
                raise InstallError(f"`codex app-server` exited before answering {method}")
            with contextlib.suppress(ValueError):
                message = json.loads(line)
                if isinstance(message, dict) and message.get("id") == request_id:
                    if "error" in message:
                        error = message["error"]
                        text = error.get("message") if isinstance(error, dict) else error
                        raise InstallError(f"`codex app-server` {method} failed: {text}")
                    return message.get("result")

    def hooks(self, cwd: str) -> list[dict[str, Any]]:
        """Every hook Codex finds for ``cwd`` (``key``, ``currentHash``, ``trustStatus``…)."""
        result = self.request("hooks/list", {"cwds": [cwd]})
        hooks: list[dict[str, Any]] = []
        for entry in (result or {}).get("data", []):
            hooks.extend(hook for hook in entry.get("hooks", []) if isinstance(hook, dict))
        return hooks

    def set_hook_state(self, states: Mapping[str, str | None]) -> None:
        """Store (or, with ``None``, delete) ``hooks.state."<key>"`` entries in config.toml."""
        edits = [
            {
                "keyPath": f"hooks.state.{json.dumps(key)}"
                + (".trusted_hash" if value is not None else ""),
                "value": value,
                "mergeStrategy": "replace",
            }
            for key, value in states.items()
        ]
        self.request("config/batchWrite", {"edits": edits})

    def close(self) -> None:
        with contextlib.suppress(OSError):
            if self._process.stdin is not None:
                self._process.stdin.close()
        if self._process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self._process.pid, signal.SIGTERM)
        try:
            self._process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self._process.pid, signal.SIGKILL)
            self._process.wait(timeout=10)

    def __enter__(self) -> AppServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _trusted_hash(current_hash: object) -> str:
    """The part of ``currentHash`` Codex compares with ``trusted_hash``.

    Plugin hooks report ``sha256:<hook>/sha256:<plugin>``; only the first part is stored
    (storing the whole value makes Codex report the hook as *modified*).
    """
    return str(current_hash).split("/", 1)[0]


class CodexIntegration(HostIntegration):
    """PowerContext's Codex CLI plugin (``powercontext@powercontext-local``)."""

    host = "codex"
    display_name = "Codex CLI"
    module = "powercontext_codex"
    script = "powercontext-codex"
    cli_name = "codex"
    config_dir_var = "CODEX_HOME"
    config_dir_name = ".codex"
    version = __version__
    host_user_data = frozenset(
        {"sessions", "archived_sessions", "history.jsonl", "log", "auth.json", "AGENTS.md"}
    )
    #: Codex 0.169.0 starts a stdio MCP server with only these of its own variables (plus the
    #: server's ``env_vars`` and ``env``): ``docs/decisions/real-host-facts.md`` § MCP servers.
    mcp_inherited_env = (
        "HOME",
        "LOGNAME",
        "PATH",
        "SHELL",
        "USER",
        "__CF_USER_TEXT_ENCODING",
        "LANG",
        "LC_ALL",
        "TERM",
        "TMPDIR",
        "TZ",
    )

    # ---- places ---------------------------------------------------------------------------

    def marketplace_files(self) -> dict[str, Any]:
        return {
            ".agents/plugins/marketplace.json": {
                "name": self.marketplace_name,
                "interface": {"displayName": "PowerContext (local)"},
                "plugins": [
                    {
                        "name": self.plugin_name,
                        "source": {"source": "local", "path": f"./plugins/{self.plugin_name}"},
                        "policy": {"installation": "AVAILABLE"},
                        "category": "Productivity",
                    }
                ],
            }
        }

    def user_hooks_file(self, env: Mapping[str, str]) -> Path:
        return self.config_dir(env) / "hooks.json"

    def installed_plugin_root(self, env: Mapping[str, str]) -> Path:
        """Codex runs the copy ``codex plugin add`` made: ``plugins/cache/<market>/<plugin>/
        <version>`` in its config folder."""
        return (
            self.config_dir(env)
            / "plugins"
            / "cache"
            / self.marketplace_name
            / self.plugin_name
            / self.version
        )

    def config_file(self, env: Mapping[str, str]) -> Path:
        return self.config_dir(env) / "config.toml"

    def cli_config_file(self, env: Mapping[str, str]) -> Path:
        return self.config_file(env)  # `codex plugin …` records plugins in config.toml

    def host_state_roots(self, env: Mapping[str, str]) -> list[Path]:
        """``plugins/`` (the cache copy; ``plugin remove`` leaves ``plugins/cache/<market>``)
        and ``.hook-trust/``: trusting a hook through ``config/batchWrite`` also writes
        ``.hook-trust/<hash>``, and deleting the trust entry does not remove it (0.169.0)."""
        return [*super().host_state_roots(env), self.config_dir(env) / ".hook-trust"]

    def shell_argv(self, env: Mapping[str, str]) -> list[str]:
        return [env.get("SHELL") or "/bin/sh", "-c"]  # Codex runs hooks with `$SHELL -c`

    def sample_event(self, cwd: str, prompt: str) -> dict[str, Any]:
        return {
            "session_id": "powercontext-doctor",
            "turn_id": "powercontext-doctor",
            "transcript_path": None,
            "cwd": cwd,
            "hook_event_name": "UserPromptSubmit",
            "model": "powercontext-doctor",
            "permission_mode": "default",
            "prompt": prompt,
        }

    def check_user_hooks(self, document: Mapping[str, Any], path: Path) -> None:
        """Codex 0.169.0 drops a whole hooks.json with any top-level key but ``description``
        and ``hooks`` (only a stderr warning says so): merging into it would be useless."""
        unknown = sorted(set(document) - _HOOKS_FILE_KEYS)
        if unknown:
            raise InstallError(
                f"Codex ignores {path}: unknown top-level key(s) {', '.join(unknown)} (only "
                "`description` and `hooks` are allowed); fix the file, then retry"
            )

    def add_install_arguments(self, parser: Any) -> None:
        parser.add_argument(
            "--no-trust",
            action="store_true",
            help="do not mark the installed hooks as trusted; review them in Codex with /hooks",
        )

    # ---- talking to codex ----------------------------------------------------------------

    def _plugins_feature_on(self, ctx: InstallContext) -> bool:
        for line in self.run_host_cli(ctx, "features", "list").stdout.splitlines():
            parts = line.split()
            if parts and parts[0] == "plugins":
                return parts[-1] == "true"
        return False

    def installed_plugin(self, ctx: InstallContext) -> dict[str, Any] | None:
        listing = self.run_host_cli(ctx, "plugin", "list", "--json").json()
        for plugin in listing.get("installed", []):
            if plugin.get("pluginId") == self.plugin_id:
                return plugin
        return None

    def registered_marketplace(self, ctx: InstallContext) -> str | None:
        listing = self.run_host_cli(ctx, "plugin", "marketplace", "list", "--json").json()
        for market in listing.get("marketplaces", []):
            if market.get("name") == self.marketplace_name:
                return str(market.get("root"))
        return None

    def _is_ours_listed(self, hook: Mapping[str, Any], ctx: InstallContext) -> bool:
        """One of the hooks *we* installed: our command, in our plugin or our user file."""
        if self.is_ours({"command": hook.get("command")}) is None:
            return False
        if hook.get("source") == "plugin":
            return hook.get("pluginId") == self.plugin_id
        source = hook.get("sourcePath")
        return (
            hook.get("source") == "user"
            and source is not None
            and os.path.realpath(str(source)) == os.path.realpath(self.user_hooks_file(ctx.env))
        )

    def _trust(self, ctx: InstallContext) -> None:
        """Mark exactly our freshly installed hooks as trusted, then verify Codex agrees."""
        if getattr(ctx.options, "no_trust", False):
            ctx.report.notes.append(
                "not trusted (--no-trust): Codex skips the hooks until you trust them — open "
                "`codex`, run /hooks and trust the PowerContext hooks"
            )
            return
        assert ctx.host_cli is not None
        with AppServer(ctx.host_cli, ctx.env, ctx.cwd) as server:
            ours = [hook for hook in server.hooks(ctx.cwd) if self._is_ours_listed(hook, ctx)]
            if not ours:
                raise InstallError(
                    "Codex does not list the PowerContext hook after installing it; "
                    f"run `{self.script} doctor`"
                )
            states: dict[str, str | None] = {}
            for hook in ours:
                verb = self.is_ours({"command": hook.get("command")})
                if hook.get("command") != ctx.commands.get(str(verb)):
                    raise InstallError(
                        f"Codex lists an unexpected PowerContext hook command "
                        f"({hook.get('command')!r}); not trusting it"
                    )
                if hook.get("trustStatus") != _TRUSTED:
                    states[str(hook["key"])] = _trusted_hash(hook.get("currentHash"))
            if not states:
                return
            config = self.config_file(ctx.env)
            ctx.ledger.before_change(config)
            server.set_hook_state(states)
            for key in states:
                ctx.report.add(Change("trusted", key, f"hooks.state in {config}"))
        untrusted = self._untrusted(ctx)
        if untrusted:
            # A plugin that changed after its first trust (e.g. `install --bootstrap` over an
            # install): Codex remembers the plugin part of the hash from that first trust
            # (`.hook-trust/`), so the hook part alone reads "modified"; the whole current hash
            # is what it accepts then (verified with 0.169.0, docs/decisions/real-host-facts.md).
            with AppServer(ctx.host_cli, ctx.env, ctx.cwd) as server:
                server.set_hook_state(untrusted)
            untrusted = self._untrusted(ctx)
        if untrusted:
            raise InstallError(f"Codex still reports the hook as not trusted: {sorted(untrusted)}")

    def _untrusted(self, ctx: InstallContext) -> dict[str, str]:
        """Our hooks Codex does not report as trusted: key → their whole current hash."""
        assert ctx.host_cli is not None
        with AppServer(ctx.host_cli, ctx.env, ctx.cwd) as server:  # a fresh read of the config
            return {
                str(hook.get("key")): str(hook.get("currentHash"))
                for hook in server.hooks(ctx.cwd)
                if self._is_ours_listed(hook, ctx) and hook.get("trustStatus") != _TRUSTED
            }

    def _trust_entries(self, ctx: InstallContext, keys: Sequence[str] = ()) -> list[str]:
        """``hooks.state`` keys in config.toml that belong to our plugin or are in ``keys``."""
        try:
            document = tomllib.loads(self.config_file(ctx.env).read_text("utf-8"))
        except FileNotFoundError:
            return []
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
            raise InstallError(f"cannot read {self.config_file(ctx.env)}: {exc}") from exc
        hooks = document.get("hooks")
        state = hooks.get("state") if isinstance(hooks, dict) else None
        if not isinstance(state, dict):
            return []
        prefix = f"{self.plugin_id}:"
        return [key for key in state if key.startswith(prefix) or key in keys]

    def _untrust(self, ctx: InstallContext, keys: Sequence[str]) -> None:
        if not keys:
            return
        assert ctx.host_cli is not None
        config = self.config_file(ctx.env)
        ctx.ledger.before_change(config)
        with AppServer(ctx.host_cli, ctx.env, ctx.cwd) as server:
            server.set_hook_state(dict.fromkeys(keys))
        for key in keys:
            ctx.report.add(Change("untrusted", key, f"hooks.state removed from {config}"))

    # ---- install / uninstall ---------------------------------------------------------------

    def choose_mode(self, ctx: InstallContext) -> str:
        trust_hint = (
            "Codex runs them only once trusted: open `codex`, run /hooks and trust the "
            f"PowerContext hooks (or re-run `{self.script} install` with codex on PATH)"
        )
        if getattr(ctx.options, "no_host_cli", False):
            ctx.report.notes.append(f"--no-host-cli: merged into hooks.json. {trust_hint}")
            return "hooks"
        if ctx.host_cli is None:
            ctx.report.notes.append(
                f"`codex` is not on PATH (or use --host-cli): merged into hooks.json. {trust_hint}"
            )
            return "hooks"
        if not self._plugins_feature_on(ctx):
            ctx.report.notes.append(
                "the Codex `plugins` feature is off, and plugin hooks never run then: "
                "installed as a user hook in hooks.json instead (no MCP server or skill)"
            )
            return "hooks"
        return "plugin"

    def register_plugin(self, ctx: InstallContext, marketplace: Path) -> None:
        self.point_marketplace(ctx, marketplace)
        installed = self.installed_plugin(ctx)
        cache = self.installed_plugin_root(ctx.env)
        current = (
            installed is not None
            and installed.get("enabled") is True
            and same_tree(cache, self.plugin_dir(), ignore=(".powercontext-managed.json",))
        )
        if not current:
            self.run_change(ctx, "plugin", "add", self.plugin_id, detail=f"copied to {cache}")
        # Codex does not create the plugin's data dir, our hook does (mkdir -p) at its first
        # run: note now which of its folders are new, so uninstall takes them away again.
        ctx.ledger.before_create_dir(self.plugin_data_dir(ctx.env))
        self._trust(ctx)

    def after_merge(self, ctx: InstallContext, hooks_file: Path) -> None:
        if ctx.host_cli is not None:
            self._trust(ctx)

    def before_unmerge(self, ctx: InstallContext, hooks_file: Path) -> None:
        if ctx.host_cli is None:
            return
        with AppServer(ctx.host_cli, ctx.env, ctx.cwd) as server:
            keys = [
                str(hook["key"])
                for hook in server.hooks(ctx.cwd)
                if hook.get("source") == "user" and self._is_ours_listed(hook, ctx)
            ]
        present = set(self._trust_entries(ctx, keys))
        self._untrust(ctx, [key for key in keys if key in present])

    def verify_unregistered(self, ctx: InstallContext) -> None:
        """Neither plugin nor marketplace listed, and no trust entry of our plugin left."""
        super().verify_unregistered(ctx)
        left = self._trust_entries(ctx)
        if left:
            raise InstallError(
                f"{self.config_file(ctx.env)} still trusts {', '.join(left)}; run "
                f"`{self.script} uninstall` again"
            )

    def unregister_plugin(self, ctx: InstallContext) -> None:
        self._untrust(ctx, self._trust_entries(ctx))
        if self.installed_plugin(ctx) is not None:
            self.run_change(ctx, "plugin", "remove", self.plugin_id)
        self.remove_marketplace(ctx)
        data = self.plugin_data_dir(ctx.env)
        if data.is_dir():  # Codex does not create it; our hook did (diagnostics log)
            shutil.rmtree(data)
            ctx.report.add(Change("removed", str(data), "the plugin hook's data dir"))

    # ---- doctor ----------------------------------------------------------------------------

    def inspect_registration(self, ctx: InstallContext) -> HookRegistration:
        registration = HookRegistration()
        checks = registration.checks
        if ctx.host_cli is None:
            return self._inspect_files(ctx, registration)
        version = (
            self.run_host_cli(ctx, "--version", check=False).stdout.strip() or "unknown version"
        )
        checks.append(Check("host", "info", f"{version} ({ctx.host_cli})"))
        try:
            with AppServer(ctx.host_cli, ctx.env, ctx.cwd) as server:
                listed = server.hooks(ctx.cwd)
        except InstallError as exc:
            checks.append(Check("hooks", "fail", str(exc)))
            return registration
        ours: dict[str, list[dict[str, Any]]] = {
            name: [
                hook
                for hook in listed
                if self.is_ours({"command": hook.get("command")}) == name
                and hook.get("eventName") == _EVENT_NAMES[event]
            ]
            for name, event in HOOK_EVENTS.items()
        }
        if not any(ours.values()):
            hooks_file = self.user_hooks_file(ctx.env)
            try:  # a user hooks file Codex cannot read explains a missing hook best
                self.check_user_hooks(load_json_object(hooks_file) or {}, hooks_file)
            except InstallError as exc:
                checks.append(Check("hooks", "fail", str(exc)))
                return registration
            installed = self.installed_plugin(ctx)
            if installed is not None and not self._plugins_feature_on(ctx):
                checks.append(
                    Check(
                        "hooks",
                        "fail",
                        "the plugin is installed but the Codex `plugins` feature is off, so "
                        "its hooks never run",
                        f"re-run `{self.script} install` (it then uses hooks.json)",
                    )
                )
            else:
                checks.extend(self.registration_checks(ctx, {}, {}))
            return registration
        places = {
            name: [
                f"plugin {h.get('pluginId')}"
                if h.get("source") == "plugin"
                else f"{h.get('source')} hook in {h.get('sourcePath')}"
                for h in hooks
            ]
            for name, hooks in ours.items()
        }
        for name, hooks in ours.items():
            if hooks:
                registration.commands[name] = str(hooks[0].get("command"))
        first = ours["user-prompt-submit"][:1] or ours["session-start"][:1]
        registration.data_dir = (
            str(self.plugin_data_dir(ctx.env))
            if first[0].get("source") == "plugin"
            else self.user_hook_data_dir(ctx.env)
        )
        checks.extend(self.registration_checks(ctx, places, registration.commands))
        found = [hooks[0] for hooks in ours.values() if hooks]
        disabled = [h for h in found if h.get("enabled") is False]
        if disabled:
            events = " and ".join(_EVENT_LABELS[str(h.get("eventName"))] for h in disabled)
            checks.append(Check("enabled", "fail", f"{events} disabled in Codex", "enable it"))
        checks.append(self._trust_check(found))
        return registration

    def _trust_check(self, hooks: Sequence[Mapping[str, Any]]) -> Check:
        """One ``trust`` line for all our listed hooks: ok only if Codex trusts every one."""
        fix = (
            f"run `{self.script} install` (it trusts the hooks), or trust them in `codex` → /hooks"
        )
        modified = [h for h in hooks if h.get("trustStatus") == "modified"]
        if modified:
            events = " and ".join(_EVENT_LABELS[str(h.get("eventName"))] for h in modified)
            return Check(
                "trust",
                "fail",
                f"{events} changed since it was trusted: Codex does not run it (a plugin hook "
                f"shows as `hook: {events.split(' and ')[0]} Failed`)",
                fix,
            )
        untrusted = [h for h in hooks if h.get("trustStatus") != _TRUSTED]
        if untrusted:
            status = untrusted[0].get("trustStatus") or "unknown"
            events = " and ".join(_EVENT_LABELS[str(h.get("eventName"))] for h in untrusted)
            return Check(
                "trust",
                "fail",
                f"{events} {status}: `codex exec` silently skips untrusted hooks",
                fix,
            )
        return Check("trust", "ok", f"trusted ({hook_events_text()})")

    def _inspect_files(
        self, ctx: InstallContext, registration: HookRegistration
    ) -> HookRegistration:
        """Without ``codex``: read the files install writes; trust cannot be checked."""
        checks = registration.checks
        places: dict[str, list[str]] = {name: [] for name in HOOK_EVENTS}
        try:
            document = load_json_object(self.user_hooks_file(ctx.env)) or {}
        except InstallError as exc:
            checks.append(Check("hooks", "fail", str(exc)))
            return registration
        for name, command in self.our_hook_commands(document):
            places[name].append(f"user hook in {self.user_hooks_file(ctx.env)}")
            registration.commands[name] = command
            registration.data_dir = self.user_hook_data_dir(ctx.env)
        if self.plugin_registered_in_config(ctx):
            with contextlib.suppress(InstallError):
                for name, command in self.plugin_hook_commands(self.plugin_dir()):
                    places[name].append(f"plugin {self.plugin_id}")
                    registration.commands[name] = command
                    registration.data_dir = str(self.plugin_data_dir(ctx.env))
        checks.extend(self.registration_checks(ctx, places, registration.commands))
        checks.append(
            Check(
                "trust",
                "warn",
                "cannot be checked without `codex` on PATH (use --host-cli); untrusted hooks "
                "are skipped silently",
            )
        )
        return registration

    def plugin_registered_in_config(self, ctx: InstallContext) -> bool:
        try:
            document = tomllib.loads(self.config_file(ctx.env).read_text("utf-8"))
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
            return False
        plugins = document.get("plugins")
        entry = plugins.get(self.plugin_id) if isinstance(plugins, dict) else None
        return isinstance(entry, dict) and entry.get("enabled") is True
