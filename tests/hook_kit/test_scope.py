"""Scope resolution: one rule for both hosts, from override down to a local hash."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from powercontext_hook_kit import (
    ScopeError,
    bind,
    explain_scope,
    find_repository,
    normalize_remote_url,
    resolve_scope,
    unbind,
)
from powercontext_hook_kit.scope import _origin_url_from_config
from tests.hook_kit.conftest import event, hook_env, run_in_process
from tests.hook_kit.stub import StubRuntime

GIT = shutil.which("git")
needs_git = pytest.mark.skipif(GIT is None, reason="git is not installed")


def git(*args: str, cwd: Path) -> str:
    env = {key: value for key, value in os.environ.items() if not key.startswith("GIT_")}
    env.update(
        GIT_AUTHOR_NAME="t",
        GIT_AUTHOR_EMAIL="t@example.com",
        GIT_COMMITTER_NAME="t",
        GIT_COMMITTER_EMAIL="t@example.com",
        GIT_CONFIG_NOSYSTEM="1",
        HOME=str(cwd),
    )
    completed = subprocess.run(
        ["git", *args], cwd=cwd, env=env, capture_output=True, text=True, check=True
    )
    return completed.stdout.strip()


def local(path: Path) -> str:
    return "local:sha256:" + hashlib.sha256(os.path.realpath(path).encode()).hexdigest()


def make_repo(path: Path, remote: str | None = None) -> Path:
    """A minimal checkout without spawning git: what find_repository looks for."""
    (path / ".git").mkdir(parents=True)
    (path / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    config = "[core]\n\tbare = false\n"
    if remote is not None:
        config += f'[remote "origin"]\n\turl = {remote}\n'
    (path / ".git" / "config").write_text(config)
    return path


@pytest.mark.parametrize(
    ("url", "scope"),
    [
        ("git@github.com:Owner/Repo.git", "git:github.com/Owner/Repo"),
        ("git@GitHub.COM:Owner/Repo.git", "git:github.com/Owner/Repo"),
        ("github.com:Owner/Repo", "git:github.com/Owner/Repo"),
        ("https://github.com/Owner/Repo.git", "git:github.com/Owner/Repo"),
        ("https://github.com/Owner/Repo", "git:github.com/Owner/Repo"),
        ("https://github.com/Owner/Repo/", "git:github.com/Owner/Repo"),
        ("https://github.com/Owner/Repo.git/", "git:github.com/Owner/Repo"),
        ("https://user:pass@Host.Example:8443/Owner/Repo.git", "git:host.example/Owner/Repo"),
        ("https://token@host/owner/repo", "git:host/owner/repo"),
        ("http://host:80/owner/repo.git", "git:host/owner/repo"),
        ("ssh://git@host:22/owner/repo", "git:host/owner/repo"),
        ("ssh://git@HOST/owner/repo.git", "git:host/owner/repo"),
        ("git+ssh://git@host/owner/repo.git", "git:host/owner/repo"),
        ("git://host/owner/repo", "git:host/owner/repo"),
        ("git://host/group/sub/Deep.Repo.git", "git:host/group/sub/Deep.Repo"),
        ("ssh://git@[::1]:2222/owner/repo.git", "git:[::1]/owner/repo"),
        ("git@[::1]:owner/repo.git", "git:[::1]/owner/repo"),
        ("https://host//owner/repo//", "git:host/owner/repo"),
        ("  git@github.com:Owner/Repo.git \n", "git:github.com/Owner/Repo"),
    ],
)
def test_remote_normalisation(url: str, scope: str) -> None:
    assert normalize_remote_url(url) == scope


@pytest.mark.parametrize(
    "url",
    [
        "",
        "/srv/git/repo.git",
        "../sibling/repo",
        "./repo",
        "file:///srv/git/repo.git",
        "C:/work/repo",
        "https://host",
        "https://host/",
        "git@host:",
        "https://user@/owner/repo",
    ],
)
def test_local_or_unusable_remotes_are_not_git_scopes(url: str) -> None:
    assert normalize_remote_url(url) is None


def test_long_remotes_are_hashed() -> None:
    path = "owner/" + "r" * 260
    scope = normalize_remote_url(f"https://host/{path}.git")
    expected = hashlib.sha256(f"git:host/{path}".encode()).hexdigest()
    assert scope == f"git:sha256:{expected}"
    exactly = "p" * (256 - len("git:host/"))
    assert normalize_remote_url(f"https://host/{exactly}") == f"git:host/{exactly}"


def test_control_characters_are_hashed_not_sent() -> None:
    scope = normalize_remote_url("https://host/owner/re\x01po")
    assert scope is not None and scope.startswith("git:sha256:")


# --- resolution ------------------------------------------------------------------------------


def test_no_cwd_means_unscoped() -> None:
    assert resolve_scope(None) is None
    assert resolve_scope("") is None
    assert resolve_scope("relative/path") is None
    assert resolve_scope("/definitely/not/here") is None


def test_override_wins_over_everything(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r", "git@github.com:Owner/Repo.git")
    bind(str(repo), "bound-scope")
    assert explain_scope(str(repo), "explicit") == ("explicit", "override")
    assert explain_scope(None, "explicit") == ("explicit", "override")


def test_binding_wins_over_remote(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r", "git@github.com:Owner/Repo.git")
    assert explain_scope(str(repo)) == ("git:github.com/Owner/Repo", "remote")
    path = bind(str(repo / "."), "team:payments")
    assert path == str(repo / ".git" / "powercontext" / "workspace.json")
    assert json.loads(Path(path).read_text()) == {
        "schema": "powercontext.workspace.v1",
        "scope_id": "team:payments",
    }
    (repo / "src").mkdir()
    assert explain_scope(str(repo / "src")) == ("team:payments", "binding")
    assert unbind(str(repo)) is True
    assert unbind(str(repo)) is False
    assert resolve_scope(str(repo)) == "git:github.com/Owner/Repo"


def test_bind_refuses_bad_input(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r")
    with pytest.raises(ScopeError):
        bind(str(repo), " padded")
    with pytest.raises(ScopeError):
        bind(str(repo), "")
    outside = tmp_path / "plain"
    outside.mkdir()
    with pytest.raises(ScopeError):
        bind(str(outside), "scope")


@pytest.mark.parametrize(
    "content",
    [
        "{not json",
        '{"schema":"powercontext.workspace.v2","scope_id":"x"}',
        '{"schema":"powercontext.workspace.v1","scope_id":" x"}',
        '{"schema":"powercontext.workspace.v1","scope_id":"x","extra":1}',
        '{"schema":"powercontext.workspace.v1"}',
    ],
)
def test_a_corrupt_binding_is_an_error_not_a_fallback(tmp_path: Path, content: str) -> None:
    repo = make_repo(tmp_path / "r", "git@github.com:Owner/Repo.git")
    (repo / ".git" / "powercontext").mkdir()
    (repo / ".git" / "powercontext" / "workspace.json").write_text(content)
    with pytest.raises(ScopeError):
        resolve_scope(str(repo))


def test_without_remote_the_repository_root_is_hashed(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r")
    (repo / "a" / "b").mkdir(parents=True)
    assert explain_scope(str(repo / "a" / "b")) == (local(repo), "local")
    assert resolve_scope(str(repo)) == local(repo)


def test_outside_git_the_directory_is_hashed(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    link = tmp_path / "link"
    link.symlink_to(plain)
    assert resolve_scope(str(plain)) == local(plain)
    assert resolve_scope(str(link)) == local(plain)  # resolved, so aliases agree


def test_a_git_file_pointing_nowhere_is_not_a_repository(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / ".git").write_text("gitdir: /does/not/exist\n")
    assert find_repository(str(plain)) is None


@needs_git
def test_linked_worktrees_share_the_repository_scope(tmp_path: Path) -> None:
    main = tmp_path / "main"
    main.mkdir()
    git("init", "-q", cwd=main)
    git("commit", "-q", "--allow-empty", "-m", "init", cwd=main)
    git("worktree", "add", "-q", str(tmp_path / "wt"), cwd=main)
    worktree = tmp_path / "wt"
    assert (worktree / ".git").is_file()
    repo = find_repository(str(worktree))
    assert repo is not None and repo.worktree == str(worktree.resolve())
    assert repo.common_dir == str((main / ".git").resolve())
    # No remote: both checkouts hash the main repository root.
    assert resolve_scope(str(worktree)) == resolve_scope(str(main)) == local(main)
    git("remote", "add", "origin", "https://user:pw@Example.org:8443/Team/Proj.git", cwd=main)
    assert resolve_scope(str(worktree)) == "git:example.org/Team/Proj"
    bind(str(worktree), "bound-in-worktree")
    assert resolve_scope(str(main)) == "bound-in-worktree"


CONFIGS = [
    '[remote "origin"]\n\turl = git@github.com:Owner/Repo.git\n',
    '[remote "origin"]\nurl="quoted value.git" ; comment\n',
    '[remote "origin"]\n\tURL = first\n\turl = second # wins\n',
    '[Remote "origin"]\n\turl = case-insensitive-section\n',
    '[remote "Origin"]\n\turl = wrong-subsection\n',
    '[remote "upstream"]\n\turl = not-origin\n[remote "origin"]\n\turl = origin\n',
    '# comment\n; comment\n[core]\n\tbare = false\n[remote "origin"]\n'
    "\turl = with\\\n continuation\n",
    '[remote "origin"]\n\turl = has \\"escaped\\" quotes and \\\\ slash\n',
    '[remote "origin"]\n\turl =   spaced   inside   \n',
    '[remote "origin"]\n\turl = a#b\n\turl = "c#d"\n',
    '[remote "origin"]\r\n\turl = crlf\r\n',
    '[remote "origin"]\n\tfetch = +refs/heads/*:refs/remotes/origin/*\n',
    "[remote.origin]\n\turl = old-style\n",
]


@needs_git
@pytest.mark.parametrize("index", range(len(CONFIGS)))
def test_config_parser_agrees_with_git(tmp_path: Path, index: int) -> None:
    config = tmp_path / "config"
    config.write_bytes(CONFIGS[index].encode())
    completed = subprocess.run(
        ["git", "config", "--file", str(config), "--get", "remote.origin.url"],
        capture_output=True,
        text=True,
        check=False,
    )
    expected = completed.stdout.rstrip("\n") if completed.returncode == 0 else None
    assert _origin_url_from_config(CONFIGS[index])[0] == expected


@needs_git
def test_included_config_is_resolved_by_git(tmp_path: Path) -> None:
    repo = tmp_path / "r"
    repo.mkdir()
    git("init", "-q", cwd=repo)
    (tmp_path / "extra.config").write_text(
        '[remote "origin"]\n\turl = git@host:team/included.git\n'
    )
    with (repo / ".git" / "config").open("a") as handle:
        handle.write(f"[include]\n\tpath = {tmp_path / 'extra.config'}\n")
    assert resolve_scope(str(repo)) == "git:host/team/included"


def test_both_hosts_send_byte_identical_scopes(stub: StubRuntime, tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r", "ssh://git@GitHub.com:22/Owner/Répo.git")
    env = hook_env(stub.url, tmp_path / "data")
    del env["POWERCONTEXT_SCOPE_ID"]
    run_in_process(event(cwd=str(repo)), env, host="codex")
    run_in_process(event(cwd=str(repo)), env, host="claude-code")
    scopes = [r.json()["scope_id"] for r in stub.requests if r.path.endswith("prepare")]
    assert scopes == ["git:github.com/Owner/Répo"] * 2
    raw = [r.body.split(b'"query"')[0] for r in stub.requests if r.path.endswith("prepare")]
    assert raw[0] == raw[1]


def test_the_environment_override_beats_a_binding_in_the_hook(
    stub: StubRuntime, tmp_path: Path
) -> None:
    repo = make_repo(tmp_path / "r", "git@github.com:Owner/Repo.git")
    bind(str(repo), "bound")
    env = hook_env(stub.url, tmp_path / "data")
    run_in_process(event(cwd=str(repo)), env)
    del env["POWERCONTEXT_SCOPE_ID"]
    run_in_process(event(cwd=str(repo)), env)
    scopes = [r.json()["scope_id"] for r in stub.requests if r.path.endswith("prepare")]
    assert scopes == ["git:example.com/acme/SENTINEL-scope", "bound"]
