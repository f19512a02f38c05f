"""``powercontext service``: the units it writes (issue 16 #5). The systemd unit is checked by
``systemd-analyze verify`` where systemd is installed (this machine, CI); the launchd agent is
parsed back with plistlib. Nothing here talks to a real service manager (``--no-start``) or
touches the real HOME."""

from __future__ import annotations

import json
import os
import plistlib
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from powercontext_runtime.cli.main import main as cli_main
from powercontext_runtime.cli.service import launchd_plist, plan_for, systemd_unit
from powercontext_runtime.settings import Settings


@pytest.fixture
def user_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "user"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    for name in list(os.environ):
        if name.startswith("POWERCONTEXT_"):
            monkeypatch.delenv(name)
    return home


def _json(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict]:
    code = cli_main([*argv, "--json"])
    return code, json.loads(capsys.readouterr().out)


def test_the_unit_runs_this_interpreter_with_the_chosen_data_dir(tmp_path: Path) -> None:
    home = tmp_path / "data dir with spaces, 100%"
    settings = Settings.load(env={}, home=home, port=7500)
    plan = plan_for(settings, "systemd", {"HOME": str(tmp_path)})
    assert plan.path == tmp_path / ".config" / "systemd" / "user" / "powercontext.service"
    assert plan.arguments == (
        sys.executable, "-m", "powercontext_runtime.cli.main", "serve",
        "--data-dir", str(home.resolve()), "--port", "7500",
    )  # fmt: skip
    lines = plan.content.splitlines()
    assert (
        f'ExecStart="{sys.executable}" "-m" "powercontext_runtime.cli.main" "serve" '
        f'"--data-dir" "{str(home.resolve()).replace("%", "%%")}" "--port" "7500"'
    ) in lines
    for line in ("Type=exec", "Restart=on-failure", "UMask=0077", "WantedBy=default.target"):
        assert line in lines
    assert plan.content == systemd_unit(plan.arguments)


def test_a_default_database_url_is_not_written_but_a_custom_one_is(tmp_path: Path) -> None:
    default = plan_for(Settings.load(env={}, home=tmp_path), "systemd", {"HOME": str(tmp_path)})
    assert "--database-url" not in default.arguments
    url = "mysql+pymysql://u:secret@db:2881/pc?charset=utf8mb4"
    custom = plan_for(
        Settings.load(env={}, home=tmp_path, database_url=url), "systemd", {"HOME": str(tmp_path)}
    )
    assert custom.arguments[-2:] == ("--database-url", url)


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd is not installed")
def test_systemd_analyze_accepts_the_unit(
    user_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = str(user_home / "d%1 x")
    code, report = _json(capsys, "service", "install", "--no-start", "--data-dir", data)
    assert code == 0 and report["file"] == "written"
    verified = subprocess.run(
        ["systemd-analyze", "verify", report["path"]], capture_output=True, text=True, timeout=60
    )
    assert verified.returncode == 0, verified.stderr
    # The check is real: the same unit with a relative interpreter is refused.
    broken = Path(report["path"]).with_name("broken.service")
    broken.write_text(Path(report["path"]).read_text().replace(f'"{sys.executable}"', '"python"'))
    refused = subprocess.run(
        ["systemd-analyze", "verify", str(broken)], capture_output=True, text=True, timeout=60
    )
    assert refused.returncode != 0


def test_install_is_idempotent_private_and_uninstall_removes_it(
    user_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    unit = user_home / ".config" / "systemd" / "user" / "powercontext.service"
    code, first = _json(capsys, "service", "install", "--no-start")
    assert (code, first["path"], first["file"]) == (0, str(unit), "written")
    assert first["started"] is False
    assert stat.S_IMODE(unit.stat().st_mode) == 0o600
    code, again = _json(capsys, "service", "install", "--no-start")
    assert again["file"] == "unchanged"
    assert sorted(p.name for p in unit.parent.iterdir()) == ["powercontext.service"]
    code, status = _json(capsys, "service", "status")
    assert status["installed"] is True
    code, removed = _json(capsys, "service", "uninstall")
    assert (code, removed["removed"]) == (0, True)
    assert not unit.exists()
    code, status = _json(capsys, "service", "status")
    assert (code, status["installed"], status["running"]) == (1, False, False)
    code, removed = _json(capsys, "service", "uninstall")
    assert (code, removed["removed"]) == (0, False)


def test_the_launchd_agent_keeps_the_daemon_alive(tmp_path: Path) -> None:
    settings = Settings.load(env={}, home=tmp_path / "data")
    plan = plan_for(settings, "launchd", {"HOME": str(tmp_path)})
    assert plan.path == tmp_path / "Library" / "LaunchAgents" / "dev.powercontext.runtime.plist"
    document = plistlib.loads(plan.content.encode())
    assert document["Label"] == "dev.powercontext.runtime"
    assert document["ProgramArguments"] == list(plan.arguments)
    assert document["ProgramArguments"][0] == sys.executable
    assert document["RunAtLoad"] is True and document["KeepAlive"] == {"SuccessfulExit": False}
    assert document["Umask"] == 0o077
    assert document["StandardErrorPath"] == str(settings.home / "service.log")
    assert plan.content == launchd_plist(plan.arguments, settings.home / "service.log")
