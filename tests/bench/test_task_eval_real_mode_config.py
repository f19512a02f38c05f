"""The task evaluation's real-model mode, without hosts: how the user's variables become the
hosts' settings, the watcher that makes the citation task's concurrent revision, and the
citation check's order rule. The end-to-end run through the real CLIs against a local
stand-in endpoint is ``tests/e2e/test_task_eval_real_mode.py``.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from bench.task_eval import __main__ as cli
from bench.task_eval.harness import (
    CODEX_PROVIDER,
    PREPARE,
    Model,
    _watch_prepare,
)
from bench.task_eval.tasks import OLD_TAG, TASKS, TaskContext
from tests.support.hosts import CODEX_STUB_KEY_ENV

VARIABLES = (
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_BASE_URL",
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "POWERCONTEXT_EVAL_CLAUDE_MODEL",
    "POWERCONTEXT_EVAL_CODEX_MODEL",
    "POWERCONTEXT_EVAL_MODEL",
)


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in VARIABLES:
        monkeypatch.delenv(name, raising=False)


def _overrides(args: list[str]) -> dict[str, str]:
    """The ``-c key=value`` pairs of Codex arguments (a later one wins, as in Codex)."""
    pairs = [args[i + 1] for i, arg in enumerate(args) if arg == "-c"]
    return dict(pair.split("=", 1) for pair in pairs)


def test_anthropic_base_url_is_passed_as_is_with_the_default_when_unset(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    model = Model("anthropic", None)
    assert model.real_url() == "https://api.anthropic.com"
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "")
    assert model.real_url() == "https://api.anthropic.com"
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:4000/gateway")
    assert model.real_url() == "http://127.0.0.1:4000/gateway"
    assert model.host_args("claude-code") == []
    monkeypatch.setenv("POWERCONTEXT_EVAL_CLAUDE_MODEL", "claude-x")
    assert model.host_args("claude-code") == ["--model", "claude-x"]


@pytest.mark.parametrize(
    ("given", "base"),
    [
        (None, "https://api.openai.com/v1"),
        ("https://api.openai.com/v1", "https://api.openai.com/v1"),
        ("https://api.openai.com/v1/", "https://api.openai.com/v1"),
        ("http://127.0.0.1:8000/compat", "http://127.0.0.1:8000/compat"),
    ],
)
def test_openai_base_url_reaches_codex_exactly(
    monkeypatch: pytest.MonkeyPatch, given: str | None, base: str
) -> None:
    if given is not None:
        monkeypatch.setenv("OPENAI_BASE_URL", given)
    monkeypatch.setenv("POWERCONTEXT_EVAL_CODEX_MODEL", "gpt-x")
    args = Model("openai", None).host_args("codex")
    assert args[0] == "--dangerously-bypass-approvals-and-sandbox"
    settings = _overrides(args)
    assert json.loads(settings[f"model_providers.{CODEX_PROVIDER}.base_url"]) == base
    assert json.loads(settings["model"]) == "gpt-x"
    assert json.loads(settings["shell_environment_policy.exclude"]) == [CODEX_STUB_KEY_ENV]


def test_scripted_mode_keeps_the_ci_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POWERCONTEXT_EVAL_CLAUDE_MODEL", "claude-x")
    monkeypatch.setenv("POWERCONTEXT_EVAL_CODEX_MODEL", "gpt-x")
    model = Model("scripted", "http://127.0.0.1:9")
    assert model.host_args("claude-code") == []
    assert model.host_args("codex") == ["--dangerously-bypass-approvals-and-sandbox"]
    assert model.env("codex", Path("/nonexistent")) == {}


def test_the_key_goes_only_into_the_host_process_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-secret")
    env = Model("anthropic", None).env("claude-code", tmp_path)
    assert env["ANTHROPIC_API_KEY"] == "sk-ant-secret"
    guard = Path(env["CLAUDE_ENV_FILE"])  # sourced by Claude Code before every Bash command
    assert guard.read_text(encoding="utf-8") == "unset ANTHROPIC_API_KEY\n"
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai-secret")
    assert Model("openai", None).env("codex", tmp_path) == {CODEX_STUB_KEY_ENV: "sk-openai-secret"}
    for path in tmp_path.rglob("*"):
        assert b"secret" not in path.read_bytes()


def test_main_refuses_a_real_mode_without_its_key_or_model(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with pytest.raises(SystemExit, match="needs ANTHROPIC_API_KEY"):
        cli.main(["--model", "anthropic"])
    with pytest.raises(SystemExit, match="needs OPENAI_API_KEY"):
        cli.main(["--model", "openai"])
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai-secret")
    with pytest.raises(SystemExit, match="POWERCONTEXT_EVAL_CODEX_MODEL") as refused:
        cli.main(["--model", "openai"])
    assert "sk-openai-secret" not in str(refused.value)


def _append(log: Path, line: dict[str, object]) -> None:
    with open(log, "a", encoding="utf-8") as f:
        f.write(json.dumps(line) + "\n")


def _wait(condition: threading.Event, seconds: float = 5.0) -> bool:
    return condition.wait(seconds)


def test_the_watcher_fires_once_after_the_turns_prepare(tmp_path: Path) -> None:
    log = tmp_path / "runtime.log"
    _append(log, {"event": "http_request", "path": PREPARE})  # an earlier turn's prepare
    offset = log.stat().st_size
    fired = threading.Event()
    calls: list[float] = []

    def revise() -> None:
        calls.append(time.monotonic())
        fired.set()

    with _watch_prepare(log, offset, revise) as failures:
        _append(log, {"event": "http_request", "path": "/v1/memory/entries/list"})
        assert not _wait(fired, 0.3)  # no prepare of this turn yet
        _append(log, {"event": "http_request", "path": PREPARE})
        _append(log, {"event": "http_request", "path": PREPARE})
        assert _wait(fired)
        time.sleep(0.2)
    assert len(calls) == 1 and failures == []


def test_the_watcher_reports_a_failed_change_and_never_fires_without_a_prepare(
    tmp_path: Path,
) -> None:
    log = tmp_path / "runtime.log"
    log.write_text("", encoding="utf-8")

    def broken() -> None:
        raise RuntimeError("the runtime refused the revision")

    with _watch_prepare(log, 0, broken) as failures:
        _append(log, {"event": "http_request", "path": PREPARE})
        deadline = time.monotonic() + 5
        while not failures and time.monotonic() < deadline:
            time.sleep(0.05)
    assert failures == ["the during-turn change failed: RuntimeError"]

    called: list[bool] = []
    with _watch_prepare(log, log.stat().st_size, lambda: called.append(True)) as failures:
        time.sleep(0.3)  # a turn without a prepare (control, runtime down)
    assert called == [] and failures == []
    with _watch_prepare(log, 0, None) as failures:
        pass
    assert failures == []


def _citation(repo: Path, tag: str, paths: list[str]) -> tuple[bool, str]:
    (repo / "RELEASE_TAG.txt").write_text(tag + "\n", encoding="utf-8")
    ctx = TaskContext(scope="s", access=[{"path": p, "status": 200} for p in paths])
    if "/v1/memory/entries/revise" in paths:
        ctx.state["revised"] = {}
    result = TASKS["citation"].check(repo, ctx)
    return result.passed, result.detail


def test_the_citation_check_needs_the_re_read_after_the_revision(tmp_path: Path) -> None:
    prepare, revise, get = PREPARE, "/v1/memory/entries/revise", "/v1/memory/entries/get"
    passed, detail = _citation(tmp_path, OLD_TAG, [prepare, revise, get])
    assert passed and "re-read after the revision=True" in detail
    # Read before the head moved: the head said the same, so nothing proves an exact re-read.
    passed, detail = _citation(tmp_path, OLD_TAG, [prepare, get, revise])
    assert not passed and "re-read after the revision=False" in detail
    assert not _citation(tmp_path, OLD_TAG, [prepare, get])[0]  # never revised
    assert not _citation(tmp_path, "rel-2026-red-heron", [prepare, revise, get])[0]
