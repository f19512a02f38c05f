"""Every script in examples/ runs against a real daemon and does what it says (issue 19 item 1).

Each example runs as its own process, the way a user runs it: ``python examples/NAME.py``,
with a throw-away ``$HOME`` and only the settings examples/README.md names
(``POWERCONTEXT_HOME`` for the token file, ``POWERCONTEXT_URL``, ``POWERCONTEXT_SCOPE_ID``).
The assertions check what the scripts claim against the runtime itself where that is cheap
(the stored versions, the candidate, the retired entries), so a script that printed the right
words over the wrong behaviour would still fail.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from powercontext_runtime.contract.capabilities import AGENT_CAPABILITIES
from powercontext_runtime.mcp.tools import TOOLS
from powercontext_runtime.services.auth import required_capability
from tests.e2e.helpers import new_scope
from tests.support.backends import fresh_database
from tests.support.daemon import Daemon, free_port, start_daemon
from tests.support.plugin_sandbox import init_repo

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
#: Generous: the machine may be at load average 10 on 2 cores; a run takes about a second.
RUN_TIMEOUT = 240


def run_example(
    name: str,
    *args: str,
    home: Path,
    env: dict[str, str],
    expect: int = 0,
) -> list[str]:
    """``python examples/<name>.py args`` with a fresh ``$HOME`` and ``env``; its stdout lines.

    The caller's POWERCONTEXT_* variables never reach it; PYTHONPATH does (the tree under test).
    """
    home.mkdir(parents=True, exist_ok=True)
    clean = {k: v for k, v in os.environ.items() if not k.startswith("POWERCONTEXT_")}
    clean.update(HOME=str(home), XDG_DATA_HOME=str(home / ".local" / "share"), **env)
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / f"{name}.py"), *args],
        env=clean,
        cwd=home,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
    )
    assert done.returncode == expect, f"{name} exited {done.returncode}:\n{done.stderr[-3000:]}"
    if expect == 0:
        assert "Traceback" not in done.stderr, done.stderr[-3000:]
    return done.stdout.splitlines() if expect == 0 else done.stderr.splitlines()


def daemon_env(daemon: Daemon, scope: str, *, tcp: bool = True) -> dict[str, str]:
    """What a user of ``daemon`` has: its data dir (token files), its URL, one scope."""
    env = {"POWERCONTEXT_HOME": str(daemon.home), "POWERCONTEXT_SCOPE_ID": scope}
    if tcp:
        env["POWERCONTEXT_URL"] = daemon.url
    return env


def post(daemon: Daemon, path: str, body: dict[str, object]) -> dict[str, object]:
    with daemon.client() as http:
        response = http.post(path, json=body)
    assert response.status_code == 200, response.text
    return response.json()


def line(lines: list[str], prefix: str) -> str:
    found = [text for text in lines if text.startswith(prefix)]
    assert len(found) == 1, (prefix, lines)
    return found[0]


@pytest.fixture(scope="module")
def examples_daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    """One default daemon for the examples that need nothing special (SQLite, auth on)."""
    with start_daemon(tmp_path_factory.mktemp("examples") / "daemon-home") as running:
        yield running


def test_every_example_has_a_readme_line_and_a_test() -> None:
    scripts = {path.stem for path in EXAMPLES.glob("*.py")}
    readme = (EXAMPLES / "README.md").read_text("utf-8")
    assert {name for name in scripts if f"[{name}.py]({name}.py)" not in readme} == set()
    tested = set(re.findall(r'run_example\(\s*"([a-z_]+)"', Path(__file__).read_text("utf-8")))
    assert scripts - tested == set(), "examples no test runs"
    assert "examples/README.md" in (ROOT / "README.md").read_text("utf-8")


def test_quickstart_over_the_default_socket_twice(examples_daemon: Daemon, tmp_path: Path) -> None:
    """No POWERCONTEXT_URL: the client finds the data dir's socket and token by itself."""
    scope = new_scope("quickstart")
    env = daemon_env(examples_daemon, scope, tcp=False)
    for run in (1, 2):  # a second run starts alike: the first retired what it wrote
        out = run_example("quickstart", home=tmp_path / f"home{run}", env=env)
        entry_id = re.fullmatch(r"remembered (mem_ent_\w+) \(Memory revision \d+\)", out[0])[1]
        assert line(out, "search: ") == "search: 1 hit, the best is 'Run make lint before pushing'"
        assert line(out, "context pack: ").startswith("context pack: ready, ")
        assert any('"content":"Run make lint before pushing"' in text for text in out)
        assert line(out, "revised: ") == (
            "revised: version 2 is 'Run make lint and make test before pushing'"
        )
        refused = re.fullmatch(
            r"stale citation refused: revision_conflict \(current version (mem_ver_\w+)\)",
            line(out, "stale citation refused: "),
        )
        assert refused is not None
        assert line(out, "the first citation") == (
            "the first citation still reads back exactly: 'Run make lint before pushing'"
        )
        history = post(examples_daemon, "/v1/memory/entries/versions",
                       {"scope_id": scope, "entry_id": entry_id})  # fmt: skip
        versions = history["versions"]  # newest first: the retirement, then the revision
        assert [v["operation"] for v in versions] == ["retire", "revise", "remember"]
        assert versions[1]["citation"]["entry_version_id"] == refused[1]
        assert versions[0]["state"] == "inactive"


def test_async_client_writes_concurrently_and_answers_each_question(
    examples_daemon: Daemon, tmp_path: Path
) -> None:
    scope = new_scope("async")
    out = run_example(
        "async_client", home=tmp_path / "home", env=daemon_env(examples_daemon, scope)
    )
    assert out[0] == "4 concurrent writes: 4 entries, revisions [1, 2, 3, 4]"
    assert out[1:] == [
        "Which days do we deploy? -> Deploys go out on Tuesdays and Thursdays",
        "Who owns the invoices table? -> The billing service owns the invoices table",
        "Where are the flags? -> Feature flags live in config/flags.yaml",
    ]
    changes = post(examples_daemon, "/v1/memory/changes", {"scope_id": scope})["changes"]
    assert [c["revision"] for c in changes] == [1, 2, 3, 4]


def test_mcp_session_with_the_agent_token(examples_daemon: Daemon, tmp_path: Path) -> None:
    scope = new_scope("mcp")
    out = run_example("mcp_session", home=tmp_path / "home", env=daemon_env(examples_daemon, scope))
    tools = re.fullmatch(r"(\d+) tools offered to the agent; review tools among them: \[\]", out[0])
    agent_tools = [t for t in TOOLS if required_capability(t.name) in AGENT_CAPABILITIES]
    assert tools is not None and int(tools[1]) == len(agent_tools) < len(TOOLS)
    assert line(out, "search_memory: ") == (
        "search_memory: ['The importer must run before the nightly report']"
    )
    proposed = re.fullmatch(
        r"proposed (cand_\w+): pending, waits for review", line(out, "proposed ")
    )
    assert proposed is not None
    assert line(out, "approve with") == "approve with the agent token: capability_forbidden"
    # The operator sees the proposal waiting, made by the agent's token, still pending.
    listed = post(examples_daemon, "/v1/artifact-candidates/list", {"scope_id": scope})
    assert [(c["candidate_id"], c["status"]) for c in listed["candidates"]] == [
        (proposed[1], "pending")
    ]


def test_mcp_session_over_the_default_socket(examples_daemon: Daemon, tmp_path: Path) -> None:
    scope = new_scope("mcp-socket")
    env = daemon_env(examples_daemon, scope, tcp=False)
    out = run_example("mcp_session", home=tmp_path / "home", env=env)
    assert line(out, "approve with") == "approve with the agent token: capability_forbidden"


def readme_commands() -> list[str]:
    """Every ``powercontext …`` command examples/README.md tells a user to type (in backticks),
    but those that start a daemon: a user runs them as written, with no scope set."""
    readme = (EXAMPLES / "README.md").read_text("utf-8")
    commands = re.findall(r"`((?:[A-Z_]+=\S+ )*powercontext [^`]+)`", readme)
    return [command for command in commands if " serve" not in command]


def test_the_readmes_commands_run_as_written_after_their_examples(
    examples_daemon: Daemon, tmp_path: Path
) -> None:
    """The README's follow-up commands work as written, after the examples ran with their
    default scopes (before: `powercontext candidate list` exited 2, no scope)."""
    commands = readme_commands()
    assert "powercontext candidate list --scope example:mcp" in commands, commands
    env = {"POWERCONTEXT_HOME": str(examples_daemon.home), "POWERCONTEXT_URL": examples_daemon.url}
    out = run_example("mcp_session", home=tmp_path / "home", env=env)
    waiting = r"proposed (cand_\w+): pending, waits for review"
    proposed = re.fullmatch(waiting, line(out, "proposed "))
    assert proposed is not None
    clean = {k: v for k, v in os.environ.items() if not k.startswith("POWERCONTEXT_")}
    clean.update(HOME=str(tmp_path / "home"), PATH=f"{Path(sys.executable).parent}:/usr/bin:/bin")
    clean.update(env)
    for command in commands:
        done = subprocess.run(
            ["/bin/sh", "-c", command], env=clean, cwd=ROOT, capture_output=True, text=True,
            timeout=RUN_TIMEOUT,
        )  # fmt: skip
        assert done.returncode == 0, (command, done.returncode, done.stderr[-2000:])
        if command.startswith("powercontext candidate list"):
            assert f"{proposed[1]} v1 experience pending" in done.stdout, done.stdout[-2000:]


CONTRIBUTING = """\
# Contributing to the shop

Thanks for helping! Some background first.

- this list is not under a rules heading, so nothing here is seeded

## Rules

- Run `make lint` before pushing
- Every pull request needs one approving review
  from a code owner
1. Never commit secrets; use the vault

### Commit messages

* Use the imperative mood

## Releasing

- Tag the release on main
"""

README = """\
# shop

## Conventions

- Money is stored in integer cents
"""


def _entries(daemon: Daemon, scope: str, **filters: object) -> list[dict[str, object]]:
    return post(daemon, "/v1/memory/entries/list", {"scope_id": scope, **filters})["entries"]


def test_seeding_follows_the_repository_files(examples_daemon: Daemon, tmp_path: Path) -> None:
    name = f"seed-{uuid.uuid4().hex[:8]}"
    repo = init_repo(tmp_path / "shop", f"https://github.com/acme/{name}.git")
    (repo / "CONTRIBUTING.md").write_text(CONTRIBUTING, "utf-8")
    (repo / "README.md").write_text(README, "utf-8")
    scope = f"git:github.com/acme/{name}"  # what the plugins derive from that origin
    env = {"POWERCONTEXT_HOME": str(examples_daemon.home), "POWERCONTEXT_URL": examples_daemon.url}

    out = run_example("seed_from_repo", str(repo), "--bootstrap", home=tmp_path / "h1", env=env)
    assert out[0] == f"scope {scope}"
    assert line(out, "CONTRIBUTING.md: ") == "CONTRIBUTING.md: 4 rule(s) seeded (4 new), 0 retired"
    assert line(out, "README.md: ") == "README.md: 1 rule(s) seeded (1 new), 0 retired"
    seeded = _entries(examples_daemon, scope, tag="from-contributing.md")
    assert [e["text"] for e in seeded] == [
        "Run `make lint` before pushing",
        "Every pull request needs one approving review from a code owner",
        "Never commit secrets; use the vault",
        "Use the imperative mood",
    ]
    assert all("bootstrap-context" in e["tags"] for e in seeded)
    assert seeded[3]["reason"] == "CONTRIBUTING.md § Rules"

    # The file changes: one rule goes, one comes; the others stay the same entries.
    changed = CONTRIBUTING.replace("1. Never commit secrets; use the vault\n", "")
    (repo / "CONTRIBUTING.md").write_text(changed + "\n## Checklist\n\n- Update CHANGES.md\n")
    out = run_example("seed_from_repo", str(repo), "--bootstrap", home=tmp_path / "h2", env=env)
    assert line(out, "CONTRIBUTING.md: ") == "CONTRIBUTING.md: 4 rule(s) seeded (1 new), 1 retired"
    assert "  - Never commit secrets; use the vault" in out
    assert "  + Update CHANGES.md" in out
    assert "  = Run `make lint` before pushing" in out
    after = _entries(examples_daemon, scope, tag="from-contributing.md", state="any")
    states = {e["text"]: e["state"] for e in after}
    assert states["Never commit secrets; use the vault"] == "inactive"
    assert {e["citation"]["entry_id"] for e in after} >= {e["citation"]["entry_id"] for e in seeded}
    assert len(after) == 5


def test_bootstrap_and_handoff_are_delivered_once(examples_daemon: Daemon, tmp_path: Path) -> None:
    scope = new_scope("bootstrap")
    env = daemon_env(examples_daemon, scope)
    for revision in (1, 2):  # every run commits the next revision and delivers it once
        out = run_example("bootstrap_handoff", home=tmp_path / f"home{revision}", env=env)
        assert out[0] == f"session 1: committed handoff revision {revision}, queued: True"
        assert re.fullmatch(
            r"session 2: pack ready, \d+ bytes, items \['handoff', 'memory'\]",
            line(out, "session 2: pack"),
        )
        begin = out.index("BEGIN_POWERCONTEXT_BOOTSTRAP_CONTEXT_V1")
        pack = json.loads(out[begin + 1])
        assert "Move the nightly report after the importer" in json.dumps(pack, ensure_ascii=False)
        assert line(out, "session 2: after") == "session 2: after the claim, waiting handoff: None"
        assert line(out, "session 2: first prompt") == (
            "session 2: first prompt's pack empty (the bootstrap pack had it); "
            "without the receipt ready"
        )
        assert re.fullmatch(
            r"session 3: pack ready, \d+ bytes, items \['memory'\]", line(out, "session 3: pack")
        )
    waiting = post(examples_daemon, "/v1/handoff/next", {"scope_id": scope})
    assert waiting["handoff_ref"] is None


def test_custom_extractor_is_what_the_daemon_flushes_with(tmp_path: Path) -> None:
    pythonpath = os.pathsep.join(filter(None, [str(EXAMPLES), os.environ.get("PYTHONPATH")]))
    extra = {
        "POWERCONTEXT_EXTRACTOR": "custom_extractor:DecisionExtractor",
        "PYTHONPATH": pythonpath,
    }
    scope = new_scope("extractor")
    with start_daemon(tmp_path / "daemon-home", extra_env=extra) as daemon:
        out = run_example("custom_extractor", home=tmp_path / "home", env=daemon_env(daemon, scope))
    assert out[0] == "flush processed: 3 prompts, cursor 0 -> 3"
    decision = re.fullmatch(
        r"decision: background jobs run on Redis streams  \(from (prompt-\w+-1)\)", out[1]
    )
    constraint = re.fullmatch(
        r"constraint: the public API never returns more than 100 items per page"
        r"  \(from (prompt-\w+-2)\)",
        out[2],
    )
    assert decision and constraint and len(out) == 3
    assert decision[1].rsplit("-", 1)[0] == constraint[1].rsplit("-", 1)[0]  # this run's prompts


def test_custom_extractor_says_so_when_the_daemon_does_not_use_it(
    examples_daemon: Daemon, tmp_path: Path
) -> None:
    scope = new_scope("extractor-missing")
    err = run_example("custom_extractor", home=tmp_path / "home",
                      env=daemon_env(examples_daemon, scope), expect=1)  # fmt: skip
    assert err[-1].startswith("nothing extracted: is the daemon running with")


def test_a_daemon_refuses_to_start_with_an_extractor_it_cannot_import(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("POWERCONTEXT_")}
    env.update(POWERCONTEXT_EXTRACTOR="no_such_extractor_module:Thing")
    done = subprocess.run(
        [sys.executable, "-m", "powercontext_runtime.cli.main", "serve", "--port", str(free_port()),
         "--data-dir", str(tmp_path / "home"), "--socket", "off"],
        env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT,
    )  # fmt: skip
    assert done.returncode == 1
    assert (
        "configuration: the extractor no_such_extractor_module:Thing cannot be loaded: "
        "No module named 'no_such_extractor_module'"
    ) in done.stderr


@pytest.mark.oceanbase
def test_team_example_on_two_daemons_sharing_one_seekdb_database(
    tmp_path: Path, oceanbase_server_url: str
) -> None:
    url = fresh_database(oceanbase_server_url, "examples_team")
    team_scope = new_scope("team")
    prefix = team_scope.rsplit("/", 1)[0] + "/*"
    created = subprocess.run(
        [sys.executable, "-m", "powercontext_runtime.cli.main", "token", "create", "--json",
         "--name", "team", "--scope", prefix, "--database-url", url,
         "--data-dir", str(tmp_path / "admin")],
        env={k: v for k, v in os.environ.items() if not k.startswith("POWERCONTEXT_")},
        capture_output=True, text=True, timeout=RUN_TIMEOUT,
    )  # fmt: skip
    assert created.returncode == 0, created.stderr
    token = json.loads(created.stdout)["token"]
    with (
        start_daemon(tmp_path / "alice", database_url=url) as alice,
        start_daemon(tmp_path / "bob", database_url=url) as bob,
    ):
        env = {
            "POWERCONTEXT_TEAM_URLS": f"{alice.url} {bob.url}",
            "POWERCONTEXT_TOKEN": token,
            "POWERCONTEXT_SCOPE_ID": team_scope,
        }
        out = run_example("team_oceanbase", home=tmp_path / "home", env=env)
        assert out[:2] == [
            f"alice's runtime at {alice.url}: oceanbase",
            f"bob's runtime at {bob.url}: oceanbase",
        ]
        entry_id = re.fullmatch(r"alice wrote (mem_ent_\w+) in revision 1", out[2])[1]
        assert out[3:] == [
            "bob's search finds alice's entry: True (same citation, same bytes)",
            "bob revised it to version 2",
            "alice's stale revise: revision_conflict; current is bob's version: True",
            "alice retired it; bob's runtime no longer serves it: True",
        ]
        # What the database holds, read through Bob's runtime with his own local token.
        history = post(bob, "/v1/memory/entries/versions", {"scope_id": team_scope,
                                                            "entry_id": entry_id})  # fmt: skip
        assert [v["operation"] for v in history["versions"]] == ["retire", "revise", "remember"]
