"""The stdio MCP bridge (``<plugin> mcp``) as the hosts run it: a real process on pipes.

Issue 16 item 1: the plugins' MCP servers must work right after ``install`` with nothing
exported. The bridge is started exactly as the rendered ``.mcp.json`` says (the absolute
interpreter, ``-I -m powercontext_codex mcp``), with an environment built from scratch: only
the runtime's data dir (``POWERCONTEXT_HOME``) is set, never ``POWERCONTEXT_URL`` or
``POWERCONTEXT_TOKEN``, so the runtime is reached over its socket with its agent token.

Against a real ``powercontext serve`` (both MCP protocol eras, a tool call round trip, batches,
a token file re-issued while the bridge runs) and against the scripted stub runtime for what a
real one will not do on demand (hang, answer 503, send too much).
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from powercontext_hook_kit import __version__
from powercontext_hook_kit.install import mcp_command
from powercontext_hook_kit.mcp_bridge import DEADLINE_SECONDS, MAX_MESSAGE_BYTES, RUNTIME_ERROR
from tests.hook_kit.stub import Reply, StubRuntime, running_stub
from tests.support.daemon import Daemon, start_daemon

pytestmark = pytest.mark.skipif(os.name != "posix", reason="the unix socket default is POSIX-only")

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "bridge-test", "version": "1"},
    },
}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}
MODERN = "2026-07-28"
META = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientInfo": {"name": "bridge-test", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {},
}
#: Tools an agent's token must see, and one it must not (only a reviewer approves).
AGENT_TOOLS = {"search_memory", "remember_memory", "get_memory_entry", "propose_experience"}
REVIEW_TOOL = "approve_artifact_candidate"
SECRET = "pc_SENTINEL_wrong_token"


def request(message_id: Any, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": message_id, "method": method}
    if params is not None:
        message["params"] = params
    return message


def call(message_id: Any, tool: str, arguments: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return request(message_id, "tools/call", {"name": tool, "arguments": arguments, **extra})


def structured(answer: dict[str, Any]) -> dict[str, Any]:
    result = answer["result"]
    assert result["isError"] is False, result
    return dict(result["structuredContent"])


def bridge_env(tmp_path: Path, runtime_home: Path, **extra: str) -> dict[str, str]:
    """A host's environment from scratch: the runtime's data dir and private user dirs only."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(tmp_path / "user"),
        "POWERCONTEXT_HOME": str(runtime_home),
        "XDG_CONFIG_HOME": str(tmp_path / "user" / "config"),
        "XDG_DATA_HOME": str(tmp_path / "user" / "data"),
        "XDG_STATE_HOME": str(tmp_path / "user" / "state"),
    }
    env.update(extra)
    return {key: value for key, value in env.items() if value != ""}


class BridgeProcess:
    """``<python> -I -m <plugin> mcp`` (what ``install`` registers) on pipes."""

    def __init__(self, env: dict[str, str], *, module: str = "powercontext_codex") -> None:
        executable, args = mcp_command(module)
        self.argv = [executable, *args]
        self.process = subprocess.Popen(
            self.argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            cwd="/",
        )
        self._lines: queue.Queue[bytes | None] = queue.Queue()
        self._stderr: list[bytes] = []
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._read_stderr, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self._lines.put(line)
        self._lines.put(None)

    def _read_stderr(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self._stderr.append(line)

    def send(self, *messages: Any) -> None:
        assert self.process.stdin is not None
        for message in messages:
            raw = message if isinstance(message, bytes) else json.dumps(message).encode()
            self.process.stdin.write(raw + b"\n")
        self.process.stdin.flush()

    def line(self, timeout: float = 30.0) -> bytes:
        line = self._lines.get(timeout=timeout)
        assert line is not None, "the bridge closed its stdout"
        assert line.endswith(b"\n") and line.count(b"\n") == 1
        return line

    def answer(self, timeout: float = 30.0) -> Any:
        return json.loads(self.line(timeout))

    def ask(self, message: dict[str, Any], timeout: float = 30.0) -> dict[str, Any]:
        self.send(message)
        answer = self.answer(timeout)
        assert answer.get("id") == message.get("id"), answer
        return dict(answer)

    def close(self, timeout: float = 15.0) -> tuple[int, list[bytes]]:
        """End of input: the bridge answers what is in flight, then exits. Returns its exit
        status and whatever it still wrote."""
        assert self.process.stdin is not None
        self.process.stdin.close()
        code = self.process.wait(timeout=timeout)
        rest: list[bytes] = []
        while (line := self._lines.get(timeout=5)) is not None:
            rest.append(line)
        return code, rest

    def diagnostics(self) -> list[dict[str, Any]]:
        time.sleep(0.05)
        return [json.loads(line) for line in self._stderr if line.strip()]

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    with start_daemon(tmp_path_factory.mktemp("bridge") / "home") as running:
        yield running


@pytest.fixture
def bridges() -> Iterator[list[BridgeProcess]]:
    started: list[BridgeProcess] = []
    yield started
    for bridge in started:
        bridge.kill()


def start(bridges: list[BridgeProcess], env: dict[str, str], **kwargs: Any) -> BridgeProcess:
    bridge = BridgeProcess(env, **kwargs)
    bridges.append(bridge)
    return bridge


def scope() -> str:
    return f"bridge-test:{uuid.uuid4().hex[:12]}"


# ---- against a real runtime --------------------------------------------------------------


@pytest.mark.e2e
def test_handshake_and_tools_over_the_default_socket_with_the_agent_token(
    daemon: Daemon, tmp_path: Path, bridges: list[BridgeProcess]
) -> None:
    bridge = start(bridges, bridge_env(tmp_path, daemon.home))
    initialized = bridge.ask(INITIALIZE)
    assert initialized["result"]["protocolVersion"] == "2025-06-18"
    assert initialized["result"]["serverInfo"]["name"] == "powercontext"
    bridge.send(INITIALIZED)  # a notification: no answer at all
    listed = bridge.ask(request(2, "tools/list"))
    names = {tool["name"] for tool in listed["result"]["tools"]}
    assert names >= AGENT_TOOLS
    assert REVIEW_TOOL not in names  # the agent token, never the operator's
    assert bridge.ask(request(3, "ping")) == {"jsonrpc": "2.0", "id": 3, "result": {}}
    code, rest = bridge.close()
    assert (code, rest) == (0, [])  # nothing for the notification, exit 0 at end of input
    assert bridge.diagnostics() == []  # success is silent


@pytest.mark.e2e
def test_a_tool_call_round_trip_remember_then_search(
    daemon: Daemon, tmp_path: Path, bridges: list[BridgeProcess]
) -> None:
    where = scope()
    text = "Release branches are cut on Thursdays ünïcödé ✓"
    bridge = start(bridges, bridge_env(tmp_path, daemon.home))
    bridge.ask(INITIALIZE)
    bridge.send(INITIALIZED)
    written = structured(
        bridge.ask(call(2, "remember_memory", {"scope_id": where, "kind": "fact", "text": text}))
    )
    found = structured(
        bridge.ask(call(3, "search_memory", {"scope_id": where, "query": "release branches"}))
    )
    assert [(hit["citation"], hit["text"]) for hit in found["hits"]] == [
        (written["entry"]["citation"], text)
    ]
    # What the bridge relayed is what the runtime stored (read over HTTP with the operator).
    with daemon.client() as client:
        listed = client.post("/v1/memory/entries/list", json={"scope_id": where}).json()
    assert [entry["text"] for entry in listed["entries"]] == [text]
    assert bridge.close() == (0, [])


@pytest.mark.e2e
def test_the_per_request_protocol_era_gets_its_routing_headers(
    daemon: Daemon, tmp_path: Path, bridges: list[BridgeProcess]
) -> None:
    """Claude Code 2.1.328 first tries ``server/discover`` (2026-07-28); every request of that
    era carries its version in ``_meta`` and the runtime wants it in headers too."""
    where = scope()
    bridge = start(bridges, bridge_env(tmp_path, daemon.home))
    discovered = bridge.ask(request("d", "server/discover", {"_meta": META}))
    assert "result" in discovered, discovered
    listed = bridge.ask(request(1, "tools/list", {"_meta": META}))
    assert {tool["name"] for tool in listed["result"]["tools"]} >= AGENT_TOOLS
    found = bridge.ask(call(2, "search_memory", {"scope_id": where, "query": "x"}, _meta=META))
    assert structured(found)["hits"] == []
    assert bridge.close() == (0, [])


@pytest.mark.e2e
def test_a_batch_is_answered_with_an_array_and_notifications_get_nothing(
    daemon: Daemon, tmp_path: Path, bridges: list[BridgeProcess]
) -> None:
    bridge = start(bridges, bridge_env(tmp_path, daemon.home))
    bridge.ask(INITIALIZE)
    bridge.send([request(2, "ping"), INITIALIZED, request(3, "tools/list")])
    answers = bridge.answer()
    assert isinstance(answers, list)
    assert [answer["id"] for answer in answers] == [2, 3]
    assert answers[0]["result"] == {}
    bridge.send([])
    assert bridge.answer()["error"]["code"] == -32600
    assert bridge.close() == (0, [])


@pytest.mark.e2e
def test_a_line_that_is_not_json_is_a_parse_error_and_the_session_goes_on(
    daemon: Daemon, tmp_path: Path, bridges: list[BridgeProcess]
) -> None:
    bridge = start(bridges, bridge_env(tmp_path, daemon.home))
    bridge.send(b'{"jsonrpc": "2.0", "id": 1, "method": ')
    assert bridge.answer() == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": -32700, "message": "parse error: the line is not JSON"},
    }
    bridge.send(b"")  # blank lines are skipped
    bridge.send(b"42")
    assert bridge.answer()["error"]["code"] == -32600
    assert "result" in bridge.ask(INITIALIZE)
    assert bridge.close() == (0, [])


@pytest.mark.e2e
def test_a_refused_token_names_the_fix_and_a_re_issued_token_file_is_read_again(
    daemon: Daemon, tmp_path: Path, bridges: list[BridgeProcess]
) -> None:
    """The token file is read for every request: after ``powercontext serve`` re-issues it (here:
    the right token written over a wrong one) the same bridge process works."""
    home = tmp_path / "pc-home"  # a data dir of our own, whose token file we control
    (home / "auth").mkdir(parents=True)
    token_file = home / "auth" / "agent-token"
    token_file.write_text(SECRET + "\n")
    bridge = start(bridges, bridge_env(tmp_path, home, POWERCONTEXT_URL=daemon.unix_url))
    assert bridge.ask(INITIALIZE)["result"]["serverInfo"]["name"] == "powercontext"  # local
    refused = bridge.ask(request(2, "tools/list"))
    error = refused["error"]
    assert error["code"] == RUNTIME_ERROR
    assert error["data"] == {"outcome": "authentication_failed", "http_status": 401}
    assert "refused the agent token" in error["message"]
    assert str(token_file) in error["message"]
    assert "`powercontext serve`" in error["message"]
    assert SECRET not in json.dumps(refused)
    diagnostics = bridge.diagnostics()
    assert [(d["event"], d["outcome"], d.get("http_status")) for d in diagnostics] == [
        ("mcp_request", "authentication_failed", 401)  # initialize, answered locally
    ] * 2
    assert SECRET not in json.dumps(diagnostics)

    token_file.write_text(daemon.agent_token + "\n")
    assert bridge.ask(request(3, "tools/list"))["result"]["tools"]
    assert bridge.close() == (0, [])


@pytest.mark.e2e
def test_a_wrong_token_variable_is_named_but_never_shown(
    daemon: Daemon, tmp_path: Path, bridges: list[BridgeProcess]
) -> None:
    bridge = start(bridges, bridge_env(tmp_path, daemon.home, POWERCONTEXT_TOKEN=SECRET))
    error = bridge.ask(request(1, "tools/list"))["error"]
    assert "POWERCONTEXT_TOKEN" in error["message"]
    assert SECRET not in error["message"]
    assert bridge.close() == (0, [])


@pytest.mark.e2e
def test_no_token_file_says_to_start_the_runtime_once(
    daemon: Daemon, tmp_path: Path, bridges: list[BridgeProcess]
) -> None:
    home = tmp_path / "empty-home"
    home.mkdir()
    bridge = start(bridges, bridge_env(tmp_path, home, POWERCONTEXT_URL=daemon.url))
    error = bridge.ask(request(1, "tools/list"))["error"]
    assert error["data"]["http_status"] == 401
    assert f"{home}/auth/agent-token does not exist" in error["message"]
    assert "powercontext serve" in error["message"]
    assert bridge.close() == (0, [])


# ---- runtime down, hung or odd -----------------------------------------------------------


def test_a_runtime_that_is_down_gets_an_error_per_request_and_never_a_hang(
    tmp_path: Path, bridges: list[BridgeProcess]
) -> None:
    home = tmp_path / "no-runtime"  # no socket, no token: nothing was ever started here
    home.mkdir()
    where = scope()
    bridge = start(bridges, bridge_env(tmp_path, home))
    started = time.monotonic()
    # The handshake is answered here: a host remembers a server that failed to start (Claude
    # Code for 15 minutes), but retries a failing tools/list and finds the runtime next time.
    assert bridge.ask(request("d", "server/discover", {"_meta": META})) == {
        "jsonrpc": "2.0",
        "id": "d",
        "error": {"code": -32601, "message": "Method not found"},
    }
    assert bridge.ask(INITIALIZE) == {
        "jsonrpc": "2.0",
        "id": 1,
        "result": {
            "protocolVersion": "2025-06-18",
            "capabilities": {"tools": {"listChanged": False}},
            "serverInfo": {"name": "powercontext", "version": __version__},
        },
    }
    bridge.send(INITIALIZED)
    refused = bridge.ask(request(2, "tools/list"))
    refused_call = bridge.ask(call(3, "search_memory", {"scope_id": where, "query": "SENTINEL"}))
    assert time.monotonic() - started < 5
    for answer in (refused, refused_call):
        error = answer["error"]
        assert error["code"] == RUNTIME_ERROR
        assert error["data"] == {"outcome": "server_unavailable"}
        assert error["message"] == (
            f"PowerContext runtime is not reachable at unix socket {home}/powercontext.sock "
            "(connection refused or closed); start it with `powercontext serve`, or point "
            "POWERCONTEXT_URL at it"
        )
        assert where not in json.dumps(answer) and "SENTINEL" not in json.dumps(answer)
    assert bridge.close() == (0, [])  # the notification got no answer
    lines = bridge.diagnostics()
    assert [line["outcome"] for line in lines] == ["server_unavailable"] * 5
    for line in lines:
        assert set(line) <= {"component", "event", "outcome", "http_status", "duration_ms"}
        assert line["component"] == "powercontext.codex.mcp"


def _echo(status: int = 200, **result: Any) -> Any:
    """A stub ``/mcp`` that answers every request with ``result`` under its own id."""

    def answer(path: str, body: bytes) -> Reply | None:
        message = json.loads(body)
        if "id" not in message:
            return Reply(202, b"")
        reply = {"jsonrpc": "2.0", "id": message["id"], "result": result}
        return Reply(status, json.dumps(reply).encode())

    return answer


@pytest.fixture
def stub_home(tmp_path: Path) -> Path:
    """A runtime data dir with an agent token, where the stub runtime listens."""
    home = tmp_path / "stub-home"
    (home / "auth").mkdir(parents=True)
    (home / "auth" / "agent-token").write_text("pc_agent_stub\n")
    return home


@pytest.fixture
def stub_runtime(stub_home: Path) -> Iterator[StubRuntime]:
    with running_stub(str(stub_home / "powercontext.sock")) as running:
        yield running


def test_headers_follow_the_negotiated_protocol_version(
    stub_runtime: StubRuntime, stub_home: Path, tmp_path: Path, bridges: list[BridgeProcess]
) -> None:
    stub_runtime.answer = _echo(protocolVersion="2025-06-18")
    bridge = start(bridges, bridge_env(tmp_path, stub_home))
    bridge.ask(INITIALIZE)
    bridge.send(INITIALIZED)
    bridge.ask(request(2, "tools/list"))
    bridge.ask(call(3, "search_memory", {"scope_id": "s", "query": "q"}, _meta=META))
    bridge.ask(call(4, "naïve tool", {}, _meta=META))
    assert bridge.close() == (0, [])
    sent = stub_runtime.requests
    assert [request.path for request in sent] == ["/mcp"] * 5
    # The bridge forwards each message on its own thread, so the notification (which nobody
    # waits for) may reach the runtime after the next request: key them by what they carry.
    by_message = {json.loads(request.body).get("id", "notification"): request for request in sent}
    assert sorted(by_message, key=str) == sorted([1, 2, 3, 4, "notification"], key=str)
    order = [1, "notification", 2, 3, 4]
    headers = [{k.lower(): v for k, v in by_message[key].headers.items()} for key in order]
    for seen in headers:
        assert seen["authorization"] == "Bearer pc_agent_stub"
        assert seen["content-type"] == "application/json"
        assert seen["accept"] == "application/json, text/event-stream"
        assert seen["host"] == "localhost"
    assert "mcp-protocol-version" not in headers[0]  # initialize itself negotiates it
    assert headers[1]["mcp-protocol-version"] == headers[2]["mcp-protocol-version"] == "2025-06-18"
    assert (headers[3]["mcp-protocol-version"], headers[3]["mcp-method"]) == (MODERN, "tools/call")
    assert headers[3]["mcp-name"] == "search_memory"
    assert headers[4]["mcp-name"] == "=?base64?bmHDr3ZlIHRvb2w=?="  # the SDK's encoding
    # Every message is forwarded byte-for-byte as the host wrote it.
    assert json.loads(by_message[2].body) == request(2, "tools/list")


def test_a_hung_runtime_is_answered_with_a_timeout_error(
    stub_runtime: StubRuntime, stub_home: Path, tmp_path: Path, bridges: list[BridgeProcess]
) -> None:
    stub_runtime.replies["/mcp"] = Reply(200, b"{}", delay=60)
    bridge = start(bridges, bridge_env(tmp_path, stub_home))
    started = time.monotonic()
    error = bridge.ask(request(1, "tools/list"), timeout=DEADLINE_SECONDS + 20)["error"]
    assert DEADLINE_SECONDS - 0.5 < time.monotonic() - started < DEADLINE_SECONDS + 10
    assert error["data"] == {"outcome": "server_unavailable"}
    assert f"did not answer within {DEADLINE_SECONDS:.0f} s" in error["message"]
    bridge.kill()


@pytest.mark.parametrize(
    ("reply", "outcome", "expected"),
    [
        (
            Reply(503, b'{"error":{"code":"runtime_not_ready","message":"x","details":null}}'),
            "server_unavailable",
            "cannot serve the request now (HTTP 503 runtime_not_ready)",
        ),
        (Reply(404, b"{}"), "version_mismatch", "has no MCP endpoint (HTTP 404)"),
        (
            Reply(403, b'{"error":{"code":"origin_forbidden","message":"x","details":null}}'),
            "forbidden",
            "refused the request (HTTP 403 origin_forbidden)",
        ),
        (Reply(200, b"x" * (MAX_MESSAGE_BYTES + 1)), "invalid_response", "8 MiB"),
        (Reply(200, b"not json"), "invalid_response", "without answering it"),
    ],
)
def test_odd_answers_become_errors_that_say_why(
    stub_runtime: StubRuntime,
    stub_home: Path,
    tmp_path: Path,
    bridges: list[BridgeProcess],
    reply: Reply,
    outcome: str,
    expected: str,
) -> None:
    stub_runtime.replies["/mcp"] = reply
    bridge = start(bridges, bridge_env(tmp_path, stub_home))
    assert bridge.ask(INITIALIZE)["result"]["serverInfo"]["name"] == "powercontext"  # local
    error = bridge.ask(request(2, "tools/list"))["error"]
    assert error["code"] == RUNTIME_ERROR
    assert error["data"]["outcome"] == outcome
    assert expected in error["message"], error["message"]
    assert bridge.close() == (0, [])


def test_a_json_rpc_error_from_the_runtime_is_forwarded_as_it_is(
    stub_runtime: StubRuntime, stub_home: Path, tmp_path: Path, bridges: list[BridgeProcess]
) -> None:
    """The SDK refuses an unsupported protocol version with HTTP 400 and a JSON-RPC error: that
    is the runtime's answer to the host, not a transport failure."""
    body = b'{"jsonrpc":"2.0","id":7,"error":{"code":-32602,"message":"unsupported version"}}'
    stub_runtime.replies["/mcp"] = Reply(400, body)
    bridge = start(bridges, bridge_env(tmp_path, stub_home))
    bridge.send(request(7, "tools/list"))
    assert bridge.line() == body + b"\n"
    assert bridge.close() == (0, [])


def test_the_claude_code_bridge_takes_the_plugin_options(
    stub_runtime: StubRuntime, stub_home: Path, tmp_path: Path, bridges: list[BridgeProcess]
) -> None:
    """Claude Code's ``.mcp.json`` hands the ``url``/``token`` options over as
    ``CLAUDE_PLUGIN_OPTION_*``; they rank below ``POWERCONTEXT_*``, as for the hooks."""
    stub_runtime.answer = _echo(protocolVersion="2025-06-18")
    other = tmp_path / "elsewhere"
    other.mkdir()
    env = bridge_env(
        tmp_path,
        other,  # no socket or token file there: only the options can lead to the stub
        CLAUDE_PLUGIN_OPTION_URL=stub_runtime.url,
        CLAUDE_PLUGIN_OPTION_TOKEN="pc_option_token",
    )
    bridge = start(bridges, env, module="powercontext_claude_code")
    assert "result" in bridge.ask(INITIALIZE)
    assert bridge.close() == (0, [])
    assert stub_runtime.requests[0].headers["Authorization"] == "Bearer pc_option_token"


@pytest.mark.parametrize("module", ["powercontext_codex", "powercontext_claude_code"])
def test_the_bridge_keeps_the_hooks_lean_imports(tmp_path: Path, module: str) -> None:
    """The host starts the bridge with every session: ``<plugin> mcp`` takes the hooks' short
    path — none of the heavy client libraries, no argparse, no install machinery."""
    probe = (
        "import io, sys\n"
        "sys.stdin = io.TextIOWrapper(io.BytesIO(b''))\n"
        f"from {module}.__main__ import main\n"
        "assert main(['mcp']) == 0\n"
        "print(' '.join(sorted(sys.modules)))\n"
    )
    done = subprocess.run(
        [sys.executable, "-I", "-c", probe],
        capture_output=True,
        text=True,
        env=bridge_env(tmp_path, tmp_path / "none"),
        timeout=60,
        check=True,
    )
    loaded = set(done.stdout.split())
    assert "powercontext_hook_kit.mcp_bridge" in loaded
    heavy = {"httpx", "http.client", "asyncio", "ssl", "email", "argparse", "subprocess"}
    lazy = {"powercontext_hook_kit.install", f"{module}.integration"}
    assert not loaded & (heavy | lazy), loaded & (heavy | lazy)


# ---- the catalog cache (a cold or loaded runtime must not cost Codex's first turn its tools) --

#: Far below the second Codex ``exec`` waits for ``initialize`` + ``tools/list``.
CACHED_ANSWER_BOUND = 0.5
TOOLS_LIST = request(2, "tools/list")


class CatalogRuntime:
    """A stub ``/mcp`` that answers the handshake and ``tools/list`` like the runtime, with a
    given server version, tool names and delay (changeable between bridges)."""

    def __init__(self, version: str, tools: list[str], *, list_changed: bool = False) -> None:
        self.version = version
        self.tools = tools
        self.list_changed = list_changed
        self.delay = 0.0

    def __call__(self, path: str, body: bytes) -> Reply:
        message = json.loads(body)
        if "id" not in message:
            return Reply(202, b"", delay=self.delay)
        method = message["method"]
        if method in ("initialize", "server/discover"):
            result: dict[str, Any] = {
                "protocolVersion": message.get("params", {}).get("protocolVersion", MODERN),
                "capabilities": {"tools": {"listChanged": self.list_changed}},
                "serverInfo": {"name": "powercontext", "version": self.version},
            }
        elif method == "tools/list":
            result = {"tools": [{"name": name, "inputSchema": {}} for name in self.tools]}
        else:
            result = {"content": [], "isError": False}
        answer = {"jsonrpc": "2.0", "id": message["id"], "result": result}
        return Reply(200, json.dumps(answer).encode(), delay=self.delay)


def catalog_path(tmp_path: Path) -> Path:
    """Where the Codex bridge of :func:`bridge_env` keeps its cache: no ``PLUGIN_DATA`` reaches
    a Codex MCP server, so the kit's plugin data dir is ``<XDG_STATE_HOME>/powercontext/codex``."""
    return tmp_path / "user" / "state" / "powercontext" / "codex" / "mcp-catalog.json"


def tool_names(answer: dict[str, Any]) -> list[str]:
    return [tool["name"] for tool in answer["result"]["tools"]]


def prime(bridges: list[BridgeProcess], env: dict[str, str], *messages: dict[str, Any]) -> None:
    """One session against a warm runtime: its answers are what the cache keeps."""
    bridge = start(bridges, env)
    for message in messages or (INITIALIZE, TOOLS_LIST):
        assert "result" in bridge.ask(message)
    assert bridge.close() == (0, [])


def started(bridges: list[BridgeProcess], env: dict[str, str], **kwargs: Any) -> BridgeProcess:
    """A bridge that is up and reading (a line that is not JSON is answered without the
    runtime), so timings below measure the answers, not the interpreter's start."""
    bridge = start(bridges, env, **kwargs)
    bridge.send(b"up?")
    assert bridge.answer()["error"]["code"] == -32700
    return bridge


def timed(bridge: BridgeProcess, message: dict[str, Any]) -> tuple[dict[str, Any], float]:
    started = time.monotonic()
    answer = bridge.ask(message)
    return answer, time.monotonic() - started


def test_a_cached_catalog_answers_at_once_while_the_runtime_is_slow_and_is_refreshed(
    stub_runtime: StubRuntime, stub_home: Path, tmp_path: Path, bridges: list[BridgeProcess]
) -> None:
    runtime = CatalogRuntime("1.0", ["search_memory", "remember_memory"])
    stub_runtime.answer = runtime
    env = bridge_env(tmp_path, stub_home)
    prime(bridges, env)
    path = catalog_path(tmp_path)
    assert path.stat().st_mode & 0o777 == 0o600

    # A cold (or loaded) runtime: every /mcp answer takes seconds — and lists one more tool.
    runtime.delay, runtime.version = 3.0, "1.1"
    runtime.tools = [*runtime.tools, "get_memory_entry"]
    bridge = started(bridges, env)
    handshake, first = timed(bridge, INITIALIZE)
    bridge.send(INITIALIZED)
    tools, second = timed(bridge, TOOLS_LIST)
    assert first < CACHED_ANSWER_BOUND and second < CACHED_ANSWER_BOUND, (first, second)
    assert handshake["result"]["serverInfo"]["version"] == "1.0"  # the runtime's, cached
    assert handshake["result"]["protocolVersion"] == "2025-06-18"
    assert tool_names(tools) == ["search_memory", "remember_memory"]
    # The real requests still went out (the host's own bytes, with the negotiated version) …
    deadline = time.monotonic() + 10
    while len(stub_runtime.requests) < 5 and time.monotonic() < deadline:
        time.sleep(0.01)
    refreshed = [json.loads(r.body) for r in stub_runtime.requests[2:]]
    assert sorted(str(m.get("id")) for m in refreshed) == ["1", "2", "None"]
    listed = next(r for r in stub_runtime.requests[2:] if json.loads(r.body).get("id") == 2)
    assert listed.headers["MCP-Protocol-Version"] == "2025-06-18"
    # … and their answers refresh the file; nothing more reaches the host (it has its answers,
    # and was not promised list_changed).
    assert bridge.close() == (0, [])
    stored = json.loads(path.read_text())
    by_method = {entry["method"]: entry for entry in stored["entries"]}
    assert [t["name"] for t in by_method["tools/list"]["result"]["tools"]] == runtime.tools
    assert by_method["initialize"]["runtime_version"] == "1.1"
    # The next session lists the new tool, still at once.
    runtime.delay = 3.0
    bridge = started(bridges, env)
    assert timed(bridge, INITIALIZE)[1] < CACHED_ANSWER_BOUND
    tools, seconds = timed(bridge, TOOLS_LIST)
    assert seconds < CACHED_ANSWER_BOUND and tool_names(tools) == runtime.tools
    bridge.kill()


def test_a_changed_tool_list_is_announced_when_the_runtime_promised_list_changed(
    stub_runtime: StubRuntime, stub_home: Path, tmp_path: Path, bridges: list[BridgeProcess]
) -> None:
    runtime = CatalogRuntime("1.0", ["search_memory"], list_changed=True)
    stub_runtime.answer = runtime
    env = bridge_env(tmp_path, stub_home)
    prime(bridges, env)
    runtime.delay, runtime.tools = 1.0, ["search_memory", "remember_memory"]
    bridge = start(bridges, env)
    bridge.ask(INITIALIZE)
    assert tool_names(bridge.ask(TOOLS_LIST)) == ["search_memory"]
    assert bridge.answer(timeout=15) == {
        "jsonrpc": "2.0",
        "method": "notifications/tools/list_changed",
    }
    assert tool_names(bridge.ask(request(3, "tools/list"), timeout=15)) == runtime.tools
    assert bridge.close() == (0, [])


def test_the_per_request_era_discovery_and_tools_come_from_the_cache_too(
    stub_runtime: StubRuntime, stub_home: Path, tmp_path: Path, bridges: list[BridgeProcess]
) -> None:
    runtime = CatalogRuntime("1.0", ["search_memory"])
    stub_runtime.answer = runtime
    env = bridge_env(tmp_path, stub_home, CLAUDE_PLUGIN_DATA=str(tmp_path / "claude-data"))
    discover = request(1, "server/discover", {"_meta": META})
    modern_tools = request(2, "tools/list", {"_meta": META})
    bridge = start(bridges, env, module="powercontext_claude_code")
    bridge.ask(discover)
    bridge.ask(modern_tools)
    assert bridge.close() == (0, [])
    # Claude Code hands its MCP server the plugin's data dir: the cache lives there.
    assert (tmp_path / "claude-data" / "mcp-catalog.json").is_file()

    runtime.delay = 3.0
    bridge = started(bridges, env, module="powercontext_claude_code")
    answer, first = timed(bridge, discover)
    tools, second = timed(bridge, modern_tools)
    assert first < CACHED_ANSWER_BOUND and second < CACHED_ANSWER_BOUND, (first, second)
    assert answer["result"]["serverInfo"]["version"] == "1.0"
    assert tool_names(tools) == ["search_memory"]
    # An initialize-era session has no entry yet: it waits for the runtime.
    answer, seconds = timed(bridge, request(3, "initialize", INITIALIZE["params"]))
    assert seconds >= 2.5 and "result" in answer
    bridge.kill()


def test_another_token_never_gets_the_cached_catalog_and_neither_token_is_stored(
    stub_runtime: StubRuntime, stub_home: Path, tmp_path: Path, bridges: list[BridgeProcess]
) -> None:
    runtime = CatalogRuntime("1.0", ["search_memory"])
    stub_runtime.answer = runtime
    env = bridge_env(tmp_path, stub_home)
    prime(bridges, env)
    # `powercontext serve` re-issued the agent token (a reviewer's token would list more).
    (stub_home / "auth" / "agent-token").write_text("pc_agent_reissued\n")
    runtime.delay, runtime.tools = 1.0, ["search_memory", "approve_artifact_candidate"]
    bridge = started(bridges, env)
    _answer, first = timed(bridge, INITIALIZE)
    tools, second = timed(bridge, TOOLS_LIST)
    assert first >= 0.9 and second >= 0.9  # both waited for the runtime: no cache hit
    assert tool_names(tools) == runtime.tools
    assert bridge.close() == (0, [])
    text = catalog_path(tmp_path).read_text()
    assert "pc_agent_stub" not in text and "pc_agent_reissued" not in text
    fingerprints = {entry["token"] for entry in json.loads(text)["entries"]}
    assert len(fingerprints) == 2  # one per token, both salted hashes
    assert all(len(f) == 64 for f in fingerprints)


def test_the_cache_file_holds_no_token_and_no_content(
    stub_runtime: StubRuntime, stub_home: Path, tmp_path: Path, bridges: list[BridgeProcess]
) -> None:
    stub_runtime.answer = CatalogRuntime("1.0", ["search_memory"])
    env = bridge_env(tmp_path, stub_home)
    bridge = start(bridges, env)
    bridge.ask(INITIALIZE)
    bridge.ask(TOOLS_LIST)
    secret_scope, secret_text = "acme-scope-SENTINEL", "the deploy password is SENTINEL"
    bridge.ask(call(3, "search_memory", {"scope_id": secret_scope, "query": secret_text}))
    bridge.ask(request(4, "tools/list", {"cursor": "page-SENTINEL"}))
    assert bridge.close() == (0, [])
    path = catalog_path(tmp_path)
    text = path.read_text()
    assert "SENTINEL" not in text and "pc_agent_stub" not in text
    assert {entry["method"] for entry in json.loads(text)["entries"]} == {
        "initialize",
        "tools/list",
    }
    assert path.stat().st_mode & 0o777 == 0o600
    assert path.parent.stat().st_mode & 0o077 == 0


@pytest.mark.parametrize(
    "damage",
    [
        b"\x00not json at all",
        b'{"schema":"someone.else.v1","entries":[]}',
        b'{"schema":"powercontext.mcp-catalog.v1","salt":"zz","entries":[]}',
        b'{"schema":"powercontext.mcp-catalog.v1","salt":"' + b"0" * 32 + b'","entries":[1]}',
    ],
    ids=["garbage", "foreign", "bad-salt", "bad-entry"],
)
def test_a_corrupt_or_foreign_cache_file_is_ignored_and_replaced(
    stub_runtime: StubRuntime,
    stub_home: Path,
    tmp_path: Path,
    bridges: list[BridgeProcess],
    damage: bytes,
) -> None:
    runtime = CatalogRuntime("1.0", ["search_memory"])
    stub_runtime.answer = runtime
    path = catalog_path(tmp_path)
    path.parent.mkdir(parents=True)
    path.write_bytes(damage)
    bridge = start(bridges, bridge_env(tmp_path, stub_home))
    assert bridge.ask(INITIALIZE)["result"]["serverInfo"]["version"] == "1.0"
    assert tool_names(bridge.ask(TOOLS_LIST)) == ["search_memory"]
    assert bridge.close() == (0, [])
    assert bridge.diagnostics() == []  # not even worth a line
    stored = json.loads(path.read_text())
    assert stored["schema"] == "powercontext.mcp-catalog.v1"
    assert {entry["method"] for entry in stored["entries"]} == {"initialize", "tools/list"}


def test_a_cache_never_hides_a_runtime_that_is_down(
    stub_home: Path, tmp_path: Path, bridges: list[BridgeProcess]
) -> None:
    """The cache stands in for a *cold* runtime only: with nothing listening the host gets
    what it gets without a cache (the handshake answered here, tools/list an explanation), so
    a turn never offers tools that cannot work."""
    env = bridge_env(tmp_path, stub_home)
    with running_stub(str(stub_home / "powercontext.sock")) as stub:
        stub.answer = CatalogRuntime("9.9", ["search_memory"])
        prime(bridges, env)
    assert catalog_path(tmp_path).is_file()
    bridge = start(bridges, env)
    handshake = bridge.ask(INITIALIZE)
    assert handshake["result"]["serverInfo"]["version"] == __version__  # the bridge's own
    error = bridge.ask(TOOLS_LIST)["error"]
    assert error["code"] == RUNTIME_ERROR and "not reachable" in error["message"]
    assert bridge.close() == (0, [])
    assert [line["outcome"] for line in bridge.diagnostics()] == ["server_unavailable"] * 2
