"""The Review Inbox through the CLI and the Python client against a real daemon (issue 6)."""

from __future__ import annotations

import pytest

from powercontext_runtime.client import ConflictError, PowerContextClient
from tests.e2e.helpers import cli_json, new_scope, run_cli
from tests.support.daemon import Daemon


def _capture(daemon: Daemon, scope: str, source_id: str) -> None:
    """Capture the source a proposal cites: its evidence must exist in the scope."""
    with PowerContextClient(daemon.url, token=daemon.token) as client:
        client.capture_content_source(scope_id=scope, source_id=source_id, content="evidence")


def test_candidate_commands_round_trip(module_daemon: Daemon) -> None:
    scope = new_scope("review-cli")
    _capture(module_daemon, scope, "prompt/run-7")
    proposed = cli_json(
        module_daemon,
        "experience",
        "propose",
        "--scope",
        scope,
        "--situation",
        "Editing the OpenAPI document",
        "--action",
        "Regenerated the client",
        "--outcome",
        "Contract tests caught a rename",
        "--lesson",
        "Regenerate the client after editing openapi",
        "--source-ref",
        "prompt/run-7",
        "--json",
    )
    assert (proposed["status"], proposed["version"]) == ("pending", 1)
    candidate_id = proposed["candidate_id"]
    inbox = cli_json(module_daemon, "candidate", "list", "--scope", scope, "--json")
    assert [c["candidate_id"] for c in inbox["candidates"]] == [candidate_id]
    revised = cli_json(
        module_daemon,
        "candidate",
        "revise",
        "--scope",
        scope,
        candidate_id,
        "--expected-version",
        "1",
        "--proposal",
        "-",
        "--json",
        stdin='{"situation":"Editing openapi/powercontext.json","action":"Regenerated the client",'
        '"outcome":"Contract tests caught a rename",'
        '"lesson":"Regenerate the client after editing the OpenAPI document"}',
    )
    assert revised["version"] == 2
    stale = run_cli(
        module_daemon,
        "candidate",
        "approve",
        "--scope",
        scope,
        candidate_id,
        "--expected-version",
        "1",
    )
    assert stale.returncode == 1 and "candidate_conflict" in stale.stderr
    approved = cli_json(
        module_daemon,
        "candidate",
        "approve",
        "--scope",
        scope,
        candidate_id,
        "--expected-version",
        "2",
        "--json",
    )
    ref = approved["result_artifact"]
    assert approved["status"] == "approved" and ref["family"] == "experience"
    shown = cli_json(
        module_daemon,
        "experience",
        "get",
        "--scope",
        scope,
        ref["artifact_id"],
        "--revision",
        str(ref["revision"]),
        "--json",
    )
    assert shown["content"]["situation"] == "Editing openapi/powercontext.json"
    old = cli_json(
        module_daemon,
        "candidate",
        "show",
        "--scope",
        scope,
        candidate_id,
        "--version",
        "1",
        "--json",
    )
    assert old["proposal"]["situation"] == "Editing the OpenAPI document"
    assert (
        cli_json(module_daemon, "candidate", "list", "--scope", scope, "--json")["candidates"] == []
    )


def test_skill_reject_and_client_errors(module_daemon: Daemon) -> None:
    scope = new_scope("review-skill")
    _capture(module_daemon, scope, "s1")
    proposed = cli_json(
        module_daemon,
        "skill",
        "propose",
        "--scope",
        scope,
        "--name",
        "ship-it",
        "--instructions",
        "Run the release script",
        "--validation",
        "CI is green",
        "--source-ref",
        "s1",
        "--json",
    )
    rejected = cli_json(
        module_daemon,
        "candidate",
        "reject",
        "--scope",
        scope,
        proposed["candidate_id"],
        "--expected-version",
        "1",
        "--reason",
        "missing rollback steps",
        "--json",
    )
    assert (rejected["status"], rejected["decision_reason"]) == (
        "rejected",
        "missing rollback steps",
    )
    with PowerContextClient(module_daemon.url, token=module_daemon.token) as client:
        with pytest.raises(ConflictError) as caught:
            client.approve_artifact_candidate(
                scope_id=scope, candidate_id=proposed["candidate_id"], expected_version=1
            )
        assert caught.value.code == "candidate_terminal"
        assert caught.value.details == {"status": "rejected"}
        listed = client.list_artifact_candidates(scope_id=scope, status="rejected")
        assert [c.candidate_id for c in listed.candidates] == [proposed["candidate_id"]]
