"""The rest of ``powercontext-claude-code``: ``bind``, ``hook``, exit codes, the lean hook path
and the packaged plugin folder."""

from __future__ import annotations

import glob
import json
import subprocess
import sys
import tomllib
from importlib.resources import files
from pathlib import Path

from powercontext_claude_code.integration import ClaudeCodeIntegration
from powercontext_hook_kit import explain_scope
from powercontext_hook_kit.install import HOOK_TIMEOUT_SECONDS
from tests.claude_code.conftest import MODULE, ClaudeSandbox

ROOT = Path(__file__).resolve().parents[2]


def test_bind_sets_and_clears_the_scope(sandbox: ClaudeSandbox) -> None:
    remote = explain_scope(str(sandbox.repo))
    assert remote is not None and remote[1] == "remote"
    done = sandbox.run("bind", "team:shop")
    assert done.returncode == 0 and done.stdout.startswith("bind: bound to team:shop")
    assert explain_scope(str(sandbox.repo)) == ("team:shop", "binding")
    noted = sandbox.run("bind", "team:other", POWERCONTEXT_SCOPE_ID="env:scope")
    assert "overrides the binding" in noted.stdout
    assert sandbox.run_json("bind", "--clear")["action"] == "cleared"
    assert explain_scope(str(sandbox.repo)) == remote


def test_usage_errors_exit_2_and_hooks_always_exit_0(sandbox: ClaudeSandbox) -> None:
    assert sandbox.run().returncode == 2
    assert sandbox.run("doctor", "--bogus").returncode == 2
    for stdin in ("", "{", '{"hook_event_name": "Stop", "prompt": "x"}'):
        done = sandbox.run("hook", "user-prompt-submit", stdin=stdin)
        assert (done.returncode, done.stdout) == (0, ""), stdin


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
    line = json.loads(done.stderr)
    assert (line["component"], line["outcome"]) == (
        "powercontext.claude-code.user-prompt-submit",
        "skipped",
    )
    loaded = set(done.stdout.split())
    lazy = ("argparse", "subprocess", "powercontext_hook_kit.install", f"{MODULE}.integration")
    assert not loaded.intersection(lazy)


def test_the_plugin_folder_is_package_data() -> None:
    """setuptools' globs skip dot-names, so every template file must match a listed pattern
    (verified against a built wheel: `.claude-plugin/` and `.mcp.json` are in it)."""
    pyproject = tomllib.loads((ROOT / "claude_code_plugin" / "pyproject.toml").read_text("utf-8"))
    patterns = pyproject["tool"]["setuptools"]["package-data"][MODULE]
    package = Path(str(files(MODULE)))
    template = package / "plugin"
    matched = {
        Path(path).relative_to(template).as_posix()
        for pattern in patterns
        for path in glob.glob(str(package / pattern))
        if Path(path).is_file()
    }
    on_disk = {p.relative_to(template).as_posix() for p in template.rglob("*") if p.is_file()}
    assert matched == on_disk
    assert {".claude-plugin/plugin.json", ".mcp.json", "hooks/hooks.json"} <= matched
    scripts = pyproject["project"]["scripts"]
    assert scripts == {"powercontext-claude-code": f"{MODULE}.__main__:main"}


def test_the_template_registers_user_prompt_submit_and_offers_the_settings() -> None:
    plugin = files(MODULE) / "plugin"
    hooks = json.loads((plugin / "hooks" / "hooks.json").read_text("utf-8"))
    assert set(hooks["hooks"]) == {"SessionStart", "UserPromptSubmit", "Stop"}
    (start,) = hooks["hooks"]["SessionStart"]  # no matcher: every source, fork included
    assert start == {
        "hooks": [
            {
                "type": "command",
                "command": "{{powercontext:hook-command:session-start}}",
                "timeout": HOOK_TIMEOUT_SECONDS,
            }
        ]
    }
    (group,) = hooks["hooks"]["UserPromptSubmit"]
    assert group["hooks"] == [
        {
            "type": "command",
            "command": "{{powercontext:hook-command:user-prompt-submit}}",
            "timeout": HOOK_TIMEOUT_SECONDS,
        }
    ]
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
    manifest = json.loads((plugin / ".claude-plugin" / "plugin.json").read_text("utf-8"))
    options = manifest["userConfig"]
    # Every option is a kit setting (CLAUDE_PLUGIN_OPTION_<KEY>); none has a default, which
    # Claude Code would export and so shadow plugins.toml.
    assert set(options) == {
        "url",
        "token",
        "scope_id",
        "bootstrap",
        "capture_prompts",
        "capture_spool",
        "max_bytes",
    }
    assert options["bootstrap"]["type"] == "boolean"  # CLAUDE_PLUGIN_OPTION_BOOTSTRAP
    assert options["capture_spool"]["type"] == "boolean"  # …_OPTION_CAPTURE_SPOOL
    assert all("default" not in option for option in options.values())
    assert options["token"]["sensitive"] is True


def test_claude_code_recognises_only_its_own_entries() -> None:
    integration = ClaudeCodeIntegration()
    ours = f"/v/bin/python -I -m {MODULE} hook user-prompt-submit"
    assert integration.is_ours({"type": "command", "command": ours}) == "user-prompt-submit"
    codex = "/v/bin/python -I -m powercontext_codex hook user-prompt-submit"
    assert integration.is_ours({"type": "command", "command": codex}) is None
    assert integration.is_ours({"type": "prompt", "command": ours}) is None
