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
import os
import shutil
import sqlite3
import subprocess
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

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
    claude_env,
    codex_env,
    locate_text,
    prepare_codex_home,
    run_claude,
    run_codex,
)

pytestmark = pytest.mark.e2e

MEMORY = (
    "The billing service retries failed webhooks three times with exponential backoff "
    "(1 s, 4 s, 16 s), then parks them in the dead-letter queue."
)
PROMPT = 'How does the billing service retry failed webhooks? ünïcödé ✓ "quoted"'
PACK_BEGIN = "BEGIN_POWERCONTEXT_PREPARED_CONTEXT_V1"
#: A dead runtime costs at most the hook's own 2 s deadline; the rest is the host's turn.
DOWN_TURN_BOUND_S = 20.0
HOSTS = ("codex", "claude-code")


@dataclass
class Machine:
    """One user's machine: a home, a project with an origin remote, and the host's config."""

    host: str
    home: Path
    repo: Path
    scope: str
    env: dict[str, str]  # what the user's shell has when running install

    @property
    def module(self) -> str:
        return {"codex": "powercontext_codex", "claude-code": "powercontext_claude_code"}[self.host]

    @property
    def codex_home(self) -> Path:
        return self.home / ".codex"

    def install(self) -> dict[str, Any]:
        done = subprocess.run(
            [sys.executable, "-m", self.module, "install", "--json"],
            cwd=self.repo,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=180,
        )
        assert done.returncode == 0, (done.stdout, done.stderr)
        report = json.loads(done.stdout)
        assert report["mode"] == "plugin", report
        return report

    def plugin_data_dir(self) -> Path:
        base = self.codex_home if self.host == "codex" else self.home / ".claude"
        return base / "plugins" / "data" / "powercontext-powercontext-local"


def _machine(host: str, tmp_path: Path, daemon: Daemon, clis: HostCLIs, proxy_url: str) -> Machine:
    home = tmp_path / "home"
    label = f"{host}-e2e-{uuid.uuid4().hex[:10]}"
    repo = tmp_path / "project"
    repo.mkdir(parents=True)
    git_env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp_path)}
    subprocess.run(["git", "init", "-q", str(repo)], check=True, env=git_env)
    subprocess.run(
        ["git", "-C", str(repo), "remote", "add", "origin", f"git@github.com:acme/{label}.git"],
        check=True,
        env=git_env,
    )
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    if host == "codex":
        prepare_codex_home(home / ".codex", "http://127.0.0.1:9", plugins=True)
        env = codex_env(home / ".codex", proxy_url, home=home)
        (bin_dir / "codex").symlink_to(clis.codex)
        node = shutil.which("node")
        assert node, "the Codex launcher needs node"
        (bin_dir / "node").symlink_to(node)
    else:
        env = claude_env(home, "http://127.0.0.1:9", proxy_url)
        (bin_dir / "claude").symlink_to(clis.claude)
    env["PATH"] = str(bin_dir)
    env.update(POWERCONTEXT_URL=daemon.url, POWERCONTEXT_HOME=str(daemon.home))
    return Machine(host, home, repo, f"git:github.com/acme/{label}", env)


def _runtime_env(daemon: Daemon) -> dict[str, str]:
    """What the user's shell exports for the runtime; the hosts pass it on to hooks."""
    return {"POWERCONTEXT_URL": daemon.url, "POWERCONTEXT_HOME": str(daemon.home)}


def _turn(
    machine: Machine, clis: HostCLIs, proxy_url: str, daemon: Daemon
) -> tuple[CompletedRun, RecordedRequest]:
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
                extra_env=_runtime_env(daemon),
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
                extra_env=_runtime_env(daemon),
            )
            requests = stub.model_requests()
    assert run.returncode == 0 and STUB_REPLY_TEXT in run.stdout, run.describe()
    assert len(requests) == 1, [r.path for r in requests]
    return run, requests[0]


def _expected_pack(daemon: Daemon, scope: str) -> str:
    """What the hook must have injected: the runtime's answer to the same request."""
    body = {"scope_id": scope, "query": PROMPT.strip(), "max_bytes": 8000}
    answer = daemon.client().post("/v1/context/prepare", json=body).json()
    assert answer["status"] == "ready" and MEMORY in answer["content"], answer
    return str(answer["content"])


def _assert_injected(host: str, request: RecordedRequest, pack: str) -> None:
    if host == "codex":
        # Its own developer message whose only text is exactly the pack, right after the prompt.
        items = request.json()["input"]
        prompt_at = next(
            i
            for i, item in enumerate(items)
            if item.get("role") == "user" and item["content"][0].get("text") == PROMPT
        )
        (place,) = locate_text(request, pack)
        assert (place["role"], place["type"], place["exact"]) == ("developer", "input_text", True)
        assert place["index"] == prompt_at + 1
    else:
        # Claude Code: one system message, "UserPromptSubmit hook additional context: <pack>\n".
        (place,) = locate_text(request, pack)
        assert (place["field"], place["role"]) == ("messages", "system")
        text = request.json()["messages"][place["index"]]["content"][place["block"]]["text"]
        marker = "UserPromptSubmit hook additional context: "
        assert text.split(marker, 1)[1].startswith(pack + "\n")
    assert request.body.decode("utf-8").count(PACK_BEGIN) == 1


def _assert_captured(daemon: Daemon, machine: Machine) -> None:
    """The prompt is a source of the scope; capturing it again gives the same position."""
    with sqlite3.connect(f"file:{daemon.home / 'powercontext.db'}?mode=ro", uri=True) as db:
        rows = db.execute(
            "SELECT source_id, content, metadata, position FROM sources WHERE scope_id = ?",
            (machine.scope,),
        ).fetchall()
    assert len(rows) == 1, rows
    ((source_id, content, metadata, position),) = rows
    assert source_id.startswith(f"{machine.host}-user-prompt:")
    assert content == PROMPT
    assert json.loads(metadata) == {"host": machine.host, "hook": "UserPromptSubmit"}
    again = daemon.client().post(
        "/v1/sources/content",
        json={
            "scope_id": machine.scope,
            "source_id": source_id,
            "content": content,
            "metadata": json.loads(metadata),
        },
    )
    assert again.status_code == 202, again.text
    assert again.json()["position"] == position


@pytest.mark.parametrize("host", HOSTS)
def test_the_installed_plugin_injects_the_runtime_pack_byte_for_byte(
    host: str,
    tmp_path: Path,
    module_daemon: Daemon,
    host_clis: HostCLIs,  # noqa: F811
    proxy: BlackholeProxy,  # noqa: F811
) -> None:
    machine = _machine(host, tmp_path, module_daemon, host_clis, proxy.url)
    module_daemon.client().post(
        "/v1/memory/remember",
        json={"scope_id": machine.scope, "kind": "fact", "text": MEMORY},
    ).raise_for_status()
    machine.install()

    run, request = _turn(machine, host_clis, proxy.url, module_daemon)
    record_timing(f"{host} turn with the PowerContext plugin", run.seconds)
    assert run.seconds < 60, run.describe()
    if host == "codex":
        assert "hook: UserPromptSubmit Completed" in run.stderr, run.describe()
    _assert_injected(host, request, _expected_pack(module_daemon, machine.scope))
    _assert_captured(module_daemon, machine)
    assert not [a for a in proxy.attempts if "127.0.0.1" in a]  # loopback never proxied


@pytest.mark.parametrize("host", HOSTS)
def test_a_stopped_runtime_costs_a_bounded_moment_and_injects_nothing(
    host: str,
    tmp_path: Path,
    daemon: Daemon,
    host_clis: HostCLIs,  # noqa: F811
    proxy: BlackholeProxy,  # noqa: F811
) -> None:
    machine = _machine(host, tmp_path, daemon, host_clis, proxy.url)
    daemon.client().post(
        "/v1/memory/remember",
        json={"scope_id": machine.scope, "kind": "fact", "text": MEMORY},
    ).raise_for_status()
    machine.install()
    assert daemon.stop() == 0

    run, request = _turn(machine, host_clis, proxy.url, daemon)
    record_timing(f"{host} turn with the runtime stopped", run.seconds)
    assert run.seconds < DOWN_TURN_BOUND_S, run.describe()
    assert PACK_BEGIN not in request.body.decode("utf-8")
    assert "PowerContext prepared untrusted historical context" not in request.body.decode()
    log = machine.plugin_data_dir() / "diagnostics.log"
    lines = [json.loads(line) for line in log.read_text("utf-8").splitlines()]
    # SessionStart asks the runtime too (even with bootstrap off), then UserPromptSubmit.
    assert [(line["component"], line["event"], line["outcome"]) for line in lines] == [
        (f"powercontext.{host}.session-start", "context_bootstrap", "server_unavailable"),
        (f"powercontext.{host}.user-prompt-submit", "context_prepare", "server_unavailable"),
    ]
