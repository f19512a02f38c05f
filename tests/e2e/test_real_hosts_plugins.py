"""Each PowerContext plugin, installed by its own ``install`` command into a throw-away user,
runs inside the real host (Codex CLI 0.169.0 / Claude Code 2.1.328, from npm) against a real
runtime — offline, with local model stubs.

What is proven, per host:

* the scope comes from the repository's ``remote.origin.url`` (the realistic path);
* the exact pack the runtime returns for the prompt (``prepare_context`` with the same scope,
  query and budget) arrives byte-for-byte in the model request;
* the prompt was captured as a source (read back from the runtime's database; capturing the
  same source again returns the same position);
* the plugin's skill is offered to the model, with the description that says when to propose a
  lesson (``propose_experience``), and Claude Code offers the ``/powercontext:propose-lesson``
  command with its description;
* with the runtime stopped, the turn still completes quickly and nothing is injected.

Codex runs *without* ``--dangerously-bypass-hook-trust``: ``install`` trusted the hook.
"""

from __future__ import annotations

import json
from importlib.resources import files

import pytest

from powercontext_hook_kit.install.plugin_folder import MEMORY_SKILL_MARKDOWN
from tests.e2e.helpers import DOWN_TURN_BOUND_S, PACK_BEGIN, PREPARE, SOURCES, remember
from tests.hosts.conftest import record_timing
from tests.support.daemon import Daemon
from tests.support.hosts import RecordedRequest, assert_hook_context
from tests.support.plugin_sandbox import HOSTS, PluginUserFactory, RealHostUser

pytestmark = pytest.mark.e2e

MEMORY = (
    "The billing service retries failed webhooks three times with exponential backoff "
    "(1 s, 4 s, 16 s), then parks them in the dead-letter queue."
)
PROMPT = 'How does the billing service retry failed webhooks? ünïcödé ✓ "quoted"'


def _expected_pack(daemon: Daemon, scope: str) -> str:
    """What the hook must have injected: the runtime's answer to the same request."""
    body = {"scope_id": scope, "query": PROMPT.strip(), "max_bytes": 8000}
    answer = daemon.client().post(PREPARE, json=body).json()
    assert answer["status"] == "ready" and MEMORY in answer["content"], answer
    return str(answer["content"])


def _assert_injected(host: str, request: RecordedRequest, pack: str) -> None:
    """Where UserPromptSubmit context goes: right after the prompt (Codex), or a system
    message (Claude Code) — and the pack only once."""
    assert_hook_context(request, pack, host=host, event="UserPromptSubmit", prompt=PROMPT)
    assert request.body.decode("utf-8").count(PACK_BEGIN) == 1


def _assert_captured(daemon: Daemon, user: RealHostUser) -> None:
    """The prompt is a source of the scope; capturing it again gives the same position."""
    rows = daemon.query(
        # name = 'content': the Stop hook also records the turn, as a task-result source
        "SELECT source_id, content, metadata, position FROM sources"
        " WHERE scope_id = ? AND name = 'content'",
        user.scope,
    )
    assert len(rows) == 1, rows
    ((source_id, content, metadata, position),) = rows
    assert source_id.startswith(f"{user.host}-user-prompt:")
    assert content == PROMPT
    assert json.loads(metadata) == {"host": user.host, "hook": "UserPromptSubmit"}
    again = daemon.client().post(
        SOURCES,
        json={
            "scope_id": user.scope,
            "source_id": source_id,
            "content": content,
            "metadata": json.loads(metadata),
        },
    )
    assert again.status_code == 202, again.text
    assert again.json()["position"] == position


def _assert_skill_offered(host: str, request: RecordedRequest) -> None:
    """The skill (both hosts) and the slash command (Claude Code) are listed to the model by
    name with their descriptions: that text is all a model sees before it chooses one."""
    text = request.body.decode("utf-8")
    skill = _frontmatter(MEMORY_SKILL_MARKDOWN)
    assert skill["name"] == "powercontext-memory"
    assert "propose_experience citing its task result" in skill["description"]
    assert f"powercontext:{skill['name']}" in text, text[:4000]
    assert skill["description"] in text
    if host == "claude-code":
        command = _frontmatter(
            (files("powercontext_claude_code") / "plugin/commands/propose-lesson.md").read_text()
        )
        assert "powercontext:propose-lesson" in text
        assert command["description"] in text


def _frontmatter(markdown: str) -> dict[str, str]:
    """``key: value`` lines between the leading ``---`` fences (one line each here)."""
    head = markdown.split("---\n", 2)[1]
    return dict(line.split(": ", 1) for line in head.splitlines() if ": " in line)


def _installed(host: str, daemon: Daemon, plugin_user: PluginUserFactory) -> RealHostUser:
    """A user of ``host`` whose scope holds :data:`MEMORY`, with the plugin installed."""
    user = plugin_user(host, daemon)
    with daemon.client() as client:
        remember(client, user.scope, MEMORY)
    user.install()
    return user


@pytest.mark.parametrize("host", HOSTS)
def test_the_installed_plugin_injects_the_runtime_pack_byte_for_byte(
    host: str, module_daemon: Daemon, plugin_user: PluginUserFactory
) -> None:
    user = _installed(host, module_daemon, plugin_user)

    run, request = user.turn(PROMPT)
    record_timing(f"{host} turn with the PowerContext plugin", run.seconds)
    assert run.seconds < 60, run.describe()
    if host == "codex":
        assert "hook: UserPromptSubmit Completed" in run.stderr, run.describe()
    _assert_injected(host, request, _expected_pack(module_daemon, user.scope))
    _assert_captured(module_daemon, user)
    _assert_skill_offered(host, request)
    assert not [a for a in user.proxy.attempts if "127.0.0.1" in a]  # loopback never proxied


@pytest.mark.parametrize("host", HOSTS)
def test_a_stopped_runtime_costs_a_bounded_moment_and_injects_nothing(
    host: str, daemon: Daemon, plugin_user: PluginUserFactory
) -> None:
    user = _installed(host, daemon, plugin_user)
    assert daemon.stop() == 0

    run, request = user.turn(PROMPT)
    record_timing(f"{host} turn with the runtime stopped", run.seconds)
    assert run.seconds < DOWN_TURN_BOUND_S, run.describe()
    assert PACK_BEGIN not in request.body.decode("utf-8")
    assert "PowerContext prepared untrusted historical context" not in request.body.decode()
    # SessionStart asks the runtime too (even with bootstrap off), then UserPromptSubmit, then
    # Stop records the turn's task result (kept in its spool for later).
    assert [(line["component"], line["event"], line["outcome"]) for line in user.diagnostics()] == [
        (f"powercontext.{host}.session-start", "context_bootstrap", "server_unavailable"),
        (f"powercontext.{host}.user-prompt-submit", "context_prepare", "server_unavailable"),
        (f"powercontext.{host}.stop", "task_result", "server_unavailable"),
    ]
