"""The sample outputs in README.md, docs/ and examples/README.md, generated from real runs.

A fenced block in the Markdown right after ``<!-- sample: NAME -->`` is not written by hand: it is
what a real command printed in a fresh, throw-away user of this machine, with only the volatile
parts normalised (:func:`rules`). ``tests/e2e/test_doc_samples.py`` regenerates every sample and
fails when a block differs, so a sample cannot go stale::

    python tools/doc_samples.py --write    # rewrite every marked block (`make docs`)
    python tools/doc_samples.py --check    # exit 1 listing the stale blocks
    python tools/doc_samples.py --list     # the samples and where each comes from

The user (:class:`World`) is built from scratch under one temp dir: its own ``$HOME`` (so the
XDG dirs and PowerContext's data dir ``~/.local/share/powercontext`` are under it; no
``XDG_*`` or ``POWERCONTEXT_*`` variable of the caller leaks in), a git clone of
``github.com/acme/shop`` at ``~/shop``, both plugins installed (Codex through the real ``codex``
CLI from npm, ``tests/support/hosts.py``), a black-hole proxy for anything that tries the
network, and one real ``powercontext serve`` started the way ``make run`` starts it. The samples
come from one story (:func:`generate`): first what the user sees while the runtime is down, then
with it running. Why markers and a generator: ``docs/decisions/doc-samples.md``.
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # `python tools/doc_samples.py` from anywhere
    sys.path.insert(0, str(ROOT))

# The repository's own test support (real daemon, sandboxed plugin users, host CLIs).
from tests.support.daemon import Daemon, free_port, stop_process, wait_ready  # noqa: E402
from tests.support.hosts import (  # noqa: E402
    BlackholeProxy,
    HostCLIs,
    ensure_host_clis,
    run_host_turn,
)
from tests.support.plugin_sandbox import (  # noqa: E402
    ClaudeSandbox,
    CodexSandbox,
    _private_path,
    init_repo,
    plugin_handlers,
)

#: Every sample, and the real run it comes from (``--list``).
SAMPLES: dict[str, str] = {
    "serve-ready": "the line `powercontext serve` (`make run`) prints once it accepts connections",
    "context-prepare": "README's `context prepare` prompt after README's two `memory remember`",
    "context-pack": "`context prepare` for a prompt that has a match: a ready pack",
    "codex-install": "`powercontext-codex install` with the real `codex` on PATH",
    "runtime-doctor": "`powercontext doctor` while no daemon runs",
    "codex-doctor": "`powercontext-codex doctor` after one prompt with the runtime down, one up",
    "mcp-doctor-lines": "the `mcp` line of `powercontext-codex doctor`, runtime up, then down",
    "mcp-errors": "the stdio MCP bridge's error for tools/list: runtime down, agent token refused",
    "mcp-tool-error": "a tool call with an unknown argument, through the stdio MCP bridge",
    "hook-diagnostic": "the Claude Code hook's stderr line with a wrong POWERCONTEXT_TOKEN",
    "handoff-commit": "`powercontext handoff commit @handoff.json --scope …`",
    "handoff-commit-next": "README's `handoff commit` then `handoff next`",
    "candidate-show": "`powercontext candidate show` of a proposed Skill",
    "skill-get": "`powercontext skill get` of that Skill once approved",
    "review-cli": "docs/review.md's command-line session, each command run as shown",
    "cli-candidate-conflict": "`candidate approve` of a version that was revised since",
    "cli-candidate-conflict-json": "the same with --json (stderr)",
    "http-error-envelope": "the HTTP answer of a revise whose citation is stale (409)",
    "memory-flush": "`powercontext memory flush --json` after three captured prompts",
    "metrics-packs": "`GET /metrics` at the end of the story: the pack and prepare counters",
    "portability-export": "`powercontext export --scope … -o FILE` of the memory-flush scope",
    "portability-import": "`powercontext import FILE --data-dir DIR` of that file elsewhere",
    "example-quickstart": "`python examples/quickstart.py` against the story's daemon",
    "example-bootstrap-handoff": "`python examples/bootstrap_handoff.py` against it",
}

#: The pages that may hold marked blocks.
PAGES = ("README.md", "docs/*.md", "docs/decisions/*.md", "examples/*.md")

REMOTE = "https://github.com/acme/shop.git"
SCOPE = "git:github.com/acme/shop"  # what the plugins derive from REMOTE
#: The user's shell setting for every hook run: Codex gives a hook 10 s, the hook's own default
#: deadline is 2 s; on a loaded machine 2 s could turn a recall into a timeout, and the samples
#: must not depend on timing. No sample shows this setting.
DEADLINE = {"POWERCONTEXT_DEADLINE_SECONDS": "8"}


# --------------------------------------------------------------------------------------------
# Normalisation: only what is volatile and must be
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Rule:
    why: str
    pattern: re.Pattern[str]
    replacement: str | Callable[[re.Match[str]], str]

    def apply(self, text: str) -> str:
        return self.pattern.sub(self.replacement, text)


def _rule(why: str, pattern: str, replacement: str | Callable[[re.Match[str]], str]) -> Rule:
    return Rule(why, re.compile(pattern), replacement)


_ID = r"\b([a-z]+(?:_[a-z]+)?)_[0-9a-f]{20}\b"
_TIME = r"\b\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z\b"


#: What is volatile in any run: ids the runtime generates, clock times and durations.
GENERIC_RULES: dict[str, Rule] = {
    "ids": _rule("generated ids: a prefix and 20 hex digits", _ID, r"\1_…"),
    "times": _rule("timestamps", _TIME, "…"),
    "duration_ms": _rule("durations of diagnostics", r'"duration_ms":\d+', '"duration_ms":…'),
    "durations": _rule("durations in reports", r"\bin \d+ ms\b", "in … ms"),
}


def rules(world: World) -> dict[str, Rule]:
    """The whole normalisation, applied in this order: this run's paths and port (literal
    matches of its exact values, never a pattern that could hide a change in wording), then
    :data:`GENERIC_RULES`."""
    home, bin_dir, port = re.escape(str(world.home)), re.escape(str(world.bin_dir)), world.port
    return {
        "home": _rule("the temp $HOME", home, "/home/you"),
        "bin": _rule("the private bin dir holding `codex`", bin_dir, "/usr/local/bin"),
        "port": _rule("the daemon's free TCP port", rf"127\.0\.0\.1:{port}\b", "127.0.0.1:7411"),
        **GENERIC_RULES,
    }


#: Rules of single samples, in place of the rule of the same key. docs/review.md's two samples
#: keep ids and times of the real shape (the values the page showed before it was generated),
#: because tests/e2e/test_daemon_cli_papercuts.py matches those two samples by shape.
_SHAPED_IDS = {"cand": "cand_6d1f0e4b9a2c7e3f5a80", "skill": "skill_0a1b2c3d4e5f60718293"}
_SHAPED = {
    "ids": _rule("ids, shaped", _ID, lambda match: _SHAPED_IDS[match[1]]),
    "times": _rule("timestamps, shaped", _TIME, "2026-12-01T20:41:07.512Z"),
}
SAMPLE_RULES: dict[str, dict[str, Rule]] = {"candidate-show": _SHAPED, "skill-get": _SHAPED}


def normalise(name: str, text: str, table: Mapping[str, Rule]) -> str:
    """``text`` of sample ``name`` with every rule applied (its own rules in place of those
    with the same key)."""
    for rule in {**table, **SAMPLE_RULES.get(name, {})}.values():
        text = rule.apply(text)
    return text


class SampleError(RuntimeError):
    """A command of the story did not do what the story needs (the samples would be wrong)."""


# --------------------------------------------------------------------------------------------
# The user and the runtime
# --------------------------------------------------------------------------------------------


@dataclass
class World:
    """One fresh user under ``root``: ``$HOME``, a clone of acme/shop at ``~/shop``, the private
    bin dir with ``codex``, and (once :meth:`serve` runs) a real daemon in the default data dir."""

    root: Path
    proxy: BlackholeProxy
    clis: HostCLIs
    home: Path = field(init=False)
    bin_dir: Path = field(init=False)
    repo: Path = field(init=False)
    codex: CodexSandbox = field(init=False)
    claude: ClaudeSandbox = field(init=False)
    port: int = field(init=False, default=0)
    daemon: Daemon | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        self.home = self.root / "home"
        self.bin_dir = self.root / "bin"
        self.bin_dir.mkdir()
        self.repo = init_repo(self.home / "shop", REMOTE)
        path = _private_path(self.bin_dir, node=True) + os.pathsep + str(_venv_bin())
        codex_env = {**CodexSandbox.offline_env(self.home, self.proxy.url), "PATH": path}
        claude_env = {**ClaudeSandbox.offline_env(self.home, self.proxy.url), "PATH": path}
        # One user with both hosts: one $HOME, one clone, one runtime.
        self.codex = CodexSandbox(self.home, self.repo, self.bin_dir, codex_env, dict(DEADLINE))
        self.claude = ClaudeSandbox(self.home, self.repo, self.bin_dir, claude_env, dict(DEADLINE))
        self.codex.with_host_cli(self.clis)  # `codex` on PATH; no `claude`

    @property
    def data_dir(self) -> Path:
        """PowerContext's default data dir for this user (nothing sets POWERCONTEXT_HOME)."""
        return self.home / ".local" / "share" / "powercontext"

    def env(self, **extra: str) -> dict[str, str]:
        return self.codex.env(**extra)

    def sh(
        self,
        command: str,
        *,
        expect: int = 0,
        stdin: str | None = None,
        env: Mapping[str, str] | None = None,
        timeout: float = 180,
    ) -> subprocess.CompletedProcess[str]:
        """``command`` as the user types it (``/bin/sh -c``, in ``~/shop``); its exit status
        must be ``expect``."""
        done = subprocess.run(
            ["/bin/sh", "-c", command],
            cwd=self.repo,
            env=dict(env) if env is not None else self.env(),
            input=stdin,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if done.returncode != expect:
            raise SampleError(
                f"`{command}` exited {done.returncode}, the story needs {expect}\n"
                f"--- stdout ---\n{done.stdout[-3000:]}\n--- stderr ---\n{done.stderr[-3000:]}"
            )
        return done

    @contextlib.contextmanager
    def serve(self) -> Iterator[str]:
        """``powercontext serve`` as ``make run`` starts it (the default data dir and socket),
        on a free port; yields its ready line (stdout) once it answers /health/ready."""
        self.port = free_port()
        out, err = self.root / "serve-stdout.txt", self.root / "serve-stderr.log"
        with open(out, "wb") as stdout, open(err, "wb") as stderr:
            process = subprocess.Popen(
                [str(_venv_bin() / "powercontext"), "serve", "--port", str(self.port)],
                stdout=stdout,
                stderr=stderr,
                # The distill worker proposes candidates and moves its cursor in the background,
                # on its own schedule: the samples' candidate lists and export sizes would then
                # depend on when it ran. Everything else serves as `make run` does.
                env=self.env(POWERCONTEXT_DISTILL="off"),
                cwd=self.repo,
            )
        self.daemon = Daemon(
            f"http://127.0.0.1:{self.port}",
            self.data_dir,
            process,
            err,
            self.data_dir / "powercontext.sock",
        )
        try:
            wait_ready(self.daemon.url, process, err)
            deadline = time.monotonic() + 30
            while not out.read_bytes().endswith(b"\n"):
                if time.monotonic() > deadline or process.poll() is not None:
                    raise SampleError("`powercontext serve` printed no ready line")
                time.sleep(0.05)
            yield out.read_text("utf-8")
        finally:
            stop_process(process)
            self.daemon = None

    def codex_turn(self, prompt: str) -> None:
        """One prompt in a fresh session of the real Codex CLI (its hooks run as installed)."""
        run_host_turn(
            "codex",
            prompt,
            home=self.home,
            cwd=self.repo,
            clis=self.clis,
            proxy_url=self.proxy.url,
            extra_env=dict(DEADLINE),
        )

    def mcp_bridge(self, *messages: Mapping[str, Any]) -> dict[Any, dict[str, Any]]:
        """The Codex plugin's stdio MCP server, started as its ``.mcp.json`` says, fed
        ``messages`` until end of input; its answers by id."""
        from powercontext_hook_kit.install import mcp_command

        executable, args = mcp_command("powercontext_codex")
        done = subprocess.run(
            [executable, *args],
            input="".join(json.dumps(message) + "\n" for message in messages),
            capture_output=True,
            text=True,
            env=self.env(),
            cwd="/",
            timeout=120,
        )
        if done.returncode != 0:
            raise SampleError(f"the MCP bridge exited {done.returncode}: {done.stderr[-2000:]}")
        answers = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
        return {answer.get("id"): answer for answer in answers}


def _venv_bin() -> Path:
    """Where this interpreter's console scripts are (``.venv/bin``: powercontext, …)."""
    return Path(sys.executable).parent


_INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "doc-samples", "version": "1"},
    },
}
_INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}


def _rpc(message_id: int, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": message_id, "method": method, "params": params or {}}


def _line(text: str, prefix: str) -> str:
    """The one line of a report that starts with ``prefix``."""
    found = [line for line in text.splitlines() if line.startswith(prefix)]
    if len(found) != 1:
        raise SampleError(f"want one line starting {prefix!r}, got {found!r} in:\n{text}")
    return found[0]


def _console(command: str, output: str) -> str:
    """A terminal transcript: the command as typed, then what it printed."""
    return f"$ {command}\n{output}"


# --------------------------------------------------------------------------------------------
# The story
# --------------------------------------------------------------------------------------------

#: docs/review.md's session: its first line, then each command (``{}``: the ids printed before).
REVIEW_SCOPE = f"export POWERCONTEXT_SCOPE_ID={SCOPE}"
REVIEW_RECORD = "powercontext task-result record @task.json"
_PRINTED_ID = re.compile(r"\b(?:cand|exp)_[0-9a-f]{20}\b")


def _page_block(page: str, heading: str) -> list[str]:
    """The lines of the first ``sh`` block under ``heading`` (a whole heading line)."""
    text = (ROOT / page).read_text("utf-8")
    found = re.search(rf"^{re.escape(heading)}\n.*?^```sh\n(.*?)^```$", text, re.M | re.S)
    if found is None:
        raise SampleError(f"{page} has no sh block under {heading!r}")
    return found[1].splitlines()


def _page_json(page: str, name: str) -> str:
    """The JSON block a page shows right after the line ```name`:``."""
    text = (ROOT / page).read_text("utf-8")
    found = re.search(rf"^`{re.escape(name)}`:\n\n```json\n(.*?)^```$", text, re.M | re.S)
    if found is None:
        raise SampleError(f"{page} shows no `{name}`")
    return found[1]


def _review_session(world: World) -> str:
    """Run docs/review.md's command-line session as a user types it: each command in a shell
    that first runs the block's ``export`` line, in ``~/shop`` (``experience.json`` there is the
    page's own, and so is ``task.json``); returns the block: the commands as run."""
    for name in ("experience.json", "task.json"):
        (world.repo / name).write_text(_page_json("docs/review.md", name))
    shown = [REVIEW_SCOPE]

    def run(command: str) -> str:
        shown.append(command)
        return world.sh(f"{REVIEW_SCOPE}\n{command}", env=world.env()).stdout

    def printed(output: str, prefix: str) -> str:
        ids = [found for found in _PRINTED_ID.findall(output) if found.startswith(prefix)]
        if not ids:
            raise SampleError(f"no {prefix}… id in:\n{output}")
        return ids[0]

    recorded = run(REVIEW_RECORD)
    if not recorded.startswith("recorded task-result/run-42 at position ") or not recorded.endswith(
        " (1 secret redacted)\n"
    ):
        raise SampleError(f"docs/review.md describes another answer than:\n{recorded}")
    if "run-42" not in run("powercontext task-result list"):
        raise SampleError("the task result is not listed")
    if "[REDACTED]" not in run("powercontext task-result show run-42"):
        raise SampleError("the task result's secret is not shown redacted")
    candidate = printed(
        run(
            'powercontext experience propose --situation "Changing a route" '
            '--action "Ran make openapi" \\\n'
            '    --outcome "CI passed" --lesson "Regenerate the OpenAPI document" '
            "--source-ref task-result/run-42"
        ),
        "cand_",
    )
    if candidate not in run("powercontext candidate list                      # the inbox"):
        raise SampleError("the inbox does not list the proposal")
    run(f"powercontext candidate show {candidate} --version 1")
    revise = f"powercontext candidate revise {candidate} --expected-version 1"
    run(revise + " --proposal @experience.json")
    experience = printed(
        run(f"powercontext candidate approve {candidate} --expected-version 2"), "exp_"
    )
    run("powercontext experience list                     # approved, current heads")
    run(f"powercontext experience get {experience} --revision 1")
    skill = printed(
        run(
            'echo "Run make release." | powercontext skill propose --name ship-it '
            '--instructions - \\\n    --validation "CI is green" --source-ref task-result/run-42'
        ),
        "cand_",
    )
    run(f'powercontext candidate reject {skill} --expected-version 1 --reason "too general"')
    if run("powercontext skill list").strip() != "no approved Skills":
        raise SampleError("the rejected Skill was listed")
    return "\n".join(shown) + "\n"


def _story(world: World) -> dict[str, str]:
    """Run the story; returns every sample, not yet normalised."""
    from powercontext_runtime.cli.schemas import HANDOFF_EXAMPLE, SKILL_EXAMPLE
    from powercontext_runtime.client import PowerContextClient

    s: dict[str, str] = {}
    scoped = world.env(POWERCONTEXT_SCOPE_ID=SCOPE)  # README: `export POWERCONTEXT_SCOPE_ID=…`

    # -- the runtime is not running yet ------------------------------------------------------
    s["codex-install"] = world.sh("powercontext-codex install").stdout
    world.sh("powercontext-claude-code install --no-host-cli")
    s["runtime-doctor"] = world.sh("powercontext doctor", expect=1).stdout
    down_doctor = world.sh("powercontext-codex doctor", expect=1).stdout
    listed = world.mcp_bridge(_INITIALIZE, _INITIALIZED, _rpc(2, "tools/list"))
    down_message = listed[2]["error"]["message"]
    world.codex_turn("How do we deploy the shop?")  # the hook finds no runtime

    # -- `make run` ---------------------------------------------------------------------------
    with world.serve() as ready:
        daemon = world.daemon
        assert daemon is not None
        s["serve-ready"] = ready

        # README "Use it", as written: each command in a shell that first runs the block's
        # `export` line; the lines with placeholders (`mem_ent_…`) cannot run as they stand
        export, *commands = _page_block("README.md", "## Use it")
        if export.split("#")[0].strip() != f"export POWERCONTEXT_SCOPE_ID={SCOPE}":
            raise SampleError(f"README's Use it starts with {export!r}, the story needs {SCOPE}")
        for command in commands:
            if "…" not in command:
                done = world.sh(f"{export}\n{command}", env=world.env()).stdout
                if command.startswith("powercontext context prepare "):
                    s["context-prepare"] = done
        s["context-pack"] = world.sh(
            "powercontext context prepare 'run make lint before pushing'", env=scoped
        ).stdout
        if not s["context-pack"].startswith("PowerContext prepared untrusted"):
            raise SampleError(f"docs/api.md needs a ready pack, got:\n{s['context-pack']}")

        world.codex_turn("How do we deploy the shop?")  # delivers the prompt kept meanwhile
        up_doctor = world.sh("powercontext-codex doctor").stdout
        s["codex-doctor"] = up_doctor
        s["mcp-doctor-lines"] = (
            _line(up_doctor, "ok   mcp:") + "\n" + _line(down_doctor, "FAIL mcp:") + "\n"
        )

        # README "Start each session where the last one stopped"; docs/bootstrap.md
        (world.repo / "handoff.json").write_text(
            json.dumps(HANDOFF_EXAMPLE, indent=2, ensure_ascii=False) + "\n", "utf-8"
        )
        commit = world.sh(
            'powercontext handoff commit @handoff.json --scope "$(powercontext-codex scope)"'
        ).stdout
        waiting = world.sh('powercontext handoff next --scope "$(powercontext-codex scope)"').stdout
        s["handoff-commit"] = commit
        s["handoff-commit-next"] = commit + waiting

        # docs/review.md (its session records the task result task-result/run-42 cited below)
        s["review-cli"] = _review_session(world)
        proposed = world.sh(
            "powercontext skill propose --json "
            + shlex.join(
                [
                    "--name", SKILL_EXAMPLE["name"],
                    "--description", SKILL_EXAMPLE["description"],
                    "--instructions", "-",
                    *(a for step in SKILL_EXAMPLE["validation"] for a in ("--validation", step)),
                    "--source-ref", "task-result/run-42",
                    "--artifact-ref", "memory:memory:1",
                    "--reason", "Seen in the last three releases",
                ]
            ),
            stdin=SKILL_EXAMPLE["instructions"],
            env=scoped,
        )  # fmt: skip
        candidate = json.loads(proposed.stdout)["candidate_id"]
        show = f"powercontext candidate show {candidate}"
        s["candidate-show"] = _console(show, world.sh(show, env=scoped).stdout)
        approved = world.sh(
            f"powercontext candidate approve {candidate} --expected-version 1 --json", env=scoped
        )
        skill = json.loads(approved.stdout)["result_artifact"]["artifact_id"]
        get = f"powercontext skill get {skill} --revision 1"
        s["skill-get"] = _console(get, world.sh(get, env=scoped).stdout)

        # docs/api.md: a stale candidate version, a stale citation
        proposed = world.sh(
            "powercontext experience propose --json --situation 'Changing a route' "
            "--action 'Ran make openapi' --outcome 'CI passed' "
            "--lesson 'Regenerate the OpenAPI document' --source-ref task-result/run-42",
            env=scoped,
        )
        candidate = json.loads(proposed.stdout)["candidate_id"]
        world.sh(
            f"powercontext candidate revise {candidate} --expected-version 1 --proposal -",
            stdin=json.dumps(
                {
                    "situation": "Changing a route or a contract model",
                    "action": "Ran make openapi",
                    "outcome": "CI passed",
                    "lesson": "Regenerate the OpenAPI document with the change",
                }
            ),
            env=scoped,
        )
        approve = f"powercontext candidate approve {candidate} --expected-version 1"
        s["cli-candidate-conflict"] = world.sh(approve, expect=1, env=scoped).stderr
        as_json = world.sh(approve + " --json", expect=1, env=scoped)
        s["cli-candidate-conflict-json"] = as_json.stderr
        with daemon.client() as http:
            first = http.post(
                "/v1/memory/remember",
                json={"scope_id": SCOPE, "kind": "fact", "text": "The API listens on port 9090"},
            ).json()["entry"]["citation"]
            revise = {"scope_id": SCOPE, "citation": first, "text": "Port 9191"}
            http.post("/v1/memory/entries/revise", json=revise).raise_for_status()
            stale = http.post("/v1/memory/entries/revise", json={**revise, "text": "Port 9292"})
            if stale.status_code != 409:
                raise SampleError(f"a stale citation got {stale.status_code}: {stale.text}")
            s["http-error-envelope"] = stale.text + "\n"

        # docs/mcp.md: a tool call the schema refuses, through the agent's bridge
        called = world.mcp_bridge(
            _INITIALIZE,
            _INITIALIZED,
            _rpc(
                2,
                "tools/call",
                {
                    "name": "search_memory",
                    "arguments": {"scope_id": SCOPE, "query": "deploy", "surprise": True},
                },
            ),
        )
        result = called[2]["result"]
        if not result.get("isError"):
            raise SampleError(f"the tool call was not refused: {result}")
        (block,) = result["content"]
        s["mcp-tool-error"] = block["text"] + "\n"

        # README "Plugin troubleshooting": the Claude Code hook with a wrong token
        (handler,) = plugin_handlers("powercontext_claude_code", world.claude.user_hooks())
        event = {
            "session_id": "s",
            "transcript_path": str(world.home / ".claude" / "session.jsonl"),
            "cwd": str(world.repo),
            "hook_event_name": "UserPromptSubmit",
            "prompt": "How do we deploy the shop?",
        }
        hooked = world.sh(
            handler["command"],
            stdin=json.dumps(event),
            env=world.claude.env(POWERCONTEXT_TOKEN="pc_not_the_agent_token"),
        )
        if hooked.stdout:
            raise SampleError(f"a refused hook printed {hooked.stdout!r}")
        s["hook-diagnostic"] = hooked.stderr

        # docs/flush.md: three captured prompts with `remember:` lines, in a scope of their own
        billing = "git:github.com/acme/billing"
        prompts = [
            "remember: invoices are numbered per calendar year",
            "Why did the export fail?\nremember: the export runs at 02:00 UTC",
            "记住：退款必须经过两个人审批",
        ]
        with PowerContextClient(daemon.url, token=daemon.agent_token) as client:
            for number, prompt in enumerate(prompts, 1):
                client.capture_content_source(
                    scope_id=billing, source_id=f"prompt-{number}", content=prompt
                )
        s["memory-flush"] = world.sh(f"powercontext memory flush --json --scope {billing}").stdout

        # docs/portability.md: that scope exported, then imported into another data dir
        export = f"powercontext export --scope {billing} -o ~/billing.jsonl"
        s["portability-export"] = _console(export, world.sh(export).stdout)
        load = "powercontext import ~/billing.jsonl --data-dir ~/elsewhere"
        s["portability-import"] = _console(load, world.sh(load).stdout)

        # README "Plugin MCP tools": the agent token file no longer matches the runtime's
        token_file = world.data_dir / "auth" / "agent-token"
        kept = token_file.read_bytes()
        token_file.write_text("pc_not_the_agent_token\n", "utf-8")
        try:
            listed = world.mcp_bridge(_INITIALIZE, _INITIALIZED, _rpc(2, "tools/list"))
        finally:
            token_file.write_bytes(kept)
        s["mcp-errors"] = down_message + "\n" + listed[2]["error"]["message"] + "\n"

        # docs/observability.md: what /metrics says about this story's packs
        auth = {"Authorization": f"Bearer {daemon.token}"}
        scraped = httpx.get(daemon.url + "/metrics", headers=auth, timeout=30).text
        shown = ("powercontext_context_packs_total", 'powercontext_http_requests_total{code=""')
        s["metrics-packs"] = "".join(
            line + "\n"
            for line in scraped.splitlines()
            if line.startswith(shown) and ("packs" in line or "prepare_context" in line)
        )

        # examples/README.md: two examples as a user runs them, with the daemon's defaults
        # (after /metrics: they prepare packs of their own)
        for name in ("quickstart", "bootstrap_handoff"):
            script = shlex.join([sys.executable, str(ROOT / "examples" / f"{name}.py")])
            s[f"example-{name.replace('_', '-')}"] = world.sh(script).stdout
    return s


def generate(*, clis: HostCLIs | None = None) -> dict[str, str]:
    """Every sample, from a real run in a fresh user (see :func:`_story`), normalised."""
    clis = clis or ensure_host_clis()
    previous_umask = os.umask(0o022)  # the modes install reports must not depend on the caller
    try:
        with (
            tempfile.TemporaryDirectory(prefix="pc-docs-", dir=_short_tmp()) as scratch,
            BlackholeProxy() as proxy,
        ):
            world = World(Path(scratch), proxy, clis)
            raw = _story(world)
            table = rules(world)
            leaks = _leaks(world)
    finally:
        os.umask(previous_umask)
    if set(raw) != set(SAMPLES):
        raise SampleError(f"the story made {sorted(raw)}, SAMPLES lists {sorted(SAMPLES)}")
    samples = {}
    for name in SAMPLES:
        text = normalise(name, raw[name], table)
        for leak in leaks:
            if leak in text:
                raise SampleError(f"sample {name} still holds {leak!r}: a rule is missing\n{text}")
        samples[name] = text.rstrip("\n")
    return samples


def _leaks(world: World) -> list[str]:
    """Paths of this machine no sample may show: the temp dir, the checkout, the caller's
    $HOME (unless it is a prefix of what the rules put in, like ``/home``)."""
    found = []
    for path in (str(world.root), str(ROOT), str(Path.home())):
        if len(Path(path).parts) > 1 and not any(
            kept.startswith(path) for kept in ("/home/you", "/usr/local/bin")
        ):
            found.append(path)
    return found


def _short_tmp() -> str | None:
    """/tmp when there is one: the socket path under the temp $HOME must stay short."""
    return "/tmp" if Path("/tmp").is_dir() else None


# --------------------------------------------------------------------------------------------
# The Markdown side
# --------------------------------------------------------------------------------------------

_MARKER = re.compile(r"^[ \t]*<!--[ \t]*sample\b", re.M)  # a line that starts like a marker
_BLOCK = re.compile(
    r"^<!-- sample: (?P<name>[a-z0-9-]+) -->\n"
    r"(?P<fence>```+)(?P<info>[^\n`]*)\n(?P<body>(?:.*?\n)??)(?P=fence)$",
    re.M | re.S,
)


@dataclass(frozen=True)
class Block:
    """One marked block: the sample it shows and its current text."""

    page: Path
    line: int  # of the marker, 1-based
    name: str
    text: str  # the lines between the fences, without the last newline
    start: int  # offsets of the body in the page
    end: int

    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def pages() -> list[Path]:
    found: list[Path] = []
    for pattern in PAGES:
        found += sorted(ROOT.glob(pattern))
    return found


def blocks(page: Path) -> list[Block]:
    """The marked blocks of ``page``; a marker not right above a fenced block is an error."""
    text = page.read_text("utf-8")
    found = []
    for match in _BLOCK.finditer(text):
        line = text.count("\n", 0, match.start()) + 1
        body = match["body"]
        name, start, end = match["name"], match.start("body"), match.end("body")
        found.append(Block(page, line, name, body[:-1] if body else "", start, end))
    markers = len(_MARKER.findall(text))
    if markers != len(found):
        raise SampleError(
            f"{page.relative_to(ROOT)}: {markers} sample markers but {len(found)} marked blocks "
            "(a marker must be the line right above a fence, its name [a-z0-9-]+)"
        )
    return found


def all_blocks() -> list[Block]:
    return [block for page in pages() for block in blocks(page)]


def stale(samples: Mapping[str, str]) -> list[tuple[Block, str]]:
    """Every marked block whose text is not its sample, with a short diff."""
    found = []
    for block in all_blocks():
        want = samples.get(block.name)
        if want is None:
            found.append((block, f"unknown sample {block.name!r}"))
        elif block.text != want:
            diff = difflib.unified_diff(
                block.text.splitlines(), want.splitlines(), "in the page", "real run", lineterm=""
            )
            found.append((block, "\n".join(diff)))
    return found


def write(samples: Mapping[str, str]) -> list[Block]:
    """Rewrite every marked block from ``samples``; returns the blocks that changed."""
    changed = []
    for page in pages():
        text = page.read_text("utf-8")
        out, last = [], 0
        for block in blocks(page):
            if block.name not in samples:
                raise SampleError(f"{block.where()}: unknown sample {block.name!r}")
            new = samples[block.name] + "\n" if samples[block.name] else ""
            out += [text[last : block.start], new]
            last = block.end
            if new != text[block.start : block.end]:
                changed.append(block)
        out.append(text[last:])
        if "".join(out) != text:
            page.write_text("".join(out), "utf-8")
    return changed


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--write", action="store_true", help="rewrite every marked block")
    action.add_argument("--check", action="store_true", help="exit 1 listing stale blocks")
    action.add_argument("--list", action="store_true", help="the samples and their runs")
    options = parser.parse_args(argv)
    if options.list:
        used: dict[str, list[str]] = {}
        for block in all_blocks():
            used.setdefault(block.name, []).append(block.where())
        for name, what in SAMPLES.items():
            print(f"{name:28} {what}\n{'':28} {', '.join(used.get(name, ['(unused)']))}")
        return 0
    started = time.monotonic()
    samples = generate()
    seconds = time.monotonic() - started
    if options.write:
        changed = write(samples)
        for block in changed:
            print(f"rewrote {block.where()} ({block.name})")
        print(f"{len(samples)} samples, real run {seconds:.0f} s; {len(changed)} blocks changed")
        return 0
    problems = stale(samples)
    for block, diff in problems:
        print(f"{block.where()}: sample {block.name} is stale\n{diff}\n")
    if problems:
        print(f"{len(problems)} stale blocks: run `make docs`")
        return 1
    print(f"{len(samples)} samples, real run {seconds:.0f} s; every marked block is current")
    return 0


if __name__ == "__main__":
    sys.exit(main())
