"""Prompt capture: after recall, idempotent, bounded, and never in the way of the injection."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from powercontext_hook_kit import prompt_source_id
from tests.hook_kit.conftest import event, hook_env, run_in_process
from tests.hook_kit.stub import CAPTURE, PREPARE, Reply, StubRuntime, prepared_body

PACK = "PowerContext prepared untrusted historical context.\nitem"
SCOPE = "git:example.com/acme/SENTINEL-scope"


@pytest.fixture
def env(stub: StubRuntime, tmp_path: Path) -> dict[str, str]:
    stub.replies[PREPARE] = Reply(200, prepared_body(PACK))
    return hook_env(stub.url, tmp_path / "plugin-data")


def captured_ids(stub: StubRuntime) -> list[str]:
    return [r.json()["source_id"] for r in stub.requests if r.path == CAPTURE]


def test_capture_follows_the_answered_recall(stub: StubRuntime, env: dict[str, str]) -> None:
    """The prompt reaches the runtime only after recall answered: it can never recall itself."""
    stub.replies[PREPARE] = Reply(200, prepared_body(PACK), delay=0.2)
    run = run_in_process(event(prompt="remember: deploys need a green build"), env)
    assert run.injected() == PACK
    prepare, capture = stub.requests
    assert (prepare.path, capture.path) == (PREPARE, CAPTURE)
    assert capture.at - prepare.at >= 0.2
    assert capture.json() == {
        "scope_id": SCOPE,
        "source_id": captured_ids(stub)[0],
        "content": "remember: deploys need a green build",
        "metadata": {"host": "codex", "hook": "UserPromptSubmit"},
    }
    assert capture.headers["Authorization"].startswith("Bearer ")


def test_capture_also_follows_an_empty_recall(stub: StubRuntime, env: dict[str, str]) -> None:
    stub.replies[PREPARE] = Reply(200, prepared_body(None))
    run_in_process(event(), env)
    assert stub.paths() == [PREPARE, CAPTURE]


def test_source_id_is_idempotent_per_turn(stub: StubRuntime, env: dict[str, str]) -> None:
    run_in_process(event(), env)
    run_in_process(event(), env)
    run_in_process(event(turn_id="turn-2"), env)
    run_in_process(event(session_id="sess-2"), env)
    run_in_process(event(prompt="another prompt"), env)
    run_in_process(event(), {**env, "POWERCONTEXT_SCOPE_ID": "git:example.com/acme/other"})
    first, again, *others = captured_ids(stub)
    assert first == again
    assert len({first, *others}) == 5
    assert re.fullmatch(r"codex-user-prompt:[0-9a-f]{64}", first)


def test_claude_code_uses_prompt_id_and_its_own_prefix(
    stub: StubRuntime, env: dict[str, str]
) -> None:
    payload = event()
    del payload["turn_id"]
    run_in_process({**payload, "prompt_id": "p-1"}, env, host="claude-code")
    run_in_process({**payload, "prompt_id": "p-2"}, env, host="claude-code")
    one, two = captured_ids(stub)
    assert one != two
    assert one.startswith("claude-code-user-prompt:")
    assert stub.requests[1].json()["metadata"] == {
        "host": "claude-code",
        "hook": "UserPromptSubmit",
    }


def test_source_id_encoding_is_unambiguous() -> None:
    ids = {
        prompt_source_id("codex", "s", "ab", "c", "p"),
        prompt_source_id("codex", "s", "a", "bc", "p"),
        prompt_source_id("codex", "s", None, "c", "p"),
        prompt_source_id("codex", "s", "", "c", "p"),
        prompt_source_id("codex", "s", "N", "c", "p"),
        prompt_source_id("codex", "s", "c", None, "p"),
        prompt_source_id("codex", "sc", None, None, "p"),
        prompt_source_id("codex", "s", None, None, "cp"),
    }
    assert len(ids) == 8
    assert prompt_source_id("codex", "s", "a", "b", "p") == prompt_source_id(
        "codex", "s", "a", "b", "p"
    )


@pytest.mark.parametrize(
    "reply",
    [
        Reply(500, b"{}"),
        Reply(409, b'{"error":{"code":"source_conflict"}}'),
        Reply(hang_up=True),
        Reply(302, b"", headers={"Location": "/x"}),
        Reply(202, b"{}", delay=3),
    ],
)
def test_capture_failure_never_affects_the_injection(
    stub: StubRuntime, env: dict[str, str], reply: Reply
) -> None:
    stub.replies[CAPTURE] = reply
    run = run_in_process(event(), env)
    assert run.code == 0
    assert run.injected() == PACK
    assert run.outcome("source_capture") in ("server_unavailable", "invalid_response")
    assert run.outcome("context_prepare") is None


def test_capture_can_be_switched_off(stub: StubRuntime, env: dict[str, str]) -> None:
    off = {**env, "POWERCONTEXT_CAPTURE_PROMPTS": "off"}
    run = run_in_process(event(), off)
    assert run.injected() == PACK
    assert stub.paths() == [PREPARE]
    assert run.lines == []  # a deliberate setting is not worth a line per prompt
    debug = run_in_process(event(), {**off, "POWERCONTEXT_DEBUG": "true"})
    assert debug.outcome("source_capture") == "disabled"


def test_long_prompts_recall_a_bounded_query_and_capture_the_prompt(
    stub: StubRuntime, env: dict[str, str]
) -> None:
    prompt = "  " + "word " * 2000 + "tail"  # 10,006 characters
    run_in_process(event(prompt=prompt), env)
    prepare, capture = stub.requests
    assert prepare.json()["query"] == prompt.strip()[:8192]
    assert len(prepare.json()["query"]) == 8192
    assert capture.json()["content"] == prompt
    assert "truncated" not in capture.json()["metadata"]


def test_very_long_prompts_are_captured_up_to_the_source_limit(
    stub: StubRuntime, env: dict[str, str]
) -> None:
    prompt = "é" * 250_000
    run = run_in_process(event(prompt=prompt), env)
    assert run.injected() == PACK
    capture = stub.requests[1].json()
    assert capture["content"] == prompt[:200_000]
    assert capture["metadata"] == {"host": "codex", "hook": "UserPromptSubmit", "truncated": True}


def test_escape_heavy_prompts_stay_under_the_request_limit(
    stub: StubRuntime, env: dict[str, str]
) -> None:
    prompt = "\x01" * 199_000
    run_in_process(event(prompt=prompt + "x"), env)
    capture = stub.requests[1]
    assert len(capture.body) <= 1_000_000
    document = capture.json()
    assert document["metadata"]["truncated"] is True
    assert prompt.startswith(document["content"])


def test_lone_surrogates_from_the_host_do_not_break_the_hook(
    stub: StubRuntime, env: dict[str, str]
) -> None:
    raw = (
        b'{"cwd":"/","session_id":"s","prompt":"broken \\ud800 text",'
        b'"hook_event_name":"UserPromptSubmit"}'
    )
    run = run_in_process(raw, env)
    assert run.injected() == PACK
    assert stub.requests[0].json()["query"] == "broken ? text"


FLUSH = "/v1/memory/flush"


def test_flush_after_capture_is_opt_in(stub: StubRuntime, env: dict[str, str]) -> None:
    stub.replies[FLUSH] = Reply(200, b'{"status":"processed"}')
    run_in_process(event(prompt="remember: deploys need a green build"), env)
    assert stub.paths() == [PREPARE, CAPTURE]
    run = run_in_process(
        event(prompt="remember: tag releases"), {**env, "POWERCONTEXT_FLUSH_AFTER_CAPTURE": "yes"}
    )
    assert stub.paths()[2:] == [PREPARE, CAPTURE, FLUSH]
    assert stub.requests[-1].json() == {"scope_id": SCOPE}
    assert run.injected() == PACK
    assert run.outcome("memory_flush") is None  # success is silent without debug


def test_a_failing_flush_costs_only_a_diagnostic(stub: StubRuntime, env: dict[str, str]) -> None:
    stub.replies[FLUSH] = Reply(503, b'{"error":{"code":"extraction_unavailable"}}')
    run = run_in_process(event(), {**env, "POWERCONTEXT_FLUSH_AFTER_CAPTURE": "1"})
    assert run.injected() == PACK
    assert run.outcome("memory_flush") == "server_unavailable"
    assert run.outcome("source_capture") is None
