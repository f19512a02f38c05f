"""The memory tools reach the real hosts' models right after ``install``, with nothing exported.

Issue 16 item 1: the plugins' ``.mcp.json`` used to point the host's HTTP MCP client at
``http://127.0.0.1:7411/mcp`` with a token from ``POWERCONTEXT_TOKEN`` — without it Codex showed
no tools and Claude Code got a 401. Now each plugin registers a stdio MCP server, the kit's
bridge, which reaches the runtime the way the hooks do (its unix socket and its agent token).

Per host (Codex CLI 0.169.0, Claude Code 2.1.328, from npm; offline against model stubs): a
user whose shell sets **no** ``POWERCONTEXT_*`` variable at all, a runtime serving the
default data dir (``~/.local/share/powercontext``: only its socket is reachable, the TCP port is
a random one), the plugin installed by its own ``install`` — and the model request of the first
turn lists the PowerContext tools (the agent token's: no review tools). ``doctor`` agrees.
With the runtime stopped the turn still completes, without the tools, and once it is back
the next session has them again.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.daemon import Daemon, start_daemon
from tests.support.hosts import CODEX_STUB_KEY_ENV, BlackholeProxy, HostCLIs, RecordedRequest
from tests.support.plugin_sandbox import HOSTS, SANDBOXES, RealHostUser, checks_by_name

pytestmark = pytest.mark.e2e

#: Tools the agent token must list, and review tools it must never list.
AGENT_TOOLS = {"search_memory", "remember_memory", "get_memory_entry", "propose_experience"}
REVIEW_TOOLS = {"approve_artifact_candidate", "reject_artifact_candidate"}
PROMPT = "What do we know about how this project deploys?"


def listed_powercontext_tools(host: str, request: RecordedRequest) -> set[str]:
    """The PowerContext MCP tools the host offered its model in ``request``.

    Codex: a ``namespace`` tool ``mcp__powercontext`` holding one function per MCP tool.
    Claude Code: MCP tools are deferred — listed by name (``mcp__plugin_<plugin>_<server>__<tool>``)
    in the prompt for the model to load with ToolSearch.
    """
    if host == "codex":
        names: set[str] = set()
        for tool in request.json().get("tools", []):
            if tool.get("type") == "namespace" and tool.get("name") == "mcp__powercontext":
                names |= {inner["name"] for inner in tool.get("tools", [])}
        return names
    text = request.body.decode("utf-8")
    return set(re.findall(r"mcp__plugin_powercontext_powercontext__([a-z_]+)", text))


@pytest.fixture
def default_user(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    host_clis: HostCLIs,
    proxy: BlackholeProxy,
) -> Iterator[tuple[RealHostUser, Daemon]]:
    """A user of ``host`` with nothing configured and a runtime in the default data dir."""
    host = request.param
    label = f"{host}-mcp-{uuid.uuid4().hex[:10]}"
    sandbox = SANDBOXES[host].create(tmp_path, proxy.url, remote=f"git@github.com:acme/{label}.git")
    sandbox.with_host_cli(host_clis)
    exported = {name for name in sandbox.env() if name.startswith("POWERCONTEXT_")}
    assert exported <= {CODEX_STUB_KEY_ENV}  # only the model stub's dummy key
    with start_daemon(sandbox.home / ".local/share/powercontext") as daemon:
        user = RealHostUser(sandbox, f"git:github.com/acme/{label}", host_clis, proxy)
        yield user, daemon


def _install(user: RealHostUser) -> dict[str, Any]:
    report = user.install()
    assert "POWERCONTEXT_TOKEN" not in json.dumps(report)
    return report


@pytest.mark.parametrize("default_user", HOSTS, indirect=True)
def test_the_model_sees_the_memory_tools_with_nothing_exported(
    default_user: tuple[RealHostUser, Daemon],
) -> None:
    user, daemon = default_user
    _install(user)

    run, request = user.turn(PROMPT)
    tools = listed_powercontext_tools(user.host, request)
    assert tools >= AGENT_TOOLS, (tools, run.describe())
    assert not tools & REVIEW_TOOLS  # the agent token: a person reviews
    # The tools came from the runtime, over its socket (its TCP port is a random one).
    assert '"path":"/mcp"' in daemon.log_text().replace(" ", "")

    code, report = user.sandbox.doctor()
    mcp = checks_by_name(report)["mcp"]
    assert (code, mcp["status"]) == (0, "ok"), report
    assert mcp["message"] == f"{len(tools)} tools over unix:{daemon.socket_path}"


@pytest.mark.parametrize("default_user", HOSTS, indirect=True)
def test_a_stopped_runtime_leaves_the_turn_working_without_the_tools(
    default_user: tuple[RealHostUser, Daemon],
) -> None:
    user, daemon = default_user
    _install(user)
    assert daemon.stop() == 0

    run, request = user.turn(PROMPT)
    assert run.seconds < 30, run.describe()
    assert listed_powercontext_tools(user.host, request) == set()
    code, report = user.sandbox.doctor()
    mcp = checks_by_name(report)["mcp"]
    assert code == 1 and mcp["status"] == "fail"
    assert "not reachable at unix socket" in mcp["message"]
    assert "powercontext serve" in mcp["message"]

    # The next session finds the runtime again. (Had the server failed to *start*, Claude Code
    # would leave it alone for 15 minutes: the bridge answers the handshake itself instead.)
    with start_daemon(daemon.home):
        _run, request = user.turn(PROMPT)
        assert listed_powercontext_tools(user.host, request) >= AGENT_TOOLS
