"""``powercontext-codex doctor`` against a real runtime and the real Codex CLI: one line per
check, exit 1 on any failure, and a fix for each failure."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

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
        "host",
        "hooks",
        "trust",
        "dry-run",
    ]
    assert all(c["status"] in ("ok", "info") for c in report["checks"]), report
    assert checks["scope"]["message"].startswith("git:github.com/acme/codex-")
    assert "remote.origin.url" in checks["scope"]["message"]
    assert checks["hooks"]["message"] == (
        "SessionStart and UserPromptSubmit registered (plugin powercontext@powercontext-local)"
    )
    assert checks["trust"]["message"] == "trusted (SessionStart and UserPromptSubmit)"
    assert checks["bootstrap"]["status"] == "info"
    assert checks["bootstrap"]["message"].startswith("off (default)")
    assert checks["host"]["message"].startswith("codex-cli 0.169.0")
    assert checks["runtime"]["message"].startswith("reachable over TCP 127.0.0.1:")
    assert checks["token"]["message"].startswith("accepted (from the agent token file ")

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
