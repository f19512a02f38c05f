"""``powercontext-codex install`` / ``uninstall``: both install paths, idempotency, backups,
other hooks preserved, exact reversal — and the hook command it writes really runs."""

from __future__ import annotations

import json
import os
import shlex
import tomllib
from collections.abc import Callable
from typing import Any

import pytest

from powercontext_hook_kit.install import mcp_command
from powercontext_hook_kit.mcp_bridge import SETTINGS_VARIABLES
from tests.codex.conftest import MODULE, CodexSandbox, our_handlers
from tests.support.daemon import Daemon
from tests.support.hosts import HostCLIs, codex_hooks_list, run_codex_cli
from tests.support.plugin_sandbox import (
    assert_install_cycles_leave_no_trace,
    assert_installed_hook_injects_the_pack,
    write_json,
)

OTHER_HOOKS = {
    "hooks": {
        "UserPromptSubmit": [
            {"hooks": [{"type": "command", "command": "echo mine", "timeout": 3}]}
        ],
        "Stop": [{"matcher": "x", "hooks": [{"type": "command", "command": "echo stop"}]}],
    },
    "description": "the user's own hooks",
}


def test_install_without_host_cli_merges_into_hooks_json(sandbox: CodexSandbox) -> None:
    original = write_json(sandbox.hooks_file, OTHER_HOOKS)
    report = sandbox.run_json("install", "--no-host-cli")

    assert report["mode"] == "hooks" and report["changed"] is True
    actions = [(change["action"], change["target"]) for change in report["changes"]]
    assert actions == [("backup", str(sandbox.hooks_file)), ("updated", str(sandbox.hooks_file))]
    assert any("/hooks" in note for note in report["notes"])  # how to trust it
    (backup,) = sandbox.backups(sandbox.hooks_file)
    assert backup.read_bytes() == original

    document = sandbox.hooks()
    assert document["description"] == OTHER_HOOKS["description"]
    stops = document["hooks"]["Stop"]
    assert stops[: len(OTHER_HOOKS["hooks"]["Stop"])] == OTHER_HOOKS["hooks"]["Stop"]  # ours after
    groups = document["hooks"]["UserPromptSubmit"]
    assert groups[0] == OTHER_HOOKS["hooks"]["UserPromptSubmit"][0]  # ours is appended
    (handler,) = our_handlers(document)
    assert groups[1] == {"hooks": [handler]}
    assert handler["timeout"] == 10 and type(handler["timeout"]) is int  # Codex needs an int
    assert handler["additionalContextLimit"] == 8192
    argv = shlex.split(handler["command"])
    assert os.path.isabs(argv[0]) and os.access(argv[0], os.X_OK)
    assert argv[1:] == ["-I", "-m", MODULE, "hook", "user-prompt-submit"]
    # SessionStart: one group without a matcher covers every source (startup, resume, clear,
    # compact), run by the same interpreter with the session-start verb.
    (start,) = our_handlers(document, "SessionStart")
    assert document["hooks"]["SessionStart"] == [{"hooks": [start]}]
    assert start["timeout"] == 10 and type(start["timeout"]) is int
    assert set(start) == {"type", "command", "timeout"}
    assert shlex.split(start["command"]) == [*argv[:-1], "session-start"]
    assert not sandbox.marketplace.exists()  # no plugin folder without the host CLI


def test_install_is_idempotent_and_uninstall_restores(sandbox: CodexSandbox) -> None:
    write_json(sandbox.hooks_file, OTHER_HOOKS)
    sandbox.run_json("install", "--no-host-cli")
    installed = sandbox.hooks_file.read_bytes()

    again = sandbox.run("install", "--no-host-cli")
    assert again.returncode == 0, again.stderr
    assert "nothing to change" in again.stdout
    assert sandbox.hooks_file.read_bytes() == installed
    assert len(sandbox.backups(sandbox.hooks_file)) == 1  # no change, no new backup

    removed = sandbox.run_json("uninstall", "--no-host-cli")
    assert removed["changed"] is True
    assert ("restored", str(sandbox.hooks_file)) in [
        (c["action"], c["target"]) for c in removed["changes"]
    ]
    assert sandbox.hooks() == OTHER_HOOKS
    assert sandbox.backups(sandbox.hooks_file) == []  # restored from it, then gone
    assert sandbox.run_json("uninstall", "--no-host-cli")["changed"] is False


def test_a_file_created_by_install_is_removed_by_uninstall(sandbox: CodexSandbox) -> None:
    sandbox.run_json("install", "--no-host-cli")
    assert our_handlers(sandbox.hooks()) and our_handlers(sandbox.hooks(), "SessionStart")
    assert sandbox.hooks_file.stat().st_mode & 0o077 == 0  # new user config: private
    report = sandbox.run_json("uninstall", "--no-host-cli")
    assert report["changes"][0] == {
        "action": "removed",
        "target": str(sandbox.hooks_file),
        "detail": "removed our hooks: uninstalled",
    }
    assert not sandbox.hooks_file.exists()
    assert sandbox.backups(sandbox.hooks_file) == []
    assert not sandbox.ledger().exists()


def _our_hooks_merged(sandbox: CodexSandbox) -> Callable[[dict[str, Any]], None]:
    """Checks an install report: our hooks were merged into hooks.json."""

    def check(report: dict[str, Any]) -> None:
        assert report["mode"] == "hooks" and report["changed"] is True, report
        assert our_handlers(sandbox.hooks()) and our_handlers(sandbox.hooks(), "SessionStart")

    return check


@pytest.mark.parametrize("hooks_json", ["absent", "the user's own"])
def test_install_uninstall_cycles_leave_codex_home_exactly_as_it_was(
    sandbox: CodexSandbox, hooks_json: str
) -> None:
    """Item 6 of issue 16: after uninstall the home is byte-identical to before the first
    install — no re-serialised hooks.json, no backups, no ledger, no empty folders, the same
    modes — however many times the user installs and uninstalls."""
    os.chmod(sandbox.config_file, 0o644)
    if hooks_json != "absent":
        write_json(sandbox.hooks_file, OTHER_HOOKS)  # compact: a rewrite would show
        os.chmod(sandbox.hooks_file, 0o640)
    assert_install_cycles_leave_no_trace(
        sandbox, "--no-host-cli", installed=_our_hooks_merged(sandbox)
    )


def test_a_hooks_file_edited_while_installed_keeps_the_edit(sandbox: CodexSandbox) -> None:
    """Restoring the old bytes must never lose what the user added since: then only our
    entries go, and the backup with them."""
    write_json(sandbox.hooks_file, OTHER_HOOKS)
    sandbox.run_json("install", "--no-host-cli")
    document = sandbox.hooks()
    document["hooks"]["Stop"].append({"hooks": [{"type": "command", "command": "echo new"}]})
    write_json(sandbox.hooks_file, document)

    report = sandbox.run_json("uninstall", "--no-host-cli")
    expected = json.loads(json.dumps(OTHER_HOOKS))
    expected["hooks"]["Stop"].append({"hooks": [{"type": "command", "command": "echo new"}]})
    assert sandbox.hooks() == expected
    assert ("updated", str(sandbox.hooks_file)) in [
        (c["action"], c["target"]) for c in report["changes"]
    ]
    assert sandbox.backups(sandbox.hooks_file) == [] and not sandbox.ledger().exists()


def test_a_stale_entry_of_ours_is_updated_in_place(sandbox: CodexSandbox) -> None:
    """Codex keys trust by position: our entry keeps its place, duplicates of it go."""
    stale = "/old/venv/bin/python -I -m powercontext_codex hook user-prompt-submit"
    write_json(
        sandbox.hooks_file,
        {
            "hooks": {
                "UserPromptSubmit": [
                    {"hooks": [{"type": "command", "command": stale, "timeout": 5}]},
                    {"hooks": [{"type": "command", "command": "echo mine"}]},
                    {"hooks": [{"type": "command", "command": stale}]},
                ]
            }
        },
    )
    sandbox.run_json("install", "--no-host-cli")
    hooks = sandbox.hooks()["hooks"]
    groups = hooks["UserPromptSubmit"]
    assert len(groups) == 2
    assert groups[0]["hooks"][0]["command"].endswith(f"-m {MODULE} hook user-prompt-submit")
    assert groups[0]["hooks"][0]["command"] != stale
    assert groups[1] == {"hooks": [{"type": "command", "command": "echo mine"}]}
    # the missing hooks are appended
    assert list(hooks) == ["UserPromptSubmit", "SessionStart", "Stop"]


def test_an_older_install_gains_session_start_and_uninstall_removes_both(
    sandbox: CodexSandbox,
) -> None:
    """A hooks.json from a UserPromptSubmit-only install: re-installing adds SessionStart and
    leaves the existing entry where it is; uninstall removes both and nothing else."""
    write_json(sandbox.hooks_file, OTHER_HOOKS)
    sandbox.run_json("install", "--no-host-cli")
    document = sandbox.hooks()
    del document["hooks"]["SessionStart"]
    write_json(sandbox.hooks_file, document)
    before = document["hooks"]["UserPromptSubmit"]

    report = sandbox.run_json("install", "--no-host-cli")
    assert report["changed"] is True
    updated = sandbox.hooks()
    assert updated["hooks"]["UserPromptSubmit"] == before
    assert len(our_handlers(updated, "SessionStart")) == 1

    sandbox.run_json("uninstall", "--no-host-cli")
    assert sandbox.hooks() == OTHER_HOOKS


def test_an_unreadable_hooks_file_is_never_rewritten(sandbox: CodexSandbox) -> None:
    sandbox.hooks_file.write_text("{not json", encoding="utf-8")
    done = sandbox.run("install", "--no-host-cli")
    assert done.returncode == 1
    assert "not valid JSON" in done.stderr
    assert sandbox.hooks_file.read_text("utf-8") == "{not json"
    assert sandbox.backups(sandbox.hooks_file) == []


def test_a_hooks_file_codex_would_ignore_is_reported_not_merged(sandbox: CodexSandbox) -> None:
    """Codex drops a whole hooks.json with an unknown top-level key (only a warning says so)."""
    broken = {**OTHER_HOOKS, "note": "unknown to Codex"}
    write_json(sandbox.hooks_file, broken)
    done = sandbox.run("install", "--no-host-cli")
    assert done.returncode == 1
    assert "Codex ignores" in done.stderr and "note" in done.stderr
    assert sandbox.hooks() == broken


@pytest.mark.parametrize("transport", ["tcp", "unix"])
def test_the_installed_hook_command_runs_and_injects_the_pack(
    live: CodexSandbox, runtime_daemon: Daemon, transport: str
) -> None:
    """The command is absolute: it runs from any directory with an empty PATH, the way Codex
    runs it (``$SHELL -c``), and prints exactly the runtime's pack for the prompt."""
    event = {
        "session_id": "s",
        "turn_id": "t",
        "transcript_path": None,
        "cwd": str(live.repo),
        "hook_event_name": "UserPromptSubmit",
        "model": "m",
        "permission_mode": "default",
        "prompt": "when do deploys go out?",
    }
    assert_installed_hook_injects_the_pack(
        live, runtime_daemon, event, scope_variable="POWERCONTEXT_SCOPE_ID", transport=transport
    )


# ---- with the real Codex CLI -----------------------------------------------------------------


def _our_listed(sandbox: CodexSandbox, clis: HostCLIs) -> list[dict]:
    return [
        hook
        for hook in codex_hooks_list(sandbox.codex_home, sandbox.repo, clis=clis)
        if f"-m {MODULE} hook" in hook["command"]
    ]


def test_install_with_codex_registers_and_trusts_the_plugin(
    live: CodexSandbox, host_clis: HostCLIs
) -> None:
    live.with_host_cli(host_clis)
    config_before = live.config_file.read_text("utf-8")
    report = live.run_json("install")

    assert report["mode"] == "plugin"
    ran = [c["target"] for c in report["changes"] if c["action"] == "ran"]
    assert ran == [
        f"codex plugin marketplace add {live.marketplace}",
        "codex plugin add powercontext@powercontext-local",
    ]
    assert [c["action"] for c in report["changes"]].count("trusted") == 3  # all three hooks
    (backup,) = live.backups(live.config_file)
    assert backup.read_text("utf-8") == config_before
    assert not live.hooks_file.exists()  # the plugin path does not touch hooks.json

    plugin = live.marketplace / "plugins" / "powercontext"
    mcp = json.loads((plugin / ".mcp.json").read_text("utf-8"))["mcpServers"]["powercontext"]
    executable, args = mcp_command(MODULE)
    assert mcp == {  # the stdio bridge: no URL, no token, nothing to export
        "command": executable,
        "args": args,
        "env_vars": list(SETTINGS_VARIABLES),
    }
    assert args[-3:] == ["-m", MODULE, "mcp"] and os.path.isabs(executable)
    skill = (plugin / "skills" / "powercontext-memory" / "SKILL.md").read_text("utf-8")
    assert "search_memory" in skill and "`powercontext-codex scope`" in skill
    assert "propose_experience" in skill and "task-result/<id>" in skill
    assert not (plugin / "commands").exists()  # Codex plugins have no slash commands
    listing = run_codex_cli(
        ["plugin", "list", "--json"], codex_home=live.codex_home, cwd=live.repo, clis=host_clis
    )
    (installed,) = json.loads(listing.stdout)["installed"]
    assert installed["pluginId"] == "powercontext@powercontext-local" and installed["enabled"]
    listed = {hook["eventName"]: hook for hook in _our_listed(live, host_clis)}
    assert sorted(listed) == ["sessionStart", "stop", "userPromptSubmit"]
    for hook in listed.values():
        assert (hook["source"], hook["trustStatus"], hook["timeoutSec"]) == (
            "plugin",
            "trusted",
            10,
        )
    assert listed["userPromptSubmit"]["additionalContextLimit"] == 8192
    assert listed["sessionStart"]["command"].endswith(f"-m {MODULE} hook session-start")

    again = live.run_json("install")
    assert again["changed"] is False
    assert len(live.backups(live.config_file)) == 1

    removed = live.run_json("uninstall")
    assert [c["action"] for c in removed["changes"]][:6] == [
        "untrusted",
        "untrusted",
        "untrusted",
        "ran",
        "ran",
        "removed",
    ]
    assert live.config_file.read_text("utf-8") == config_before
    assert live.backups(live.config_file) == []
    assert not live.marketplace.exists()
    assert _our_listed(live, host_clis) == []
    assert live.run_json("uninstall")["changed"] is False


def test_with_the_plugins_feature_off_the_hook_goes_to_hooks_json_trusted(
    live: CodexSandbox, host_clis: HostCLIs
) -> None:
    """Codex never runs plugin hooks with `features.plugins = false`: use a user hook."""
    live.with_host_cli(host_clis)
    with open(live.config_file, "a", encoding="utf-8") as config:
        config.write("\n[features]\nplugins = false\n")
    write_json(live.hooks_file, OTHER_HOOKS)
    report = live.run_json("install")

    assert report["mode"] == "hooks"
    assert any("plugins` feature is off" in note for note in report["notes"])
    listed = _our_listed(live, host_clis)
    events = sorted(hook["eventName"] for hook in listed)
    assert events == ["sessionStart", "stop", "userPromptSubmit"]
    assert {(hook["source"], hook["trustStatus"]) for hook in listed} == {("user", "trusted")}
    state = tomllib.loads(live.config_file.read_text("utf-8"))["hooks"]["state"]
    assert sorted(state) == sorted(hook["key"] for hook in listed)
    assert live.run_json("install")["changed"] is False

    live.run_json("uninstall")
    assert live.hooks() == OTHER_HOOKS
    assert "hooks" not in tomllib.loads(live.config_file.read_text("utf-8"))


def _plugin_registered(report: dict[str, Any]) -> None:
    assert report["mode"] == "plugin" and report["changed"] is True, report
    assert [c["action"] for c in report["changes"]].count("trusted") == 3


def test_plugin_install_uninstall_cycles_leave_codex_home_exactly_as_it_was(
    sandbox: CodexSandbox, host_clis: HostCLIs
) -> None:
    """Through the real ``codex plugin …`` commands and Codex's own config writer: after each
    uninstall ``$CODEX_HOME`` (config.toml bytes *and* its 0644 mode, plugins/cache) and the
    user data dir are exactly as before the first install."""
    sandbox.with_host_cli(host_clis)
    os.chmod(sandbox.config_file, 0o644)
    assert_install_cycles_leave_no_trace(sandbox, installed=_plugin_registered)
    assert _our_listed(sandbox, host_clis) == []


def test_trusted_user_hook_cycles_leave_codex_home_exactly_as_it_was(
    sandbox: CodexSandbox, host_clis: HostCLIs
) -> None:
    """The `plugins` feature off: a user hook in hooks.json, trusted through Codex's writer
    (config.toml); uninstall takes both back to their exact bytes and modes."""
    sandbox.with_host_cli(host_clis)
    with open(sandbox.config_file, "a", encoding="utf-8") as config:
        config.write("\n[features]\nplugins = false\n")
    os.chmod(sandbox.config_file, 0o644)
    write_json(sandbox.hooks_file, OTHER_HOOKS)

    def trusted(report: dict[str, Any]) -> None:
        assert report["mode"] == "hooks" and report["changed"] is True, report
        assert [c["action"] for c in report["changes"]].count("trusted") == 3

    assert_install_cycles_leave_no_trace(sandbox, installed=trusted)


def test_install_bootstrap_over_an_install_changes_and_trusts_the_new_command(
    live: CodexSandbox, host_clis: HostCLIs
) -> None:
    """The README's order: ``install``, later ``install --bootstrap`` — Codex must run (and
    trust) the new SessionStart command, and a plain ``install`` switches it back."""
    live.with_host_cli(host_clis)
    live.run_json("install")
    switched = live.run_json("install", "--bootstrap")
    assert switched["changed"] is True
    listed = {hook["eventName"]: hook for hook in _our_listed(live, host_clis)}
    assert listed["sessionStart"]["command"].endswith(f"-m {MODULE} hook session-start --bootstrap")
    assert {hook["trustStatus"] for hook in listed.values()} == {"trusted"}
    assert live.run_json("install", "--bootstrap")["changed"] is False
    live.run_json("install")
    listed = {hook["eventName"]: hook for hook in _our_listed(live, host_clis)}
    assert listed["sessionStart"]["command"].endswith(f"-m {MODULE} hook session-start")
    assert {hook["trustStatus"] for hook in listed.values()} == {"trusted"}
