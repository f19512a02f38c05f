"""The rest of ``powercontext-codex``: ``bind``, ``hook``, exit codes, the lean hook path and
the packaged plugin folder."""

from __future__ import annotations

import glob
import json
import subprocess
import sys
import tomllib
from importlib.resources import files
from pathlib import Path

import pytest

from powercontext_codex.integration import CodexIntegration
from powercontext_hook_kit import explain_scope
from powercontext_hook_kit.install import HOOK_TIMEOUT_SECONDS, hook_command_verb
from tests.codex.conftest import MODULE, CodexSandbox

ROOT = Path(__file__).resolve().parents[2]


def test_bind_pins_sets_and_clears_the_scope(sandbox: CodexSandbox) -> None:
    remote_scope = explain_scope(str(sandbox.repo))
    assert remote_scope is not None and remote_scope[1] == "remote"

    pinned = sandbox.run_json("bind")
    assert pinned["scope_id"] == remote_scope[0]
    assert explain_scope(str(sandbox.repo)) == (remote_scope[0], "binding")

    chosen = sandbox.run_json("bind", "team:shop")
    assert Path(chosen["binding"]) == sandbox.repo / ".git" / "powercontext" / "workspace.json"
    subdir = sandbox.repo / "src"
    subdir.mkdir()
    assert explain_scope(str(subdir)) == ("team:shop", "binding")
    assert sandbox.run_json("bind", "--clear")["action"] == "cleared"
    assert explain_scope(str(sandbox.repo)) == remote_scope
    assert sandbox.run_json("bind", "--clear")["action"] == "unchanged"


def test_bind_refuses_what_it_cannot_do(sandbox: CodexSandbox, tmp_path: Path) -> None:
    outside = tmp_path / "not-a-repo"
    outside.mkdir()
    done = sandbox.run("bind", "team:x", cwd=outside)
    assert done.returncode == 1 and "not inside a git repository" in done.stderr
    bad = sandbox.run("bind", " padded ")
    assert bad.returncode == 1 and "whitespace" in bad.stderr
    both = sandbox.run("bind", "x", "--clear")
    assert both.returncode == 1


def test_usage_errors_exit_2_and_hooks_always_exit_0(sandbox: CodexSandbox) -> None:
    assert sandbox.run().returncode == 2
    assert sandbox.run("frobnicate").returncode == 2
    assert sandbox.run("install", "--bogus").returncode == 2
    for stdin in ("", "not json", "[]", '{"hook_event_name": "SessionStart"}'):
        done = sandbox.run("hook", "user-prompt-submit", stdin=stdin)
        assert (done.returncode, done.stdout) == (0, ""), stdin
    for stdin in ("", "not json", '{"hook_event_name": "UserPromptSubmit"}'):
        done = sandbox.run("hook", "session-start", stdin=stdin)
        assert (done.returncode, done.stdout) == (0, ""), stdin
    unknown = sandbox.run("hook", "no-such-hook", stdin="{}")
    assert (unknown.returncode, unknown.stdout) == (0, "")


def test_invalid_settings_never_block_a_prompt(sandbox: CodexSandbox) -> None:
    """A broken setting is a diagnostic line, never a blocked prompt."""
    event = {"cwd": str(sandbox.repo), "hook_event_name": "UserPromptSubmit", "prompt": "hi"}
    done = sandbox.run(
        "hook", "user-prompt-submit", stdin=json.dumps(event), POWERCONTEXT_MAX_BYTES="lots"
    )
    assert (done.returncode, done.stdout) == (0, "")
    assert json.loads(done.stderr)["outcome"] == "skipped"


def test_the_hook_path_stays_lean() -> None:
    """`hook` imports neither argparse, subprocess nor the install machinery."""
    code = (
        "import io, sys\n"
        "sys.stdin = io.TextIOWrapper(io.BytesIO(b''))\n"
        f"from {MODULE}.__main__ import main\n"
        "main(['hook', 'user-prompt-submit'])\n"
        "print(' '.join(sorted(sys.modules)))\n"
    )
    done = subprocess.run(
        [sys.executable, "-I", "-c", code], capture_output=True, text=True, timeout=60
    )
    assert json.loads(done.stderr)["outcome"] == "skipped"  # the hook did run
    loaded = set(done.stdout.split())
    assert "powercontext_hook_kit.runner" in loaded
    lazy = ("argparse", "subprocess", "powercontext_hook_kit.install", f"{MODULE}.integration")
    assert not loaded.intersection(lazy)


def _template_files() -> list[str]:
    root = Path(str(files(MODULE) / "plugin"))
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())


def test_the_plugin_folder_is_package_data() -> None:
    """setuptools' globs skip dot-names, so every template file must match a listed pattern
    (verified against a built wheel: `.codex-plugin/` and `.mcp.json` are in it)."""
    pyproject = tomllib.loads((ROOT / "codex_plugin" / "pyproject.toml").read_text("utf-8"))
    patterns = pyproject["tool"]["setuptools"]["package-data"][MODULE]
    package = Path(str(files(MODULE)))
    matched = {
        Path(path).relative_to(package / "plugin").as_posix()
        for pattern in patterns
        for path in glob.glob(str(package / pattern))
        if Path(path).is_file()
    }
    assert matched == set(_template_files())
    assert {".codex-plugin/plugin.json", ".mcp.json", "hooks/hooks.json"} <= matched
    scripts = pyproject["project"]["scripts"]
    assert scripts == {"powercontext-codex": f"{MODULE}.__main__:main"}


def test_the_template_registers_session_start_and_user_prompt_submit() -> None:
    """One entry per event, no matcher (SessionStart: every source); timeouts are integers."""
    hooks = json.loads((files(MODULE) / "plugin" / "hooks" / "hooks.json").read_text("utf-8"))
    assert set(hooks) == {"hooks"} and set(hooks["hooks"]) == {
        "SessionStart",
        "UserPromptSubmit",
        "Stop",
    }
    (start,) = hooks["hooks"]["SessionStart"]
    assert start == {
        "hooks": [
            {
                "type": "command",
                "command": "{{powercontext:hook-command:session-start}}",
                "timeout": HOOK_TIMEOUT_SECONDS,
            }
        ]
    }
    assert type(start["hooks"][0]["timeout"]) is int
    (group,) = hooks["hooks"]["UserPromptSubmit"]
    (handler,) = group["hooks"]
    assert handler == {
        "type": "command",
        "command": "{{powercontext:hook-command:user-prompt-submit}}",
        "timeout": HOOK_TIMEOUT_SECONDS,
        "additionalContextLimit": 8192,  # tokens: covers the 32768-byte max_bytes
    }
    (stop,) = hooks["hooks"]["Stop"]  # end of turn: the task result (issue #31)
    assert stop == {
        "hooks": [
            {
                "type": "command",
                "command": "{{powercontext:hook-command:stop}}",
                "timeout": HOOK_TIMEOUT_SECONDS,
            }
        ]
    }
    manifest = json.loads(
        (files(MODULE) / "plugin" / ".codex-plugin" / "plugin.json").read_text("utf-8")
    )
    assert manifest["name"] == "powercontext"


@pytest.mark.parametrize(
    ("command", "verb"),
    [
        ("/v/bin/python -I -m powercontext_codex hook user-prompt-submit", "user-prompt-submit"),
        ("'/a b/python' -E -P -m powercontext_codex hook session-start", "session-start"),
        ("/usr/local/bin/powercontext-codex hook user-prompt-submit", "user-prompt-submit"),
        ("python -m powercontext_claude_code hook user-prompt-submit", None),
        ("echo powercontext_codex hook user-prompt-submit", None),
        ("unbalanced 'quote", None),
    ],
)
def test_our_entries_are_recognised_by_their_command(command: str, verb: str | None) -> None:
    assert hook_command_verb(command, MODULE, "powercontext-codex") == verb
    assert CodexIntegration().is_ours({"type": "command", "command": command}) == verb
