"""SessionStart bootstrap through each installed plugin inside the real host (Codex CLI 0.169.0 /
Claude Code 2.1.328, from npm), against a real runtime — offline, with local model stubs.

Each plugin is installed by its own ``install`` into a throw-away user, in a git repository whose
scope comes from ``remote.origin.url`` (a ``RealHostUser``, ``tests/support/plugin_sandbox.py``,
as in ``test_real_hosts_plugins``). The scope holds one entry tagged ``bootstrap-context`` and
one untagged entry, both matching the prompt.

* Bootstrap on (``POWERCONTEXT_BOOTSTRAP=1`` in the host's environment): the SessionStart pack —
  byte-for-byte what ``POST /v1/context/bootstrap`` renders for the scope — reaches the model
  request; the server-side receipt is ``injected`` (a second claim is refused with that state);
  the same turn's UserPromptSubmit pack leaves out the entry already delivered and keeps the
  other one.
* Bootstrap off (the default): no bootstrap text in the request; recall is unchanged.
* Runtime stopped: the session starts and the turn completes quickly, nothing is injected.

Codex runs *without* ``--dangerously-bypass-hook-trust``: ``install`` trusted both hooks.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.e2e.helpers import (
    BOOTSTRAP,
    DOWN_TURN_BOUND_S,
    PACK_BEGIN,
    PREPARE,
    RECEIPTS,
    assert_envelope,
    remember,
)
from tests.hosts.conftest import record_timing
from tests.support.daemon import Daemon
from tests.support.hosts import RecordedRequest, assert_hook_context, locate_text
from tests.support.plugin_sandbox import HOSTS, PluginUserFactory, RealHostUser

pytestmark = pytest.mark.e2e

#: Eligible for the bootstrap pack (tagged) and relevant to the prompt.
TAGGED = "The release checklist requires a signed changelog before every release tag."
#: Relevant to the prompt, never eligible for bootstrap (no tag).
PLAIN = "The release checklist requires a green CI run before a release tag (docs/release.md)."
PROMPT = "What does the release checklist require before a release tag?"
BOOTSTRAP_BEGIN = "BEGIN_POWERCONTEXT_BOOTSTRAP_CONTEXT_V1"
BOOTSTRAP_HEADER = "PowerContext bootstrap untrusted historical context."
PREPARED_HEADER = "PowerContext prepared untrusted historical context."
PREPARED_END = "END_POWERCONTEXT_PREPARED_CONTEXT_V1"
SESSION_MARKER = "SessionStart hook additional context: "
PROMPT_MARKER = "UserPromptSubmit hook additional context: "


def _seeded(host: str, daemon: Daemon, plugin_user: PluginUserFactory) -> RealHostUser:
    """A user of ``host`` with the plugin installed, whose scope holds both entries."""
    user = plugin_user(host, daemon)
    with daemon.client() as client:
        remember(client, user.scope, TAGGED, tags=["bootstrap-context"])
        remember(client, user.scope, PLAIN)
        control = client.post(PREPARE, json={"scope_id": user.scope, "query": PROMPT}).json()
    # Without a receipt, recall for this prompt finds both (the dedup below is the receipt's).
    assert TAGGED in control["content"] and PLAIN in control["content"], control
    user.install()
    return user


def _expected_bootstrap(daemon: Daemon, user: RealHostUser) -> dict[str, Any]:
    """The pack the runtime renders for this scope (no event id: nothing is recorded against
    the session; the same data always renders the same bytes)."""
    body = {
        "scope_id": user.scope,
        "enabled": True,
        "profile": "powercontext.scope-bootstrap.v1",
        "lifecycle": "startup",
        "integration": user.host,
        "max_bytes": 4096,
    }
    answer = daemon.client().post(BOOTSTRAP, json=body).json()
    assert answer["status"] == "ready", answer
    [item] = answer["items"]  # only the tagged entry is eligible
    assert item["truncated"] is False
    assert TAGGED in answer["content"] and PLAIN not in answer["content"]
    return answer


def _prompt_pack(host: str, request: RecordedRequest) -> str:
    """The UserPromptSubmit pack of the request, whole."""
    places = locate_text(request, PREPARED_HEADER)
    assert len(places) == 1, places
    (place,) = places
    body = request.json()
    key = "input" if host == "codex" else "messages"
    text = str(body[key][place["index"]]["content"][place["block"]]["text"])
    if host == "codex":
        assert place["role"] == "developer" and text.startswith(PREPARED_HEADER)
        return text
    after = text.split(PROMPT_MARKER, 1)[1]
    assert after.startswith(PREPARED_HEADER)
    return after[: after.index(PREPARED_END) + len(PREPARED_END)]


def _assert_bootstrap_injected(host: str, request: RecordedRequest, pack: str) -> None:
    """Where SessionStart context goes: right before the prompt, the UserPromptSubmit pack
    right after it (Codex), or a system message (Claude Code) — and the pack only once."""
    assert_hook_context(request, pack, host=host, event="SessionStart", prompt=PROMPT)
    assert request.body.decode("utf-8").count(BOOTSTRAP_BEGIN) == 1


def _receipts(daemon: Daemon, scope: str) -> list[tuple[Any, ...]]:
    """``(receipt_id, state, integration, lifecycle)`` of the scope's bootstrap receipts."""
    return daemon.query(
        "SELECT receipt_id, state, integration, lifecycle FROM bootstrap_receipts "
        "WHERE scope_id = ? ORDER BY created_at",
        scope,
    )


@pytest.mark.parametrize("host", HOSTS)
def test_bootstrap_on_delivers_the_pack_once_and_recall_leaves_it_out(
    host: str, module_daemon: Daemon, plugin_user: PluginUserFactory
) -> None:
    user = _seeded(host, module_daemon, plugin_user)

    run, request = user.turn(PROMPT, POWERCONTEXT_BOOTSTRAP="1")
    record_timing(f"{host} turn with SessionStart bootstrap", run.seconds)
    assert run.seconds < 60, run.describe()
    if host == "codex":
        assert "hook: SessionStart Completed" in run.stderr, run.describe()
        assert "hook: UserPromptSubmit Completed" in run.stderr, run.describe()

    # The receipt the hook claimed (read before anything else touches the scope).
    [(receipt_id, state, integration, lifecycle)] = _receipts(module_daemon, user.scope)
    assert (state, integration, lifecycle) == ("injected", host, "startup")
    claim = {"scope_id": user.scope, "receipt_id": receipt_id, "state": "injected"}
    # The host's hook used the agent token it found in the data dir: the receipt is that
    # token's, invisible to the operator's, and a second claim with it is a conflict.
    assert_envelope(module_daemon.client().post(RECEIPTS, json=claim), 404, "receipt_not_found")
    second = module_daemon.client(module_daemon.agent_token).post(RECEIPTS, json=claim)
    error = assert_envelope(second, 409, "receipt_conflict")
    assert error["details"] == {"state": "injected"}

    expected = _expected_bootstrap(module_daemon, user)
    _assert_bootstrap_injected(host, request, expected["content"])

    # The same turn's recall: the entry delivered whole at SessionStart is left out, the other
    # relevant entry is still there.
    prompt_pack = _prompt_pack(host, request)
    assert PLAIN in prompt_pack and TAGGED not in prompt_pack
    assert request.body.decode("utf-8").count(PACK_BEGIN) == 1
    assert not [a for a in user.proxy.attempts if "127.0.0.1" in a]  # loopback never proxied


@pytest.mark.parametrize("host", HOSTS)
def test_bootstrap_off_by_default_injects_no_bootstrap_text(
    host: str, module_daemon: Daemon, plugin_user: PluginUserFactory
) -> None:
    user = _seeded(host, module_daemon, plugin_user)

    # Debug logging makes the SessionStart hook's otherwise silent `disabled` outcome visible.
    run, request = user.turn(PROMPT, POWERCONTEXT_DEBUG="1")
    assert run.seconds < 60, run.describe()
    raw = request.body.decode("utf-8")
    assert BOOTSTRAP_BEGIN not in raw and BOOTSTRAP_HEADER not in raw
    if host == "claude-code":
        assert SESSION_MARKER not in raw
    # No delivery, so recall is the plain one: both relevant entries.
    prompt_pack = _prompt_pack(host, request)
    assert PLAIN in prompt_pack and TAGGED in prompt_pack
    assert all(state != "injected" for _, state, _, _ in _receipts(module_daemon, user.scope))
    outcomes = {(line["component"], line["event"], line["outcome"]) for line in user.diagnostics()}
    assert (f"powercontext.{host}.session-start", "context_bootstrap", "disabled") in outcomes


@pytest.mark.parametrize("host", HOSTS)
def test_bootstrap_with_the_runtime_stopped_starts_quickly_and_injects_nothing(
    host: str, daemon: Daemon, plugin_user: PluginUserFactory
) -> None:
    user = _seeded(host, daemon, plugin_user)
    assert daemon.stop() == 0

    run, request = user.turn(PROMPT, POWERCONTEXT_BOOTSTRAP="1")
    record_timing(f"{host} bootstrap turn with the runtime stopped", run.seconds)
    assert run.seconds < DOWN_TURN_BOUND_S, run.describe()
    raw = request.body.decode("utf-8")
    assert BOOTSTRAP_BEGIN not in raw and BOOTSTRAP_HEADER not in raw
    assert PACK_BEGIN not in raw and PREPARED_HEADER not in raw
    lines = user.diagnostics()
    assert sorted((line["event"], line["outcome"]) for line in lines) == [
        ("context_bootstrap", "server_unavailable"),
        ("context_prepare", "server_unavailable"),
        ("task_result", "server_unavailable"),  # the turn's Stop hook: spooled for later
    ]
    components = {line["component"] for line in lines}
    assert components == {
        f"powercontext.{host}.session-start",
        f"powercontext.{host}.user-prompt-submit",
        f"powercontext.{host}.stop",
    }
