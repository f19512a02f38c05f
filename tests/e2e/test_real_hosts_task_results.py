"""The installed plugins record each turn's task result by themselves (issue #31 item 2).

Per host (Codex CLI 0.169.0 / Claude Code 2.1.328 from npm, offline): the plugin is installed
by its own ``install`` into a throw-away user, a scripted model (``tests/support/task_session``)
runs a failing check, edits ``calc.py`` and runs the check again, passing — through the host's
real tools — and at the end of the turn the plugin's Stop hook reads the host's transcript and
records the task result in a real runtime. The test reads it back through the runtime's own
``get_task_result``, and checks that an unreachable runtime costs the turn nothing: the result
waits in the plugin's spool and a later turn's Stop delivers it.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.hook_kit.stub import dead_port
from tests.hosts.conftest import record_timing
from tests.support.daemon import Daemon
from tests.support.hosts import CompletedRun, run_host
from tests.support.plugin_sandbox import HOSTS, PluginUserFactory, RealHostUser
from tests.support.task_session import (
    CHECK_COMMAND,
    FINAL_TEXT,
    FIXED,
    TASK_PROMPT,
    task_session_model,
    write_task_repo,
)

pytestmark = pytest.mark.e2e

#: What each host needs to let the scripted model's tools run non-interactively.
_TOOL_ARGS = {
    "codex": ["--sandbox", "danger-full-access"],
    "claude-code": ["--allowedTools", "Bash,Edit,Read", "--"],
}


def _session(user: RealHostUser) -> CompletedRun:
    sandbox = user.sandbox
    write_task_repo(sandbox.repo)
    with task_session_model(user.host, sandbox.repo) as model:
        run = run_host(
            user.host,
            TASK_PROMPT,
            model_url=model.url,
            home=sandbox.home,
            cwd=sandbox.repo,
            clis=user.clis,
            proxy_url=user.proxy.url,
            extra_env=sandbox.extra_env,
            extra_args=_TOOL_ARGS[user.host],
            timeout=120,
        )
    assert run.returncode == 0 and FINAL_TEXT in run.stdout, run.describe()
    assert (sandbox.repo / "calc.py").read_text("utf-8") == FIXED, run.describe()
    return run


def _task_results(daemon: Daemon, scope: str) -> list[dict[str, Any]]:
    answer = daemon.client().post("/v1/task-results/list", json={"scope_id": scope})
    assert answer.status_code == 200, answer.text
    return list(answer.json()["task_results"])


def _task(daemon: Daemon, scope: str, source_id: str) -> dict[str, Any]:
    task_id = source_id.removeprefix("task-result/")
    answer = daemon.client().post(
        "/v1/task-results/get", json={"scope_id": scope, "task_id": task_id}
    )
    assert answer.status_code == 200, answer.text
    return dict(answer.json()["task"])


def _assert_the_task(task: dict[str, Any], host: str) -> None:
    assert task["goal"] == TASK_PROMPT
    assert task["outcome"] == "succeeded"
    assert task["host"] == host
    assert task["changes"] == [{"path": "calc.py", "added": 1, "removed": 1}]
    assert [(c["command"], c["exit_status"]) for c in task["checks"]] == [
        (CHECK_COMMAND, 1),
        (CHECK_COMMAND, 0),
    ]
    assert task["checks"][0]["output_tail"].endswith("expected 5, got -1")


@pytest.mark.parametrize("host", HOSTS)
def test_the_installed_plugin_records_the_turns_task_result(
    host: str, module_daemon: Daemon, plugin_user: PluginUserFactory
) -> None:
    user = plugin_user(host, module_daemon)
    user.install()

    run = _session(user)
    record_timing(f"{host} scripted task turn with the Stop hook", run.seconds)
    if host == "codex":
        assert "hook: Stop Completed" in run.stderr, run.describe()

    [listed] = _task_results(module_daemon, user.scope)
    assert listed["source"]["name"] == "task-result"
    _assert_the_task(_task(module_daemon, user.scope, listed["source"]["source_id"]), host)
    assert not [line for line in user.diagnostics() if line.get("event") == "task_result"]


@pytest.mark.parametrize("host", HOSTS)
def test_an_unreachable_runtime_spools_the_result_for_a_later_turn(
    host: str, module_daemon: Daemon, plugin_user: PluginUserFactory
) -> None:
    user = plugin_user(host, module_daemon)
    user.install()
    env = user.sandbox.extra_env
    url = env["POWERCONTEXT_URL"]
    env["POWERCONTEXT_URL"] = f"http://127.0.0.1:{dead_port()}"  # the runtime is not there

    _session(user)
    outcomes = [
        (line["event"], line["outcome"])
        for line in user.diagnostics()
        if line.get("event", "").startswith("task_result")
    ]
    assert ("task_result", "server_unavailable") in outcomes, outcomes
    spool = user.sandbox.plugin_data_dir / "task-result-spool"
    entries = list(spool.glob("*.json"))
    assert len(entries) == 1
    assert json.loads(entries[0].read_bytes())["task"]["goal"] == TASK_PROMPT

    env["POWERCONTEXT_URL"] = url  # back
    _session(user)  # a later turn's Stop delivers the spooled result first
    assert list(spool.glob("*.json")) == []
    results = _task_results(module_daemon, user.scope)
    assert len(results) == 2, results  # the spooled turn's and this turn's
    for listed in results:
        _assert_the_task(_task(module_daemon, user.scope, listed["source"]["source_id"]), host)
