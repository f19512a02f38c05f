"""The task evaluation's real-model mode (``--model anthropic|openai``), end to end through the
real Claude Code and Codex CLIs, against a local stand-in for the user's endpoint.

No hosted model can be called here, so the stand-in plays the user's endpoint: a server on
127.0.0.1 that speaks the API the host speaks (Anthropic Messages for Claude Code, OpenAI
Responses for Codex), records every request — path, headers, body — and answers with the
scripted policy (``bench/task_eval/scripted.py``) of whichever task the request carries. It is
reached only through the documented variables (``ANTHROPIC_BASE_URL`` / ``OPENAI_BASE_URL``,
the user's key in ``ANTHROPIC_API_KEY`` / ``OPENAI_API_KEY``, the model name in
``POWERCONTEXT_EVAL_CLAUDE_MODEL`` / ``POWERCONTEXT_EVAL_CODEX_MODEL``), and the evaluation
is started the way a user starts it: ``python -m bench.task_eval`` (its ``main``) with
``POWERCONTEXT_EVAL_MODEL`` set. So these tests run every line of the real-model mode —
key pass-through, base-URL handling, the model flag, and the watcher that revises the citation
entry once the runtime logged the turn's prepare — and assert:

* every model request reached the stand-in at the documented URL, with the user's key in the
  header the host's API uses (``x-api-key`` / ``Authorization: Bearer``), never a placeholder,
  and with the model the user named;
* the key appears nowhere the harness writes: the report (JSON and markdown), its progress
  lines, and every file of the work dir (diagnostics, the runtime's log, the users' homes);
* the watcher revised the citation entry mid-turn — after the runtime served the turn's
  prepare and before the agent's exact re-read — and the report says the re-read found the
  cited version's tag, not the revised head's.

What this cannot show is how a real model does: that is the user's run (docs/evaluation.md).
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import sqlite3
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from bench.task_eval import __main__ as cli
from bench.task_eval.conversation import view_of
from bench.task_eval.harness import GET as GET_PATH
from bench.task_eval.harness import PREPARE as PREPARE_PATH
from bench.task_eval.report import render_markdown
from bench.task_eval.scripted import (
    Action,
    Finish,
    Shell,
    codex_shell_call,
    decide,
    is_task_conversation,
)
from bench.task_eval.tasks import NEW_TAG, OLD_TAG, TASKS, Task
from tests.support.hosts import (
    AnthropicStub,
    HostCLIs,
    OpenAIResponsesStub,
    RecordedRequest,
    StubReply,
)

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]

EVAL_TASKS = ("citation", "constraint")
EVAL_ARMS = ("control", "treatment")
#: The stand-in's first command in every task conversation: what the agent's shell can see.
ENV_PROBE = "env"


class _StandIn:
    """The user's endpoint: records every request, strips the endpoint's own path ``prefix``
    before the API routes, and answers each task conversation with that task's scripted
    policy (no ``on_first_request``: in real-model mode the harness revises by itself)."""

    host: str
    prefix: str
    tasks: Sequence[Task]

    def _decide(self, body: Mapping[str, Any]) -> tuple[Any, Action | None]:
        """The task's scripted action, after a first ``env`` in the agent's shell (its output
        comes back in the next request: the key must not be in it)."""
        view = view_of(self.host, body)
        for task in self.tasks:
            if is_task_conversation(view, task.prompt):
                if not view.issued(ENV_PROBE):
                    return view, Shell(ENV_PROBE)
                return view, decide(view, task.prompt, task.step)
        return view, None

    def _routed(self, request: RecordedRequest) -> RecordedRequest | None:
        if not request.path.startswith(self.prefix + "/"):
            return None
        return RecordedRequest(
            request.method, request.path[len(self.prefix) :], request.headers, request.body
        )


class StandInAnthropic(_StandIn, AnthropicStub):
    host = "claude-code"

    def __init__(self, prefix: str, tasks: Sequence[Task]) -> None:
        AnthropicStub.__init__(self)
        self.prefix, self.tasks = prefix, tasks

    def respond(self, request: RecordedRequest) -> tuple[int, bytes, str]:
        routed = self._routed(request)
        if routed is None:
            return 404, b'{"type":"error","error":{"type":"not_found_error"}}', "application/json"
        return super().respond(routed)

    def next_reply(self, body: Mapping[str, Any]) -> StubReply:
        _view, action = self._decide(body)
        if action is None:
            return StubReply(text="stand-in: not a task conversation")
        if isinstance(action, Finish):
            return StubReply(text=action.text)
        return StubReply(tool="Bash", arguments={"command": action.command})


class StandInResponses(_StandIn, OpenAIResponsesStub):
    host = "codex"

    def __init__(self, prefix: str, tasks: Sequence[Task]) -> None:
        OpenAIResponsesStub.__init__(self)
        self.prefix, self.tasks = prefix, tasks

    def respond(self, request: RecordedRequest) -> tuple[int, bytes, str]:
        routed = self._routed(request)
        if routed is None:
            return 404, b'{"error":{"message":"stand-in: not found"}}', "application/json"
        return super().respond(routed)

    def next_reply(self, body: Mapping[str, Any]) -> StubReply:
        view, action = self._decide(body)
        if action is None:
            return StubReply(text="stand-in: not a task conversation")
        if isinstance(action, Finish):
            return StubReply(text=action.text)
        call = codex_shell_call(view.tools, action.command)
        if call is None:
            return StubReply(text="stand-in: the host offered no shell tool")
        return StubReply(tool=call[0], arguments=call[1])


@dataclass(frozen=True)
class Case:
    """One way a user points the evaluation at their endpoint."""

    mode: str
    host: str
    #: The path of the user's base URL on the stand-in (``<stand-in>/<base_path>``).
    base_path: str
    #: Where the documented semantics of that base URL put every model request.
    model_path: str
    #: What the stand-in strips before its API routes (``/v1/messages``, ``[/v1]/responses``).
    route_prefix: str


CASES = {
    # ANTHROPIC_BASE_URL is the API root: Claude Code posts to <base>/v1/messages.
    "anthropic": Case(
        "anthropic",
        "claude-code",
        "/gateway/anthropic",
        "/gateway/anthropic/v1/messages",
        "/gateway/anthropic",
    ),
    # OPENAI_BASE_URL as the OpenAI SDKs take it, /v1 included (here with a trailing slash):
    # Codex posts to <base>/responses.
    "openai": Case(
        "openai", "codex", "/gateway/openai/v1/", "/gateway/openai/v1/responses", "/gateway/openai"
    ),
    # An OpenAI-compatible endpoint whose root has no /v1: used exactly as given.
    "openai-compatible": Case("openai", "codex", "/compat", "/compat/responses", "/compat"),
}

KEY_VARIABLES = (
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_BASE_URL",
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "POWERCONTEXT_EVAL_CLAUDE_MODEL",
    "POWERCONTEXT_EVAL_CODEX_MODEL",
    "POWERCONTEXT_EVAL_MODEL",
)


@dataclass
class RealModeRun:
    case: Case
    key: str
    model_name: str
    stand_in: AnthropicStub | OpenAIResponsesStub
    report: dict[str, Any]
    stdout: str
    stderr: str
    work_dir: Path
    exit_code: int

    def runs(self) -> dict[tuple[str, str], dict[str, Any]]:
        return {(r["task"], r["arm"]): r for r in self.report["runs"]}

    def posts(self) -> list[RecordedRequest]:
        return [r for r in self.stand_in.requests if r.method == "POST"]

    def runtime_log(self) -> list[dict[str, Any]]:
        """The runtime's access log of the whole evaluation, in order."""
        text = (self.work_dir / "runtime-home-stderr.log").read_text(encoding="utf-8")
        lines = [json.loads(line) for line in text.splitlines() if line.startswith("{")]
        return [line for line in lines if line.get("event") == "http_request"]


def _evaluate(case: Case, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> RealModeRun:
    """``python -m bench.task_eval --json …`` with the documented variables pointing at a
    fresh stand-in, as a user would run it."""
    key = f"sk-standin-{case.mode}-{uuid.uuid4().hex}"
    model_name = f"standin-{case.mode}-model"
    tasks = [TASKS[name] for name in EVAL_TASKS]
    factory = StandInAnthropic if case.mode == "anthropic" else StandInResponses
    stand_in = factory(case.route_prefix, tasks)
    work_dir = tmp_path / "work"
    with stand_in:
        base_url = stand_in.url + case.base_path
        monkeypatch.setenv("POWERCONTEXT_EVAL_MODEL", case.mode)
        if case.mode == "anthropic":
            monkeypatch.setenv("ANTHROPIC_API_KEY", key)
            monkeypatch.setenv("ANTHROPIC_BASE_URL", base_url)
            monkeypatch.setenv("POWERCONTEXT_EVAL_CLAUDE_MODEL", model_name)
        else:
            monkeypatch.setenv("OPENAI_API_KEY", key)
            monkeypatch.setenv("OPENAI_BASE_URL", base_url)
            monkeypatch.setenv("POWERCONTEXT_EVAL_CODEX_MODEL", model_name)
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = cli.main(
                [
                    "--tasks",
                    ",".join(EVAL_TASKS),
                    "--arms",
                    ",".join(EVAL_ARMS),
                    "--work-dir",
                    str(work_dir),
                    "--turn-timeout",
                    "180",
                    "--json",
                ]
            )
    return RealModeRun(
        case=case,
        key=key,
        model_name=model_name,
        stand_in=stand_in,
        report=json.loads(out.getvalue()),
        stdout=out.getvalue(),
        stderr=err.getvalue(),
        work_dir=work_dir,
        exit_code=code,
    )


@pytest.fixture(scope="module", params=sorted(CASES))
def real_run(
    request: pytest.FixtureRequest,
    host_clis: HostCLIs,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[RealModeRun]:
    case = CASES[str(request.param)]
    with pytest.MonkeyPatch.context() as monkeypatch:
        for name in KEY_VARIABLES:
            monkeypatch.delenv(name, raising=False)
        yield _evaluate(case, tmp_path_factory.mktemp(f"real-{request.param}"), monkeypatch)


def _explain(run: RealModeRun) -> str:
    lines = [f"exit={run.exit_code} stand-in saw: {run.stand_in.summary()}"]
    for (task, arm), r in sorted(run.runs().items()):
        lines.append(
            f"{task}/{arm}: success={r['success']} outcome={r['prepare_outcome']} "
            f"check={r['check']} error={r['error']}"
        )
    return "\n".join([*lines, run.stderr[-2000:]])


def test_every_turn_ran_against_the_users_endpoint(real_run: RealModeRun) -> None:
    assert real_run.exit_code == 0, _explain(real_run)
    assert real_run.report["mode"] == real_run.case.mode
    assert real_run.model_name in real_run.report["model_note"]
    runs = real_run.runs()
    assert set(runs) == {(t, a) for t in EVAL_TASKS for a in EVAL_ARMS}
    assert all(r["host"] == real_run.case.host for r in runs.values())
    assert all(r["turn_completed"] and r["error"] is None for r in runs.values()), _explain(
        real_run
    )
    # The stand-in answers with the scripted policy, so the verdicts are the scripted ones.
    assert {key: r["success"] for key, r in runs.items()} == {
        (t, a): TASKS[t].expected[a] for t in EVAL_TASKS for a in EVAL_ARMS
    }, _explain(real_run)
    # Real-model mode does not read the wire: the harness never sees the user's traffic.
    assert all(r["wire"] is None and r["model_requests"] is None for r in runs.values())
    assert len(real_run.posts()) >= 2 * len(runs), _explain(real_run)


def test_the_users_key_base_url_and_model_reach_every_model_request(
    real_run: RealModeRun,
) -> None:
    posts = real_run.posts()
    assert posts, _explain(real_run)
    paths = {r.path.split("?", 1)[0] for r in posts}
    assert paths == {real_run.case.model_path}, _explain(real_run)
    for r in posts:
        if real_run.case.mode == "anthropic":  # Claude Code sends ANTHROPIC_API_KEY as x-api-key
            assert r.headers.get("x-api-key") == real_run.key
            assert "authorization" not in r.headers
        else:  # Codex sends the provider's key as a bearer token
            assert r.headers.get("authorization") == f"Bearer {real_run.key}"
        assert (r.json() or {}).get("model") == real_run.model_name
    # No request reached the endpoint with the sandbox's placeholder key instead.
    for r in real_run.stand_in.requests:
        assert "dummy" not in " ".join(r.headers.values())


def test_the_agents_shell_never_sees_the_key(real_run: RealModeRun) -> None:
    """The key is for the host's own requests: the ``env`` the stand-in ran first in every
    task conversation came back without it (a real model's ``env`` would otherwise put it
    into its context and the host's transcript)."""
    host = real_run.case.host
    outputs = [
        output
        for r in real_run.posts()
        for view in [view_of(host, r.json() or {})]
        for call, output in zip(view.calls, view.tool_outputs, strict=False)
        if call == ENV_PROBE
    ]
    assert outputs and all("POWERCONTEXT_SCOPE_ID=" in output for output in outputs)
    for r in real_run.posts():
        assert real_run.key.encode() not in r.body


def test_the_key_is_never_written_by_the_harness(real_run: RealModeRun) -> None:
    key = real_run.key
    assert key not in real_run.stdout and key not in real_run.stderr
    assert key not in render_markdown(real_run.report)  # what --write-results would write
    leaked = [
        str(path.relative_to(real_run.work_dir))
        for path in sorted(real_run.work_dir.rglob("*"))
        if path.is_file() and not path.is_symlink() and key.encode() in path.read_bytes()
    ]
    assert leaked == [], "the key was written to these files of the work dir"
    assert len(list(real_run.work_dir.rglob("diagnostics.log"))) >= 1  # what was searched


def _reread(run: RealModeRun) -> tuple[str, str]:
    """The entry and version id of the agent's exact re-read (from its shell command)."""
    host = run.case.host
    commands = {
        command
        for r in run.posts()
        for command in view_of(host, r.json() or {}).calls
        if command.startswith("powercontext memory get")
    }
    (command,) = commands
    found = re.search(r"--entry-id (\S+) --version-id (\S+)", command)
    assert found is not None, command
    return found.group(1), found.group(2)


def test_the_watcher_revises_the_cited_entry_mid_turn(real_run: RealModeRun) -> None:
    runs = real_run.runs()
    treatment, control = runs["citation", "treatment"], runs["citation", "control"]
    # The report: the exact re-read found the cited version's tag after the head moved.
    assert treatment["success"] and treatment["entry_gets"] == 1, _explain(real_run)
    assert f"RELEASE_TAG.txt='{OLD_TAG}'" in treatment["check"]
    assert "revised during the turn=True" in treatment["check"]
    assert "re-read after the revision=True" in treatment["check"]
    # Without the plugin there is no prepare, so the watcher never fires.
    assert "revised during the turn=False" in control["check"] and not control["success"]

    # The runtime's log: the turn's prepare, then the revision, then the agent's re-read.
    paths = [line["path"] for line in real_run.runtime_log() if line.get("status") == 200]
    revise = "/v1/memory/entries/revise"
    assert paths.count(revise) == 1, paths  # once: citation/treatment only
    at = paths.index(revise)
    assert PREPARE_PATH in paths[:at] and GET_PATH in paths[at:]
    assert GET_PATH not in paths[:at]

    # The runtime's data: the head holds the revised tag; the version the agent re-read is
    # the one its pack cited, which still holds the old one.
    entry_id, version_id = _reread(real_run)
    db = sqlite3.connect(f"file:{real_run.work_dir}/runtime-home/powercontext.db?mode=ro", uri=True)
    try:
        (head,) = db.execute(
            "SELECT v.entry_version_id, v.text FROM memory_entries e JOIN memory_versions v"
            " ON v.entry_version_id = e.current_version_id WHERE e.entry_id = ?",
            (entry_id,),
        ).fetchall()
        (cited,) = db.execute(
            "SELECT text FROM memory_versions WHERE entry_version_id = ?", (version_id,)
        ).fetchall()
    finally:
        db.close()
    assert head[0] != version_id
    assert NEW_TAG in head[1] and OLD_TAG not in head[1]
    assert OLD_TAG in cited[0]
