"""Bootstrap inputs and packs through the CLI and the Python client, real daemon (issue 7)."""

from __future__ import annotations

import json

import pytest

from powercontext_runtime.client import ConflictError, PowerContextClient
from tests.e2e.helpers import cli_json, new_scope, remember, run_cli
from tests.support.daemon import Daemon

HANDOFF = {
    "schema": "powercontext.handoff.v1",
    "objective": "Land the OceanBase backend",
    "state": ["store passes the contract suite", "benchmarks pending"],
    "disposition": "continuable",
    "next_action": "run bench/write_scaling.py against seekdb",
}


def test_handoff_references_and_bootstrap_from_the_cli(module_daemon: Daemon) -> None:
    scope = new_scope("bootstrap-cli")
    shared = new_scope("bootstrap-shared")
    with module_daemon.client() as client:
        remember(client, scope, "Run make lint before pushing", tags=["bootstrap-context"])
        remember(client, shared, "Org-wide: never force-push main", tags=["bootstrap-context"])
    first = cli_json(
        module_daemon, "handoff", "commit", "--scope", scope, "-", stdin=json.dumps(HANDOFF)
    )
    assert first["reference"]["revision"] == 1
    stale = run_cli(module_daemon, "handoff", "commit", "--scope", scope, json.dumps(HANDOFF))
    assert stale.returncode == 1 and "artifact_conflict" in stale.stderr
    second = cli_json(
        module_daemon,
        "handoff",
        "commit",
        "--scope",
        scope,
        "--base",
        "1",
        json.dumps({**HANDOFF, "disposition": "complete"}),
    )
    assert second["reference"]["revision"] == 2
    old = cli_json(module_daemon, "handoff", "get", "--scope", scope, "--revision", "1")
    assert old["content"]["disposition"] == "continuable"
    refs = cli_json(
        module_daemon, "scope", "refs", "set", "--scope", scope, shared, "--expected-version", "0"
    )
    assert refs == {"scope_id": scope, "references": [shared], "version": 1}
    pack = cli_json(
        module_daemon, "context", "bootstrap", "--scope", scope, "--handoff-revision", "2"
    )
    assert pack["status"] == "ready" and pack["receipt"]["state"] == "pending"
    assert [(i["kind"], i["scope_id"]) for i in pack["items"]] == [
        ("handoff", scope),
        ("memory", scope),
        ("memory", shared),
    ]


def test_receipts_through_the_client(module_daemon: Daemon) -> None:
    scope = new_scope("bootstrap-client")
    with module_daemon.client() as http:
        remember(http, scope, "Deploys need a green build", tags=["bootstrap-context"])
    with PowerContextClient(module_daemon.url, token=module_daemon.token) as client:
        pack = client.bootstrap_context(
            scope_id=scope,
            enabled=True,
            profile="powercontext.scope-bootstrap.v1",
            lifecycle="startup",
            integration="codex",
            event_id="sess-42",
        )
        assert pack.status == "ready" and pack.content is not None
        receipt = pack.receipt.receipt_id
        claimed = client.record_bootstrap_receipt(
            scope_id=scope, receipt_id=receipt, state="injected"
        )
        assert claimed.state == "injected"
        with pytest.raises(ConflictError) as caught:
            client.record_bootstrap_receipt(scope_id=scope, receipt_id=receipt, state="injected")
        assert caught.value.code == "receipt_conflict"
        replay = client.bootstrap_context(
            scope_id=scope,
            enabled=True,
            profile="powercontext.scope-bootstrap.v1",
            lifecycle="startup",
            integration="codex",
            event_id="sess-42",
        )
        assert (replay.status, replay.content, replay.receipt.state) == (
            "skipped",
            None,
            "injected",
        )
