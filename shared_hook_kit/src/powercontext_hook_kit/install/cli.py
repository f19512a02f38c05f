"""The command line both plugins share: ``<script> install|uninstall|doctor|hook|mcp|bind|scope``.

``hook`` and ``mcp`` are answered before argparse is even imported (the host runs them on
every prompt and every session); the other verbs build an :class:`.InstallContext` and call
the plugin's :class:`.HostIntegration`.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import Any, Literal

from ..runner import HOOK_NAMES
from ..scope import ScopeError, bind, explain_scope, unbind
from ..terminal import json_text, visible
from .doctor import DOCTOR_PROMPT
from .host_cli import find_executable
from .integration import HostIntegration, InstallContext
from .ledger import InstallLedger
from .report import InstallError, Report

__all__ = ["run_plugin_cli"]

ExitCode = Literal[0, 1, 2]


def _parser(integration: HostIntegration) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=integration.script,
        description=f"PowerContext for {integration.display_name}: install the hooks, check "
        "them, and run them.",
    )
    verbs = parser.add_subparsers(dest="verb", required=True, metavar="COMMAND")

    def host_cli_options(sub: argparse.ArgumentParser) -> None:
        sub.add_argument(
            "--no-host-cli",
            action="store_true",
            help=f"never run `{integration.cli_name}`: merge hooks into "
            f"{integration.display_name}'s user config instead of registering a plugin",
        )
        sub.add_argument(
            "--host-cli",
            metavar="PATH",
            help=f"the `{integration.cli_name}` executable to use (default: from PATH)",
        )

    install = verbs.add_parser("install", help="register the PowerContext hooks with the host")
    host_cli_options(install)
    install.add_argument("--json", action="store_true", help="print the result as JSON")
    install.add_argument(
        "--bootstrap",
        action="store_true",
        help="switch SessionStart bootstrap on in the installed hook (any other bootstrap "
        "setting still wins; re-run install without it to switch it off)",
    )
    integration.add_install_arguments(install)

    uninstall = verbs.add_parser("uninstall", help="remove exactly what install added")
    host_cli_options(uninstall)
    uninstall.add_argument("--json", action="store_true", help="print the result as JSON")

    doctor = verbs.add_parser("doctor", help="check the runtime, scope, hooks and a dry run")
    host_cli_options(doctor)
    doctor.add_argument("--json", action="store_true", help="print the checks as JSON")
    doctor.add_argument("--cwd", help="check this directory instead of the current one")
    doctor.add_argument("--prompt", default=DOCTOR_PROMPT, help="the dry run's test prompt")
    doctor.add_argument(
        "--log-lines", type=int, default=5, help="diagnostic log lines to show (default 5)"
    )

    hook = verbs.add_parser("hook", help="run a hook (this is what the host calls)")
    hook.add_argument("hook_name", metavar="HOOK", help=", ".join(sorted(HOOK_NAMES)))

    verbs.add_parser(
        "mcp",
        help="serve the memory tools as a stdio MCP server (this is what the host starts)",
        description="A bridge from MCP on stdin/stdout to the runtime's /mcp, with the hooks' "
        "settings (the runtime's socket and agent token by default).",
    )

    scope_parser = verbs.add_parser(
        "scope",
        help="print the scope id the hooks use here",
        description="The scope id this directory's hooks resolve to (the scope_id setting, "
        "the repository's binding, its origin URL, else a hash of its path), alone on a line: "
        'for the runtime CLI, e.g. powercontext handoff next --scope "$(%(prog)s)".',
    )
    scope_parser.add_argument("--cwd", help="the directory (default: the current one)")
    scope_parser.add_argument("--json", action="store_true", help="also say which rule decided")

    bind_parser = verbs.add_parser(
        "bind",
        help="bind this git repository to a scope (private to the clone)",
        description="Without SCOPE_ID, pin the scope the repository resolves to today (so a "
        "renamed remote or moved folder keeps its memory). --clear removes the binding.",
    )
    bind_parser.add_argument("scope_id", nargs="?", metavar="SCOPE_ID")
    bind_parser.add_argument("--clear", action="store_true", help="remove the binding")
    bind_parser.add_argument("--cwd", help="the repository (default: the current directory)")
    bind_parser.add_argument("--json", action="store_true", help="print the result as JSON")
    return parser


def _context(
    integration: HostIntegration, options: argparse.Namespace, action: str
) -> InstallContext:
    report = Report(integration.host, integration.display_name, action)
    env = dict(os.environ)
    host_cli = None
    if not getattr(options, "no_host_cli", False):
        host_cli = find_executable(integration.cli_name, getattr(options, "host_cli", None))
    cwd = os.path.abspath(getattr(options, "cwd", None) or os.getcwd())
    return InstallContext(
        env=env,
        cwd=cwd,
        report=report,
        ledger=InstallLedger(integration.ledger_path(), report, restoring=action == "uninstall"),
        options=options,
        host_cli=host_cli,
    )


def _print_json(document: Any) -> None:
    print(json_text(document, indent=2))


def _run_bind(options: argparse.Namespace) -> ExitCode:
    cwd = os.path.abspath(options.cwd or os.getcwd())
    if options.clear and options.scope_id:
        raise InstallError("give either SCOPE_ID or --clear, not both")
    if options.clear:
        removed = unbind(cwd)
        result: dict[str, Any] = {"action": "cleared" if removed else "unchanged", "cwd": cwd}
        message = "removed the binding" if removed else "there was no binding"
    else:
        scope = options.scope_id
        if scope is None:
            explained = explain_scope(cwd)
            if explained is None:
                raise InstallError(f"no scope for {cwd}")
            scope = explained[0]
        try:
            path = bind(cwd, scope)
        except ScopeError as exc:
            raise InstallError(str(exc)) from exc
        result = {"action": "bound", "cwd": cwd, "scope_id": scope, "binding": path}
        message = f"bound to {scope} ({path})"
        if os.environ.get("POWERCONTEXT_SCOPE_ID", "").strip():
            message += "; note: POWERCONTEXT_SCOPE_ID is set and overrides the binding"
    if options.json:
        _print_json(result)
    else:
        print(f"bind: {visible(message)}")
    return 0


def _run_scope(integration: HostIntegration, options: argparse.Namespace) -> ExitCode:
    from ..settings import HookSettings, SettingsError

    cwd = os.path.abspath(options.cwd or os.getcwd())
    try:
        override = HookSettings.load(integration.host, os.environ).scope_id
    except SettingsError as exc:
        raise InstallError(str(exc)) from exc
    explained = explain_scope(cwd, override)
    if explained is None:
        raise InstallError(f"no scope for {cwd}")
    scope, source = explained
    if options.json:
        _print_json({"scope_id": scope, "source": source, "cwd": cwd})
    else:
        # Alone on a line for `--scope "$(… scope)"`: a scope id has no hidden character
        # (the scope rules refuse them), and a backslash in it must stay single.
        print(scope)
    return 0


def run_plugin_cli(integration: HostIntegration, argv: Sequence[str] | None = None) -> int:
    """``<script> install|uninstall|doctor|hook|mcp|bind …``; exit 0 ok, 1 failed, 2 usage error.

    ``hook`` always exits 0 (the hook process contract), whatever happens; ``mcp`` serves until
    its input ends, then exits 0.
    """
    arguments = list(sys.argv[1:] if argv is None else argv)
    if len(arguments) >= 2 and arguments[0] == "hook":
        from ..host import StandardHostAdapter
        from ..runner import run_hook_main

        return run_hook_main(StandardHostAdapter(integration.host), arguments[1], arguments[2:])
    if arguments == ["mcp"]:
        from ..entry import run_mcp_bridge

        return run_mcp_bridge(integration.host)
    options = _parser(integration).parse_args(arguments)
    try:
        if options.verb == "hook":
            from ..host import StandardHostAdapter
            from ..runner import run_hook_main

            return run_hook_main(StandardHostAdapter(integration.host), options.hook_name)
        if options.verb == "bind":
            return _run_bind(options)
        if options.verb == "scope":
            return _run_scope(integration, options)
        ctx = _context(integration, options, options.verb)
        if options.verb == "doctor":
            checks, log = integration.doctor(
                ctx, prompt=options.prompt, log_lines=options.log_lines
            )
            failed = any(check.status == "fail" for check in checks)
            if options.json:
                _print_json(
                    {
                        "host": integration.host,
                        "ok": not failed,
                        "checks": [check.to_json() for check in checks],
                        "log": log,
                    }
                )
            else:
                for check in checks:
                    print(visible(check.line()))
                if log:
                    print("     last diagnostic lines:")
                    for line in log:
                        print(f"       {visible(line)}")
            return 1 if failed else 0
        report = (
            integration.install(ctx) if options.verb == "install" else integration.uninstall(ctx)
        )
        if options.json:
            _print_json(report.to_json())
        else:
            print(visible(report.render(), multiline=True))
        return 0
    except InstallError as exc:
        if getattr(options, "json", False):
            _print_json({"host": integration.host, "error": str(exc)})
        print(f"{integration.script}: error: {visible(str(exc))}", file=sys.stderr)
        return 1
