"""``powercontext service install|uninstall|status``: start the daemon at login.

Hooks fail open when the runtime is down, so a daemon that did not come back after a reboot
silently turns memory off. The service manager the user already has keeps it running instead:
a systemd *user* unit on Linux (no root, starts with the user's session), a launchd agent on
macOS. The unit runs this very interpreter by absolute path (no PATH or virtualenv activation
at login) with the data dir and database the user chose, and a 0077 umask.

Rendering is pure (:func:`systemd_unit`, :func:`launchd_plist`) so tests check the exact files;
activation goes through ``systemctl --user`` / ``launchctl`` only when they are there.
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from ..errors import PowerContextError
from ..files import write_private_file
from ..settings import Settings
from .output import emit, visible

__all__ = ["ServicePlan", "add_parsers", "launchd_plist", "plan_for", "systemd_unit"]

UNIT_NAME = "powercontext.service"
LAUNCHD_LABEL = "dev.powercontext.runtime"
_COMMAND_TIMEOUT = 30


@dataclass(frozen=True)
class ServicePlan:
    """What ``install`` writes and runs for one platform."""

    platform: str  # "systemd" | "launchd"
    path: Path
    content: str
    arguments: tuple[str, ...]  # the daemon's command line


def serve_arguments(settings: Settings, *, python: str = sys.executable) -> tuple[str, ...]:
    """The daemon's command line, fully resolved: nothing depends on the login environment.

    The data dir is always named; the database URL, host and port only when they differ from
    the defaults (a URL may carry a password: the unit file is 0600 either way).
    """
    arguments = [python, "-m", "powercontext_runtime.cli.main", "serve"]
    arguments += ["--data-dir", str(settings.home.expanduser().resolve())]
    default = Settings.load(env={}, home=settings.home)
    if settings.database_url != default.database_url:
        arguments += ["--database-url", settings.database_url]
    if settings.host != default.host:
        arguments += ["--host", settings.host]
    if settings.port != default.port:
        arguments += ["--port", str(settings.port)]
    return tuple(arguments)


def _systemd_quote(argument: str) -> str:
    """One ExecStart word: systemd splits on whitespace and honours double quotes, and
    expands ``%`` specifiers and ``$`` variables, so those are escaped."""
    escaped = argument.replace("\\", "\\\\").replace('"', '\\"')
    escaped = escaped.replace("%", "%%").replace("$", "$$")
    return f'"{escaped}"'


def systemd_unit(arguments: tuple[str, ...]) -> str:
    exec_start = " ".join(_systemd_quote(a) for a in arguments)
    return (
        "# Written by `powercontext service install`; `powercontext service uninstall`"
        " removes it.\n"
        "[Unit]\n"
        "Description=PowerContext runtime (project memory for coding agents)\n"
        "\n"
        "[Service]\n"
        "Type=exec\n"
        f"ExecStart={exec_start}\n"
        "Restart=on-failure\n"
        "RestartSec=2\n"
        "UMask=0077\n"
        "NoNewPrivileges=yes\n"
        "Environment=PYTHONUNBUFFERED=1\n"
        "\n"
        "[Install]\n"
        "WantedBy=default.target\n"
    )


def launchd_plist(arguments: tuple[str, ...], log_file: Path) -> str:
    import plistlib  # macOS only: kept off every other command's start-up

    document = {
        "Label": LAUNCHD_LABEL,
        "ProgramArguments": list(arguments),
        "RunAtLoad": True,
        "KeepAlive": {"SuccessfulExit": False},
        "Umask": 0o077,
        "StandardErrorPath": str(log_file),
        "ProcessType": "Background",
    }
    return plistlib.dumps(document, sort_keys=False).decode("utf-8")


def _systemd_dir(env: dict[str, str]) -> Path:
    base = env.get("XDG_CONFIG_HOME", "")
    home = Path(env.get("HOME", "~")).expanduser()
    root = Path(base) if os.path.isabs(base) else home / ".config"
    return root / "systemd" / "user"


def plan_for(settings: Settings, platform: str, env: dict[str, str]) -> ServicePlan:
    arguments = serve_arguments(settings)
    if platform == "launchd":
        path = Path(env.get("HOME", "~")).expanduser() / "Library" / "LaunchAgents"
        log_file = settings.home / "service.log"
        return ServicePlan(
            platform, path / f"{LAUNCHD_LABEL}.plist", launchd_plist(arguments, log_file), arguments
        )
    return ServicePlan("systemd", _systemd_dir(env) / UNIT_NAME, systemd_unit(arguments), arguments)


def current_platform() -> str:
    if sys.platform == "darwin":
        return "launchd"
    if sys.platform.startswith("linux"):
        return "systemd"
    raise PowerContextError(
        "`powercontext service` supports systemd (Linux) and launchd (macOS); run "
        "`powercontext serve` from your system's own service manager",
        code="unsupported_platform",
    )


# -- the command ------------------------------------------------------------------------------


def add_parsers(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:  # type: ignore[type-arg]
    service = sub.add_parser("service", help="start the daemon at login (systemd / launchd)")
    verbs = service.add_subparsers(dest="verb", required=True, metavar="VERB")
    where = argparse.ArgumentParser(add_help=False)
    where.add_argument("--data-dir", dest="home", help="data directory (POWERCONTEXT_HOME)")
    where.add_argument("--database-url", help="override POWERCONTEXT_DATABASE_URL")
    where.add_argument("--host", help="bind address (default 127.0.0.1)")
    where.add_argument("--port", type=int, help="port (default 7411)")
    p = verbs.add_parser("install", help="write the unit and start it", parents=[common, where])
    p.add_argument(
        "--no-start",
        action="store_true",
        help="only write the unit file (do not enable or start it)",
    )
    p.set_defaults(handler=_install)
    p = verbs.add_parser("uninstall", help="stop it and remove the unit", parents=[common])
    p.set_defaults(handler=_uninstall)
    p = verbs.add_parser(
        "status",
        help="is the unit installed and running, and does a daemon answer?",
        description="Report the service unit (installed? running?) and whether a daemon "
        "answers at --url (default: the data dir's socket), which it may do without the unit "
        "(`powercontext serve`). Exit 0 only when the unit is installed and running.",
        parents=[common],
    )
    p.add_argument("--data-dir", dest="home", help="data directory (POWERCONTEXT_HOME)")
    p.set_defaults(handler=_status)


def _settings(args: argparse.Namespace) -> Settings:
    return Settings.load(
        home=getattr(args, "home", None),
        database_url=getattr(args, "database_url", None),
        host=getattr(args, "host", None),
        port=getattr(args, "port", None),
    )


def _manager(platform: str, plan: ServicePlan, action: str) -> list[list[str]]:
    """The service-manager commands for ``action`` (install / uninstall / status)."""
    if platform == "systemd":
        user = ["systemctl", "--user"]
        return {
            "install": [[*user, "daemon-reload"], [*user, "enable", "--now", UNIT_NAME]],
            "uninstall": [[*user, "disable", "--now", UNIT_NAME], [*user, "daemon-reload"]],
            "status": [[*user, "is-active", UNIT_NAME]],
        }[action]
    domain = f"gui/{os.getuid()}"
    return {
        "install": [["launchctl", "bootstrap", domain, str(plan.path)]],
        "uninstall": [["launchctl", "bootout", f"{domain}/{LAUNCHD_LABEL}"]],
        "status": [["launchctl", "print", f"{domain}/{LAUNCHD_LABEL}"]],
    }[action]


def _run(commands: list[list[str]]) -> tuple[bool, str]:
    """Run the manager's commands; (all succeeded, what to tell the user)."""
    if shutil.which(commands[0][0]) is None:
        return False, f"{commands[0][0]} is not available"
    for command in commands:
        try:
            done = subprocess.run(
                command, capture_output=True, text=True, timeout=_COMMAND_TIMEOUT, check=False
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            return False, f"`{shlex.join(command)}` failed ({type(exc).__name__})"
        if done.returncode != 0:
            reason = (done.stderr or done.stdout).strip().splitlines()
            return False, f"`{shlex.join(command)}`: {reason[-1] if reason else done.returncode}"
    return True, "ok"


def _install(args: argparse.Namespace) -> int:
    platform = current_platform()
    plan = plan_for(_settings(args), platform, dict(os.environ))
    previous = plan.path.read_text(encoding="utf-8") if plan.path.exists() else None
    plan.path.parent.mkdir(parents=True, exist_ok=True)
    write_private_file(plan.path, plan.content)
    started, detail = (
        (False, "not started (--no-start)")
        if args.no_start
        else _run(_manager(platform, plan, "install"))
    )
    changed = "unchanged" if previous == plan.content else "written"
    start = shlex.join(_manager(platform, plan, "install")[-1])
    hint = "" if started or args.no_start else f"\nthe unit is in place; start it: {start}"
    emit(
        {
            "platform": platform,
            "path": str(plan.path),
            "file": changed,
            "started": started,
            "detail": detail,
            "command": list(plan.arguments),
        },
        as_json=args.json,
        human=f"{platform} unit {changed}: {plan.path}\nstarted: {'yes' if started else detail}"
        + hint,
    )
    return 0


def _uninstall(args: argparse.Namespace) -> int:
    platform = current_platform()
    plan = plan_for(_settings(args), platform, dict(os.environ))
    if not plan.path.exists():
        emit({"platform": platform, "path": str(plan.path), "removed": False},
             as_json=args.json, human=f"not installed ({plan.path} does not exist)")  # fmt: skip
        return 0
    stopped, detail = _run(_manager(platform, plan, "uninstall"))
    plan.path.unlink()
    if platform == "systemd":
        _run([["systemctl", "--user", "daemon-reload"]])
    emit(
        {
            "platform": platform,
            "path": str(plan.path),
            "removed": True,
            "stopped": stopped,
            "detail": detail,
        },
        as_json=args.json,
        human=f"removed {plan.path}" + ("" if stopped else f" (stopping it: {detail})"),
    )
    return 0


def _daemon_answers(args: argparse.Namespace, settings: Settings) -> tuple[bool, str]:
    """Whether a daemon answers at the URL the other commands would use (it may run without
    the unit: ``powercontext serve`` in a terminal, another service manager)."""
    from ..client import PowerContextClient  # httpx loads only for this verb
    from ..client._common import default_url

    url = args.url or default_url(home=settings.home)
    with PowerContextClient(url, token=None) as client:
        try:
            client.get_readiness()
        except PowerContextError:
            return False, client.url
        return True, client.url


def _status(args: argparse.Namespace) -> int:
    platform = current_platform()
    settings = _settings(args)
    plan = plan_for(settings, platform, dict(os.environ))
    installed = plan.path.exists()
    running, detail = _run(_manager(platform, plan, "status")) if installed else (False, "-")
    answers, url = _daemon_answers(args, settings)
    if not installed:
        unit = "not installed (`powercontext service install` adds it)"
    elif running:
        unit = "installed, running"
    else:
        unit = f"installed, not running ({detail})"
    if answers:
        daemon = f"answers at {url}" + ("" if running else " (not started by the service unit)")
    else:
        daemon = f"no answer at {url}"
    emit(
        {
            "platform": platform,
            "path": str(plan.path),
            "installed": installed,
            "running": running,
            "detail": detail,
            "daemon": {"url": url, "answers": answers},
        },
        as_json=args.json,
        human=(
            f"service unit ({platform}): {unit}\n"
            f"  {visible(str(plan.path))}\n"
            f"daemon: {visible(daemon)}"
        ),
    )
    return 0 if installed and running else 1
