"""``powercontext-claude-code install`` / ``uninstall``: both install paths, idempotency,
backups, other settings preserved, exact reversal — and the hook command really runs."""

from __future__ import annotations

import json
import os
import shlex
from typing import Any

import pytest

from powercontext_hook_kit.install import mcp_command
from tests.claude_code.conftest import MODULE, PLUGIN_ID, ClaudeSandbox, our_handlers
from tests.support.daemon import Daemon
from tests.support.hosts import HostCLIs
from tests.support.plugin_sandbox import (
    assert_install_cycles_leave_no_trace,
    assert_installed_hook_injects_the_pack,
    write_json,
)

OTHER_SETTINGS = {
    "model": "opus",
    "permissions": {"allow": ["Bash(ls:*)"]},
    "hooks": {
        "UserPromptSubmit": [{"hooks": [{"type": "command", "command": "echo mine"}]}],
        "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "true"}]}],
    },
}


def test_install_without_host_cli_merges_into_settings(sandbox: ClaudeSandbox) -> None:
    original = write_json(sandbox.settings_file, OTHER_SETTINGS)
    report = sandbox.run_json("install", "--no-host-cli")

    assert report["mode"] == "hooks" and report["changed"] is True
    actions = [(c["action"], c["target"]) for c in report["changes"]]
    assert actions == [
        ("backup", str(sandbox.settings_file)),
        ("updated", str(sandbox.settings_file)),
    ]
    assert any("MCP server and skill need the plugin" in note for note in report["notes"])
    (backup,) = sandbox.backups(sandbox.settings_file)
    assert backup.read_bytes() == original

    settings = sandbox.settings()
    assert {k: v for k, v in settings.items() if k != "hooks"} == {
        "model": "opus",
        "permissions": {"allow": ["Bash(ls:*)"]},
    }
    assert settings["hooks"]["PreToolUse"] == OTHER_SETTINGS["hooks"]["PreToolUse"]
    groups = settings["hooks"]["UserPromptSubmit"]
    assert groups[0] == OTHER_SETTINGS["hooks"]["UserPromptSubmit"][0]
    (handler,) = our_handlers(settings)
    assert groups[1] == {"hooks": [handler]}
    assert handler["timeout"] == 10 and set(handler) == {"type", "command", "timeout"}
    argv = shlex.split(handler["command"])
    assert os.path.isabs(argv[0]) and os.access(argv[0], os.X_OK)
    assert argv[1:] == ["-I", "-m", MODULE, "hook", "user-prompt-submit"]
    # SessionStart: one group without a matcher, so every source (startup, resume, clear,
    # compact, fork) runs it.
    (start,) = our_handlers(settings, "SessionStart")
    assert settings["hooks"]["SessionStart"] == [{"hooks": [start]}]
    assert start == {"type": "command", "command": start["command"], "timeout": 10}
    assert shlex.split(start["command"]) == [*argv[:-1], "session-start"]


def test_install_is_idempotent_and_uninstall_restores(sandbox: ClaudeSandbox) -> None:
    write_json(sandbox.settings_file, OTHER_SETTINGS)
    sandbox.run_json("install", "--no-host-cli")
    installed = sandbox.settings_file.read_bytes()
    again = sandbox.run("install", "--no-host-cli")
    assert again.returncode == 0 and "nothing to change" in again.stdout
    assert sandbox.settings_file.read_bytes() == installed
    assert len(sandbox.backups(sandbox.settings_file)) == 1

    assert sandbox.run_json("uninstall", "--no-host-cli")["changed"] is True
    assert sandbox.settings() == OTHER_SETTINGS
    assert sandbox.run_json("uninstall", "--no-host-cli")["changed"] is False


def test_without_claude_on_path_install_merges_and_says_why(sandbox: ClaudeSandbox) -> None:
    report = sandbox.run_json("install")
    assert report["mode"] == "hooks"
    assert any("`claude` is not on PATH" in note for note in report["notes"])
    assert our_handlers(sandbox.settings()) and our_handlers(sandbox.settings(), "SessionStart")
    sandbox.run_json("uninstall")
    assert not sandbox.settings_file.exists()  # we created it, we remove it
    assert not sandbox.config_dir.exists()  # and the ~/.claude folder it needed


@pytest.mark.parametrize("settings", ["no ~/.claude", "the user's own"])
def test_install_uninstall_cycles_leave_the_home_exactly_as_it_was(
    sandbox: ClaudeSandbox, settings: str
) -> None:
    """Item 6 of issue 16: after uninstall the home is byte-identical to before the first
    install (no settings.json it never had, no backups, no ledger, no empty folders, the same
    modes), however many times the user installs and uninstalls."""
    if settings != "no ~/.claude":
        write_json(sandbox.settings_file, OTHER_SETTINGS)  # compact: a rewrite would show
        os.chmod(sandbox.settings_file, 0o644)

    def merged(report: dict[str, Any]) -> None:
        assert report["mode"] == "hooks" and report["changed"] is True, report
        assert our_handlers(sandbox.settings()) and our_handlers(sandbox.settings(), "SessionStart")

    assert_install_cycles_leave_no_trace(sandbox, "--no-host-cli", installed=merged)


@pytest.mark.parametrize("transport", ["tcp", "unix"])
def test_the_installed_hook_command_runs_and_injects_the_pack(
    live: ClaudeSandbox, runtime_daemon: Daemon, transport: str
) -> None:
    """Claude Code runs hooks with `/bin/sh -c`; the absolute command needs no PATH."""
    event = {
        "session_id": "s",
        "transcript_path": "/x.jsonl",
        "cwd": str(live.repo),
        "prompt_id": "p",
        "permission_mode": "default",
        "hook_event_name": "UserPromptSubmit",
        "prompt": "when do deploys go out?",
    }
    assert_installed_hook_injects_the_pack(
        live,
        runtime_daemon,
        event,
        scope_variable="CLAUDE_PLUGIN_OPTION_SCOPE_ID",
        transport=transport,
    )


# ---- with the real Claude Code CLI -----------------------------------------------------------


def test_install_with_claude_registers_the_plugin(live: ClaudeSandbox, host_clis: HostCLIs) -> None:
    live.with_host_cli(host_clis)
    write_json(live.settings_file, {"model": "opus"})
    report = live.run_json("install")

    assert report["mode"] == "plugin"
    ran = [c["target"] for c in report["changes"] if c["action"] == "ran"]
    assert ran == [
        f"claude plugin marketplace add {live.marketplace}",
        f"claude plugin install {PLUGIN_ID} --scope user",
    ]
    (backup,) = live.backups(live.settings_file)
    assert json.loads(backup.read_text("utf-8")) == {"model": "opus"}
    assert "hooks" not in live.settings()

    plugin = live.marketplace / "plugins" / "powercontext"
    validate = live.claude("plugin", "validate", str(plugin))
    assert validate.returncode == 0, validate.stdout + validate.stderr
    assert "UserPromptSubmit command" in validate.stdout
    assert "SessionStart command" in validate.stdout
    assert live.claude("plugin", "validate", str(live.marketplace)).returncode == 0
    mcp = json.loads((plugin / ".mcp.json").read_text("utf-8"))["mcpServers"]["powercontext"]
    executable, args = mcp_command(MODULE)
    assert mcp == {  # the stdio bridge: no URL, no token, nothing to export
        "type": "stdio",
        "command": executable,
        "args": args,
        "env": {
            "CLAUDE_PLUGIN_OPTION_URL": "${user_config.url}",
            "CLAUDE_PLUGIN_OPTION_TOKEN": "${user_config.token}",
        },
    }
    assert args[-3:] == ["-m", MODULE, "mcp"] and os.path.isabs(executable)
    skill = (plugin / "skills" / "powercontext-memory" / "SKILL.md").read_text("utf-8")
    assert "commit_handoff" in skill and "`powercontext-claude-code scope`" in skill
    assert "propose_experience" in skill and "list_task_results" in skill
    # /powercontext:propose-lesson, rendered (validated above with the rest of the folder)
    command = (plugin / "commands" / "propose-lesson.md").read_text("utf-8")
    assert command.startswith("---\ndescription: Propose one lesson")
    assert "`powercontext-claude-code scope`" in command and "propose_experience" in command

    (installed,) = json.loads(live.claude("plugin", "list", "--json").stdout)
    assert (installed["id"], installed["enabled"]) == (PLUGIN_ID, True)
    assert installed["readFromFolder"] == str(plugin)  # read in place: no copy to refresh
    plugin_hooks = json.loads((plugin / "hooks" / "hooks.json").read_text("utf-8"))
    (handler,) = our_handlers(plugin_hooks)
    assert shlex.split(handler["command"])[-4:] == ["-m", MODULE, "hook", "user-prompt-submit"]
    (start,) = our_handlers(plugin_hooks, "SessionStart")
    assert shlex.split(start["command"])[-4:] == ["-m", MODULE, "hook", "session-start"]

    assert live.run_json("install")["changed"] is False
    assert len(live.backups(live.settings_file)) == 1

    removed = live.run_json("uninstall")
    assert [c["action"] for c in removed["changes"]][:3] == ["ran", "ran", "removed"]
    assert json.loads(live.claude("plugin", "list", "--json").stdout) == []
    assert not live.marketplace.exists()
    assert live.settings() == {"model": "opus"}
    assert live.backups(live.settings_file) == []
    assert live.run_json("uninstall")["changed"] is False


def test_switching_to_the_plugin_removes_the_merged_hook(
    live: ClaudeSandbox, host_clis: HostCLIs
) -> None:
    """Never both: the prompt would get the pack twice."""
    write_json(live.settings_file, OTHER_SETTINGS)
    live.run_json("install", "--no-host-cli")
    live.with_host_cli(host_clis)
    report = live.run_json("install")
    assert report["mode"] == "plugin"
    assert ("updated", str(live.settings_file)) in [
        (c["action"], c["target"]) for c in report["changes"]
    ]
    settings = live.settings()
    assert our_handlers(settings) == our_handlers(settings, "SessionStart") == []
    assert settings["hooks"] == OTHER_SETTINGS["hooks"]
    live.run_json("uninstall")


@pytest.mark.parametrize("settings", ["no ~/.claude", "the user's own"])
def test_plugin_install_uninstall_cycles_leave_the_home_exactly_as_it_was(
    sandbox: ClaudeSandbox, host_clis: HostCLIs, settings: str
) -> None:
    """Through the real ``claude plugin …`` commands: after each uninstall no settings.json
    Claude Code wrote for the plugin, no known_marketplaces.json / installed_plugins.json,
    no backups and no empty folders are left — the home is exactly as before."""
    sandbox.with_host_cli(host_clis)
    if settings != "no ~/.claude":
        write_json(sandbox.settings_file, OTHER_SETTINGS)
        os.chmod(sandbox.settings_file, 0o644)

    def registered(report: dict[str, Any]) -> None:
        assert report["mode"] == "plugin" and report["changed"] is True, report
        ran = [c["target"] for c in report["changes"] if c["action"] == "ran"]
        assert ran[-1] == f"claude plugin install {PLUGIN_ID} --scope user", ran

    assert_install_cycles_leave_no_trace(sandbox, installed=registered)
