"""Task results from the command line and both Python clients, against a real daemon.

``powercontext task-result record @FILE|-`` records docs/review.md's ``task.json`` (the CLI's
own example), ``list`` and ``show`` print it for people with agent-written text made visible,
``--source-ref task-result/ID`` cites it, and the sync and async clients do the same over the
unix socket and TCP.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from powercontext_runtime.cli.schemas import TASK_RESULT_EXAMPLE
from powercontext_runtime.client import (
    AsyncPowerContextClient,
    ConflictError,
    NotFoundError,
    PowerContextClient,
)
from tests.e2e.helpers import cli_json, new_scope, run_cli
from tests.support.daemon import Daemon

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]


def test_docs_review_shows_the_clis_own_task_file() -> None:
    page = (ROOT / "docs" / "review.md").read_text("utf-8")
    shown = page.split("`task.json`:\n\n```json\n", 1)[1].split("```", 1)[0]
    assert json.loads(shown) == TASK_RESULT_EXAMPLE


def test_record_list_show_and_cite_from_the_command_line(
    module_daemon: Daemon, tmp_path: Path
) -> None:
    d = module_daemon
    scope = new_scope("task-cli")
    path = tmp_path / "task.json"
    path.write_text(json.dumps(TASK_RESULT_EXAMPLE, indent=2), "utf-8")
    done = run_cli(d, "task-result", "record", f"@{path}", "--scope", scope)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "recorded task-result/run-42 at position 1 (1 secret redacted)\n"
    again = cli_json(d, "task-result", "record", "-", "--scope", scope,
                     stdin=json.dumps(TASK_RESULT_EXAMPLE))  # fmt: skip
    assert again["source"] == {"name": "task-result", "source_id": "task-result/run-42"}
    changed = {**TASK_RESULT_EXAMPLE, "task": {**TASK_RESULT_EXAMPLE["task"], "outcome": "failed"}}
    conflict = run_cli(d, "task-result", "record", "-", "--scope", scope,
                       stdin=json.dumps(changed))  # fmt: skip
    assert conflict.returncode == 1 and "task_result_conflict" in conflict.stderr
    for bad, message in (
        ("[1]", "must be a JSON object"),
        (json.dumps({**TASK_RESULT_EXAMPLE, "scope_id": scope}), "comes from --scope"),
    ):
        refused = run_cli(d, "task-result", "record", "-", "--scope", scope, stdin=bad)
        assert refused.returncode == 2 and message in refused.stderr, refused.stderr
    inline = run_cli(d, "task-result", "record", "{}", "--scope", scope)
    assert inline.returncode == 2 and "@FILE or -" in inline.stderr

    listed = run_cli(d, "task-result", "list", "--scope", scope)
    assert listed.returncode == 0, listed.stderr
    first, *rest = listed.stdout.splitlines()
    assert first.startswith("task-result/run-42 succeeded (position 1, recorded ")
    assert rest == [
        "  goal: Add a route for order refunds and keep the OpenAPI document in step",
        "  host: codex",
        "  session: codex-session-7f3a",
        "  2 changed files, 2 checks (0 failed)",
    ]
    shown = run_cli(d, "task-result", "show", "task-result/run-42", "--scope", scope)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.splitlines()[1:] == [
        "  goal: Add a route for order refunds and keep the OpenAPI document in step",
        "  host: codex",
        "  session: codex-session-7f3a",
        "  changes:",
        "    - shop/routes/refunds.py +48 -0",
        "    - openapi.json +31 -2",
        "  checks:",
        "    - exit 0: make openapi",
        "    - exit 0: DATABASE_URL=postgres://shop:[REDACTED]@localhost/shop make test",
        "      output: 212 passed in 9.84s",
    ]
    as_json = cli_json(d, "task-result", "show", "run-42", "--scope", scope)
    assert as_json["task"]["checks"][1]["output_tail"] == "212 passed in 9.84s"
    missing = run_cli(d, "task-result", "show", "run-43", "--scope", scope)
    assert missing.returncode == 1 and "task_result_not_found" in missing.stderr

    proposed = cli_json(
        d, "experience", "propose", "--scope", scope, "--situation", "Changing a route",
        "--action", "Ran make openapi", "--outcome", "CI passed",
        "--lesson", "Regenerate the OpenAPI document", "--source-ref", "task-result/run-42",
    )  # fmt: skip
    assert proposed["source_refs"] == [again["source"]]


def test_agent_text_is_shown_visibly(module_daemon: Daemon) -> None:
    """A goal and an output tail written to rewrite the terminal are shown as escapes."""
    d = module_daemon
    scope = new_scope("task-visible")
    attack = "fine\r\x1b[2K  goal: all checks passed"
    check = {"command": "make test", "exit_status": 1, "output_tail": "a\nb\x1b[31m\u202e"}
    body = {"task_id": "v-1", "task": {"goal": attack, "outcome": "failed", "checks": [check]}}
    assert run_cli(d, "task-result", "record", "-", "--scope", scope,
                   stdin=json.dumps(body)).returncode == 0  # fmt: skip
    for verb in (["list"], ["show", "v-1"]):
        out = run_cli(d, "task-result", *verb, "--scope", scope).stdout
        assert "\x1b" not in out and "\r" not in out and "\u202e" not in out, out
        assert "fine\\r\\x1b[2K  goal: all checks passed" in out
    shown = run_cli(d, "task-result", "show", "v-1", "--scope", scope).stdout
    assert "      output:\n        a\n        b\\x1b[31m\\u202e" in shown


def test_both_clients_record_list_and_get(module_daemon: Daemon) -> None:
    scope = new_scope("task-clients")
    task = {"goal": "Fix the flaky importer test", "outcome": "abandoned",
            "checks": [{"command": "pytest -x", "exit_status": -1}]}  # fmt: skip
    with PowerContextClient(module_daemon.url, token=module_daemon.token) as client:
        recorded = client.record_task_result(scope_id=scope, task_id="c-1", task=task)
        assert (recorded.position, recorded.redactions) == (1, 0)
        assert client.record_task_result(scope_id=scope, task_id="c-1", task=task) == recorded
        with pytest.raises(ConflictError) as conflict:
            client.record_task_result(scope_id=scope, task_id="c-1", task={**task, "goal": "x"})
        assert conflict.value.code == "task_result_conflict"
        listed = client.list_task_results(scope_id=scope)
        assert [(r.outcome, r.failed_checks) for r in listed.task_results] == [("abandoned", 1)]

    async def scenario() -> None:
        async with AsyncPowerContextClient(module_daemon.url, token=module_daemon.token) as aio:
            made = await aio.record_task_result(scope_id=scope, task=task)
            assert made.source.source_id.startswith("task-result/tr_") and made.position == 2
            found = await aio.get_task_result(scope_id=scope, task_id="c-1")
            assert found.task.checks[0].exit_status == -1 and found.source == recorded.source
            assert len((await aio.list_task_results(scope_id=scope)).task_results) == 2
            with pytest.raises(NotFoundError) as missing:
                await aio.get_task_result(scope_id=scope, task_id="c-2")
            assert missing.value.code == "task_result_not_found"

    asyncio.run(scenario())
