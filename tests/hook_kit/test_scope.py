"""Scope resolution: one rule for both hosts, from override down to a local hash."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import unicodedata
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
from powercontext_hook_kit import scope as scope_module
from powercontext_hook_kit.scope import _git_timeout, _origin_url_from_config
from powercontext_hook_kit.transport import Deadline
from tests.hook_kit.conftest import event, finishes, hook_env, run_in_process
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


REFUSED = {"Cc", "Cf", "Cs", "Zl", "Zp"}


@pytest.mark.parametrize(
    "remote",
    [
        "https://github.com/acme/pay\u200bments.git",  # zero-width space: looks like "payments"
        "git@github.com:acme/\u202estnemyap.git",  # right-to-left override: displays reversed
        "https://github.com/acme/repo\u2066x\u2069",
        "https://github.com/acme/re\u2028po",
        "https://github.com/acme/\ufeffrepo",
        "https://github.com/acme/re\udc80po",  # an undecodable byte in .git/config
    ],
)
def test_invisible_and_bidi_characters_in_a_remote_are_hashed(remote: str) -> None:
    """Decision (docs/configuration.md): such a remote still gets its own stable scope, shared
    by all its clones, but as ``git:sha256:<hex>`` of the would-be id — never a readable id
    that passes for another repository's, and never the characters stripped (which would make
    ``pay\u200bments`` and ``payments`` one scope)."""
    scope = normalize_remote_url(remote)
    assert scope is not None and scope.startswith("git:sha256:")
    stripped = "".join(ch for ch in remote if unicodedata.category(ch) not in REFUSED)
    assert scope != normalize_remote_url(stripped)
    assert normalize_remote_url(remote) == scope  # deterministic


def test_a_remote_with_bidi_characters_is_hashed_in_the_hook(
    stub: StubRuntime, tmp_path: Path
) -> None:
    repo = make_repo(tmp_path / "r", "https://github.com/acme/pay\u200bments.git")
    env = hook_env(stub.url, tmp_path / "data")
    del env["POWERCONTEXT_SCOPE_ID"]
    run_in_process(event(cwd=str(repo)), env)
    (request,) = [r for r in stub.requests if r.path.endswith("prepare")]
    expected = hashlib.sha256("git:github.com/acme/pay\u200bments".encode()).hexdigest()
    assert request.json()["scope_id"] == f"git:sha256:{expected}"


def test_a_binding_with_bidi_characters_is_refused(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r")
    with pytest.raises(ScopeError):
        bind(str(repo), "team:pay\u202ements")
    (repo / ".git" / "powercontext").mkdir()
    (repo / ".git" / "powercontext" / "workspace.json").write_text(
        json.dumps({"schema": "powercontext.workspace.v1", "scope_id": "team:\u200bx"})
    )
    with pytest.raises(ScopeError):
        resolve_scope(str(repo))


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


# --- nothing in the project can block the hook -----------------------------------------------


def _resolve(path: Path, fifos: list[Path], seconds: float = 5.0) -> object:
    """``resolve_scope`` under a deadline; asserts it returns (or raises) instead of hanging."""
    done, result = finishes(
        lambda: resolve_scope(str(path), deadline=Deadline.after(seconds)), fifos
    )
    assert done, "scope resolution blocked"
    return result


def _fifo(path: Path) -> Path:
    if path.exists() or path.is_symlink():
        if path.is_dir():
            shutil.rmtree(path)
        else:
            path.unlink()
    os.mkfifo(path)
    return path


REMOTE = "git@github.com:Owner/Repo.git"


def test_a_fifo_as_git_config_reads_as_no_remote(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r", REMOTE)
    fifo = _fifo(repo / ".git" / "config")
    assert _resolve(repo, [fifo]) == local(repo)


def test_a_fifo_as_dot_git_is_not_a_repository(tmp_path: Path) -> None:
    folder = tmp_path / "plain"
    folder.mkdir()
    fifo = _fifo(folder / ".git")
    assert _resolve(folder, [fifo]) == local(folder)


def test_a_git_file_pointing_at_a_fifo_is_not_a_repository(tmp_path: Path) -> None:
    folder = tmp_path / "plain"
    folder.mkdir()
    fifo = _fifo(tmp_path / "pointed-at")
    (folder / ".git").write_text(f"gitdir: {fifo}\n")
    assert _resolve(folder, [fifo]) == local(folder)


def test_a_fifo_as_commondir_is_ignored(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r", REMOTE)
    fifo = _fifo(repo / ".git" / "commondir")
    assert _resolve(repo, [fifo]) == "git:github.com/Owner/Repo"


def test_fifos_as_head_and_a_worktree_gitdir_are_never_opened(tmp_path: Path) -> None:
    """``HEAD`` is only ``stat``-ed, and a linked worktree's ``gitdir`` back-pointer never read."""
    main = make_repo(tmp_path / "main", REMOTE)
    admin = main / ".git" / "worktrees" / "wt"
    admin.mkdir(parents=True)
    (admin / "HEAD").write_text("ref: refs/heads/wt\n")
    (admin / "commondir").write_text("../..\n")
    worktree = tmp_path / "wt"
    worktree.mkdir()
    (worktree / ".git").write_text(f"gitdir: {admin}\n")
    fifos = [_fifo(admin / "gitdir"), _fifo(main / ".git" / "HEAD")]
    assert _resolve(worktree, fifos) == "git:github.com/Owner/Repo"
    assert _resolve(main, fifos) == "git:github.com/Owner/Repo"


def test_a_fifo_as_the_binding_is_a_corrupt_binding(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r", REMOTE)
    (repo / ".git" / "powercontext").mkdir()
    fifo = _fifo(repo / ".git" / "powercontext" / "workspace.json")
    assert isinstance(_resolve(repo, [fifo]), ScopeError)


def test_a_symlinked_binding_is_refused(tmp_path: Path) -> None:
    """``bind`` only writes regular files; a symlink there was put by someone else."""
    repo = make_repo(tmp_path / "r", REMOTE)
    (repo / ".git" / "powercontext").mkdir()
    target = tmp_path / "elsewhere.json"
    target.write_text(json.dumps({"schema": "powercontext.workspace.v1", "scope_id": "x"}))
    (repo / ".git" / "powercontext" / "workspace.json").symlink_to(target)
    with pytest.raises(ScopeError):
        resolve_scope(str(repo))


@pytest.mark.parametrize("name", ["config", "powercontext/workspace.json", "commondir"])
def test_directories_and_devices_in_place_of_files_do_not_block(tmp_path: Path, name: str) -> None:
    repo = make_repo(tmp_path / "r", REMOTE)
    target = repo / ".git" / name
    target.parent.mkdir(exist_ok=True)
    if target.exists():
        target.unlink()
    target.symlink_to("/dev/zero")  # endless if read; a character device, not a regular file
    result = _resolve(repo, [])
    if name == "powercontext/workspace.json":
        assert isinstance(result, ScopeError)
    elif name == "config":
        assert result == local(repo)
    else:
        assert result == "git:github.com/Owner/Repo"


@needs_git
def test_a_fifo_as_an_included_config_is_bounded_by_the_deadline(tmp_path: Path) -> None:
    """``git`` blocks on the FIFO; it is killed within the hook's deadline and the prompt goes
    unscoped (skipped) — never a scope that depends on how long git happened to take."""
    repo = tmp_path / "r"
    repo.mkdir()
    git("init", "-q", cwd=repo)
    fifo = _fifo(tmp_path / "extra.config")
    with (repo / ".git" / "config").open("a") as handle:
        handle.write(f"[include]\n\tpath = {fifo}\n")
    assert isinstance(_resolve(repo, [fifo], seconds=2.0), ScopeError)


def test_git_gets_at_most_half_of_the_remaining_deadline() -> None:
    assert _git_timeout(None) == 0.5
    assert _git_timeout(Deadline.after(30)) == 0.5
    assert _git_timeout(Deadline.after(0.4)) <= 0.2
    assert _git_timeout(Deadline.after(-1)) < 0


def test_git_is_not_started_without_time_left(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = make_repo(tmp_path / "r")
    with (repo / ".git" / "config").open("a") as handle:
        handle.write("[include]\n\tpath = /elsewhere\n")
    started: list[object] = []
    import subprocess as real_subprocess

    monkeypatch.setattr(real_subprocess, "run", lambda *a, **k: started.append(a))
    deadline = Deadline.after(0.001)
    while not deadline.expired:
        pass
    with pytest.raises(ScopeError):
        resolve_scope(str(repo), deadline=deadline)
    assert started == []
    monkeypatch.undo()
    # Without a deadline (doctor, bind) git is asked as before.
    assert scope_module.explain_scope(str(repo)) == (local(repo), "local")


def test_an_expired_deadline_stops_the_walk(tmp_path: Path) -> None:
    deep = tmp_path / "a" / "b" / "c"
    deep.mkdir(parents=True)
    with pytest.raises(ScopeError):
        find_repository(str(deep), Deadline.after(-1))
    assert find_repository(str(deep)) is None
