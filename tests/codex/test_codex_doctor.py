"""``powercontext-codex doctor`` against a real runtime and the real Codex CLI: one line per
check, exit 1 on any failure, and a fix for each failure."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

from powercontext_hook_kit.spool import CaptureSpool
from tests.codex.conftest import CodexSandbox, our_handlers
from tests.support.daemon import Daemon, free_port
from tests.support.hosts import HostCLIs
from tests.support.plugin_sandbox import checks_by_name


def test_doctor_is_healthy_after_install(live: CodexSandbox, host_clis: HostCLIs) -> None:
    live.with_host_cli(host_clis)
    live.run_json("install")
    code, report = live.doctor()
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
        "trust",
        "dry-run",
        "mcp",
        "capture spool",
        "task results",
    ]
    assert all(c["status"] in ("ok", "info") for c in report["checks"]), report
    assert checks["scope"]["message"].startswith("git:github.com/acme/codex-")
    assert "remote.origin.url" in checks["scope"]["message"]
    assert checks["hooks"]["message"] == (
        "SessionStart, UserPromptSubmit and Stop registered "
        "(plugin powercontext@powercontext-local)"
    )
    assert checks["trust"]["message"] == "trusted (SessionStart, UserPromptSubmit and Stop)"
    assert checks["bootstrap"]["status"] == "info"
    assert checks["bootstrap"]["message"].startswith("off (default)")
    assert checks["host"]["message"].startswith("codex-cli 0.169.0")
    assert checks["runtime"]["message"].startswith("reachable over TCP 127.0.0.1:")
    assert checks["token"]["message"].startswith("accepted (from the agent token file ")
    # The MCP server Codex would start (with only the variables Codex passes on), end to end.
    assert re.fullmatch(
        rf"\d+ tools over {re.escape(live.extra_env['POWERCONTEXT_URL'])}", checks["mcp"]["message"]
    ), checks["mcp"]
    assert checks["capture spool"]["message"] == "on, no prompts waiting, none dropped"

    human = live.run("doctor")
    assert human.returncode == 0
    lines = human.stdout.splitlines()
    assert lines[0].startswith("ok   settings:") and len(lines) == len(report["checks"])


def test_doctor_reports_a_runtime_that_is_down(live: CodexSandbox) -> None:
    live.run_json("install", "--no-host-cli")
    code, report = live.doctor("--no-host-cli", POWERCONTEXT_URL=f"http://127.0.0.1:{free_port()}")
    checks = checks_by_name(report)
    assert code == 1
    assert checks["runtime"]["status"] == "fail"
    assert "powercontext serve" in checks["runtime"]["fix"]
    assert checks["token"]["status"] == checks["version"]["status"] == "skip"
    assert checks["dry-run"]["status"] == "fail"
    assert "server_unavailable" in checks["dry-run"]["message"]


def test_doctor_checks_the_default_unix_socket(live: CodexSandbox, tmp_path: Path) -> None:
    """No URL configured: doctor checks the runtime's socket and says so, and a socket that is
    not the user's is refused (nothing sent) rather than trusted."""
    live.run_json("install", "--no-host-cli")
    home = tmp_path / "pc-home"
    home.mkdir()
    socket = home / "powercontext.sock"
    socket.symlink_to(tmp_path / "somewhere-else.sock")
    code, report = live.doctor("--no-host-cli", POWERCONTEXT_URL="", POWERCONTEXT_HOME=str(home))
    checks = checks_by_name(report)
    assert code == 1
    assert checks["settings"]["message"] == f"runtime URL unix:{socket} (unix socket {socket})"
    assert checks["runtime"]["message"] == (
        f"not reachable over unix socket {socket} "
        "(refused: not a socket owned by this user, nothing was sent)"
    )
    assert checks["token"]["status"] == "skip"


def test_doctor_reports_a_rejected_token(live: CodexSandbox) -> None:
    live.run_json("install", "--no-host-cli")
    code, report = live.doctor("--no-host-cli", POWERCONTEXT_TOKEN="pc_wrong_token")
    checks = checks_by_name(report)
    assert code == 1
    assert checks["runtime"]["status"] == "ok"
    assert checks["token"]["status"] == "fail"
    assert "HTTP 401" in checks["token"]["message"]
    assert "POWERCONTEXT_TOKEN" in checks["token"]["message"]
    assert "authentication_failed" in checks["dry-run"]["message"]


def test_doctor_reports_an_unusable_scope(live: CodexSandbox) -> None:
    live.run_json("install", "--no-host-cli")
    binding = live.repo / ".git" / "powercontext" / "workspace.json"
    binding.parent.mkdir()
    binding.write_text("{broken", encoding="utf-8")
    code, report = live.doctor("--no-host-cli")
    checks = checks_by_name(report)
    assert code == 1
    assert checks["scope"]["status"] == "fail"
    assert "bind --clear" in checks["scope"]["fix"]
    assert str(binding) in checks["scope"]["message"]
    assert checks["dry-run"]["status"] == "fail" and "skipped" in checks["dry-run"]["message"]


def test_doctor_reports_missing_hooks(live: CodexSandbox, host_clis: HostCLIs) -> None:
    live.with_host_cli(host_clis)
    code, report = live.doctor()
    checks = checks_by_name(report)
    assert code == 1
    assert checks["hooks"]["status"] == "fail"
    assert checks["hooks"]["fix"] == "run `powercontext-codex install`"
    # The dry run still proves the command this installation would register works.
    assert checks["dry-run"]["status"] == "ok"


def test_doctor_explains_an_untrusted_hook(live: CodexSandbox, host_clis: HostCLIs) -> None:
    """--no-host-cli writes hooks.json but cannot trust it; `codex exec` would skip it."""
    live.run_json("install", "--no-host-cli")
    live.with_host_cli(host_clis)
    code, report = live.doctor()
    checks = checks_by_name(report)
    assert code == 1
    assert checks["hooks"]["status"] == "ok"
    assert checks["trust"]["status"] == "fail"
    assert "untrusted" in checks["trust"]["message"]
    assert "silently skips" in checks["trust"]["message"]
    assert "/hooks" in checks["trust"]["fix"] and "install" in checks["trust"]["fix"]

    live.run_json("install")  # now with codex: moves to the plugin and trusts it
    assert not live.hooks_file.exists() or not our_handlers(live.hooks())
    assert live.doctor()[0] == 0


def test_doctor_shows_the_last_diagnostic_lines(live: CodexSandbox, runtime_daemon: Daemon) -> None:
    """A hook that failed leaves a content-free line in its data dir; doctor shows it."""
    live.run_json("install", "--no-host-cli")
    (handler,) = our_handlers(live.hooks())
    down = f"http://127.0.0.1:{free_port()}"
    event = {"cwd": str(live.repo), "hook_event_name": "UserPromptSubmit", "prompt": "hello"}
    subprocess.run(
        ["/bin/sh", "-c", handler["command"]],
        input=json.dumps(event),
        capture_output=True,
        text=True,
        env=live.env(POWERCONTEXT_URL=down),
        timeout=30,
        check=True,
    )
    _, report = live.doctor("--no-host-cli", "--log-lines", "3")
    (line,) = report["log"]
    logged = json.loads(line)
    assert logged["component"] == "powercontext.codex.user-prompt-submit"
    assert logged["outcome"] == "server_unavailable"
    assert "hello" not in line  # never content
    human = live.run("doctor", "--no-host-cli")
    assert "last diagnostic lines:" in human.stdout
    assert Path(live.home / ".local/state/powercontext/codex/diagnostics.log").is_file()


def test_doctor_explains_a_hook_changed_since_it_was_trusted(
    live: CodexSandbox, host_clis: HostCLIs
) -> None:
    """Codex does not run a plugin hook whose definition changed after it was trusted."""
    live.with_host_cli(host_clis)
    live.run_json("install")
    cached = next((live.codex_home / "plugins" / "cache").rglob("hooks/hooks.json"))
    document = json.loads(cached.read_text("utf-8"))
    document["hooks"]["UserPromptSubmit"][0]["hooks"][0]["timeout"] = 9
    cached.write_text(json.dumps(document), encoding="utf-8")

    code, report = live.doctor()
    trust = checks_by_name(report)["trust"]
    assert code == 1
    assert trust["status"] == "fail" and "changed since it was trusted" in trust["message"]
    live.run_json("install")  # re-copies the plugin and trusts it again
    assert live.doctor()[0] == 0


def test_doctor_reports_the_bootstrap_setting_and_where_it_came_from(live: CodexSandbox) -> None:
    live.run_json("install", "--no-host-cli")
    _, report = live.doctor("--no-host-cli", POWERCONTEXT_BOOTSTRAP="1")
    line = checks_by_name(report)["bootstrap"]
    assert line["status"] == "info"
    assert line["message"].startswith("on (from POWERCONTEXT_BOOTSTRAP)")

    config = live.home / ".config" / "powercontext" / "plugins.toml"
    config.parent.mkdir(parents=True)
    config.write_text("[codex]\nbootstrap = true\n", encoding="utf-8")
    _, report = live.doctor("--no-host-cli")
    line = checks_by_name(report)["bootstrap"]
    assert line["message"].startswith(f"on (from bootstrap in [codex] of {config})")
    _, report = live.doctor("--no-host-cli", POWERCONTEXT_BOOTSTRAP="off")  # env wins
    line = checks_by_name(report)["bootstrap"]
    assert line["message"].startswith("off (from POWERCONTEXT_BOOTSTRAP)")


def test_doctor_fails_when_session_start_is_not_registered(live: CodexSandbox) -> None:
    """A hooks.json from an install that predates SessionStart: install adds it."""
    live.run_json("install", "--no-host-cli")
    document = live.hooks()
    del document["hooks"]["SessionStart"]
    live.hooks_file.write_text(json.dumps(document), encoding="utf-8")
    code, report = live.doctor("--no-host-cli")
    hooks = checks_by_name(report)["hooks"]
    assert code == 1 and hooks["status"] == "fail"
    assert hooks["message"] == "Codex CLI has no PowerContext SessionStart hook"
    assert hooks["fix"] == "run `powercontext-codex install`"
    live.run_json("install", "--no-host-cli")
    assert checks_by_name(live.doctor("--no-host-cli")[1])["hooks"]["status"] == "ok"


def test_doctor_starts_the_registered_mcp_server_and_fails_when_the_runtime_is_down(
    live: CodexSandbox, host_clis: HostCLIs
) -> None:
    """The ``mcp`` line runs the command ``.mcp.json`` registers (Codex's copy of it) the way
    Codex does, and relays the bridge's explanation: the cause and the fix."""
    live.with_host_cli(host_clis)
    live.run_json("install")
    down = f"http://127.0.0.1:{free_port()}"
    code, report = live.doctor(POWERCONTEXT_URL=down)
    mcp = checks_by_name(report)["mcp"]
    assert code == 1
    assert mcp["status"] == "fail"
    assert mcp["message"] == (
        f"tools/list failed: PowerContext runtime is not reachable at TCP "
        f"{down.removeprefix('http://')} (connection refused or closed); start it with "
        "`powercontext serve`, or point POWERCONTEXT_URL at it"
    )


def test_doctor_starts_the_mcp_server_with_only_what_codex_passes_on(
    live: CodexSandbox, host_clis: HostCLIs
) -> None:
    """Codex 0.169.0 gives a stdio MCP server a handful of its variables plus the ``env_vars``
    the server lists. Without that list the bridge would not see POWERCONTEXT_URL/_HOME and
    would look for the default socket under $HOME — the doctor must see that failure too."""
    live.with_host_cli(host_clis)
    live.run_json("install")
    cached = next((live.codex_home / "plugins" / "cache").rglob(".mcp.json"))
    document = json.loads(cached.read_text("utf-8"))
    del document["mcpServers"]["powercontext"]["env_vars"]
    cached.write_text(json.dumps(document), encoding="utf-8")
    code, report = live.doctor()
    mcp = checks_by_name(report)["mcp"]
    socket = live.home / ".local/share/powercontext/powercontext.sock"
    assert code == 1 and mcp["status"] == "fail"
    assert f"not reachable at unix socket {socket} " in mcp["message"]


def test_doctor_says_a_hooks_only_install_has_no_mcp_server(live: CodexSandbox) -> None:
    live.run_json("install", "--no-host-cli")
    code, report = live.doctor("--no-host-cli")
    mcp = checks_by_name(report)["mcp"]
    assert code == 0  # a warning: the hooks themselves work
    assert mcp["status"] == "warn"
    assert mcp["message"].startswith("no MCP server registered: the hooks are merged into ")
    assert mcp["fix"] == "run `powercontext-codex install` with `codex` on PATH"


def test_doctor_counts_the_capture_spool_without_showing_it(live: CodexSandbox) -> None:
    """Prompts kept while the runtime was down, and prompts given up: counts only."""
    live.run_json("install", "--no-host-cli")
    data_dir = live.home / ".local/state/powercontext/codex"
    spool = CaptureSpool(str(data_dir))
    body = {
        "scope_id": "git:github.com/acme/SENTINEL-scope",
        "source_id": "codex-user-prompt:abc",
        "content": "SENTINEL prompt text",
        "metadata": {"host": "codex", "hook": "UserPromptSubmit"},
    }
    assert spool.append(json.dumps(body).encode()).spooled
    line = {"component": "powercontext.codex.user-prompt-submit", "event": "capture_spool"}
    with open(data_dir / "diagnostics.log", "a", encoding="utf-8") as log:
        log.write(json.dumps({**line, "outcome": "dropped", "dropped": 2, "pending": 1}) + "\n")
    code, report = live.doctor("--no-host-cli", "--log-lines", "0")
    row = checks_by_name(report)["capture spool"]
    assert code == 0
    assert row["status"] == "warn"
    assert re.fullmatch(
        r"on, 1 prompt waiting \(\d+ bytes, oldest 0\.0 h\), 2 dropped \(diagnostics log\)",
        row["message"],
    ), row
    assert "powercontext serve" in row["fix"]
    assert "SENTINEL" not in json.dumps(report)


def test_install_bootstrap_switches_it_on_in_the_hook_command(live: CodexSandbox) -> None:
    """``install --bootstrap`` renders the switch into the SessionStart command (nothing to
    export); doctor names it as the source, every other setting still wins, and installing
    again without it switches it off."""
    live.run_json("install", "--no-host-cli", "--bootstrap")
    (start,) = our_handlers(live.hooks(), "SessionStart")
    assert start["command"].endswith(" hook session-start --bootstrap")
    (prompt,) = our_handlers(live.hooks())
    assert prompt["command"].endswith(" hook user-prompt-submit")
    code, report = live.doctor("--no-host-cli")
    checks = checks_by_name(report)
    assert code == 0, report
    assert checks["bootstrap"]["message"].startswith("on (from install --bootstrap)")
    assert "command" not in checks  # the option is a setting, not a stale command
    _, report = live.doctor("--no-host-cli", POWERCONTEXT_BOOTSTRAP="0")
    assert checks_by_name(report)["bootstrap"]["message"].startswith(
        "off (from POWERCONTEXT_BOOTSTRAP)"
    )

    live.run_json("install", "--no-host-cli")
    (start,) = our_handlers(live.hooks(), "SessionStart")
    assert start["command"].endswith(" hook session-start")
    _, report = live.doctor("--no-host-cli")
    assert checks_by_name(report)["bootstrap"]["message"].startswith("off (default)")


def test_doctor_says_whether_a_queued_handoff_will_reach_a_session(
    live: CodexSandbox, runtime_daemon: Daemon
) -> None:
    live.run_json("install", "--no-host-cli")
    _, report = live.doctor("--no-host-cli")
    assert checks_by_name(report)["handoff"] == {
        "name": "handoff",
        "status": "info",
        "message": "none waits for the next session",
        "fix": "",
    }
    scope = checks_by_name(report)["scope"]["message"].split(" ")[0]
    handoff = {
        "schema": "powercontext.handoff.v1",
        "objective": "o",
        "state": ["s"],
        "disposition": "continuable",
    }
    with runtime_daemon.client() as client:
        committed = client.post(
            "/v1/handoff/commit", json={"scope_id": scope, "base": None, "content": handoff}
        )
        assert committed.status_code == 200, committed.text
    code, report = live.doctor("--no-host-cli")
    line = checks_by_name(report)["handoff"]
    assert code == 0  # a warning, not a failure
    assert (line["status"], line["message"]) == (
        "warn",
        "revision 1 waits, but bootstrap is off: no session will get it",
    )
    _, report = live.doctor("--no-host-cli", POWERCONTEXT_BOOTSTRAP="1")
    assert checks_by_name(report)["handoff"]["message"] == (
        "revision 1 waits: the next session gets it"
    )
