"""``<plugin> scope``: the scope id the hooks use in a directory, for the runtime CLI's --scope."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

MODULES = ("powercontext_codex", "powercontext_claude_code")


def scope_command(
    module: str, cwd: Path, *args: str, **env: str
) -> subprocess.CompletedProcess[str]:
    clean = {
        k: v for k, v in os.environ.items() if not k.startswith(("POWERCONTEXT_", "CLAUDE_PLUGIN_"))
    }
    return subprocess.run(
        [sys.executable, "-m", module, "scope", *args],
        cwd=cwd,
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def git_repo(path: Path, remote: str) -> Path:
    path.mkdir()
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    subprocess.run(["git", "-C", str(path), "remote", "add", "origin", remote], check=True)
    return path


@pytest.mark.parametrize("module", MODULES)
def test_prints_the_scope_alone_so_it_can_be_substituted(module: str, tmp_path: Path) -> None:
    repo = git_repo(tmp_path / "shop", "git@github.com:acme/shop.git")
    done = scope_command(module, repo)
    assert (done.returncode, done.stdout, done.stderr) == (0, "git:github.com/acme/shop\n", "")
    explained = json.loads(scope_command(module, tmp_path, "--cwd", str(repo), "--json").stdout)
    assert explained == {
        "scope_id": "git:github.com/acme/shop",
        "source": "remote",
        "cwd": str(repo),
    }


@pytest.mark.parametrize("module", MODULES)
def test_the_scope_setting_and_a_binding_win_as_they_do_for_the_hooks(
    module: str, tmp_path: Path
) -> None:
    repo = git_repo(tmp_path / "shop", "git@github.com:acme/shop.git")
    overridden = scope_command(module, repo, "--json", POWERCONTEXT_SCOPE_ID="team:shop")
    assert json.loads(overridden.stdout)["source"] == "override"
    bound = subprocess.run(
        [sys.executable, "-m", module, "bind", "team:payments"],
        cwd=repo,
        capture_output=True,
        text=True,
        check=False,
    )
    assert bound.returncode == 0, bound.stderr
    assert scope_command(module, repo).stdout == "team:payments\n"


@pytest.mark.parametrize("module", MODULES)
def test_an_invalid_scope_setting_is_a_one_line_error(module: str, tmp_path: Path) -> None:
    done = scope_command(module, tmp_path, POWERCONTEXT_SCOPE_ID=" padded ")
    assert done.returncode == 1 and done.stdout == ""
    [line] = done.stderr.splitlines()
    assert "POWERCONTEXT_SCOPE_ID" in line and "padded" not in line
