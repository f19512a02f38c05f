"""The kit's host-neutral install machinery (``powercontext_hook_kit.install``), which both
plugins' ``install``/``uninstall`` are built on: hook-document merging, our markers, the
managed plugin folder, atomic writes, and the ledger that lets uninstall restore exactly."""

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
    InstallError,
    InstallLedger,
    Report,
    atomic_write,
    hook_command,
    hook_command_verb,
    mcp_command,
    merge_hook_handlers,
    remove_hook_handlers,
    remove_managed_tree,
    render_plugin_files,
    sync_managed_tree,
)

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


def test_atomic_write_keeps_the_mode(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    atomic_write(path, b"{}", new_file_mode=0o600)
    assert path.stat().st_mode & 0o777 == 0o600
    os.chmod(path, 0o640)
    atomic_write(path, b'{"a": 1}')
    assert path.stat().st_mode & 0o777 == 0o640 and path.read_bytes() == b'{"a": 1}'
    assert [p.name for p in tmp_path.iterdir()] == ["settings.json"]  # no temp file left


def _ledger(tmp_path: Path, action: str) -> tuple[InstallLedger, Report]:
    report = Report("codex", "Codex CLI", action)
    path = tmp_path / "data" / "powercontext" / "hosts" / "codex" / "install-ledger.json"
    return InstallLedger(path, report, restoring=action == "uninstall"), report


def _mode(path: Path) -> int:
    return path.stat().st_mode & 0o7777


def test_one_backup_per_file_however_often_install_runs(tmp_path: Path) -> None:
    """Issue 16 item 6: the backup is the version from before PowerContext, made once and
    kept (not a new timestamped copy per run) until uninstall restores from it."""
    path = tmp_path / "home" / "settings.json"
    path.parent.mkdir()
    original = b'{"model":"opus"}'
    path.write_bytes(original)
    os.chmod(path, 0o644)
    for run in range(4):
        ledger, report = _ledger(tmp_path, "install")
        before = json.loads(path.read_bytes())
        report.add(ledger.write_json(path, before, {**before, "hooks": {"run": run}}, "merge"))
        ledger.settle()
        expected = ["backup", "updated"] if run == 0 else ["updated"]
        assert [c.action for c in report.changes] == expected
    assert sorted(path.parent.iterdir()) == [path, path.with_name("settings.json" + BACKUP_SUFFIX)]
    assert path.with_name("settings.json" + BACKUP_SUFFIX).read_bytes() == original


def test_uninstall_restores_bytes_and_mode_and_removes_what_install_created(
    tmp_path: Path,
) -> None:
    """What the host leaves after reversing its own registration — a re-serialised file,
    empty containers, mode 0600, a bookkeeping file it created, an empty folder — all goes
    back to exactly what was there before."""
    home = tmp_path / "home"
    config = home / "config.toml"
    home.mkdir()
    original = b'# mine\nmodel = "x"\n'
    config.write_bytes(original)
    os.chmod(config, 0o644)
    plugins = home / "plugins"
    ledger, _ = _ledger(tmp_path, "install")
    ledger.watch(plugins)
    ledger.before_change(config)
    # The host registers the plugin: rewrites config (0600), creates its own files.
    config.write_bytes(b'model = "x"\n[plugins."p@m"]\nenabled = true\n')
    os.chmod(config, 0o600)
    (plugins / "cache" / "m" / "p").mkdir(parents=True)
    (plugins / "known.json").write_text('{"m": {"path": "/x"}}')
    ledger.settle()
    assert _mode(config) == 0o644  # install already gives the file its mode back

    ledger, report = _ledger(tmp_path, "uninstall")
    # The host unregisters: what it leaves behind.
    config.write_bytes(b'model = "x"\n[plugins]\n')
    os.chmod(config, 0o600)
    (plugins / "cache" / "m" / "p").rmdir()
    (plugins / "known.json").write_text("{}")
    ledger.restore()
    assert config.read_bytes() == original and _mode(config) == 0o644
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["config.toml", "home"]
    actions = {(c.action, Path(c.target).name, c.detail) for c in report.changes}
    assert ("restored", "config.toml", "as before install") in actions
    assert ("removed", "plugins", "created by install (1 file)") in actions  # known.json
    assert ("removed", "data", "empty folder created by install") in actions  # the ledger's


def test_a_registry_the_host_rewrites_gets_its_backup_and_its_bytes_back(tmp_path: Path) -> None:
    """A user with other plugins already has the host's ``known_marketplaces.json``; the host
    CLI rewrites it to add ours and again to take ours out — its own way. Afterwards it holds
    the user's bytes again."""
    plugins = tmp_path / "home" / "plugins"
    plugins.mkdir(parents=True)
    registry = plugins / "known.json"
    original = b'{"theirs":{"path":"/t"}}'
    registry.write_bytes(original)
    ledger, report = _ledger(tmp_path, "install")
    ledger.watch(plugins)
    registry.write_text('{\n  "theirs": {"path": "/t"},\n  "ours": {"path": "/o"}\n}\n')
    ledger.settle()
    assert ("backup", str(registry)) in [(c.action, c.target) for c in report.changes]

    ledger, _ = _ledger(tmp_path, "uninstall")
    ledger.watch(plugins)
    registry.write_text('{\n  "theirs": {"path": "/t"}\n}\n')
    ledger.restore()
    assert registry.read_bytes() == original
    assert sorted(p.name for p in plugins.iterdir()) == ["known.json"]


def test_uninstall_never_loses_what_the_user_added_since_install(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    settings = home / "settings.json"
    settings.write_text('{"model":"opus"}')
    os.chmod(settings, 0o640)
    plugins = home / "plugins"
    ledger, _ = _ledger(tmp_path, "install")
    ledger.watch(plugins)
    ledger.before_change(settings)
    settings.write_text('{"model": "opus", "enabledPlugins": {"p@m": true}}')
    plugins.mkdir()
    (plugins / "installed.json").write_text('{"version": 2, "plugins": {"p@m": [1]}}')
    (plugins / "untouched.json").write_text('{"version": 2}')
    ledger.settle()

    ledger, report = _ledger(tmp_path, "uninstall")
    settings.write_text('{"model": "sonnet", "enabledPlugins": {}}')  # the user's change
    (plugins / "installed.json").write_text('{"version": 2, "plugins": {"theirs": [2]}}')
    ledger.restore()
    assert settings.read_text() == '{"model": "sonnet", "enabledPlugins": {}}'
    assert _mode(settings) == 0o640
    assert (plugins / "installed.json").exists()  # holds someone else's plugin now
    assert not (plugins / "untouched.json").exists()  # only install's content: gone
    assert not list(home.glob(f"*{BACKUP_SUFFIX}*"))  # the backup goes either way
    assert len(report.notes) == 2


def test_a_reinstall_never_counts_the_users_additions_as_ours(tmp_path: Path) -> None:
    """A file install created, which the user then added to: a later ``install`` (the host
    CLI rewriting it again) must not make the user's part look like ours — uninstall would
    delete the file with it."""
    created = tmp_path / "home" / "settings.json"
    created.parent.mkdir()
    ledger, _ = _ledger(tmp_path, "install")
    ledger.before_change(created)
    created.write_text('{"enabledPlugins": {"p@m": true}}')  # what the host CLI wrote
    ledger.settle()
    created.write_text('{"enabledPlugins": {"p@m": true}, "model": "mine"}')  # the user
    ledger, _ = _ledger(tmp_path, "install")
    ledger.before_change(created)
    created.write_text('{"enabledPlugins": {"p@m": true}, "model": "mine", "extra": {"m": 1}}')
    ledger.settle()

    ledger, report = _ledger(tmp_path, "uninstall")
    created.write_text('{"enabledPlugins": {}, "model": "mine", "extra": {}}')  # host reversal
    ledger.restore()
    assert json.loads(created.read_text()) == {"enabledPlugins": {}, "model": "mine", "extra": {}}
    assert any("holds settings added since" in note for note in report.notes)


def test_an_uninstall_without_a_ledger_makes_no_backup(tmp_path: Path) -> None:
    """An installation older than the ledger: uninstall still takes our entries out, and
    leaves no copy behind that nothing would ever restore from."""
    path = tmp_path / "hooks.json"
    path.write_text('{"hooks": {"Stop": []}, "x": 1}')
    ledger, report = _ledger(tmp_path, "uninstall")
    report.add(ledger.write_json(path, json.loads(path.read_text()), {"x": 1}, "removed ours"))
    ledger.restore()
    assert json.loads(path.read_text()) == {"x": 1}
    assert [c.action for c in report.changes] == ["updated"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hooks.json"]


#: The install package's modules, bottom layer first (its ``__init__`` docstring lists them).
INSTALL_LAYERS = [
    "report",
    "user_files",
    "ledger",
    "hook_commands",
    "hook_documents",
    "plugin_folder",
    "host_cli",
    "doctor",
    "integration",
    "cli",
]


def test_the_install_package_depends_one_way() -> None:
    """One module per concern, each importing only modules below it (issue 16 item 10), so a
    concern can be read — and changed — without the ones built on it."""
    import powercontext_hook_kit.install as package

    folder = Path(package.__file__).parent
    assert sorted(p.stem for p in folder.glob("*.py")) == sorted([*INSTALL_LAYERS, "__init__"])
    for index, name in enumerate(INSTALL_LAYERS):
        source = (folder / f"{name}.py").read_text("utf-8")
        for line in source.splitlines():
            if line.startswith("from .") and not line.startswith("from .."):
                imported = line.split()[1].lstrip(".")
                assert INSTALL_LAYERS.index(imported) < index, f"{name} imports {imported}"


def test_the_install_package_never_imports_the_runtime_or_httpx() -> None:
    """The kit's import-hygiene test (tests/hook_kit) reads only its top-level modules; the
    install package's modules keep the same rule."""
    import powercontext_hook_kit.install as package

    for source in Path(package.__file__).parent.glob("*.py"):
        for line in source.read_text(encoding="utf-8").splitlines():
            stripped = line.strip()
            if stripped.startswith(("import ", "from ")):
                assert "powercontext_runtime" not in stripped, source.name
                assert "httpx" not in stripped, source.name


def test_the_hook_command_is_absolute_and_isolated() -> None:
    argv = shlex.split(hook_command(MODULE, "user-prompt-submit"))
    assert os.path.isabs(argv[0]) and os.access(argv[0], os.X_OK)
    assert argv[1:] == ["-I", "-m", MODULE, "hook", "user-prompt-submit"]
    if sys.prefix != sys.base_prefix:  # a venv: always spelled <venv>/bin/python
        assert argv[0] == os.path.join(sys.prefix, "bin", "python")
    with pytest.raises(InstallError):
        hook_command(MODULE, "x", executable="/nonexistent/python")


def test_the_mcp_server_command_is_the_hooks_interpreter_without_a_shell() -> None:
    """``.mcp.json`` starts the bridge with the hooks' absolute interpreter and isolation flags,
    as an executable plus arguments (the hosts start MCP servers without a shell)."""
    executable, args = mcp_command(MODULE)
    hook = shlex.split(hook_command(MODULE, "user-prompt-submit"))
    assert executable == hook[0] and os.path.isabs(executable)
    assert args == [*hook[1 : hook.index("-m")], "-m", MODULE, "mcp"]
    with pytest.raises(InstallError):
        mcp_command(MODULE, executable="/nonexistent/python")


def test_a_json_string_that_is_one_placeholder_may_become_a_list(tmp_path: Path) -> None:
    (tmp_path / ".mcp.json").write_text(
        '{"s": {"command": "{{powercontext:c}}", "args": "{{powercontext:a}}",'
        ' "note": "x {{powercontext:c}}"}}',
        encoding="utf-8",
    )
    rendered = render_plugin_files(tmp_path, {"c": "/py", "a": ["-I", "-m", "m", "mcp"]})
    assert json.loads(rendered[".mcp.json"]) == {
        "s": {"command": "/py", "args": ["-I", "-m", "m", "mcp"], "note": "x /py"}
    }
