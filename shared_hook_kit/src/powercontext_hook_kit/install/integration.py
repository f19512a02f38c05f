"""The host integration: what each plugin implements, and the shared flows around it.

A plugin is a :class:`HostIntegration` subclass that names its host and fills in the steps
that need the host's own CLI; ``install``, ``uninstall`` and ``doctor`` are written once here
from the lower modules of this package.
"""

from __future__ import annotations

import abc
import argparse
import json
import os
import shlex
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib.resources import files
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

from ..host import SESSION_START
from ..mcp_bridge import SETTINGS_VARIABLES
from ..runner import HOOK_NAMES, installed_settings
from ..scope import ScopeError, explain_scope
from ..settings import HookSettings, SettingsError, config_file_path, data_dir_variables
from ..settings import plugin_data_dir as hook_data_dir
from ..transport import describe_endpoint
from .doctor import (
    Check,
    HookRegistration,
    bootstrap_check,
    dry_run_check,
    handoff_check,
    log_tail,
    mcp_check,
    mcp_server_env,
    runtime_checks,
    scope_check,
    spool_check,
    task_results_check,
)
from .hook_commands import (
    HOOK_EVENTS,
    hook_command,
    hook_command_options,
    hook_command_verb,
    hook_events_text,
    mcp_command,
)
from .hook_documents import iter_hook_handlers, merge_hook_handlers, remove_hook_handlers
from .host_cli import CliResult, run_cli
from .ledger import LEDGER_FILE_NAME, InstallLedger
from .plugin_folder import (
    HOOK_COMMAND_PREFIX,
    MEMORY_SKILL_MARKDOWN,
    PlaceholderValue,
    remove_managed_tree,
    render_plugin_files,
    sync_managed_tree,
)
from .report import Change, InstallError, Report
from .user_files import dump_json, load_json_object

__all__ = ["HostIntegration", "InstallContext"]


@dataclass
class InstallContext:
    """Everything one ``install``/``uninstall``/``doctor`` run works with."""

    env: dict[str, str]
    cwd: str
    report: Report
    ledger: InstallLedger
    options: argparse.Namespace
    host_cli: str | None = None
    settings: HookSettings | None = None
    files: dict[str, bytes] = field(default_factory=dict)
    commands: dict[str, str] = field(default_factory=dict)

    def wanted_hooks(self) -> dict[str, list[dict[str, Any]]]:
        """Event → handlers of the rendered plugin ``hooks/hooks.json`` (what a user-config
        install merges, so both install paths register exactly the same hooks)."""
        document = json.loads(self.files["hooks/hooks.json"])
        wanted: dict[str, list[dict[str, Any]]] = {}
        for event, _group, _index, handler in iter_hook_handlers(document):
            wanted.setdefault(event, []).append(dict(handler))
        return wanted


class HostIntegration(abc.ABC):
    """One host's plugin: names, paths and the steps that need the host's own CLI.

    Subclasses set the class attributes and implement the abstract methods; ``install``,
    ``uninstall``, ``doctor`` and ``bind`` are shared (see :func:`run_plugin_cli`).
    """

    host: str  # integration name: "codex" / "claude-code"
    display_name: str  # "Codex CLI" / "Claude Code"
    module: str  # python module: "powercontext_codex"
    script: str  # console script: "powercontext-codex"
    cli_name: str  # host executable: "codex" / "claude"
    config_dir_var: str  # overrides the host's user config folder: "CODEX_HOME" / …
    config_dir_name: str  # that folder under $HOME otherwise: ".codex" / ".claude"
    version: str
    plugin_name = "powercontext"
    marketplace_name = "powercontext-local"
    #: Names in the host's folder that hold the user's own data (sessions, transcripts): never
    #: walked, so nothing the user made there can ever be taken for something install created.
    host_user_data: frozenset[str] = frozenset()
    #: The variables the host passes on to a stdio MCP server by itself (``None``: its whole
    #: environment); the doctor starts our MCP server with exactly these.
    mcp_inherited_env: tuple[str, ...] | None = None
    #: The variable through which the host tells our MCP server the plugin's data dir, where
    #: the bridge keeps its catalog cache (Claude Code ``CLAUDE_PLUGIN_DATA``; Codex passes
    #: none, so its bridge uses the kit's default): the doctor sets it the same way.
    mcp_data_dir_var: str | None = None

    # ---- host-specific ------------------------------------------------------------------

    @abc.abstractmethod
    def marketplace_files(self) -> dict[str, Any]:
        """JSON files of the local marketplace around the plugin (path → document)."""

    @abc.abstractmethod
    def user_hooks_file(self, env: Mapping[str, str]) -> Path:
        """The host's user-level file that holds ``{"hooks": …}`` (the no-plugin path)."""

    @abc.abstractmethod
    def shell_argv(self, env: Mapping[str, str]) -> list[str]:
        """How the host runs a hook command (``[shell, "-c"]``)."""

    @abc.abstractmethod
    def sample_event(self, cwd: str, prompt: str) -> dict[str, Any]:
        """A ``UserPromptSubmit`` payload shaped like the host's, for the doctor's dry run."""

    @abc.abstractmethod
    def choose_mode(self, ctx: InstallContext) -> str:
        """``"plugin"`` (register through the host CLI) or ``"hooks"`` (merge the user file);
        explains the choice in ``ctx.report.notes`` when it is not the default."""

    @abc.abstractmethod
    def register_plugin(self, ctx: InstallContext, marketplace: Path) -> None:
        """Register the rendered marketplace with the host CLI (idempotently)."""

    @abc.abstractmethod
    def unregister_plugin(self, ctx: InstallContext) -> None:
        """Remove our plugin and marketplace from the host (only ours; idempotently)."""

    @abc.abstractmethod
    def installed_plugin(self, ctx: InstallContext) -> dict[str, Any] | None:
        """Our plugin as the host CLI lists it (user scope), or ``None`` if not installed."""

    @abc.abstractmethod
    def registered_marketplace(self, ctx: InstallContext) -> str | None:
        """The folder the host CLI has registered as our marketplace (``marketplace_name``),
        or ``None`` when it has none by that name."""

    @abc.abstractmethod
    def inspect_registration(self, ctx: InstallContext) -> HookRegistration:
        """Doctor: is the hook registered (and usable) with the host, and with which command."""

    def plugin_registered_in_config(self, ctx: InstallContext) -> bool:
        """Read-only: whether the host's config still enables our plugin (no CLI needed)."""
        return False

    def check_user_hooks(self, document: Mapping[str, Any], path: Path) -> None:  # noqa: B027
        """Raise :class:`InstallError` if the host would ignore this user hooks document."""

    def after_merge(self, ctx: InstallContext, hooks_file: Path) -> None:  # noqa: B027
        """Host-specific follow-up once our hooks are in the user file (Codex: trust)."""

    def before_unmerge(self, ctx: InstallContext, hooks_file: Path) -> None:  # noqa: B027
        """Host-specific clean-up before our hooks leave the user file (Codex: trust)."""

    def add_install_arguments(self, parser: argparse.ArgumentParser) -> None:  # noqa: B027
        """Extra ``install`` options of one host."""

    # ---- shared ---------------------------------------------------------------------------

    def registration_checks(
        self,
        ctx: InstallContext,
        places: Mapping[str, Sequence[str]],
        registered: Mapping[str, str],
    ) -> list[Check]:
        """The ``hooks`` line — every hook of :data:`HOOK_EVENTS` registered exactly once — and
        a warning when a registered command is not the one this installation would write.

        ``places`` maps hook names (``session-start``) to where each registration was found;
        ``registered`` to the command found for it.
        """
        checks: list[Check] = []
        missing = [event for name, event in HOOK_EVENTS.items() if not places.get(name)]
        doubled = {
            event: list(places[name])
            for name, event in HOOK_EVENTS.items()
            if len(places.get(name) or ()) > 1
        }
        if missing:
            checks.append(
                Check(
                    "hooks",
                    "fail",
                    f"{self.display_name} has no PowerContext {' or '.join(missing)} hook",
                    f"run `{self.script} install`",
                )
            )
        elif doubled:
            event, where = next(iter(doubled.items()))
            checks.append(
                Check(
                    "hooks",
                    "fail",
                    f"{event} registered {len(where)} times ({'; '.join(where)}): every "
                    f"{'session' if event == SESSION_START else 'prompt'} would get the pack "
                    "more than once",
                    f"run `{self.script} install` again (it keeps one)",
                )
            )
        else:
            where = sorted({place for name in HOOK_EVENTS for place in places[name]})
            checks.append(
                Check(
                    "hooks",
                    "ok",
                    f"{hook_events_text()} registered ({'; '.join(where)})",
                )
            )
        stale = [
            registered[name]
            for name in HOOK_EVENTS
            if name in registered
            and ctx.commands.get(name) is not None
            and self._without_options(registered[name]) != self._without_options(ctx.commands[name])
        ]
        if stale:
            checks.append(
                Check(
                    "command",
                    "warn",
                    f"the registered command is {stale[0]!r}, not this installation's",
                    f"re-run `{self.script} install` to use this one",
                )
            )
        return checks

    @property
    def plugin_id(self) -> str:
        return f"{self.plugin_name}@{self.marketplace_name}"

    def marketplace_dir(self) -> Path:
        """``<user data dir>/powercontext/hosts/<host>/marketplace``: ours, rewritten at will."""
        import platformdirs

        return platformdirs.user_data_path("powercontext") / "hosts" / self.host / "marketplace"

    def ledger_path(self) -> Path:
        """``<user data dir>/powercontext/hosts/<host>/install-ledger.json``: what this host's
        files looked like before install (see :mod:`.ledger`), next to the marketplace."""
        return self.marketplace_dir().parent / LEDGER_FILE_NAME

    def host_state_roots(self, env: Mapping[str, str]) -> list[Path]:
        """Folders the host CLI writes into when it registers or removes a plugin. What
        appears there during ``install`` is recorded as ours, so ``uninstall`` can take it
        away again (e.g. the empty ``plugins/cache/<market>`` Codex leaves behind). Only
        these: the rest of the host's folder (sessions, transcripts) is never watched."""
        return [self.config_dir(env) / "plugins"]

    def host_state_files(self, env: Mapping[str, str]) -> list[Path]:
        """Files the host CLI keeps for itself outside :meth:`host_state_roots` (see
        :meth:`.InstallLedger.watch_file`): tracked only when install is what creates them."""
        return []

    def watch_host_state(self, ctx: InstallContext) -> None:
        """Before the first host CLI command of a run: note what the host has now — the
        folders its plugin commands write into, its own bookkeeping files, and (for what it
        creates for itself, see :meth:`.InstallLedger.watch_state`) its whole folder except
        :attr:`host_user_data`."""
        ctx.ledger.watch(*self.host_state_roots(ctx.env))
        for path in self.host_state_files(ctx.env):
            ctx.ledger.watch_file(path)
        ctx.ledger.watch_state(self.config_dir(ctx.env), skip=self.host_user_data)

    def template(self) -> Traversable:
        """The packaged plugin folder (package data with placeholders): ``<module>/plugin``."""
        return files(self.module) / "plugin"

    def plugin_dir(self) -> Path:
        return self.marketplace_dir() / "plugins" / self.plugin_name

    def installed_plugin_root(self, env: Mapping[str, str]) -> Path:
        """The plugin folder the host actually reads (its ``.mcp.json`` is what it starts):
        the rendered folder itself unless the host keeps a copy (Codex)."""
        return self.plugin_dir()

    def data_dir_vars(self) -> list[str]:
        """The variables through which the host tells a hook its data dir (its own first)."""
        return list(data_dir_variables(self.host))

    def config_dir(self, env: Mapping[str, str]) -> Path:
        """The host's user config folder: ``$<config_dir_var>`` when set, else
        ``$HOME/<config_dir_name>`` — resolved the way the host itself resolves it."""
        configured = env.get(self.config_dir_var, "").strip()
        if configured:
            return Path(os.path.expanduser(configured)).absolute()
        return Path(env.get("HOME") or os.path.expanduser("~")) / self.config_dir_name

    def plugin_data_dir(self, env: Mapping[str, str]) -> Path:
        """The data folder the host gives our *plugin* hooks (where their diagnostics log is):
        ``<config dir>/plugins/data/<plugin>-<marketplace>``, named after the plugin id."""
        name = f"{self.plugin_name}-{self.marketplace_name}"
        return self.config_dir(env) / "plugins" / "data" / name

    def user_hook_data_dir(self, env: Mapping[str, str]) -> str:
        """Where a hook merged into the user's config logs: the host sets no data-dir variable
        for it, so the hook falls back to the kit's default (:func:`.settings.plugin_data_dir`
        without the variables this shell may happen to export)."""
        clean = {key: value for key, value in env.items() if key not in self.data_dir_vars()}
        return hook_data_dir(self.host, clean)

    def our_hook_commands(self, document: Mapping[str, Any]) -> list[tuple[str, str]]:
        """``(hook name, command)`` of each of our handlers in a hooks document that sits under
        its own event (the doctor counts where each hook is registered)."""
        found = []
        for event, _group, _index, handler in iter_hook_handlers(document):
            name = self.is_ours(handler)
            if name is not None and HOOK_EVENTS.get(name) == event:
                found.append((name, str(handler["command"])))
        return found

    def plugin_hook_commands(self, plugin: Path) -> list[tuple[str, str]]:
        """:meth:`our_hook_commands` of a plugin folder's ``hooks/hooks.json``."""
        return self.our_hook_commands(load_json_object(plugin / "hooks" / "hooks.json") or {})

    def is_ours(self, handler: Mapping[str, Any]) -> str | None:
        """The hook name of one of our handlers, else ``None`` (the marker check)."""
        if handler.get("type", "command") != "command":
            return None
        return hook_command_verb(handler.get("command"), self.module, self.script)

    def expected_commands(self, *, bootstrap: bool = False) -> dict[str, str]:
        """The absolute command of every hook this interpreter would install; ``bootstrap``
        (``install --bootstrap``) switches bootstrap on in the SessionStart hook's command."""
        return {
            name: hook_command(
                self.module,
                name,
                options=["--bootstrap"] if bootstrap and name == "session-start" else [],
            )
            for name in sorted(HOOK_NAMES)
        }

    def _without_options(self, command: str) -> str:
        """A hook command minus its install-time options (settings, not a different hook)."""
        options = hook_command_options(command, self.module, self.script)
        if not options:
            return command
        tokens = shlex.split(command)
        return shlex.join(tokens[: len(tokens) - len(options)])

    def installed_settings(self, registration: HookRegistration) -> dict[str, object]:
        """The settings ``install`` wrote into the registered SessionStart hook command."""
        command = registration.commands.get("session-start")
        return installed_settings(hook_command_options(command, self.module, self.script))

    def load_settings(self, env: Mapping[str, str]) -> HookSettings:
        try:
            return HookSettings.load(self.host, env)
        except SettingsError as exc:
            raise InstallError(f"invalid PowerContext settings: {exc}") from exc

    def prepare(self, ctx: InstallContext) -> None:
        """Render the plugin: absolute hook and MCP server commands, the skill."""
        ctx.settings = ctx.settings or self.load_settings(ctx.env)
        ctx.commands = self.expected_commands(
            bootstrap=bool(getattr(ctx.options, "bootstrap", False))
        )
        mcp_executable, mcp_args = mcp_command(self.module)
        values: dict[str, PlaceholderValue] = {
            "version": self.version,
            "script": self.script,
            "mcp-command": mcp_executable,
            "mcp-args": mcp_args,
            "mcp-env-vars": list(SETTINGS_VARIABLES),
            **{HOOK_COMMAND_PREFIX + name: command for name, command in ctx.commands.items()},
        }
        ctx.files = render_plugin_files(
            self.template(),
            values,
            extra_files={"skills/powercontext-memory/SKILL.md": MEMORY_SKILL_MARKDOWN},
        )

    def check_interpreter(self, ctx: InstallContext) -> None:
        """The hook must be able to import us with exactly the flags it will run with."""
        argv = shlex.split(next(iter(ctx.commands.values())))
        probe = [*argv[: argv.index("-m")], "-c", f"import {self.module}.__main__"]
        result = run_cli(probe, check=False, timeout=30, env=ctx.env, cwd=tempfile.gettempdir())
        if result.returncode != 0:
            raise InstallError(
                f"`{shlex.join(probe)}` fails, so the hook could not run:\n{result.stderr[-800:]}"
            )

    def marketplace_tree(self, ctx: InstallContext) -> dict[str, bytes]:
        """The whole local marketplace: its manifest(s) and the rendered plugin folder."""
        tree = {f"plugins/{self.plugin_name}/{name}": data for name, data in ctx.files.items()}
        tree.update({name: dump_json(doc) for name, doc in self.marketplace_files().items()})
        return tree

    def install(self, ctx: InstallContext) -> Report:
        self.prepare(ctx)
        self.check_interpreter(ctx)
        if ctx.host_cli is not None:
            ctx.ledger.uses_host_cli()
            self.watch_host_state(ctx)
        try:
            return self._install(ctx)
        finally:
            ctx.ledger.settle()  # also after a failure: whatever was done stays undoable

    def _install(self, ctx: InstallContext) -> Report:
        mode = ctx.report.mode = self.choose_mode(ctx)
        hooks_file = self.user_hooks_file(ctx.env)
        if mode == "plugin":
            marketplace = self.marketplace_dir()
            ctx.ledger.before_create_dir(marketplace)
            ctx.report.add(sync_managed_tree(marketplace, self.marketplace_tree(ctx), self.host))
            self.register_plugin(ctx, marketplace)
            self._unmerge(ctx, hooks_file, "PowerContext now runs as a plugin")
            self.prime_mcp_catalog(ctx)
            return ctx.report
        before = load_json_object(hooks_file)
        self.check_user_hooks(before or {}, hooks_file)
        after = merge_hook_handlers(before, ctx.wanted_hooks(), self.is_ours, path=hooks_file)
        detail = "; ".join(
            f"{event}: {handler['command']}"
            for event, handlers in ctx.wanted_hooks().items()
            for handler in handlers
        )
        ctx.report.add(ctx.ledger.write_json(hooks_file, before, after, detail))
        self.after_merge(ctx, hooks_file)
        if self.plugin_registered_in_config(ctx):
            ctx.report.notes.append(
                f"the plugin {self.plugin_id} is still registered, so prompts may get the pack "
                f"twice: run `{self.script} install` or `uninstall` with `{self.cli_name}` on PATH"
            )
        return ctx.report

    def _unmerge(self, ctx: InstallContext, hooks_file: Path, reason: str) -> None:
        """Take our handlers out of the user hooks file; a file left as ``{}`` is deleted."""
        before = load_json_object(hooks_file)
        if before is None or not any(
            self.is_ours(handler) for *_, handler in iter_hook_handlers(before)
        ):
            return
        self.before_unmerge(ctx, hooks_file)
        after = remove_hook_handlers(before, self.is_ours)
        change = ctx.ledger.write_json(
            hooks_file, before, after or None, f"removed our hooks: {reason}"
        )
        ctx.report.add(change)

    def uninstall(self, ctx: InstallContext) -> Report:
        """Remove our entries, have the host CLI reverse what it registered (and check that it
        lists nothing of ours any more), then put back every file and folder the ledger
        recorded — so the host ends up exactly as it was before the first ``install``."""
        if ctx.host_cli is not None:
            self.watch_host_state(ctx)
        self._unmerge(ctx, self.user_hooks_file(ctx.env), "uninstalled")
        if ctx.host_cli is not None:
            self.unregister_plugin(ctx)
            self.verify_unregistered(ctx)
        elif self.marketplace_dir().exists() or ctx.ledger.used_host_cli:
            # What the host CLI wrote (plugin, marketplace, Codex trust) can only be undone by
            # it: keep the ledger and the backups until an uninstall that may run it.
            ctx.report.notes.append(
                f"`{self.cli_name}` was not used, so what it registered for {self.plugin_id} may "
                f"still be there; run `{self.script} uninstall` with `{self.cli_name}` on PATH "
                "to finish"
            )
            return ctx.report
        ctx.report.add(remove_managed_tree(self.marketplace_dir()))
        ctx.ledger.restore()
        return ctx.report

    def verify_unregistered(self, ctx: InstallContext) -> None:
        """After :meth:`unregister_plugin`: the host CLI must list neither our plugin nor our
        marketplace, or restoring the files underneath it would leave the host inconsistent."""
        left = []
        if self.installed_plugin(ctx) is not None:
            left.append(f"the plugin {self.plugin_id}")
        registered = self.registered_marketplace(ctx)
        if registered is not None and os.path.realpath(registered) == os.path.realpath(
            self.marketplace_dir()
        ):
            left.append(f"the marketplace {self.marketplace_name}")
        if left:
            raise InstallError(
                f"`{self.cli_name}` still lists {' and '.join(left)} after removing it; run "
                f"`{self.script} uninstall` again"
            )

    def doctor(
        self, ctx: InstallContext, *, prompt: str, log_lines: int
    ) -> tuple[list[Check], list[str]]:
        """Settings, runtime, token, version, scope, hook registration, a dry run, the MCP
        server, the capture spool, task results, the log."""
        checks: list[Check] = []
        try:
            ctx.commands = self.expected_commands()
        except InstallError as exc:
            checks.append(Check("interpreter", "fail", str(exc)))
        registration = self.inspect_registration(ctx)
        installed = self.installed_settings(registration)
        env = {**ctx.env, **registration.env}
        settings: HookSettings | None = None
        try:
            settings = HookSettings.load(self.host, env, installed=installed)
        except SettingsError as exc:
            fix = f"check the POWERCONTEXT_* variables and {config_file_path()}"
            checks.append(Check("settings", "fail", str(exc), fix))
        if settings is not None:
            checks.append(
                Check(
                    "settings",
                    "ok",
                    f"runtime URL {settings.url} ({describe_endpoint(settings.endpoint)})",
                )
            )
            checks.append(bootstrap_check(settings, env, installed))
            checks.extend(runtime_checks(settings, env))
        checks.append(scope_check(ctx.cwd, settings))
        if settings is not None:
            checks.append(handoff_check(settings, _scope_or_none(ctx.cwd, settings)))
        checks.extend(registration.checks)
        command = registration.commands.get("user-prompt-submit") or ctx.commands.get(
            "user-prompt-submit"
        )
        if settings is None or command is None:
            checks.append(Check("dry-run", "skip", "needs valid settings and a hook command"))
        else:
            checks.append(
                dry_run_check(
                    command,
                    self.shell_argv(env),
                    self.sample_event(ctx.cwd, prompt),
                    env=env,
                    data_dir_vars=self.data_dir_vars(),
                    cwd=ctx.cwd,
                )
            )
        checks.append(self.mcp_doctor_check(ctx, registration))
        checks.append(spool_check(registration.data_dir, settings))
        if settings is not None:
            checks.append(task_results_check(settings, registration.data_dir))
        return checks, log_tail(registration.data_dir, log_lines)

    def mcp_doctor_check(self, ctx: InstallContext, registration: HookRegistration) -> Check:
        """The ``mcp`` line: start the MCP server the installed plugin registers, exactly as
        the host would, and list its tools (:func:`.doctor.mcp_check`)."""
        if not registration.commands:
            return Check("mcp", "skip", "PowerContext is not installed")
        if registration.data_dir != str(self.plugin_data_dir(ctx.env)):
            return Check(
                "mcp",
                "warn",
                f"no MCP server registered: the hooks are merged into "
                f"{self.user_hooks_file(ctx.env)}, and only the plugin gives the agent the "
                "memory tools",
                f"run `{self.script} install` with `{self.cli_name}` on PATH",
            )
        return self.mcp_server_check(ctx, registration.env)

    def prime_mcp_catalog(self, ctx: InstallContext) -> None:
        """Run the installed MCP server once, as the doctor does: when the runtime answers,
        the bridge keeps its ``initialize``/``tools/list`` answers (its catalog cache), so the
        very first session lists the tools at once however cold the runtime is (Codex ``exec``
        waits about a second). Install never fails on it: a note says what to do instead."""
        check = self.mcp_server_check(ctx, {})
        if check.status == "fail":
            ctx.report.notes.append(
                f"the MCP tools could not be listed yet ({check.message}): run `{self.script} "
                "doctor` once the runtime runs, or a session may start without them"
            )

    def mcp_server_check(self, ctx: InstallContext, options: Mapping[str, str]) -> Check:
        """Start the MCP server registered in the installed plugin folder with the environment
        the host gives it (``options``: the Claude Code plugin options) and list its tools."""
        path = self.installed_plugin_root(ctx.env) / ".mcp.json"
        try:
            document = load_json_object(path)
        except InstallError as exc:
            return Check("mcp", "fail", str(exc), f"run `{self.script} install`")
        servers = (document or {}).get("mcpServers")
        server = servers.get("powercontext") if isinstance(servers, dict) else None
        if not isinstance(server, dict):
            return Check(
                "mcp",
                "fail",
                f"{path} registers no powercontext server",
                f"run `{self.script} install`",
            )
        try:
            expected: tuple[str, list[str]] | None = mcp_command(self.module)
        except InstallError:
            expected = None
        server_env = mcp_server_env(
            server, ctx.env, inherit=self.mcp_inherited_env, options=options
        )
        if self.mcp_data_dir_var is not None:
            server_env[self.mcp_data_dir_var] = str(self.plugin_data_dir(ctx.env))
        return mcp_check(
            server,
            host=self.host,
            env=server_env,
            cwd=ctx.cwd,
            expected=expected,
            script=self.script,
        )

    # ---- shared: driving the host CLI (for the host-specific steps) ------------------------

    def run_host_cli(self, ctx: InstallContext, *args: str, check: bool = True) -> CliResult:
        """``<host CLI> <args>`` with the user's environment, in the user's folder."""
        assert ctx.host_cli is not None
        return run_cli([ctx.host_cli, *args], env=ctx.env, cwd=ctx.cwd, check=check)

    def cli_config_file(self, env: Mapping[str, str]) -> Path:
        """The user file the host CLI rewrites when it adds or removes a plugin (recorded in
        the ledger before each such command). Claude Code: settings.json, its user hooks file
        too."""
        return self.user_hooks_file(env)

    def run_change(self, ctx: InstallContext, *args: str, detail: str = "") -> None:
        """Run a host CLI command that changes the user's setup: record the file it rewrites
        first (its one backup, see :mod:`.ledger`), then the command in the report (so every
        change stays visible)."""
        ctx.ledger.before_change(self.cli_config_file(ctx.env))
        result = self.run_host_cli(ctx, *args)
        ctx.report.add(Change("ran", result.display(), detail))

    def point_marketplace(self, ctx: InstallContext, marketplace: Path) -> None:
        """Make the host's marketplace ``marketplace_name`` point at ``marketplace``.

        One registered at another path (an older install, another venv) is removed first, so the
        host never keeps serving a stale copy of the plugin.
        """
        registered = self.registered_marketplace(ctx)
        if registered is not None and os.path.realpath(registered) != os.path.realpath(marketplace):
            self.run_change(
                ctx,
                "plugin",
                "marketplace",
                "remove",
                self.marketplace_name,
                detail=f"it pointed at {registered}",
            )
            registered = None
        if registered is None:
            self.run_change(ctx, "plugin", "marketplace", "add", str(marketplace))

    def remove_marketplace(self, ctx: InstallContext) -> None:
        """Unregister the marketplace ``marketplace_name`` — only if it is ours (it points at
        :meth:`marketplace_dir`): a user's own marketplace of that name is left alone."""
        registered = self.registered_marketplace(ctx)
        if registered is not None and os.path.realpath(registered) == os.path.realpath(
            self.marketplace_dir()
        ):
            self.run_change(ctx, "plugin", "marketplace", "remove", self.marketplace_name)


def _scope_or_none(cwd: str, settings: HookSettings) -> str | None:
    """The scope the hooks use in ``cwd`` (``None`` when the ``scope`` line already failed)."""
    try:
        explained = explain_scope(cwd, settings.scope_id)
    except ScopeError:
        return None
    return explained[0] if explained else None
