"""Issue 16 "Done when": a fresh HOME, the README's steps, both plugins — and one real turn each
shows the prompt's pack, the bootstrap pack with a delivered Handoff, and the MCP tools, with no
environment variable exported.

Per host (the real Codex CLI 0.169.0 / Claude Code 2.1.328, offline against model stubs): a user
whose shell sets no ``POWERCONTEXT_*`` variable, a runtime serving the default data dir (only its
socket is reachable). As the README says: ``<plugin> scope`` names the scope, the runtime CLI
remembers two entries (one tagged ``bootstrap-context``) and commits a Handoff, ``install
--bootstrap`` installs the plugin. The first turn's model request then carries all three packs'
worth of context and lists the memory tools; the Handoff is consumed.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.test_real_hosts_mcp import AGENT_TOOLS, default_user, listed_powercontext_tools
from tests.support.daemon import Daemon
from tests.support.plugin_sandbox import HOSTS, RealHostUser

pytestmark = pytest.mark.e2e
__all__ = ["default_user"]  # the fixture, used by name below

TAGGED = "Every schema migration ships with a rollback script in migrations/rollback/."
PLAIN = "The nightly exporter writes invoices through the streaming writer in exporter/stream.py."
PROMPT = "Why is the nightly exporter slow on large invoice batches?"
OBJECTIVE = "Finish porting the nightly exporter to the streaming writer"
HANDOFF = {
    "schema": "powercontext.handoff.v1",
    "objective": OBJECTIVE,
    "state": ["exporter/stream.py is merged", "export_invoices() still buffers every row"],
    "disposition": "continuable",
    "next_action": "Port export_invoices() and rerun the 1M-row benchmark",
}
PREPARED_HEADER = "PowerContext prepared untrusted historical context."
BOOTSTRAP_HEADER = "PowerContext bootstrap untrusted historical context."


def as_user(user: RealHostUser, *command: str, stdin: str | None = None) -> str:
    """A command as the user types it in the repository, with their (empty) environment."""
    done = subprocess.run(
        [sys.executable, "-m", *command],
        cwd=user.sandbox.repo,
        env=user.sandbox.env(),
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, (command, done.stdout, done.stderr)
    return done.stdout


@pytest.mark.parametrize("default_user", HOSTS, indirect=True)
def test_readme_steps_give_pack_bootstrap_handoff_and_tools_with_nothing_exported(
    default_user: tuple[RealHostUser, Daemon], tmp_path: Path
) -> None:
    user, _daemon = default_user
    cli = "powercontext_runtime.cli.main"
    scope = as_user(user, user.sandbox.module, "scope").strip()
    assert scope == user.scope
    as_user(user, cli, "memory", "remember", "--scope", scope, "--tag", "bootstrap-context",
            "--kind", "convention", TAGGED)  # fmt: skip
    as_user(user, cli, "memory", "remember", "--scope", scope, "--kind", "fact", PLAIN)
    handoff = tmp_path / "handoff.json"
    handoff.write_text(json.dumps(HANDOFF), encoding="utf-8")
    committed = as_user(user, cli, "handoff", "commit", f"@{handoff}", "--scope", scope)
    assert committed.startswith("handoff revision 1 (queued")
    report = user.install("--bootstrap")
    assert "POWERCONTEXT_TOKEN" not in json.dumps(report)

    run, request = user.turn(PROMPT)
    raw = request.body.decode("utf-8")
    # The prompt's pack, with the entry about the exporter.
    assert raw.count(PREPARED_HEADER) == 1, run.describe()
    # The bootstrap pack: the Handoff first, then the tagged entry.
    assert raw.count(BOOTSTRAP_HEADER) == 1, run.describe()
    assert raw.index(OBJECTIVE) < raw.index(TAGGED.split(" in ")[0])
    assert PLAIN.split(" in ")[0] in raw
    # The memory tools, from the agent token (no review tools).
    assert listed_powercontext_tools(user.host, request) >= AGENT_TOOLS
    # Delivered once; nothing went wrong on the way.
    waiting = json.loads(as_user(user, cli, "handoff", "next", "--scope", scope, "--json"))
    assert waiting["handoff_ref"] is None
    log = user.sandbox.plugin_data_dir / "diagnostics.log"
    assert not log.exists() or log.read_text("utf-8") == ""
