"""The real Claude Code and Codex CLIs run our hooks and forward their context byte-for-byte.

Each test runs one non-interactive turn of a real host (npm-installed, pinned) against a local
model stub, with a probe hook (not PowerContext's plugins) that logs its stdin and prints a
known ``additionalContext``. Verified facts are written up in
``docs/decisions/real-host-facts.md``.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from tests.hosts.conftest import record_timing
from tests.support.hosts import (
    CODEX_VERSION,
    HOOK_EVENTS,
    STUB_REPLY_TEXT,
    AnthropicStub,
    BlackholeProxy,
    CompletedRun,
    HostCLIs,
    HostInstallError,
    OpenAIResponsesStub,
    ProbeHook,
    RecordedRequest,
    codex_hooks_list,
    codex_trust_toml,
    ensure_host_clis,
    hosts_unavailable_reason,
    install_claude_plugin,
    install_codex_plugin,
    locate_text,
    prepare_codex_home,
    run_claude,
    run_codex,
    write_claude_marketplace,
    write_codex_marketplace,
    write_probe_hook,
    write_probe_plugin,
)

PROMPT = 'hello from the harness — ünïcödé ✓ "quoted"'

#: The exact stdin keys each host sends (pinned versions: a change here is a host change).
STDIN_KEYS = {
    ("claude", "SessionStart"): {
        "session_id",
        "transcript_path",
        "cwd",
        "hook_event_name",
        "source",
    },
    ("claude", "UserPromptSubmit"): {
        "session_id",
        "transcript_path",
        "cwd",
        "prompt_id",
        "permission_mode",
        "hook_event_name",
        "prompt",
    },
    ("codex", "SessionStart"): {
        "session_id",
        "transcript_path",
        "cwd",
        "hook_event_name",
        "model",
        "permission_mode",
        "source",
    },
    ("codex", "UserPromptSubmit"): {
        "session_id",
        "turn_id",
        "transcript_path",
        "cwd",
        "hook_event_name",
        "model",
        "permission_mode",
        "prompt",
    },
}

HANG_TIMEOUT_S = 2
HANG_BOUND_S = 25.0


def _workdir(tmp_path: Path) -> Path:
    cwd = tmp_path / "work"
    cwd.mkdir()
    return cwd


def _only_model_request(stub: AnthropicStub | OpenAIResponsesStub) -> RecordedRequest:
    requests = stub.model_requests()
    assert len(requests) == 1, stub.summary()
    return requests[0]


def _assert_completed(run: CompletedRun) -> None:
    assert run.returncode == 0, run.describe()
    assert STUB_REPLY_TEXT in run.stdout, run.describe()


def _assert_context_absent(request: RecordedRequest, probe: ProbeHook) -> None:
    body = request.body.decode("utf-8")
    for event in HOOK_EVENTS:
        assert not locate_text(request, probe.contexts[event])
        assert f"PCTX-SENTINEL-{event}" not in body


def _assert_claude_context(request: RecordedRequest, probe: ProbeHook) -> None:
    """Claude Code 2.1.328 puts hook context into one ``role: "system"`` message after the
    first user message, each as ``"<Event> hook additional context: <text>\\n\\n…"``."""
    for event in HOOK_EVENTS:
        context = probe.contexts[event]
        places = locate_text(request, context)
        assert len(places) == 1, (event, places)
        assert places[0]["field"] == "messages" and places[0]["role"] == "system"
        message = request.json()["messages"][places[0]["index"]]
        text = message["content"][places[0]["block"]]["text"]
        assert f"{event} hook additional context: {context}\n" in text


def _assert_codex_context(request: RecordedRequest, probe: ProbeHook) -> None:
    """Codex 0.169.0 adds each hook context as its own ``developer`` message whose only
    ``input_text`` is exactly the context: SessionStart before the user prompt, UserPromptSubmit
    right after it."""
    items = request.json()["input"]
    prompt_index = next(
        i
        for i, item in enumerate(items)
        if item.get("role") == "user" and item["content"][0].get("text") == PROMPT
    )
    for event, expect_index in (
        ("SessionStart", prompt_index - 1),
        ("UserPromptSubmit", prompt_index + 1),
    ):
        places = locate_text(request, probe.contexts[event])
        assert len(places) == 1, (event, places)
        place = places[0]
        assert (place["field"], place["role"], place["type"], place["exact"]) == (
            "input",
            "developer",
            "input_text",
            True,
        )
        assert place["index"] == expect_index, (event, place, prompt_index)


def _assert_stdin(host: str, probe: ProbeHook, cwd: Path) -> None:
    for event in HOOK_EVENTS:
        calls = probe.invocations(event)
        assert len(calls) == 1, (event, probe.records())
        stdin = calls[0]["stdin"]
        assert set(stdin) == STDIN_KEYS[(host, event)], (host, event, sorted(stdin))
        assert stdin["hook_event_name"] == event
        assert stdin["cwd"] == str(cwd)
        if event == "UserPromptSubmit":
            assert stdin["prompt"] == PROMPT
        else:
            assert stdin["source"] == "startup"
    sessions = {probe.invocations(e)[0]["stdin"]["session_id"] for e in HOOK_EVENTS}
    assert len(sessions) == 1


def _claude(
    tmp_path: Path, clis: HostCLIs, stub: AnthropicStub, proxy: BlackholeProxy, hooks: dict
) -> CompletedRun:
    return run_claude(
        PROMPT,
        home=tmp_path / "home",
        stub_url=stub.url,
        cwd=tmp_path / "work",
        settings_hooks=hooks,
        clis=clis,
        proxy_url=proxy.url,
    )


def _codex(
    tmp_path: Path,
    clis: HostCLIs,
    stub: OpenAIResponsesStub,
    proxy: BlackholeProxy,
    hooks: dict,
    *,
    bypass_hook_trust: bool = True,
) -> CompletedRun:
    return run_codex(
        PROMPT,
        codex_home=tmp_path / "codex",
        stub_url=stub.url,
        cwd=tmp_path / "work",
        hooks=hooks,
        clis=clis,
        proxy_url=proxy.url,
        bypass_hook_trust=bypass_hook_trust,
    )


# ---- install ---------------------------------------------------------------------------------


def test_host_clis_install_is_cached(host_clis: HostCLIs) -> None:
    started = time.monotonic()
    again = ensure_host_clis()
    record_timing("ensure_host_clis (warm)", time.monotonic() - started)
    assert again.install_seconds is None
    assert (again.claude, again.codex) == (host_clis.claude, host_clis.codex)
    assert os.access(again.claude, os.X_OK) and os.access(again.codex, os.X_OK)
    assert CODEX_VERSION in again.prefix.name
    assert not again.prefix.is_relative_to(Path(__file__).resolve().parents[2])


def test_missing_npm_is_reported_clearly(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POWERCONTEXT_TEST_HOSTS_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    reason = hosts_unavailable_reason()
    assert reason is not None and "npm" in reason
    with pytest.raises(HostInstallError, match="npm is not on PATH"):
        ensure_host_clis()


# ---- hooks from user settings: context arrives byte-for-byte -------------------------------


def test_claude_hooks_context_reaches_model_request(
    tmp_path: Path, host_clis: HostCLIs, anthropic_stub: AnthropicStub, proxy: BlackholeProxy
) -> None:
    probe = write_probe_hook(tmp_path / "probe")
    cwd = _workdir(tmp_path)
    run = _claude(tmp_path, host_clis, anthropic_stub, proxy, probe.hooks_config("context"))
    record_timing("claude -p turn", run.seconds)

    _assert_completed(run)
    _assert_claude_context(_only_model_request(anthropic_stub), probe)
    _assert_stdin("claude", probe, cwd)
    assert anthropic_stub.summary() == ["POST /v1/messages?beta=true"]
    assert proxy.attempts == []


def test_codex_hooks_context_reaches_model_request(
    tmp_path: Path, host_clis: HostCLIs, openai_stub: OpenAIResponsesStub, proxy: BlackholeProxy
) -> None:
    probe = write_probe_hook(tmp_path / "probe")
    cwd = _workdir(tmp_path)
    run = _codex(tmp_path, host_clis, openai_stub, proxy, probe.hooks_config("context"))
    record_timing("codex exec turn", run.seconds)

    _assert_completed(run)
    _assert_codex_context(_only_model_request(openai_stub), probe)
    _assert_stdin("codex", probe, cwd)
    assert openai_stub.summary() == ["POST /v1/responses"]
    assert proxy.attempts == []


# ---- silent and hanging hooks ----------------------------------------------------------------


@pytest.mark.parametrize("host", ["claude", "codex"])
def test_silent_hook_injects_nothing(
    host: str, tmp_path: Path, host_clis: HostCLIs, proxy: BlackholeProxy
) -> None:
    probe = write_probe_hook(tmp_path / "probe")
    _workdir(tmp_path)
    hooks = probe.hooks_config("silent")
    if host == "claude":
        with AnthropicStub() as stub:
            run = _claude(tmp_path, host_clis, stub, proxy, hooks)
    else:
        with OpenAIResponsesStub() as stub:
            run = _codex(tmp_path, host_clis, stub, proxy, hooks)

    _assert_completed(run)
    assert [r["event"] for r in probe.records()] == list(HOOK_EVENTS)
    _assert_context_absent(_only_model_request(stub), probe)


@pytest.mark.parametrize("host", ["claude", "codex"])
def test_hanging_hook_is_cut_off_by_its_timeout(
    host: str, tmp_path: Path, host_clis: HostCLIs, proxy: BlackholeProxy
) -> None:
    probe = write_probe_hook(tmp_path / "probe")
    _workdir(tmp_path)
    hooks = probe.hooks_config("hang", timeout=HANG_TIMEOUT_S, sleep=60)
    if host == "claude":
        with AnthropicStub() as stub:
            run = _claude(tmp_path, host_clis, stub, proxy, hooks)
    else:
        with OpenAIResponsesStub() as stub:
            run = _codex(tmp_path, host_clis, stub, proxy, hooks)
    record_timing(f"{host} turn, 2 hooks hanging (timeout {HANG_TIMEOUT_S}s)", run.seconds)

    _assert_completed(run)
    assert run.seconds < HANG_BOUND_S, run.describe()
    assert run.seconds >= HANG_TIMEOUT_S  # the host did wait for the hook
    _assert_context_absent(_only_model_request(stub), probe)
    if host == "codex":
        assert "hook: SessionStart Failed" in run.stderr
    started = [r for r in probe.records() if "stdin" in r]
    assert [r["event"] for r in started] == list(HOOK_EVENTS)
    # The host killed the timed-out hook processes (none survives the turn).
    survivors = [r["pid"] for r in started if _alive(r["pid"])]
    for pid in survivors:
        os.kill(pid, 9)
    assert survivors == []


def _alive(pid: int, grace: float = 2.0) -> bool:
    deadline = time.monotonic() + grace
    while True:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        if time.monotonic() > deadline:
            return True
        time.sleep(0.05)


# ---- Codex hook trust ------------------------------------------------------------------------


def test_codex_skips_untrusted_hooks_until_trusted(
    tmp_path: Path, host_clis: HostCLIs, openai_stub: OpenAIResponsesStub, proxy: BlackholeProxy
) -> None:
    probe = write_probe_hook(tmp_path / "probe")
    cwd = _workdir(tmp_path)
    hooks = probe.hooks_config("context")
    codex_home = tmp_path / "codex"

    # Without --dangerously-bypass-hook-trust an untrusted hook is skipped silently.
    run = _codex(tmp_path, host_clis, openai_stub, proxy, hooks, bypass_hook_trust=False)
    _assert_completed(run)
    assert probe.records() == []
    assert "hook:" not in run.stderr
    _assert_context_absent(_only_model_request(openai_stub), probe)

    # app-server hooks/list reports the trust state; persisting trusted_hash trusts them.
    listed = codex_hooks_list(codex_home, cwd, clis=host_clis, proxy_url=proxy.url)
    assert sorted(h["eventName"] for h in listed) == ["sessionStart", "userPromptSubmit"]
    assert {h["trustStatus"] for h in listed} == {"untrusted"}
    with open(codex_home / "config.toml", "a", encoding="utf-8") as config:
        config.write(codex_trust_toml(listed))
    assert {
        h["trustStatus"]
        for h in codex_hooks_list(codex_home, cwd, clis=host_clis, proxy_url=proxy.url)
    } == {"trusted"}

    openai_stub.clear()
    run = _codex(tmp_path, host_clis, openai_stub, proxy, hooks, bypass_hook_trust=False)
    _assert_completed(run)
    _assert_codex_context(_only_model_request(openai_stub), probe)


# ---- plugins installed from a local marketplace ----------------------------------------------


def test_claude_plugin_from_local_marketplace(
    tmp_path: Path, host_clis: HostCLIs, anthropic_stub: AnthropicStub, proxy: BlackholeProxy
) -> None:
    probe = write_probe_hook(tmp_path / "probe")
    cwd = _workdir(tmp_path)
    home = tmp_path / "home"
    plugin_src = write_probe_plugin(tmp_path / "src" / "pcprobe", probe, "claude")
    market = write_claude_marketplace(tmp_path / "market", "pc-test", {"pcprobe": plugin_src})
    install_claude_plugin(
        home, market, "pcprobe", "pc-test", cwd=cwd, clis=host_clis, proxy_url=proxy.url
    )

    run = run_claude(
        PROMPT, home=home, stub_url=anthropic_stub.url, cwd=cwd, clis=host_clis, proxy_url=proxy.url
    )
    _assert_completed(run)
    _assert_claude_context(_only_model_request(anthropic_stub), probe)
    _assert_stdin("claude", probe, cwd)
    env = probe.invocations("UserPromptSubmit")[0]["env"]
    # A directory marketplace is read in place (a copy also lands in plugins/cache/...).
    assert env["CLAUDE_PLUGIN_ROOT"] == str(market / "plugins" / "pcprobe")
    data = home / ".claude" / "plugins" / "data" / "pcprobe-pc-test"
    assert env["CLAUDE_PLUGIN_DATA"] == str(data) and data.is_dir()
    assert env["CLAUDE_PROJECT_DIR"] == str(cwd)
    assert (home / ".claude" / "plugins" / "cache" / "pc-test" / "pcprobe" / "0.0.1").is_dir()
    assert proxy.attempts == []


def test_codex_plugin_from_local_marketplace(
    tmp_path: Path, host_clis: HostCLIs, openai_stub: OpenAIResponsesStub, proxy: BlackholeProxy
) -> None:
    probe = write_probe_hook(tmp_path / "probe")
    cwd = _workdir(tmp_path)
    codex_home = tmp_path / "codex"
    prepare_codex_home(codex_home, openai_stub.url, plugins=True)
    plugin_src = write_probe_plugin(tmp_path / "src" / "pcprobe", probe, "codex")
    market = write_codex_marketplace(tmp_path / "market", "pc-test", {"pcprobe": plugin_src})
    install_codex_plugin(
        codex_home, market, "pcprobe", "pc-test", cwd=cwd, clis=host_clis, proxy_url=proxy.url
    )
    installed = codex_home / "plugins" / "cache" / "pc-test" / "pcprobe" / "0.0.1"
    assert (installed / "hooks" / "hooks.json").is_file()

    # Plugin hooks need trust too; the plugin hook's hash is "sha256:<hook>/sha256:<…>".
    listed = codex_hooks_list(codex_home, cwd, clis=host_clis, proxy_url=proxy.url)
    assert {h["pluginId"] for h in listed} == {"pcprobe@pc-test"}
    assert all(str(installed) in h["command"] for h in listed)  # ${PLUGIN_ROOT} substituted
    with open(codex_home / "config.toml", "a", encoding="utf-8") as config:
        config.write(codex_trust_toml(listed))

    run = _codex(tmp_path, host_clis, openai_stub, proxy, None, bypass_hook_trust=False)
    record_timing("codex exec turn (plugins feature on)", run.seconds)
    _assert_completed(run)
    _assert_codex_context(_only_model_request(openai_stub), probe)
    _assert_stdin("codex", probe, cwd)
    env = probe.invocations("SessionStart")[0]["env"]
    assert env["PLUGIN_ROOT"] == env["CLAUDE_PLUGIN_ROOT"] == str(installed)
    data = codex_home / "plugins" / "data" / "pcprobe-pc-test"
    assert env["PLUGIN_DATA"] == env["CLAUDE_PLUGIN_DATA"] == str(data)
    # With the plugins feature on, Codex tries to sync its curated marketplace (refused here).
    assert all(a.startswith("CONNECT ") for a in proxy.attempts), proxy.attempts
