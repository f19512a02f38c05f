"""The kit's host-neutral install machinery (``powercontext_hook_kit.install``), which both
plugins' ``install``/``uninstall`` are built on: hook-document merging, our markers, the
managed plugin folder, atomic writes and backups."""

from __future__ import annotations

import copy
import json
import os
import shlex
import sys
from pathlib import Path
from typing import Any

import pytest

from powercontext_hook_kit.install import (
    BACKUP_SUFFIX,
    FileBackups,
    InstallError,
    Report,
    atomic_write,
    hook_command,
    hook_command_verb,
    mcp_url,
    merge_hook_handlers,
    remove_hook_handlers,
    remove_managed_tree,
    render_plugin_files,
    sync_managed_tree,
)
from powercontext_hook_kit.settings import HookSettings

MODULE = "powercontext_codex"
OURS = f"/venv/bin/python -I -m {MODULE} hook user-prompt-submit"
OURS_SESSION = f"/venv/bin/python -I -m {MODULE} hook session-start"


def is_ours(handler: Any) -> str | None:
    return hook_command_verb(handler.get("command"), MODULE)


def handler(command: str, **extra: Any) -> dict[str, Any]:
    return {"type": "command", "command": command, **extra}


WANTED = {"UserPromptSubmit": [handler(OURS, timeout=10)]}


def test_merge_into_nothing_creates_the_hooks_table() -> None:
    assert merge_hook_handlers(None, WANTED, is_ours) == {
        "hooks": {"UserPromptSubmit": [{"hooks": [handler(OURS, timeout=10)]}]}
    }


def test_merge_keeps_everything_else_in_place() -> None:
    document = {
        "model": "x",
        "hooks": {
            "SessionStart": [{"matcher": "startup", "hooks": [handler("echo a")]}],
            "UserPromptSubmit": [{"hooks": [handler("echo b"), handler("echo c")]}],
        },
    }
    original = copy.deepcopy(document)
    merged = merge_hook_handlers(document, WANTED, is_ours)
    assert document == original  # input untouched
    assert merged["model"] == "x"
    assert merged["hooks"]["SessionStart"] == original["hooks"]["SessionStart"]
    assert merged["hooks"]["UserPromptSubmit"] == [
        original["hooks"]["UserPromptSubmit"][0],
        {"hooks": [handler(OURS, timeout=10)]},
    ]
    assert merge_hook_handlers(merged, WANTED, is_ours) == merged  # idempotent


def test_merge_updates_ours_in_place_and_drops_duplicates_and_stale_ones() -> None:
    old = f"/old/python -I -m {MODULE} hook user-prompt-submit"
    document = {
        "hooks": {
            "UserPromptSubmit": [
                {"hooks": [handler("echo first"), handler(old, timeout=3)]},
                {"hooks": [handler(old)]},
                {"hooks": [handler("echo last")]},
            ],
            "SessionStart": [{"hooks": [handler(OURS_SESSION)]}],
        }
    }
    merged = merge_hook_handlers(document, WANTED, is_ours)
    assert merged == {
        "hooks": {
            "UserPromptSubmit": [
                {"hooks": [handler("echo first"), handler(OURS, timeout=10)]},
                {"hooks": [handler("echo last")]},
            ]
        }
    }


def test_remove_takes_out_only_our_handlers() -> None:
    document = {
        "other": True,
        "hooks": {
            "UserPromptSubmit": [
                {"hooks": [handler("echo keep"), handler(OURS)]},
                {"hooks": [handler(OURS)]},
            ],
            "SessionStart": [{"hooks": [handler(OURS_SESSION)]}],
            "Stop": [],
        },
    }
    assert remove_hook_handlers(document, is_ours) == {
        "other": True,
        "hooks": {"UserPromptSubmit": [{"hooks": [handler("echo keep")]}], "Stop": []},
    }
    only_ours = merge_hook_handlers(None, WANTED, is_ours)
    assert remove_hook_handlers(only_ours, is_ours) == {}
    assert remove_hook_handlers({"hooks": {}}, is_ours) == {"hooks": {}}
    assert remove_hook_handlers(None, is_ours) is None


@pytest.mark.parametrize("bad", [{"hooks": []}, {"hooks": "x"}, {"hooks": {"UserPromptSubmit": 1}}])
def test_a_malformed_hooks_table_is_refused(bad: dict[str, Any]) -> None:
    with pytest.raises(InstallError):
        merge_hook_handlers(bad, WANTED, is_ours)


def test_render_substitutes_inside_json_strings(tmp_path: Path) -> None:
    (tmp_path / ".meta").mkdir()
    (tmp_path / ".meta" / "p.json").write_text(
        '{"command": "{{powercontext:hook-command:x}}", "n": 1}', encoding="utf-8"
    )
    (tmp_path / "README.md").write_text("run {{powercontext:script}}\n", encoding="utf-8")
    tricky = '/a "b"/c\\d -m m hook x'
    rendered = render_plugin_files(
        tmp_path,
        {"hook-command:x": tricky, "script": "pc"},
        extra_files={"skills/s/SKILL.md": "{{powercontext:script}} doctor"},
    )
    assert json.loads(rendered[".meta/p.json"]) == {"command": tricky, "n": 1}
    assert rendered["README.md"] == b"run pc\n"
    assert rendered["skills/s/SKILL.md"] == b"pc doctor"
    with pytest.raises(InstallError, match="placeholder"):
        render_plugin_files(tmp_path, {"script": "pc"})


def test_the_managed_folder_is_synced_exactly_and_only_when_ours(tmp_path: Path) -> None:
    root = tmp_path / "market"
    created = sync_managed_tree(root, {"a.json": b"1", "d/.b": b"2"}, "codex")
    assert created is not None and created.action == "created"
    assert sync_managed_tree(root, {"a.json": b"1", "d/.b": b"2"}, "codex") is None
    updated = sync_managed_tree(root, {"a.json": b"3"}, "codex")
    assert updated is not None and updated.detail == "a.json, d/.b"
    assert sorted(p.name for p in root.rglob("*")) == [".powercontext-managed.json", "a.json"]
    assert remove_managed_tree(root) is not None and not root.exists()

    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "x").write_text("keep")
    with pytest.raises(InstallError, match="not created by PowerContext"):
        sync_managed_tree(foreign, {"a": b"1"}, "codex")
    with pytest.raises(InstallError):
        remove_managed_tree(foreign)
    assert (foreign / "x").read_text() == "keep"


def test_atomic_write_keeps_the_mode_and_backups_are_bounded(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    atomic_write(path, b"{}", new_file_mode=0o600)
    assert path.stat().st_mode & 0o777 == 0o600
    os.chmod(path, 0o640)
    atomic_write(path, b'{"a": 1}')
    assert path.stat().st_mode & 0o777 == 0o640 and path.read_bytes() == b'{"a": 1}'
    assert [p.name for p in tmp_path.iterdir()] == ["settings.json"]  # no temp file left

    for _ in range(12):
        report = Report("codex", "Codex CLI", "install")
        backups = FileBackups(report)
        first = backups.before_change(path)
        assert backups.before_change(path) == first  # once per run
        assert [c.action for c in report.changes] == ["backup"]
    kept = sorted(tmp_path.glob(f"settings.json{BACKUP_SUFFIX}*"))
    assert len(kept) == 10
    assert FileBackups(Report("codex", "x", "install")).before_change(tmp_path / "none") is None


def test_the_hook_command_is_absolute_and_isolated() -> None:
    argv = shlex.split(hook_command(MODULE, "user-prompt-submit"))
    assert os.path.isabs(argv[0]) and os.access(argv[0], os.X_OK)
    assert argv[1:] == ["-I", "-m", MODULE, "hook", "user-prompt-submit"]
    if sys.prefix != sys.base_prefix:  # a venv: always spelled <venv>/bin/python
        assert argv[0] == os.path.join(sys.prefix, "bin", "python")
    with pytest.raises(InstallError):
        hook_command(MODULE, "x", executable="/nonexistent/python")


@pytest.mark.skipif(os.name != "posix", reason="the unix socket default is POSIX-only")
def test_the_mcp_url_is_http_even_when_hooks_use_the_socket(tmp_path: Path) -> None:
    """The hosts' MCP clients speak HTTP over TCP: a ``unix:`` hook URL (the default) renders
    the runtime's TCP listener into ``.mcp.json``; a configured loopback URL is kept."""
    config = str(tmp_path / "missing.toml")
    home = {"POWERCONTEXT_HOME": str(tmp_path / "pc-home")}
    by_socket = HookSettings.load("codex", home, config_path=config)
    assert by_socket.url.startswith("unix:")
    assert mcp_url(by_socket) == "http://127.0.0.1:7411/mcp"
    by_tcp = HookSettings.load(
        "codex", {**home, "POWERCONTEXT_URL": "http://127.0.0.1:9000/"}, config_path=config
    )
    assert mcp_url(by_tcp) == "http://127.0.0.1:9000/mcp"
