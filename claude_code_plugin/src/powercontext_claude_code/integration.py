"""How PowerContext is installed into, removed from and checked against Claude Code.

Only what is specific to Claude Code lives here; the flows are the kit's
(:class:`powercontext_hook_kit.install.HostIntegration`). What Claude Code 2.1.328 does, as
verified against the real CLI (``docs/decisions/real-host-facts.md``, ``plugin-install.md``):

* A *directory* marketplace is read in place: ``CLAUDE_PLUGIN_ROOT`` is our rendered folder, so
  a re-install that rewrites it takes effect at the next session without re-registering.
* ``claude plugin install`` works without a TTY; ``userConfig`` options reach the hook as
  ``CLAUDE_PLUGIN_OPTION_<KEY>`` (the kit ranks them just below ``POWERCONTEXT_*``).
* Hooks run with ``/bin/sh -c`` whatever ``$SHELL`` is, and need no trust step.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from powercontext_hook_kit.install import (
    HOOK_EVENTS,
    Check,
    HookRegistration,
    HostIntegration,
    InstallContext,
    InstallError,
    load_json_object,
)

from . import __version__

__all__ = ["ClaudeCodeIntegration"]


def _option_value(value: object) -> str | None:
    """A ``pluginConfigs`` option the way Claude Code exports it to hooks."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(int(value)) if float(value).is_integer() else str(value)
    if isinstance(value, str):
        return value
    return None


class ClaudeCodeIntegration(HostIntegration):
    """PowerContext's Claude Code plugin (``powercontext@powercontext-local``)."""

    host = "claude-code"
    display_name = "Claude Code"
    module = "powercontext_claude_code"
    script = "powercontext-claude-code"
    cli_name = "claude"
    config_dir_var = "CLAUDE_CONFIG_DIR"
    config_dir_name = ".claude"
    version = __version__
    mcp_data_dir_var = "CLAUDE_PLUGIN_DATA"
    host_user_data = frozenset(
        {
            "projects",
            "todos",
            "history.jsonl",
            "shell-snapshots",
            "file-history",
            "session-env",
            "ide",
            "plans",
            "agents",
            "commands",
            "CLAUDE.md",
            ".credentials.json",
        }
    )

    # ---- places ---------------------------------------------------------------------------

    def marketplace_files(self) -> dict[str, Any]:
        return {
            ".claude-plugin/marketplace.json": {
                "name": self.marketplace_name,
                "owner": {"name": "PowerContext"},
                "description": "PowerContext, installed from this machine's Python package",
                "plugins": [
                    {
                        "name": self.plugin_name,
                        "source": f"./plugins/{self.plugin_name}",
                        "version": self.version,
                        "description": "Durable, cited project memory before every prompt",
                    }
                ],
            }
        }

    def user_hooks_file(self, env: Mapping[str, str]) -> Path:
        return self.config_dir(env) / "settings.json"

    def shell_argv(self, env: Mapping[str, str]) -> list[str]:
        return ["/bin/sh", "-c"]  # Claude Code ignores $SHELL for hooks

    def host_state_files(self, env: Mapping[str, str]) -> list[Path]:
        """Claude Code's global ``.claude.json`` (in ``$CLAUDE_CONFIG_DIR`` when set, else in
        the home): its first run anywhere — possibly our ``claude plugin …`` — creates it."""
        configured = env.get(self.config_dir_var, "").strip()
        home = Path(env.get("HOME") or os.path.expanduser("~"))
        base = Path(os.path.expanduser(configured)).absolute() if configured else home
        return [base / ".claude.json"]

    def sample_event(self, cwd: str, prompt: str) -> dict[str, Any]:
        return {
            "session_id": "powercontext-doctor",
            "transcript_path": "",
            "cwd": cwd,
            "prompt_id": "powercontext-doctor",
            "permission_mode": "default",
            "hook_event_name": "UserPromptSubmit",
            "prompt": prompt,
        }

    # ---- talking to claude ---------------------------------------------------------------

    def registered_marketplace(self, ctx: InstallContext) -> str | None:
        for market in self.run_host_cli(ctx, "plugin", "marketplace", "list", "--json").json():
            if isinstance(market, dict) and market.get("name") == self.marketplace_name:
                return str(market.get("path") or market.get("installLocation"))
        return None

    def installed_plugin(self, ctx: InstallContext) -> dict[str, Any] | None:
        for plugin in self.run_host_cli(ctx, "plugin", "list", "--json").json():
            if (
                isinstance(plugin, dict)
                and plugin.get("id") == self.plugin_id
                and plugin.get("scope", "user") == "user"
            ):
                return plugin
        return None

    # ---- install / uninstall ---------------------------------------------------------------

    def choose_mode(self, ctx: InstallContext) -> str:
        without = "merged into settings.json (the MCP server and skill need the plugin)"
        if getattr(ctx.options, "no_host_cli", False):
            ctx.report.notes.append(f"--no-host-cli: {without}")
            return "hooks"
        if ctx.host_cli is None:
            ctx.report.notes.append(f"`claude` is not on PATH (or use --host-cli): {without}")
            return "hooks"
        return "plugin"

    def register_plugin(self, ctx: InstallContext, marketplace: Path) -> None:
        self.point_marketplace(ctx, marketplace)
        installed = self.installed_plugin(ctx)
        if installed is None:
            self.run_change(ctx, "plugin", "install", self.plugin_id, "--scope", "user")
        elif installed.get("enabled") is not True:
            self.run_change(ctx, "plugin", "enable", self.plugin_id)

    def unregister_plugin(self, ctx: InstallContext) -> None:
        if self.installed_plugin(ctx) is not None:
            self.run_change(
                ctx,
                "plugin",
                "uninstall",
                self.plugin_id,
                "--scope",
                "user",
                detail=f"also removes {self.plugin_data_dir(ctx.env)}",
            )
        self.remove_marketplace(ctx)

    # ---- doctor ----------------------------------------------------------------------------

    def _plugin_options(self, settings: Mapping[str, Any]) -> dict[str, str]:
        """``userConfig`` values (non-sensitive ones live in settings.json) as hook variables."""
        configs = settings.get("pluginConfigs")
        entry = configs.get(self.plugin_id) if isinstance(configs, dict) else None
        options = entry.get("options") if isinstance(entry, dict) else None
        if not isinstance(options, dict):
            return {}
        env = {}
        for key, value in options.items():
            text = _option_value(value)
            if text is not None:
                env[f"CLAUDE_PLUGIN_OPTION_{key.upper()}"] = text
        return env

    def _plugin_folder_from_settings(self, settings: Mapping[str, Any]) -> Path | None:
        """Without ``claude``: our plugin's folder if settings.json enables it."""
        enabled = settings.get("enabledPlugins")
        if not (isinstance(enabled, dict) and enabled.get(self.plugin_id) is True):
            return None
        markets = settings.get("extraKnownMarketplaces")
        market = markets.get(self.marketplace_name) if isinstance(markets, dict) else None
        source = market.get("source") if isinstance(market, dict) else None
        path = source.get("path") if isinstance(source, dict) else None
        return Path(path) / "plugins" / self.plugin_name if isinstance(path, str) else None

    def plugin_registered_in_config(self, ctx: InstallContext) -> bool:
        try:
            settings = load_json_object(self.user_hooks_file(ctx.env)) or {}
        except InstallError:
            return False
        enabled = settings.get("enabledPlugins")
        return isinstance(enabled, dict) and enabled.get(self.plugin_id) is True

    def inspect_registration(self, ctx: InstallContext) -> HookRegistration:
        registration = HookRegistration()
        checks = registration.checks
        settings_file = self.user_hooks_file(ctx.env)
        try:
            settings = load_json_object(settings_file) or {}
        except InstallError as exc:
            checks.append(Check("hooks", "fail", str(exc)))
            return registration
        places: dict[str, list[str]] = {name: [] for name in HOOK_EVENTS}
        for name, command in self.our_hook_commands(settings):
            places[name].append(f"hook in {settings_file}")
            registration.commands[name] = command
            registration.data_dir = self.user_hook_data_dir(ctx.env)
        folder: Path | None
        if ctx.host_cli is not None:
            version = self.run_host_cli(ctx, "--version", check=False).stdout.strip() or "unknown"
            checks.append(Check("host", "info", f"Claude Code {version} ({ctx.host_cli})"))
            try:
                plugin = self.installed_plugin(ctx)
            except InstallError as exc:
                checks.append(Check("hooks", "fail", str(exc)))
                return registration
            folder = None
            if plugin is not None:
                if plugin.get("enabled") is not True:
                    checks.append(
                        Check(
                            "plugin",
                            "fail",
                            f"{self.plugin_id} is installed but disabled",
                            f"run `claude plugin enable {self.plugin_id}`",
                        )
                    )
                else:
                    folder = Path(str(plugin.get("readFromFolder") or plugin.get("installPath")))
        else:
            checks.append(
                Check("host", "warn", "`claude` is not on PATH (or use --host-cli): read the files")
            )
            folder = self._plugin_folder_from_settings(settings)
        if folder is not None:
            try:
                in_plugin = self.plugin_hook_commands(folder)
            except InstallError as exc:
                checks.append(Check("hooks", "fail", str(exc)))
                in_plugin = []
            for name, command in in_plugin:
                places[name].append(f"plugin {self.plugin_id} from {folder}")
                registration.commands[name] = command
                registration.data_dir = str(self.plugin_data_dir(ctx.env))
                registration.env = self._plugin_options(settings)
        checks.extend(self.registration_checks(ctx, places, registration.commands))
        return registration
