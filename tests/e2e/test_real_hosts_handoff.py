"""A Handoff committed in one session reaches the next session of the workspace once, inside the
real hosts (Codex CLI 0.169.0 / Claude Code 2.1.328, from npm), offline, against a real runtime.

The plugin is installed with ``install --bootstrap`` (the switch rendered into its hook command,
no variable exported); the Handoff is committed with the runtime CLI for the scope the plugin's
``scope`` command prints in the repository. The first session's model request carries the
Handoff as SessionStart context; the queue is then empty, and a second session gets nothing.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.support.daemon import Daemon
from tests.support.hosts import assert_hook_context
from tests.support.plugin_sandbox import HOSTS, PluginUserFactory

pytestmark = pytest.mark.e2e

OBJECTIVE = "Finish moving the invoice exporter onto the streaming writer"
HANDOFF = {
    "schema": "powercontext.handoff.v1",
    "objective": OBJECTIVE,
    "state": ["The streaming writer is merged", "export_invoices() still buffers every row"],
    "disposition": "continuable",
    "next_action": "Port export_invoices() and rerun the 1M-row benchmark",
}
PROMPT = "Where did we leave the exporter work?"
BOOTSTRAP_HEADER = "PowerContext bootstrap untrusted historical context."


def runtime_cli(daemon: Daemon, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "powercontext_runtime.cli.main", *args],
        env=daemon.env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize("host", HOSTS)
def test_the_next_session_starts_with_the_handoff_once(
    host: str, module_daemon: Daemon, plugin_user: PluginUserFactory
) -> None:
    user = plugin_user(host, module_daemon)
    report = user.install("--bootstrap")
    assert report["mode"] == "plugin", report
    printed = user.sandbox.run("scope")
    assert (printed.returncode, printed.stdout) == (0, f"{user.scope}\n"), printed.stderr

    committed = runtime_cli(
        module_daemon, "handoff", "commit", "--scope", user.scope, json.dumps(HANDOFF), "--json"
    )
    assert committed.returncode == 0, committed.stderr
    reference = json.loads(committed.stdout)["reference"]

    run, request = user.turn(PROMPT)
    assert run.seconds < 60, run.describe()
    raw = request.body.decode("utf-8")
    assert raw.count(OBJECTIVE) == 1, run.describe()
    # The SessionStart context is exactly the bootstrap pack that names this revision.
    expected = (
        module_daemon.client()
        .post(
            "/v1/context/bootstrap",
            json={
                "scope_id": user.scope,
                "enabled": True,
                "profile": "powercontext.scope-bootstrap.v1",
                "lifecycle": "startup",
                "integration": host,
                "max_bytes": 4096,
                "handoff_ref": reference,
            },
        )
        .json()
    )
    assert expected["status"] == "ready"
    [item] = expected["items"]
    assert item == {**item, "kind": "handoff", "citation": {"artifact_ref": reference}}
    assert_hook_context(
        request, expected["content"], host=host, event="SessionStart", prompt=PROMPT
    )

    waiting = runtime_cli(module_daemon, "handoff", "next", "--scope", user.scope, "--json")
    assert json.loads(waiting.stdout)["handoff_ref"] is None

    _, second = user.turn(PROMPT)
    raw = second.body.decode("utf-8")
    assert OBJECTIVE not in raw and BOOTSTRAP_HEADER not in raw
