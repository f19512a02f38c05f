"""``powercontext-claude-code doctor`` against a real runtime and the real Claude Code CLI: one
line per check, exit 1 on any failure, and a fix for each failure."""

from __future__ import annotations

import json
import re
from pathlib import Path

from tests.claude_code.conftest import PLUGIN_ID, ClaudeSandbox
from tests.support.daemon import Daemon, free_port
from tests.support.hosts import HostCLIs
from tests.support.plugin_sandbox import checks_by_name


def test_doctor_is_healthy_after_install(
    live: ClaudeSandbox, host_clis: HostCLIs, runtime_daemon: Daemon
) -> None:
    live.with_host_cli(host_clis)
    live.run_json("install")
    scope = "claude-doctor:healthy"
    runtime_daemon.client().post(
        "/v1/memory/remember",
        json={"scope_id": scope, "kind": "fact", "text": "Releases are cut from main"},
    ).raise_for_status()
    code, report = live.doctor("--prompt", "how are releases cut?", POWERCONTEXT_SCOPE_ID=scope)
    checks = checks_by_name(report)
    assert code == 0 and report["ok"] is True, report
    assert [c["name"] for c in report["checks"]] == [
        "settings",
        "bootstrap",
        "runtime",
        "token",
        "version",
        "scope",
        "handoff",
        "host",
        "hooks",
        "dry-run",
        "mcp",
        "capture spool",
        "task results",
    ]
    assert all(c["status"] in ("ok", "info") for c in report["checks"]), report
    assert checks["scope"]["message"] == f"{scope} — from the scope_id setting " + (
        "(POWERCONTEXT_SCOPE_ID / plugins.toml)"
    )
    assert checks["hooks"]["message"].startswith(
        f"SessionStart, UserPromptSubmit and Stop registered (plugin {PLUGIN_ID} from "
    )
    assert checks["bootstrap"]["message"].startswith("off (default)")
    assert checks["dry-run"]["message"].startswith("valid envelope with a ")
    assert checks["host"]["message"].startswith("Claude Code 2.1.328")
    mcp = checks["mcp"]["message"]
    assert re.fullmatch(rf"\d+ tools over {re.escape(runtime_daemon.url)}", mcp), mcp
    assert checks["capture spool"]["message"] == "on, no prompts waiting, none dropped"


def test_doctor_uses_the_plugin_options_the_hook_gets(
    live: ClaudeSandbox, host_clis: HostCLIs
) -> None:
    """userConfig options (settings.json pluginConfigs) reach the hook as
    CLAUDE_PLUGIN_OPTION_*; doctor checks with the same values."""
    live.with_host_cli(host_clis)
    live.run_json("install")
    settings = live.settings()
    settings["pluginConfigs"] = {
        PLUGIN_ID: {"options": {"url": "http://127.0.0.1:1", "bootstrap": True}}
    }
    live.settings_file.write_text(json.dumps(settings), encoding="utf-8")
    code, report = live.doctor(POWERCONTEXT_URL="")  # the variable would rank above it
    checks = checks_by_name(report)
    assert code == 1
    assert checks["settings"]["message"] == "runtime URL http://127.0.0.1:1 (TCP 127.0.0.1:1)"
    assert checks["bootstrap"]["status"] == "info"
    assert checks["bootstrap"]["message"].startswith("on (from the plugin's bootstrap option)")
    assert checks["runtime"]["status"] == "fail"
    # The MCP server gets the url option through ``${user_config.url}`` in .mcp.json.
    assert checks["mcp"]["status"] == "fail"
    assert "not reachable at TCP 127.0.0.1:1 " in checks["mcp"]["message"]


def test_doctor_reports_a_runtime_that_is_down(live: ClaudeSandbox) -> None:
    live.run_json("install", "--no-host-cli")
    down = f"http://127.0.0.1:{free_port()}"
    code, report = live.doctor("--no-host-cli", POWERCONTEXT_URL=down)
    checks = checks_by_name(report)
    assert code == 1
    assert checks["runtime"]["status"] == "fail"
    assert f"over TCP {down.removeprefix('http://')} " in checks["runtime"]["message"]
    assert "server_unavailable" in checks["dry-run"]["message"]


def test_doctor_names_the_transport_it_checked(
    live: ClaudeSandbox, runtime_daemon: Daemon, tmp_path: Path
) -> None:
    """TCP when a loopback URL is configured; otherwise the default unix socket in the runtime's
    data dir (here an empty one: nothing listens, so it fails and says how to get TCP)."""
    live.run_json("install", "--no-host-cli")
    code, report = live.doctor("--no-host-cli")
    checks = checks_by_name(report)
    port = runtime_daemon.url.rsplit(":", 1)[1]
    assert checks["runtime"]["message"] == f"reachable over TCP 127.0.0.1:{port}"
    assert checks["token"]["message"].startswith("accepted (from the agent token file ")
    assert checks["token"]["message"].endswith("auth/agent-token)")

    empty = tmp_path / "empty-home"
    empty.mkdir()
    code, report = live.doctor("--no-host-cli", POWERCONTEXT_URL="", POWERCONTEXT_HOME=str(empty))
    checks = checks_by_name(report)
    socket = empty / "powercontext.sock"
    assert code == 1
    assert checks["settings"]["message"] == f"runtime URL unix:{socket} (unix socket {socket})"
    assert checks["runtime"]["status"] == "fail"
    assert checks["runtime"]["message"].startswith(f"not reachable over unix socket {socket} (")
    assert "POWERCONTEXT_URL=http://127.0.0.1:7411" in checks["runtime"]["fix"]
    assert "server_unavailable" in checks["dry-run"]["message"]


def test_doctor_reports_a_rejected_token(live: ClaudeSandbox) -> None:
    live.run_json("install", "--no-host-cli")
    code, report = live.doctor("--no-host-cli", CLAUDE_PLUGIN_OPTION_TOKEN="pc_wrong")
    checks = checks_by_name(report)
    assert code == 1
    assert checks["token"]["status"] == "fail"
    assert "the plugin's token option" in checks["token"]["message"]


def test_doctor_reports_an_unusable_scope(live: ClaudeSandbox) -> None:
    live.run_json("install", "--no-host-cli")
    binding = live.repo / ".git" / "powercontext" / "workspace.json"
    binding.parent.mkdir()
    binding.write_text('{"schema": "powercontext.workspace.v1"}', encoding="utf-8")
    code, report = live.doctor("--no-host-cli")
    checks = checks_by_name(report)
    assert code == 1
    assert checks["scope"]["status"] == "fail" and "invalid" in checks["scope"]["message"]


def test_doctor_reports_missing_and_doubled_hooks(live: ClaudeSandbox, host_clis: HostCLIs) -> None:
    live.with_host_cli(host_clis)
    code, report = live.doctor()
    assert code == 1
    assert checks_by_name(report)["hooks"]["fix"] == "run `powercontext-claude-code install`"

    live.run_json("install")  # the plugin …
    live.run_json("install", "--no-host-cli")  # … and a settings.json hook as well
    code, report = live.doctor()
    hooks = checks_by_name(report)["hooks"]
    assert code == 1 and hooks["status"] == "fail"
    assert hooks["message"].startswith("SessionStart registered 2 times")
    live.run_json("install")  # repairs it
    assert live.doctor()[0] == 0


def test_doctor_fails_when_session_start_is_not_registered(live: ClaudeSandbox) -> None:
    """Settings from an install that predates SessionStart: doctor says so, install fixes it."""
    live.run_json("install", "--no-host-cli")
    settings = live.settings()
    del settings["hooks"]["SessionStart"]
    live.settings_file.write_text(json.dumps(settings), encoding="utf-8")
    code, report = live.doctor("--no-host-cli", POWERCONTEXT_BOOTSTRAP="yes")
    checks = checks_by_name(report)
    assert code == 1 and checks["hooks"]["status"] == "fail"
    assert checks["hooks"]["message"] == "Claude Code has no PowerContext SessionStart hook"
    assert checks["bootstrap"]["message"].startswith("on (from POWERCONTEXT_BOOTSTRAP)")
    live.run_json("install", "--no-host-cli")
    assert checks_by_name(live.doctor("--no-host-cli")[1])["hooks"]["status"] == "ok"


def test_doctor_starts_the_registered_mcp_server_and_fails_when_the_runtime_is_down(
    live: ClaudeSandbox, host_clis: HostCLIs
) -> None:
    live.with_host_cli(host_clis)
    live.run_json("install")
    home = live.home / "no-runtime"
    home.mkdir()
    code, report = live.doctor(POWERCONTEXT_URL="", POWERCONTEXT_HOME=str(home))
    mcp = checks_by_name(report)["mcp"]
    assert code == 1 and mcp["status"] == "fail"
    assert mcp["message"] == (
        f"tools/list failed: PowerContext runtime is not reachable at unix socket "
        f"{home}/powercontext.sock (connection refused or closed); start it with "
        "`powercontext serve`, or point POWERCONTEXT_URL at it"
    )


def test_doctor_warns_when_the_mcp_server_could_review(
    live: ClaudeSandbox, host_clis: HostCLIs, runtime_daemon: Daemon
) -> None:
    """The operator's token lists the review tools: an agent must never get it."""
    live.with_host_cli(host_clis)
    live.run_json("install")
    code, report = live.doctor(POWERCONTEXT_TOKEN=runtime_daemon.token)
    mcp = checks_by_name(report)["mcp"]
    assert code == 0 and mcp["status"] == "warn"
    assert "including the review tools" in mcp["message"]
    assert runtime_daemon.token not in json.dumps(report)
