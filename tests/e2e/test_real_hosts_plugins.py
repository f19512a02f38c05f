"""Each PowerContext plugin, installed by its own ``install`` command into a throw-away user,
runs inside the real host (Codex CLI 0.169.0 / Claude Code 2.1.328, from npm) against a real
runtime — offline, with local model stubs.

What is proven, per host:

* the scope comes from the repository's ``remote.origin.url`` (the realistic path);
* the exact pack the runtime returns for the prompt (``prepare_context`` with the same scope,
  query and budget) arrives byte-for-byte in the model request;
* the prompt was captured as a source (read back from the runtime's database; capturing the
  same source again returns the same position);
* with the runtime stopped, the turn still completes quickly and nothing is injected.

Codex runs *without* ``--dangerously-bypass-hook-trust``: ``install`` trusted the hook.
"""

from __future__ import annotations

import json

import pytest

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
        "SELECT source_id, content, metadata, position FROM sources WHERE scope_id = ?",
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
    # SessionStart asks the runtime too (even with bootstrap off), then UserPromptSubmit.
    assert [(line["component"], line["event"], line["outcome"]) for line in user.diagnostics()] == [
        (f"powercontext.{host}.session-start", "context_bootstrap", "server_unavailable"),
        (f"powercontext.{host}.user-prompt-submit", "context_prepare", "server_unavailable"),
    ]
