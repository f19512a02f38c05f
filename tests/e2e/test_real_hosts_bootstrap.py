"""SessionStart bootstrap through each installed plugin inside the real host (Codex CLI 0.169.0 /
Claude Code 2.1.328, from npm), against a real runtime — offline, with local model stubs.

Each plugin is installed by its own ``install`` into a throw-away user, in a git repository whose
scope comes from ``remote.origin.url`` (the machine of ``test_real_hosts_plugins``). The scope
holds one entry tagged ``bootstrap-context`` and one untagged entry, both matching the prompt.

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

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.helpers import BOOTSTRAP, PREPARE, RECEIPTS, assert_envelope, remember
from tests.e2e.test_real_hosts_plugins import (
    DOWN_TURN_BOUND_S,
    HOSTS,
    PACK_BEGIN,
    Machine,
    _machine,
    _runtime_env,
)
from tests.hosts.conftest import (  # noqa: F401  (shared fixtures)
    host_clis,
    proxy,
    record_timing,
)
from tests.support.daemon import Daemon
from tests.support.hosts import (
    STUB_REPLY_TEXT,
    AnthropicStub,
    BlackholeProxy,
    CompletedRun,
    HostCLIs,
    OpenAIResponsesStub,
    RecordedRequest,
    locate_text,
    run_claude,
    run_codex,
)

pytestmark = pytest.mark.e2e

#: Eligible for the bootstrap pack (tagged) and relevant to the prompt.
TAGGED = "The release checklist requires a signed changelog before every release tag."
#: Relevant to the prompt, never eligible for bootstrap (no tag).
PLAIN = "The release checklist lives in docs/release.md next to the changelog template."
PROMPT = "What does the release checklist require before a release tag?"
BOOTSTRAP_BEGIN = "BEGIN_POWERCONTEXT_BOOTSTRAP_CONTEXT_V1"
BOOTSTRAP_HEADER = "PowerContext bootstrap untrusted historical context."
PREPARED_HEADER = "PowerContext prepared untrusted historical context."
PREPARED_END = "END_POWERCONTEXT_PREPARED_CONTEXT_V1"
SESSION_MARKER = "SessionStart hook additional context: "
PROMPT_MARKER = "UserPromptSubmit hook additional context: "


def _seed(daemon: Daemon, scope: str) -> None:
    with daemon.client() as client:
        remember(client, scope, TAGGED, tags=["bootstrap-context"])
        remember(client, scope, PLAIN)
        control = client.post(PREPARE, json={"scope_id": scope, "query": PROMPT}).json()
    # Without a receipt, recall for this prompt finds both (the dedup below is the receipt's).
    assert TAGGED in control["content"] and PLAIN in control["content"], control


def _turn(
    machine: Machine,
    clis: HostCLIs,
    proxy_url: str,
    daemon: Daemon,
    *,
    bootstrap: bool,
    **extra_env: str,
) -> tuple[CompletedRun, RecordedRequest]:
    """One prompt in a fresh session; the switch is set the way a user would: in the shell."""
    env = {**_runtime_env(daemon), **extra_env}
    if bootstrap:
        env["POWERCONTEXT_BOOTSTRAP"] = "1"
    if machine.host == "codex":
        with OpenAIResponsesStub() as stub:
            run = run_codex(
                PROMPT,
                codex_home=machine.codex_home,
                stub_url=stub.url,
                cwd=machine.repo,
                bypass_hook_trust=False,
                clis=clis,
                proxy_url=proxy_url,
                extra_env=env,
            )
            requests = stub.model_requests()
    else:
        with AnthropicStub() as stub:
            run = run_claude(
                PROMPT,
                home=machine.home,
                stub_url=stub.url,
                cwd=machine.repo,
                clis=clis,
                proxy_url=proxy_url,
                extra_env=env,
            )
            requests = stub.model_requests()
    assert run.returncode == 0 and STUB_REPLY_TEXT in run.stdout, run.describe()
    assert len(requests) == 1, [r.path for r in requests]
    return run, requests[0]


def _expected_bootstrap(daemon: Daemon, machine: Machine) -> dict[str, Any]:
    """The pack the runtime renders for this scope (no event id: nothing is recorded against
    the session; the same data always renders the same bytes)."""
    body = {
        "scope_id": machine.scope,
        "enabled": True,
        "profile": "powercontext.scope-bootstrap.v1",
        "lifecycle": "startup",
        "integration": machine.host,
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
    if host == "codex":
        # Its own developer message whose only text is exactly the pack, right before the
        # prompt (the UserPromptSubmit pack comes right after it).
        items = request.json()["input"]
        prompt_at = next(
            i
            for i, item in enumerate(items)
            if item.get("role") == "user" and item["content"][0].get("text") == PROMPT
        )
        (place,) = locate_text(request, pack)
        assert (place["role"], place["type"], place["exact"]) == ("developer", "input_text", True)
        assert place["index"] == prompt_at - 1
    else:
        # Claude Code: the system message, "SessionStart hook additional context: <pack>\n".
        (place,) = locate_text(request, pack)
        assert (place["field"], place["role"]) == ("messages", "system")
        text = request.json()["messages"][place["index"]]["content"][place["block"]]["text"]
        assert text.split(SESSION_MARKER, 1)[1].startswith(pack + "\n")
    assert request.body.decode("utf-8").count(BOOTSTRAP_BEGIN) == 1


def _receipts(daemon: Daemon, scope: str) -> list[tuple[str, str, str, str]]:
    with sqlite3.connect(f"file:{daemon.home / 'powercontext.db'}?mode=ro", uri=True) as db:
        return db.execute(
            "SELECT receipt_id, state, integration, lifecycle FROM bootstrap_receipts "
            "WHERE scope_id = ? ORDER BY created_at",
            (scope,),
        ).fetchall()


def _log(machine: Machine) -> list[dict[str, Any]]:
    path = machine.plugin_data_dir() / "diagnostics.log"
    return [json.loads(line) for line in path.read_text("utf-8").splitlines()]


@pytest.mark.parametrize("host", HOSTS)
def test_bootstrap_on_delivers_the_pack_once_and_recall_leaves_it_out(
    host: str,
    tmp_path: Path,
    module_daemon: Daemon,
    host_clis: HostCLIs,  # noqa: F811
    proxy: BlackholeProxy,  # noqa: F811
) -> None:
    machine = _machine(host, tmp_path, module_daemon, host_clis, proxy.url)
    _seed(module_daemon, machine.scope)
    machine.install()

    run, request = _turn(machine, host_clis, proxy.url, module_daemon, bootstrap=True)
    record_timing(f"{host} turn with SessionStart bootstrap", run.seconds)
    assert run.seconds < 60, run.describe()
    if host == "codex":
        assert "hook: SessionStart Completed" in run.stderr, run.describe()
        assert "hook: UserPromptSubmit Completed" in run.stderr, run.describe()

    # The receipt the hook claimed (read before anything else touches the scope).
    [(receipt_id, state, integration, lifecycle)] = _receipts(module_daemon, machine.scope)
    assert (state, integration, lifecycle) == ("injected", host, "startup")
    second = module_daemon.client().post(
        RECEIPTS,
        json={"scope_id": machine.scope, "receipt_id": receipt_id, "state": "injected"},
    )
    error = assert_envelope(second, 409, "receipt_conflict")
    assert error["details"] == {"state": "injected"}

    expected = _expected_bootstrap(module_daemon, machine)
    _assert_bootstrap_injected(host, request, expected["content"])

    # The same turn's recall: the entry delivered whole at SessionStart is left out, the other
    # relevant entry is still there.
    prompt_pack = _prompt_pack(host, request)
    assert PLAIN in prompt_pack and TAGGED not in prompt_pack
    assert request.body.decode("utf-8").count(PACK_BEGIN) == 1
    assert not [a for a in proxy.attempts if "127.0.0.1" in a]  # loopback never proxied


@pytest.mark.parametrize("host", HOSTS)
def test_bootstrap_off_by_default_injects_no_bootstrap_text(
    host: str,
    tmp_path: Path,
    module_daemon: Daemon,
    host_clis: HostCLIs,  # noqa: F811
    proxy: BlackholeProxy,  # noqa: F811
) -> None:
    machine = _machine(host, tmp_path, module_daemon, host_clis, proxy.url)
    _seed(module_daemon, machine.scope)
    machine.install()

    # Debug logging makes the SessionStart hook's otherwise silent `disabled` outcome visible.
    run, request = _turn(
        machine, host_clis, proxy.url, module_daemon, bootstrap=False, POWERCONTEXT_DEBUG="1"
    )
    assert run.seconds < 60, run.describe()
    raw = request.body.decode("utf-8")
    assert BOOTSTRAP_BEGIN not in raw and BOOTSTRAP_HEADER not in raw
    if host == "claude-code":
        assert SESSION_MARKER not in raw
    # No delivery, so recall is the plain one: both relevant entries.
    prompt_pack = _prompt_pack(host, request)
    assert PLAIN in prompt_pack and TAGGED in prompt_pack
    assert all(state != "injected" for _, state, _, _ in _receipts(module_daemon, machine.scope))
    outcomes = {(line["component"], line["event"], line["outcome"]) for line in _log(machine)}
    assert (f"powercontext.{host}.session-start", "context_bootstrap", "disabled") in outcomes


@pytest.mark.parametrize("host", HOSTS)
def test_bootstrap_with_the_runtime_stopped_starts_quickly_and_injects_nothing(
    host: str,
    tmp_path: Path,
    daemon: Daemon,
    host_clis: HostCLIs,  # noqa: F811
    proxy: BlackholeProxy,  # noqa: F811
) -> None:
    machine = _machine(host, tmp_path, daemon, host_clis, proxy.url)
    _seed(daemon, machine.scope)
    machine.install()
    assert daemon.stop() == 0

    run, request = _turn(machine, host_clis, proxy.url, daemon, bootstrap=True)
    record_timing(f"{host} bootstrap turn with the runtime stopped", run.seconds)
    assert run.seconds < DOWN_TURN_BOUND_S, run.describe()
    raw = request.body.decode("utf-8")
    assert BOOTSTRAP_BEGIN not in raw and BOOTSTRAP_HEADER not in raw
    assert PACK_BEGIN not in raw and PREPARED_HEADER not in raw
    lines = _log(machine)
    assert sorted((line["event"], line["outcome"]) for line in lines) == [
        ("context_bootstrap", "server_unavailable"),
        ("context_prepare", "server_unavailable"),
    ]
    components = {line["component"] for line in lines}
    assert components == {
        f"powercontext.{host}.session-start",
        f"powercontext.{host}.user-prompt-submit",
    }
