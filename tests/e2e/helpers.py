"""Small shared helpers for the end-to-end tests (real daemon, real CLI processes)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.support.daemon import Daemon

REMEMBER = "/v1/memory/remember"
SEARCH = "/v1/memory/search"
GET = "/v1/memory/entries/get"
LIST = "/v1/memory/entries/list"
VERSIONS = "/v1/memory/entries/versions"
REVISE = "/v1/memory/entries/revise"
RETIRE = "/v1/memory/entries/retire"
CHANGES = "/v1/memory/changes"
SOURCES = "/v1/sources/content"
SOURCE_GET = "/v1/sources/get"
TASK_RECORD = "/v1/task-results/record"
TASK_LIST = "/v1/task-results/list"
TASK_GET = "/v1/task-results/get"
TASK_RESULT_PATHS = (TASK_RECORD, TASK_LIST, TASK_GET)
PREPARE = "/v1/context/prepare"
EXPLAIN = "/v1/context/explain"
FLUSH = "/v1/memory/flush"
BOOTSTRAP = "/v1/context/bootstrap"
RECEIPTS = "/v1/context/bootstrap/receipts"
OVERVIEW = "/v1/context/bootstrap/overview"
ACTIVITY = "/v1/activity/get"
HANDOFF_COMMIT = "/v1/handoff/commit"
HANDOFF_GET = "/v1/handoff/get"
HANDOFF_NEXT = "/v1/handoff/next"
HANDOFF_WITHDRAW = "/v1/handoff/withdraw"
REFS_SET = "/v1/scopes/references/set"
REFS_GET = "/v1/scopes/references/get"
BOOTSTRAP_PATHS = (
    BOOTSTRAP, RECEIPTS, OVERVIEW, HANDOFF_COMMIT, HANDOFF_GET, HANDOFF_NEXT, HANDOFF_WITHDRAW,
    REFS_SET, REFS_GET,
)  # fmt: skip
PROPOSE_EXPERIENCE = "/v1/experience/propose"
GET_EXPERIENCE = "/v1/experience/get"
LIST_EXPERIENCES = "/v1/experience/list"
PROPOSE_SKILL = "/v1/skill/propose"
GET_SKILL = "/v1/skill/get"
LIST_SKILLS = "/v1/skill/list"
CANDIDATES_LIST = "/v1/artifact-candidates/list"
CANDIDATES_GET = "/v1/artifact-candidates/get"
CANDIDATES_APPROVE = "/v1/artifact-candidates/approve"
CANDIDATES_REJECT = "/v1/artifact-candidates/reject"
CANDIDATES_REVISE = "/v1/artifact-candidates/revise"
REVIEW_PATHS = (
    PROPOSE_EXPERIENCE,
    GET_EXPERIENCE,
    LIST_EXPERIENCES,
    PROPOSE_SKILL,
    GET_SKILL,
    LIST_SKILLS,
    CANDIDATES_LIST,
    CANDIDATES_GET,
    CANDIDATES_APPROVE,
    CANDIDATES_REJECT,
    CANDIDATES_REVISE,
)

POST_PATHS = (
    REMEMBER,
    SEARCH,
    GET,
    LIST,
    VERSIONS,
    REVISE,
    RETIRE,
    CHANGES,
    SOURCES,
    SOURCE_GET,
    PREPARE,
    EXPLAIN,
    FLUSH,
    ACTIVITY,
    *REVIEW_PATHS,
    *BOOTSTRAP_PATHS,
    *TASK_RESULT_PATHS,
)


#: The hook command of each plugin, as its console script runs it (``<module> hook <name>``).
PLUGIN_HOOK_MODULES = {"codex": "powercontext_codex", "claude-code": "powercontext_claude_code"}
#: The persistent data dir variable each host sets for its plugin (spec 07 § Host facts).
PLUGIN_DATA_VARS = {"codex": "PLUGIN_DATA", "claude-code": "CLAUDE_PLUGIN_DATA"}

#: Where a prepared pack starts in a model request (``tests/e2e/test_real_hosts_*``).
PACK_BEGIN = "BEGIN_POWERCONTEXT_PREPARED_CONTEXT_V1"
#: A turn with the runtime stopped: the hook's own 2 s deadline at most; the rest is the host's.
DOWN_TURN_BOUND_S = 20.0


def new_scope(label: str) -> str:
    """A scope id no other test uses (tests share one daemon per module)."""
    return f"e2e:{label}/{uuid.uuid4().hex[:12]}"


def memory_ref(revision: int) -> dict[str, Any]:
    return {"family": "memory", "artifact_id": "memory", "revision": revision}


def citation(revision: int, entry_id: str, version_id: str) -> dict[str, Any]:
    return {
        "memory_ref": memory_ref(revision),
        "entry_id": entry_id,
        "entry_version_id": version_id,
    }


def served_operations(client: httpx.Client) -> list[tuple[str, str, dict[str, Any]]]:
    """``(METHOD, path, operation)`` for every operation of the daemon's served OpenAPI document.

    Security tests iterate this rather than a hand-kept list, so a new route cannot be left
    out of the auth checks by forgetting to add it here.
    """
    response = client.get("/openapi.json")
    assert response.status_code == 200, response.text
    return [
        (method.upper(), path, operation)
        for path, operations in response.json()["paths"].items()
        for method, operation in operations.items()
    ]


def valid_bodies(scope_id: str) -> dict[str, dict[str, Any]]:
    """A schema-valid body for every POST operation (the citation need not exist)."""
    cited = citation(1, "mem_ent_doesnotexist", "mem_ver_doesnotexist")
    artifact = {"family": "experience", "artifact_id": "exp_doesnotexist", "revision": 1}
    return {
        REMEMBER: {"scope_id": scope_id, "kind": "fact", "text": "a valid text"},
        SEARCH: {"scope_id": scope_id, "query": "valid query"},
        GET: {"scope_id": scope_id, "citation": cited},
        LIST: {"scope_id": scope_id},
        VERSIONS: {"scope_id": scope_id, "entry_id": "mem_ent_doesnotexist"},
        REVISE: {"scope_id": scope_id, "citation": cited, "text": "new text"},
        RETIRE: {"scope_id": scope_id, "citation": cited},
        CHANGES: {"scope_id": scope_id},
        SOURCES: {"scope_id": scope_id, "source_id": "src-1", "content": "captured"},
        SOURCE_GET: {"scope_id": scope_id, "source_id": "src-1"},
        # No task_id (optional): every key of a valid body is one that must be there.
        TASK_RECORD: {
            "scope_id": scope_id,
            "task_id": "run-1",  # optional (OPTIONAL_KEYS in test_daemon_security.py)
            "task": {"goal": "a valid goal", "outcome": "succeeded"},
        },
        TASK_LIST: {"scope_id": scope_id},
        TASK_GET: {"scope_id": scope_id, "task_id": "run-1"},
        PREPARE: {"scope_id": scope_id, "query": "valid query"},
        EXPLAIN: {"scope_id": scope_id, "query": "valid query"},
        FLUSH: {"scope_id": scope_id},
        BOOTSTRAP: {
            "scope_id": scope_id,
            "enabled": True,
            "profile": "powercontext.scope-bootstrap.v1",
            "lifecycle": "startup",
            "integration": "codex",
        },
        RECEIPTS: {"scope_id": scope_id, "receipt_id": "rcpt_doesnotexist", "state": "injected"},
        OVERVIEW: {"scope_id": scope_id},
        ACTIVITY: {"scope_id": scope_id},
        HANDOFF_COMMIT: {
            "scope_id": scope_id,
            "base": None,
            "content": {
                "schema": "powercontext.handoff.v1",
                "objective": "o",
                "state": ["s"],
                "disposition": "continuable",
            },
        },
        HANDOFF_GET: {
            "scope_id": scope_id,
            "artifact": {"family": "handoff", "artifact_id": "handoff", "revision": 1},
        },
        HANDOFF_NEXT: {"scope_id": scope_id},
        HANDOFF_WITHDRAW: {"scope_id": scope_id},
        REFS_SET: {"scope_id": scope_id, "references": ["e2e:some-other-scope"]},
        REFS_GET: {"scope_id": scope_id},
        PROPOSE_EXPERIENCE: {
            "scope_id": scope_id,
            "proposal": {"situation": "s", "action": "a", "outcome": "o", "lesson": "l"},
            "source_refs": [{"name": "content", "source_id": "src-1"}],
        },
        GET_EXPERIENCE: {"scope_id": scope_id, "artifact": artifact},
        LIST_EXPERIENCES: {"scope_id": scope_id},
        PROPOSE_SKILL: {
            "scope_id": scope_id,
            "proposal": {"name": "n", "description": "d", "instructions": "i", "validation": ["v"]},
            "source_refs": [{"name": "content", "source_id": "src-1"}],
        },
        GET_SKILL: {"scope_id": scope_id, "artifact": {**artifact, "family": "skill"}},
        LIST_SKILLS: {"scope_id": scope_id},
        CANDIDATES_LIST: {"scope_id": scope_id},
        CANDIDATES_GET: {"scope_id": scope_id, "candidate_id": "cand_doesnotexist"},
        CANDIDATES_APPROVE: {
            "scope_id": scope_id,
            "candidate_id": "cand_doesnotexist",
            "expected_version": 1,
        },
        CANDIDATES_REJECT: {
            "scope_id": scope_id,
            "candidate_id": "cand_doesnotexist",
            "expected_version": 1,
            "decision_reason": "no",
        },
        CANDIDATES_REVISE: {
            "scope_id": scope_id,
            "candidate_id": "cand_doesnotexist",
            "expected_version": 1,
            "proposal": {"situation": "s"},
        },
    }


def assert_envelope(response: httpx.Response, status: int, code: str | None = None) -> dict:
    """The response is the spec's error envelope with this status (and code); returns it."""
    assert response.status_code == status, (response.status_code, response.text[:500])
    assert response.headers["content-type"].startswith("application/json")
    body = response.json()
    assert set(body) == {"error"}, body
    error = body["error"]
    assert set(error) == {"code", "message", "details"}, error
    assert isinstance(error["code"], str) and error["code"]
    assert isinstance(error["message"], str) and error["message"]
    assert error["details"] is None or isinstance(error["details"], dict)
    if code is not None:
        assert error["code"] == code, error
    return error


def remember(client: httpx.Client, scope_id: str, text: str, **fields: Any) -> dict[str, Any]:
    body = {"scope_id": scope_id, "kind": fields.pop("kind", "fact"), "text": text, **fields}
    response = client.post(REMEMBER, json=body)
    assert response.status_code == 200, response.text
    return response.json()


def list_all(client: httpx.Client, scope_id: str, **fields: Any) -> list[dict[str, Any]]:
    """Every entry of the head, following ``next_cursor`` (bounded by a page budget)."""
    entries: list[dict[str, Any]] = []
    body: dict[str, Any] = {"scope_id": scope_id, "limit": 100, **fields}
    for _ in range(1000):
        response = client.post(LIST, json=body)
        assert response.status_code == 200, response.text
        page = response.json()
        entries.extend(page["entries"])
        if page["next_cursor"] is None:
            return entries
        body["cursor"] = page["next_cursor"]
    raise AssertionError("list never ended")


def secret_part(token: str) -> str:
    """The random part of a ``pc_<token id>_<secret>`` token (the whole string otherwise)."""
    return token.split("_", 2)[-1]


def run_cli(
    daemon: Daemon,
    *args: str,
    stdin: str | None = None,
    extra_env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run the real ``powercontext`` command against ``daemon``."""
    env = daemon.env()
    env.update(extra_env or {})
    return subprocess.run(
        [sys.executable, "-m", "powercontext_runtime.cli.main", *args],
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
    )


def cli_json(daemon: Daemon, *args: str, stdin: str | None = None) -> Any:
    """Run a CLI command with ``--json``; it must succeed; returns the parsed document."""
    done = run_cli(daemon, *args, "--json", stdin=stdin)
    assert done.returncode == 0, (done.returncode, done.stderr)
    return json.loads(done.stdout)


def create_token(
    daemon: Daemon, name: str, *scopes: str, capabilities: tuple[str, ...] = ()
) -> str:
    """A new API token through ``powercontext token create`` (works on the database directly);
    without ``capabilities``, the default (an agent's: read, write, propose)."""
    args = ["token", "create", "--name", name]
    for scope in scopes:
        args += ["--scope", scope]
    for capability in capabilities:
        args += ["--capability", capability]
    created = cli_json(daemon, *args)
    assert created["name"] == name and created["scopes"] == list(scopes)
    assert created["capabilities"] == list(capabilities or ("read", "write", "propose"))
    return str(created["token"])


def hook_env(daemon: Daemon, scope: str, tmp_path: Path, **overrides: str) -> dict[str, str]:
    """Environment for a real hook process against ``daemon``: bootstrap on, capture off.

    Every ``POWERCONTEXT_*`` and plugin variable of the outer shell is dropped and the user
    directories are private to the test, so nothing of the developer's setup leaks in.
    ``overrides`` replace or add variables (e.g. ``POWERCONTEXT_CAPTURE_PROMPTS="1"``).
    """
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("POWERCONTEXT_", "CLAUDE_PLUGIN_", "PLUGIN_"))
    }
    env.update(
        POWERCONTEXT_URL=daemon.url,
        POWERCONTEXT_TOKEN=daemon.agent_token,  # what hooks read: no review
        POWERCONTEXT_SCOPE_ID=scope,
        POWERCONTEXT_BOOTSTRAP="1",
        POWERCONTEXT_CAPTURE_PROMPTS="0",
        PLUGIN_DATA=str(tmp_path / "plugin-data"),
        XDG_CONFIG_HOME=str(tmp_path / "config"),
        XDG_STATE_HOME=str(tmp_path / "state"),
        XDG_DATA_HOME=str(tmp_path / "data"),
    )
    env.update(overrides)
    return env


def run_hook_process(
    command: Sequence[str], payload: dict[str, Any], env: dict[str, str]
) -> subprocess.CompletedProcess[bytes]:
    """One real hook process, ``python -m <command…>``, fed ``payload`` as its stdin event.

    It must exit 0 whatever happened (exit 2 would erase the user's prompt).
    """
    completed = subprocess.run(
        [sys.executable, "-m", *command],
        input=json.dumps(payload).encode(),
        env=env,
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    return completed


@asynccontextmanager
async def mcp_session(
    daemon: Daemon,
    token: str | None,
    mode: str = "auto",
    *,
    on_request: Callable[[httpx2.Request], Awaitable[None]] | None = None,
    on_response: Callable[[httpx2.Response], Awaitable[None]] | None = None,
) -> AsyncIterator[Client]:
    """The MCP SDK's client session over Streamable HTTP to the daemon's ``/mcp``.

    ``on_request`` / ``on_response`` are httpx event hooks: they see (and may change) every
    HTTP exchange the SDK makes, e.g. to record statuses or to withdraw the token mid-session.
    """
    headers = {} if token is None else {"Authorization": f"Bearer {token}"}
    hooks: dict[str, list[Any]] = {"request": [], "response": []}
    if on_request is not None:
        hooks["request"].append(on_request)
    if on_response is not None:
        hooks["response"].append(on_response)
    async with (
        httpx2.AsyncClient(headers=headers, timeout=30, event_hooks=hooks) as http,
        Client(streamable_http_client(f"{daemon.url}/mcp", http_client=http), mode=mode) as client,
    ):
        yield client
