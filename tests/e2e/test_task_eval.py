"""The task-benefit evaluation (bench/task_eval, docs/evaluation.md), run in scripted mode
through the real Claude Code and Codex CLIs (npm, pinned; offline with the black-hole proxy).

Once per host, every task in every arm: control (no plugin), treatment (the plugin installed by
its own ``install``, the task's Memory), empty (plugin, no Memory), down (plugin, no runtime).
The scripted model sees only what the real CLI sends, so every assertion below that
distinguishes the arms depends on the real hook having injected the real pack:

* treatment succeeds where control, empty and down fail (constraint, tiny budget, citation);
* stale memory loses to the code and to the user's request, with the pack prepared;
* the fake instruction is never obeyed, and in the treatment request it is inside a valid
  pack frame that marks it untrusted;
* the tiny budget's pack is within budget, valid, with a truncated cited item;
* the citation task re-read the exact entry version over the runtime while its head was revised;
* empty and down both finish, and the hook's diagnostics tell them apart;
* injected bytes agree between the hook, the runtime's access log and the wire, and are 0 for
  control; the report renders them per arm.
"""

from __future__ import annotations

import pytest

from bench.task_eval.harness import HOSTS, EvalConfig, RunResult, evaluate
from bench.task_eval.report import render_markdown, summarize
from bench.task_eval.tasks import ARMS, TASKS, TINY_BUDGET
from tests.hosts.conftest import record_timing
from tests.support.hosts import HostCLIs

# One module fixture runs 6 tasks × 4 arms through one host (≈ 24 host turns of 2-4 model
# requests each, 3 plugin installs): minutes on a loaded 2-core machine.
pytestmark = [pytest.mark.e2e, pytest.mark.timeout(1800)]

Runs = dict[tuple[str, str], RunResult]


@pytest.fixture(scope="module", params=HOSTS)
def runs(
    request: pytest.FixtureRequest, host_clis: HostCLIs, tmp_path_factory: pytest.TempPathFactory
) -> Runs:
    host = str(request.param)
    config = EvalConfig(
        hosts=[host],
        tasks=list(TASKS.values()),
        arms=ARMS,
        mode="scripted",
        work_dir=tmp_path_factory.mktemp(f"task-eval-{host}"),
    )
    results = evaluate(config, host_clis)
    for result in results:
        record_timing(f"task-eval {host} {result.arm} turn", result.turn_seconds)
    return {(r.task, r.arm): r for r in results}


def _explain(runs: Runs) -> str:
    return "\n".join(
        f"{task}/{arm}: success={r.success} outcome={r.prepare_outcome} check={r.check} "
        f"wire={r.wire} error={r.error}"
        for (task, arm), r in sorted(runs.items())
    )


def test_every_turn_finishes_in_every_arm(runs: Runs) -> None:
    assert len(runs) == len(TASKS) * len(ARMS)
    assert all(r.turn_completed and r.error is None for r in runs.values()), _explain(runs)
    assert all(r.model_requests and r.model_requests >= 2 for r in runs.values()), _explain(runs)


def test_scripted_outcomes_match_each_task_expectation(runs: Runs) -> None:
    got = {key: r.success for key, r in runs.items()}
    want = {(task.id, arm): task.expected[arm] for task in TASKS.values() for arm in ARMS}
    assert got == want, _explain(runs)


@pytest.mark.parametrize("task", ["constraint", "tiny-budget", "citation"])
def test_treatment_succeeds_where_the_pack_is_needed(runs: Runs, task: str) -> None:
    assert runs[task, "treatment"].success and runs[task, "treatment"].pack_prepared
    for arm in ("control", "empty", "down"):
        assert not runs[task, arm].success, _explain(runs)


@pytest.mark.parametrize("task", ["stale-code", "stale-user"])
def test_stale_memory_is_overridden(runs: Runs, task: str) -> None:
    treatment = runs[task, "treatment"]
    assert treatment.pack_prepared and treatment.wire and treatment.wire["items"] >= 1
    assert all(runs[task, arm].success for arm in ARMS), _explain(runs)


def test_fake_instructions_are_treated_as_data(runs: Runs) -> None:
    for arm in ARMS:
        run = runs["fake-instruction", arm]
        assert run.success and "obeyed=False" in run.check, _explain(runs)
        assert run.wire and not run.wire["injection_outside_frame"]
    wire = runs["fake-instruction", "treatment"].wire
    assert wire is not None
    assert (wire["packs"], wire["valid"], wire["marked_untrusted"]) == (1, True, True)


def test_a_tiny_budget_keeps_a_valid_cited_structure(runs: Runs) -> None:
    run = runs["tiny-budget", "treatment"]
    assert run.wire is not None
    assert run.wire["packs"] == 1 and run.wire["valid"] and run.wire["marked_untrusted"]
    assert run.wire["pack_bytes"][0] <= TINY_BUDGET
    assert run.wire["items"] >= 1 and run.wire["truncated_items"] >= 1
    assert run.injected_bytes == run.wire["pack_bytes"][0] == run.runtime_pack_bytes[0]


def test_the_citation_is_re_read_exactly_while_the_head_moves(runs: Runs) -> None:
    run = runs["citation", "treatment"]
    assert run.success and run.entry_gets >= 1, run.check
    assert "revised during the turn=True" in run.check
    assert runs["citation", "control"].entry_gets == 0


def test_empty_pack_and_runtime_down_are_distinguishable(runs: Runs) -> None:
    for task in TASKS:
        empty, down = runs[task, "empty"], runs[task, "down"]
        assert empty.turn_completed and down.turn_completed
        assert empty.prepare_outcome == "empty", _explain(runs)
        assert down.prepare_outcome == "server_unavailable", _explain(runs)
        assert empty.runtime_prepares == 1 and empty.runtime_pack_bytes == [0]
        assert down.runtime_prepares == 0
        assert empty.injected_bytes == down.injected_bytes == 0
        assert empty.wire and down.wire and empty.wire["packs"] == down.wire["packs"] == 0


def test_bytes_and_latency_are_reported_per_arm(runs: Runs) -> None:
    for task in TASKS:
        control, treatment = runs[task, "control"], runs[task, "treatment"]
        assert control.prepare_outcome is None and control.injected_bytes == 0
        assert control.runtime_prepares == 0 and control.wire and control.wire["packs"] == 0
        assert treatment.injected_bytes > 0 and treatment.hook_prepare_ms is not None
        assert treatment.wire and treatment.wire["pack_bytes"] == [treatment.injected_bytes]
        assert treatment.runtime_pack_bytes == [treatment.injected_bytes]
    report = summarize(list(runs.values()), {"mode": "scripted"})
    ((host, arms),) = report["arms"].items()
    assert arms["treatment"]["injected_bytes_mean"] > 0 == arms["control"]["injected_bytes_max"]
    assert arms["treatment"]["pack_prepared_rate"] == 1.0
    assert arms["control"]["pack_prepared_rate"] == arms["down"]["pack_prepared_rate"] == 0.0
    assert arms["treatment"]["success_rate"] > arms["control"]["success_rate"]
    markdown = render_markdown(report)
    assert f"| {host} | treatment | {len(TASKS)} |" in markdown
