"""What does the UserPromptSubmit hook cost the user on every prompt? (spec 08, P1)

The host runs the hook as a fresh process for every prompt and waits for it, so the budget is
whole-process, spawn to exit, against a warm runtime holding N = 10k entries in the scope:

* P1: wall p50 ≤ 80 ms; the hook's own overhead (hook p50 minus the server's prepare p50)
  ≤ 50 ms; peak RSS ≤ 40 MiB.

Method: one scope loaded to ``--entries`` over HTTP (the shared seeded loader), the daemon
warmed up, then ``--samples`` rounds. Each round uses one seeded, realistic prompt (about half
ask about something stored, half about something the project never mentions) and runs, in a
seeded random order so machine noise hits every series alike:

* the hook (``python -m powercontext_hook_kit hook <host> user-prompt-submit`` or
  ``--command``) with the host's event JSON on stdin, ``POWERCONTEXT_SCOPE_ID`` set and the
  runtime reached over ``--transport`` (below): wall time spawn → exit, child CPU and peak RSS
  (``os.wait4`` rusage);
  stdout must be empty or exactly one valid envelope, stderr empty or the one ``empty`` line,
  exit code 0 — a hook that skipped or failed would look fast, so such runs are counted as
  invalid and fail the measurement;
* the same hook with prompt capture off (``POWERCONTEXT_CAPTURE_PROMPTS=0``), and the plugin's
  console script (``powercontext-<host>``) when it is installed in this venv;
* reference processes from the same interpreter: ``python -c pass``,
  ``python -c "import msgspec, http.client"`` and ``python -c "import powercontext_hook_kit"``;
* the server side over one keep-alive ``http.client`` connection: the very prepare request the
  hook sends (same query, ``max_bytes`` 8000), and a prompt capture like the hook's.

Transport (``--transport``, spec 07 / issue 15): ``unix`` runs the hook as a user's runs by
default on POSIX — nothing configured but ``POWERCONTEXT_HOME``, so it finds the runtime's unix
socket ``<data dir>/powercontext.sock`` and its agent token ``<data dir>/auth/agent-token`` by
itself (``--socket`` names another socket, e.g. of a ``--url`` runtime). ``tcp`` sets
``POWERCONTEXT_URL``/``_TOKEN`` to the TCP URL, as every run before issue 15 did. ``both`` times
the socket hook and, in the same rounds, the same hook over TCP (``POWERCONTEXT_URL=http://…``,
token still from the file) as the series ``hook_tcp``, so the two transports are compared under
the same load. ``auto`` (default): ``unix`` when the socket is known (a self-started daemon on
POSIX, or ``--socket``), else ``tcp``.

The differences between these medians break the hook's time down (interpreter, imports, the
kit, the flow, the capture request, the server). Children run with a bytecode cache in a temp
dir (``PYTHONPYCACHEPREFIX``), as an installed wheel has ``.pyc`` files; when the caller sets
``PYTHONDONTWRITEBYTECODE`` (this dev environment does, and the editable kit then has no
``.pyc``), the hook is also timed with the caller's bytecode settings. Settings files and the
diagnostic log are kept out of the user's home (``XDG_CONFIG_HOME``, ``PLUGIN_DATA`` in a temp
dir). Children are spawned by a small bare launcher process, not by the bench itself: Linux carries
the spawning process's peak RSS into ``ru_maxrss`` of a vfork/exec'd child. Budgets are
reported, never enforced through the exit code, which says whether the measurement itself
worked (1 also when any hook run was invalid).

Usage (project venv; progress on stderr, Markdown or ``--json`` on stdout)::

    # Full run, N = 10k in a fresh self-started SQLite daemon (≈ 3 min on 2 cores, loading
    # ≈ 1.5 min), then rewrite the hook-latency section of RESULTS.md:
    .venv/bin/python bench/hook_latency.py --write-results
    # Keep the loaded scope for later runs: --data-dir /tmp/pc-hook --scope-id bench-hook-s42
    # As a user runs it: the command `install` writes, from a venv holding only the kit and the
    # plugin (what `make bench` does; this dev venv's editable installs cost ≈ 16 ms in `site`):
    .venv/bin/python bench/hook_latency.py --python /tmp/plugin-venv/bin/python
    # Seconds-long smoke run (bench/run_all.py --smoke runs it; tests/bench/test_run_all_smoke.py):
    .venv/bin/python bench/hook_latency.py --smoke --json
    # Another hook command (absolute path, or resolved on PATH), or Claude Code's event shape:
    .venv/bin/python bench/hook_latency.py --command '/opt/x/bin/other-hook ups' --host claude-code
    # TCP and the unix socket in the same rounds (series `hook` = socket, `hook_tcp` = TCP):
    .venv/bin/python bench/hook_latency.py --transport both
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import http.client
import json
import os
import random
import re
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from _common import (
    BenchError,
    MemoryItem,
    MemoryTextGenerator,
    Target,
    command_line,
    load_memories,
    log,
    machine_facts,
    markdown_table,
    open_target,
    percentile,
    process_cpu_seconds,
    process_memory_kib,
    publish,
    summarize_ms,
    system_busy_cpu_seconds,
)

SECTION = "hook-latency"
PREPARE_PATH = "/v1/context/prepare"
CAPTURE_PATH = "/v1/sources/content"
LIST_PATH = "/v1/memory/entries/list"
CONTEXT_SCHEMA = "powercontext.prepared-context.v1"
HOOK_EVENT = "UserPromptSubmit"
HOSTS = ("codex", "claude-code")
MAX_BYTES = 8000  # the hook's default prepare budget, sent explicitly like the hook does
QUERY_MAX_CHARS = 8192  # the hook sends prompt.strip()[:8192] as the query
PROCESS_TIMEOUT = 30.0  # a hook is bounded by its own 2 s deadline; this only guards the bench

DEFAULT_ENTRIES = 10_000
DEFAULT_SAMPLES = 100
DEFAULT_WARMUP = 5
SMOKE_ENTRIES = 100
SMOKE_SAMPLES = 3
SMOKE_WARMUP = 1
VOCAB_ENTRIES = 1000  # prompts that recall something quote one of the first loaded entries

BUDGET_N = 10_000
P1_P50_MS = 80.0
P1_OVERHEAD_MS = 50.0
P1_RSS_MIB = 40.0
REFERENCE_PASS_MS = 9.0  # spec 08 "Reference points": `python -c pass` (venv)

# Series timed in every round. Hook series are validated; reference series only timed.
BARE, PASS, IMPORTS, KIT, HOOK, NO_CAPTURE, PLUGIN, ENV_BYTECODE, HOOK_TCP = (
    "bare", "pass", "imports", "kit_import", "hook", "hook_no_capture", "plugin",
    "hook_env_bytecode", "hook_tcp",
)  # fmt: skip
HOOK_SERIES = (HOOK, NO_CAPTURE, PLUGIN, ENV_BYTECODE, HOOK_TCP)
TRANSPORTS = ("auto", "tcp", "unix", "both")
SOCKET_NAME = "powercontext.sock"  # <runtime data dir>/powercontext.sock
AGENT_TOKEN = ("auth", "agent-token")
SERVER = "server"


# -- seeded prompts ----------------------------------------------------------------------------

# Topics the memory generator never writes about (filtered against the corpus at run time).
_UNRELATED = (
    "autumn", "birthday", "bicycle", "piano", "orchard", "galaxy", "recipe", "holiday", "museum",
    "volcano", "harbor", "violin", "tomato", "umbrella", "lantern", "meadow", "penguin",
    "saxophone", "telescope", "waterfall", "kubernetes", "terraform", "graphql", "webpack",
    "kafka", "nginx", "protobuf", "bluetooth", "firmware", "shader", "spreadsheet", "payroll",
    "calendar", "subtitle", "podcast", "playlist", "thumbnail", "watermark", "geolocation",
    "carousel", "dropdown", "tooltip", "sidebar", "breadcrumb", "newsletter", "coupon",
    "wishlist", "warehouse", "barcode", "printer", "trackpad", "headphones", "microphone",
    "webcam", "firewall", "bandwidth", "compression", "snapshot", "天气", "花园", "音乐", "地图",
)  # fmt: skip

_UNRELATED_REQUESTS = (
    "Write a short poem about the {u} for a birthday card.",
    "Explain the difference between a {u} and a {u} in simple terms.",
    "What should I pack for a weekend trip to see the {u}?",
    "Draft a polite email declining the {u} meeting on Friday.",
    "Give me three ideas for a {u} themed party.",
    "How do I set up a {u} and a {u} for a small home office?",
    "Summarise the history of the {u} in five bullet points.",
    "Can you recommend a good book about the {u}?",
    "帮我写一段关于{u}的介绍，两三句话就行。",
    "Translate 'see you tomorrow at the {u}' into French and Spanish.",
)
_RECALL_REQUESTS = (
    "Can you look at {frag} again? Something is off after the last change.",
    "Before you touch {frag}, remind me what we agreed about it.",
    "Fix the failing test around {frag} and explain the cause.",
    "Is this still true: {entry} If not, update the code and the docs.",
    "Why does {frag} behave differently in CI than locally?",
    "Refactor the code that deals with {frag}, keep behaviour identical.",
    "帮我检查一下 {frag} 相关的代码，有没有问题？",
    "Add logging around {frag}; we need to debug a customer report.",
    "Where is {frag} handled, and who decided how it works?",
)
# What an agent prompt says around the specifics (makes some prompts medium or long).
_PROSE = (
    "Please keep the change small and run the tests before you report back.",
    "Explain your plan in a few bullet points before editing anything.",
    "I tried reverting the last commit locally but the problem did not go away.",
    "Keep the public interface stable; other teams depend on it.",
    "When you are done, summarise what you changed and what you left alone.",
    "If something is unclear, write the assumption down instead of guessing.",
    "It only happens on the second run, so some state probably survives between runs.",
    "Add a regression test that fails without the fix and passes with it.",
    "Think about empty input, huge input and non-ASCII text too.",
    "Ignore the flaky integration job for now; it has been red for unrelated reasons.",
)


def _tokens(text: str) -> list[str]:
    tokens = (t.strip(".,;:!?()[]`'\"#") for t in re.findall(r"[^\s，。：、；（）]+", text))
    return [t for t in tokens if len(t) >= 2]


@dataclass(frozen=True, slots=True)
class Prompt:
    flavour: str  # "recall" (quotes a stored entry) | "unrelated" (topics never stored)
    text: str


class PromptGenerator:
    """Seeded agent prompts: half quote words of a stored entry, half are about other things.

    Lengths vary like real prompts: most are one sentence, some carry a few sentences of
    instructions, about one in ten is 1,000-2,000 characters long.
    """

    def __init__(self, seed: int, entries: Sequence[MemoryItem]) -> None:
        if not entries:
            raise BenchError("prompts need at least one loaded entry")
        self._rng = random.Random(f"hook-prompts-{seed}")
        self._entries = [e.text for e in entries]
        known = {t.lower() for text in self._entries for t in _tokens(text)}
        self._unrelated = [w for w in _UNRELATED if w.lower() not in known]
        if not self._unrelated:
            raise BenchError("every unrelated word occurs in the corpus")

    def take(self, count: int) -> list[Prompt]:
        return [self.next() for _ in range(count)]

    def next(self) -> Prompt:
        rng = self._rng
        if rng.random() < 0.5:
            flavour, text = "recall", self._recall()
        else:
            flavour = "unrelated"
            text = rng.choice(_UNRELATED_REQUESTS)
            while "{u}" in text:
                text = text.replace("{u}", rng.choice(self._unrelated), 1)
        roll = rng.random()
        if roll < 0.1:  # long prompt: pasted context and instructions
            parts = [text]
            target = rng.randint(1000, 2000)
            while sum(len(p) + 1 for p in parts) < target:
                parts.append(rng.choice(_PROSE))
            text = " ".join(parts)[:target]
        elif roll < 0.45:
            text = " ".join([text, *rng.sample(_PROSE, rng.randint(1, 4))])
        return Prompt(flavour, text)

    def _recall(self) -> str:
        rng = self._rng
        entry = rng.choice(self._entries)
        template = rng.choice(_RECALL_REQUESTS)
        if "{entry}" in template:
            return template.replace("{entry}", entry)
        words = _tokens(entry)
        count = min(len(words), rng.randint(2, 5))
        start = rng.randrange(len(words) - count + 1)
        return template.replace("{frag}", " ".join(words[start : start + count]))


# -- processes ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ProcessRun:
    wall_s: float
    cpu_s: float
    maxrss_kib: int
    returncode: int
    stdout: bytes
    stderr: bytes


# The launcher: a bare interpreter (``-I -S``, stdlib only) that spawns every measured process.
# Why not spawn from the bench itself: Linux carries the parent's peak RSS into a child that is
# created with vfork/posix_spawn (or fork) and then execs, so ``ru_maxrss`` of every child would
# read as at least the bench's own ~40 MiB (httpx and friends). The launcher's peak is about
# 9 MiB, far below anything measured, and it is reported as the floor of the RSS figures.
# Protocol: one JSON request per line on stdin, one JSON answer per line on stdout; bytes travel
# as latin-1 strings (lossless).
_LAUNCHER = r"""
import json, os, select, signal, sys, time
def run(req):
    stdin = req["stdin"].encode("latin-1")
    r_in, w_in = os.pipe()
    r_out, w_out = os.pipe()
    r_err, w_err = os.pipe()
    actions = [(os.POSIX_SPAWN_DUP2, r_in, 0), (os.POSIX_SPAWN_DUP2, w_out, 1),
               (os.POSIX_SPAWN_DUP2, w_err, 2)]
    started = time.perf_counter()
    pid = os.posix_spawn(req["argv"][0], req["argv"], req["env"], file_actions=actions)
    for fd in (r_in, w_out, w_err):
        os.close(fd)
    try:
        os.write(w_in, stdin)
    except BrokenPipeError:
        pass
    os.close(w_in)
    chunks = {r_out: [], r_err: []}
    open_fds = {r_out, r_err}
    deadline = started + req["timeout"]
    killed = False
    while open_fds:
        ready, _, _ = select.select(list(open_fds), [], [], max(deadline - time.perf_counter(), 0))
        if not ready:
            os.kill(pid, signal.SIGKILL)
            killed = True
            break
        for fd in ready:
            data = os.read(fd, 65536)
            if data:
                chunks[fd].append(data)
            else:
                open_fds.discard(fd)
    _, status, usage = os.wait4(pid, 0)
    wall = time.perf_counter() - started
    out = {}
    for fd in (r_out, r_err):
        os.close(fd)
        out[fd] = b"".join(chunks[fd])
    return {"wall": wall, "cpu": usage.ru_utime + usage.ru_stime, "maxrss": usage.ru_maxrss,
            "returncode": -9 if killed else os.waitstatus_to_exitcode(status),
            "stdout": out[r_out].decode("latin-1"), "stderr": out[r_err].decode("latin-1")}
for line in sys.stdin:
    sys.stdout.write(json.dumps(run(json.loads(line))) + "\n")
    sys.stdout.flush()
"""


class Launcher:
    """A long-lived bare interpreter that spawns, times and reaps the measured processes.

    The timer runs inside the launcher from just before ``posix_spawn`` to ``wait4`` returning:
    what a host waits for. stdout and stderr are read concurrently, so no pipe can fill up.
    """

    def __init__(self, cwd: Path) -> None:
        self._process = subprocess.Popen(
            [sys.executable, "-I", "-S", "-c", _LAUNCHER],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=cwd, env={},
        )  # fmt: skip

    @property
    def pid(self) -> int:
        return self._process.pid

    def run(self, argv: Sequence[str], stdin: bytes, env: dict[str, str]) -> ProcessRun:
        """Run one process to completion (all children share the launcher's cwd)."""
        request = {"argv": list(argv), "env": env, "stdin": stdin.decode("latin-1"),
                   "timeout": PROCESS_TIMEOUT}  # fmt: skip
        assert self._process.stdin is not None and self._process.stdout is not None
        self._process.stdin.write(json.dumps(request).encode() + b"\n")
        self._process.stdin.flush()
        line = self._process.stdout.readline()
        if not line:
            raise BenchError(f"the launcher died (exit {self._process.poll()})")
        answer = json.loads(line)
        return ProcessRun(
            answer["wall"], answer["cpu"], answer["maxrss"], answer["returncode"],
            answer["stdout"].encode("latin-1"), answer["stderr"].encode("latin-1"),
        )  # fmt: skip

    def close(self) -> None:
        if self._process.stdin is not None:
            self._process.stdin.close()
        try:
            self._process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        if self._process.stdout is not None:
            self._process.stdout.close()


def check_hook_run(run: ProcessRun) -> tuple[str | None, str | None]:
    """(injected content or ``None``, problem or ``None``) for one hook run.

    Valid: exit 0 and either one envelope + newline on stdout and nothing on stderr, or nothing
    on stdout and exactly the ``context_prepare``/``empty`` diagnostic line on stderr. Anything
    else (skipped, server unavailable, extra output) means the hook did not do the real work.
    """
    if run.returncode != 0:
        return None, f"exit code {run.returncode}"
    lines = [line for line in run.stderr.decode("utf-8", "replace").splitlines() if line]
    if run.stdout:
        if not run.stdout.endswith(b"\n") or run.stdout.count(b"\n") != 1:
            return None, "stdout is not exactly one line"
        try:
            envelope = json.loads(run.stdout)
            inner = envelope["hookSpecificOutput"]
            valid = (
                set(envelope) == {"hookSpecificOutput"}
                and set(inner) == {"hookEventName", "additionalContext"}
                and inner["hookEventName"] == HOOK_EVENT
                and isinstance(inner["additionalContext"], str)
                and inner["additionalContext"].strip() != ""
            )
        except (ValueError, KeyError, TypeError):
            valid = False
        if not valid:
            return None, f"invalid envelope: {run.stdout[:200]!r}"
        if lines:
            return None, f"unexpected diagnostics with an injection: {lines[:2]}"
        return str(inner["additionalContext"]), None
    try:
        diagnostic = json.loads(lines[0]) if len(lines) == 1 else None
    except ValueError:
        diagnostic = None
    if not (
        isinstance(diagnostic, dict)
        and diagnostic.get("event") == "context_prepare"
        and diagnostic.get("outcome") == "empty"
    ):
        return None, f"no injection and diagnostics {lines[:2]}"
    return None, None


@dataclass(slots=True)
class Series:
    """One measured process kind: its command line, environment changes and samples."""

    key: str
    label: str
    argv: list[str]
    env: dict[str, str]
    is_hook: bool
    wall: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)
    rss: list[int] = field(default_factory=list)
    valid: int = 0
    injected: int = 0
    matches_server: int = 0
    problems: list[str] = field(default_factory=list)

    def record(self, run: ProcessRun) -> None:
        self.wall.append(run.wall_s)
        self.cpu.append(run.cpu_s)
        self.rss.append(run.maxrss_kib)

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "label": self.label,
            "argv": shlex.join(self.argv),
            "runs": len(self.wall),
            "wall_ms": summarize_ms(self.wall),
            "cpu_ms": summarize_ms(self.cpu),
            "maxrss_kib": {"p50": round(percentile(self.rss, 50)), "max": max(self.rss)},
        }
        if self.is_hook:
            out.update(
                valid=self.valid,
                injected=self.injected,
                empty=self.valid - self.injected,
                matches_server=self.matches_server,
                problems=self.problems[:5],
            )
        return out


# -- HTTP (server side) ------------------------------------------------------------------------


class KeepAliveClient:
    """One keep-alive ``http.client`` connection (little client CPU, no per-request connect)."""

    def __init__(self, target: Target, timeout: float = 60) -> None:
        parts = urlsplit(target.url)
        cls = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
        self._conn = cls(parts.hostname or "127.0.0.1", parts.port, timeout=timeout)
        self._base = parts.path.rstrip("/")
        self._headers = {
            "Authorization": f"Bearer {target.token}",
            "Content-Type": "application/json",
        }

    def post(self, path: str, body: bytes) -> tuple[float, int, bytes]:
        """(seconds from sending to the last body byte, status, body)."""
        started = time.perf_counter()
        self._conn.request("POST", self._base + path, body, self._headers)
        response = self._conn.getresponse()
        data = response.read()
        return time.perf_counter() - started, response.status, data

    def ensure_open(self) -> None:
        """An untimed ``GET /health/live`` that reopens the connection if the server closed it.

        Servers drop idle keep-alive connections after a few seconds (uvicorn: 5 s), and a
        round of process runs on a loaded machine can take longer than that; the timed request
        right after must not pay for a reconnect.
        """
        for attempt in (1, 2):
            try:
                self._conn.request("GET", self._base + "/health/live")
                self._conn.getresponse().read()
                return
            except (OSError, http.client.HTTPException) as exc:
                self._conn.close()  # the next request connects again
                if attempt == 2:
                    raise BenchError(f"the runtime does not answer: {exc!r}") from exc

    def close(self) -> None:
        self._conn.close()


def prepare_body(scope_id: str, prompt: Prompt) -> bytes:
    """Exactly what the hook sends for this prompt."""
    query = prompt.text.strip()[:QUERY_MAX_CHARS]
    request = {"scope_id": scope_id, "query": query, "max_bytes": MAX_BYTES}
    return json.dumps(request, ensure_ascii=False).encode()


def capture_body(scope_id: str, host: str, prompt: Prompt, turn_id: str) -> bytes:
    """A capture like the hook's, under a source id of the bench's own (no collision)."""
    digest = hashlib.sha256(f"{scope_id}\0{turn_id}\0{prompt.text}".encode()).hexdigest()
    request = {
        "scope_id": scope_id,
        "source_id": f"bench-hook-capture:{digest}",
        "content": prompt.text,
        "metadata": {"host": host, "hook": HOOK_EVENT},
    }
    return json.dumps(request, ensure_ascii=False).encode()


def pack_content(status: int, data: bytes) -> str | None:
    """The pack's content (``None`` when empty) after checking it is a valid pack."""
    if status != 200:
        raise BenchError(f"prepare -> HTTP {status}: {data[:300]!r}")
    try:
        pack = json.loads(data)
        content = pack["content"]
        valid = (
            pack["schema"] == CONTEXT_SCHEMA
            and pack["status"] in ("ready", "empty")
            and (pack["status"] == "ready") == (content is not None)
            and pack["content_bytes"] == (len(content.encode()) if content is not None else 0)
        )
    except (ValueError, KeyError, TypeError, AttributeError):
        valid = False
    if not valid:
        raise BenchError(f"prepare returned an invalid pack: {data[:300]!r}")
    return content  # type: ignore[no-any-return]


def head_revision(target: Target, scope_id: str) -> int:
    """The scope's memory head revision (= number of writes; 0 for an unknown scope)."""
    with target.client() as client:
        response = client.post(LIST_PATH, json={"scope_id": scope_id, "limit": 1})
    if response.status_code != 200:
        raise BenchError(f"list -> HTTP {response.status_code}: {response.text[:300]}")
    memory = response.json()["memory"]
    return int(memory["revision"]) if memory else 0


# -- the run -----------------------------------------------------------------------------------


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--url", help="runtime base URL (default: start a local SQLite daemon)")
    p.add_argument("--token", help="bearer token for --url (default: POWERCONTEXT_TOKEN)")
    p.add_argument("--entries", type=int, default=None, help=f"N (default {DEFAULT_ENTRIES})")
    p.add_argument("--samples", type=int, default=None, help=f"rounds (default {DEFAULT_SAMPLES})")
    p.add_argument("--warmup", type=int, default=None, help=f"untimed rounds ({DEFAULT_WARMUP})")
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--host", choices=HOSTS, default="codex", help="event shape and host name")
    p.add_argument(
        "--command",
        help="hook command to measure instead of the kit's module entry "
        "point, e.g. '.venv/bin/powercontext-codex hook user-prompt-submit'",
    )
    p.add_argument(
        "--python",
        help="interpreter of a plugin installation (a venv holding the hook kit and the host "
        "plugin, installed as a user installs them): the hook runs exactly as `install` "
        "registers it, and the reference processes use this interpreter too",
    )
    p.add_argument(
        "--no-plugin",
        action="store_true",
        help="do not also time the plugin console script when it is installed",
    )
    p.add_argument("--scope-id", help="scope to load (default: a fresh one per run)")
    p.add_argument("--data-dir", help="self-started daemon's home, kept for reuse")
    p.add_argument(
        "--transport",
        choices=TRANSPORTS,
        default="auto",
        help="how the hook reaches the runtime: its unix socket (unix, the hooks' default on "
        "POSIX), TCP loopback (tcp), both in the same rounds (both: series hook = socket, "
        "hook_tcp = TCP); auto = unix when the socket is known, else tcp",
    )
    p.add_argument(
        "--socket",
        help="the runtime's unix socket (default: <data dir>/powercontext.sock of the "
        "self-started daemon); needed for --transport unix/both with --url",
    )
    p.add_argument("--loader-concurrency", type=int, default=4)
    p.add_argument("--json", action="store_true", help="print the full report as JSON")
    p.add_argument("--write-results", action="store_true", help="rewrite the RESULTS.md section")
    p.add_argument(
        "--smoke",
        action="store_true",
        help=f"{SMOKE_ENTRIES} entries, {SMOKE_SAMPLES} rounds (seconds)",
    )
    args = p.parse_args(argv)  # fmt: skip
    if args.entries is None:
        args.entries = SMOKE_ENTRIES if args.smoke else DEFAULT_ENTRIES
    if args.samples is None:
        args.samples = SMOKE_SAMPLES if args.smoke else DEFAULT_SAMPLES
    if args.warmup is None:
        args.warmup = SMOKE_WARMUP if args.smoke else DEFAULT_WARMUP
    if args.entries < 1 or args.samples < 1 or args.warmup < 0 or args.loader_concurrency < 1:
        p.error("--entries, --samples and --loader-concurrency must be positive (--warmup ≥ 0)")
    if args.smoke and args.write_results:
        p.error("--write-results with --smoke would overwrite real numbers with smoke numbers")
    if args.transport == "auto":
        known = args.socket is not None or args.url is None
        args.transport = "unix" if known and hasattr(socket, "AF_UNIX") else "tcp"
    if args.transport in ("unix", "both") and args.url and not args.socket:
        p.error(f"--transport {args.transport} with --url needs --socket")
    return args


#: The host plugins' modules, whose ``hook`` verb is what ``install`` registers.
PLUGIN_MODULES = {"codex": "powercontext_codex", "claude-code": "powercontext_claude_code"}


def hook_argv(args: argparse.Namespace) -> list[str]:
    if args.python and not args.command:
        # Exactly the command ``install`` writes into the host's hook settings for that
        # interpreter (``<python> -I -m <plugin> hook user-prompt-submit``).
        from powercontext_hook_kit.install import hook_command

        module = PLUGIN_MODULES[args.host]
        return shlex.split(hook_command(module, "user-prompt-submit", executable=args.python))
    if not args.command:
        return [sys.executable, "-m", "powercontext_hook_kit", "hook", args.host,
                "user-prompt-submit"]  # fmt: skip
    argv = shlex.split(args.command)
    if not argv:
        raise BenchError("--command is empty")
    if "/" in argv[0]:
        argv[0] = os.path.abspath(argv[0])  # children run elsewhere; keep venv symlinks
    else:
        found = shutil.which(argv[0])
        if found is None:
            raise BenchError(f"--command: {argv[0]!r} not found on PATH")
        argv[0] = found
    return argv


def plugin_script(host: str, python: str) -> Path | None:
    """The plugin's console script in ``python``'s environment, if installed."""
    script = Path(python).parent / f"powercontext-{host}"
    return script if script.is_file() and os.access(script, os.X_OK) else None


def kit_has_bytecode(python: str) -> bool | None:
    """Whether the hook kit's ``__init__`` has a ``.pyc`` next to it in ``python``'s
    environment (``None``: not found)."""
    probe = (
        "import importlib.util as u, os; s = u.find_spec('powercontext_hook_kit'); "
        "print(s is not None and os.path.exists(u.cache_from_source(s.origin)))"
    )
    done = subprocess.run([python, "-I", "-c", probe], capture_output=True, text=True)
    return done.stdout.strip() == "True" if done.returncode == 0 else None


@dataclass(frozen=True, slots=True)
class Transport:
    """How the hook reaches the runtime: ``tcp`` (URL + token in the environment, as before
    issue 15), ``unix`` (the socket; by default nothing but ``POWERCONTEXT_HOME``) or ``both``."""

    mode: str
    socket: Path | None  # the runtime's unix socket (unix / both)
    home: Path | None  # the self-started daemon's data dir (socket and agent token in it)

    def hook_settings(self, target: Target) -> dict[str, str]:
        """The variables the measured hook gets for the runtime (``mode`` ``both``: the socket)."""
        if self.mode == "tcp":
            return {"POWERCONTEXT_URL": target.url, "POWERCONTEXT_TOKEN": target.token}
        assert self.socket is not None
        if self.home is not None and self.socket == self.home / SOCKET_NAME:
            # As a user's hook runs: socket and agent token found from the data dir alone.
            return {"POWERCONTEXT_HOME": str(self.home)}
        return {"POWERCONTEXT_URL": f"unix:{self.socket}", "POWERCONTEXT_TOKEN": target.token}

    def tcp_settings(self, target: Target) -> dict[str, str]:
        """``both``: the same hook over TCP, everything else equal (token from the same file)."""
        return {**self.hook_settings(target), "POWERCONTEXT_URL": target.url}

    def describe(self) -> str:
        if self.mode == "tcp":
            return "TCP loopback (`POWERCONTEXT_URL=http://…`, `POWERCONTEXT_TOKEN`)"
        where = f"unix socket `{self.socket}`"
        if self.home is not None and self.socket == self.home / SOCKET_NAME:
            where += " and the agent token file, both found from `POWERCONTEXT_HOME` alone"
        return where + ("; series `hook_tcp`: the same over TCP" if self.mode == "both" else "")


def check_socket(transport: Transport) -> None:
    """The runtime must really listen on the socket before any process is timed."""
    if transport.socket is None:
        return
    if not transport.socket.is_socket():
        raise BenchError(
            f"no unix socket at {transport.socket}: this runtime does not serve one "
            "(use --transport tcp, or --socket PATH)"
        )
    home = transport.home
    uses_home = home is not None and transport.socket == home / SOCKET_NAME
    if uses_home and home is not None and not home.joinpath(*AGENT_TOKEN).is_file():
        raise BenchError(f"no agent token in {home}: use --transport tcp")


def child_env(
    target: Target, scope_id: str, host: str, tmp: Path, transport: Transport
) -> dict[str, str]:
    """What the host would give the hook: the runtime settings and a plugin data dir.

    The caller's POWERCONTEXT_*/plugin variables are dropped so nothing leaks into the run;
    ``XDG_CONFIG_HOME`` points at an empty dir (no ``plugins.toml``); the bytecode cache lives in
    a temp dir so the kit runs from ``.pyc`` like an installed wheel.
    """
    dropped = ("POWERCONTEXT_", "CLAUDE_PLUGIN_", "PLUGIN_", "PYTHONPYCACHEPREFIX",
               "PYTHONDONTWRITEBYTECODE")  # fmt: skip
    env = {k: v for k, v in os.environ.items() if not k.startswith(dropped)}
    (tmp / "config").mkdir()
    (tmp / "data").mkdir()
    env.update(
        transport.hook_settings(target),
        POWERCONTEXT_SCOPE_ID=scope_id,
        XDG_CONFIG_HOME=str(tmp / "config"),
        PYTHONPYCACHEPREFIX=str(tmp / "pycache"),
    )
    env["CLAUDE_PLUGIN_DATA" if host == "claude-code" else "PLUGIN_DATA"] = str(tmp / "data")
    return env


def host_event(host: str, prompt: Prompt, session_id: str, turn_id: str, cwd: Path) -> bytes:
    """The host's UserPromptSubmit stdin (spec 07 "Host facts")."""
    event: dict[str, Any] = {"session_id": session_id}
    if host == "codex":
        event.update(turn_id=turn_id, transcript_path=None, cwd=str(cwd),
                     hook_event_name=HOOK_EVENT, model="gpt-5-codex",
                     permission_mode="default", prompt=prompt.text)  # fmt: skip
    else:
        event.update(prompt_id=turn_id, transcript_path=str(cwd / "transcript.jsonl"),
                     cwd=str(cwd), permission_mode="default", hook_event_name=HOOK_EVENT,
                     prompt=prompt.text)  # fmt: skip
    return json.dumps(event, ensure_ascii=False).encode()


def build_series(
    args: argparse.Namespace, env: dict[str, str], tcp_env: dict[str, str] | None = None
) -> list[Series]:
    py = args.python or sys.executable
    hook = hook_argv(args)
    if args.command:
        label = "hook (`--command`)"
    elif args.python:
        label = f"hook as `install` registers it (`python {' '.join(hook[1:])}`)"
    else:
        label = "hook (`python -m powercontext_hook_kit`)"
    series = [
        Series(BARE, "`python -S -c pass` (no site)", [py, "-S", "-c", "pass"], env, False),
        Series(PASS, "`python -c pass`", [py, "-c", "pass"], env, False),
        Series(IMPORTS, '`python -c "import msgspec, http.client"`',
               [py, "-c", "import msgspec, http.client"], env, False),
        Series(KIT, '`python -c "import powercontext_hook_kit"`',
               [py, "-c", "import powercontext_hook_kit"], env, False),
        Series(HOOK, label, hook, env, True),
        Series(NO_CAPTURE, "same hook, capture off (`POWERCONTEXT_CAPTURE_PROMPTS=0`)", hook,
               {**env, "POWERCONTEXT_CAPTURE_PROMPTS": "0"}, True),
    ]  # fmt: skip
    if tcp_env is not None:
        series.append(Series(HOOK_TCP, "same hook over TCP (`POWERCONTEXT_URL=http://…`)", hook,
                             tcp_env, True))  # fmt: skip
    script = None if (args.command or args.no_plugin) else plugin_script(args.host, py)
    if script is not None:
        series.append(Series(PLUGIN, f"plugin script (`{script.name} hook user-prompt-submit`)",
                             [str(script), "hook", "user-prompt-submit"], env, True))  # fmt: skip
    if os.environ.get("PYTHONDONTWRITEBYTECODE"):
        # As this environment runs it: no cache prefix, no .pyc written for the kit.
        caller = {k: v for k, v in env.items() if k != "PYTHONPYCACHEPREFIX"}
        caller["PYTHONDONTWRITEBYTECODE"] = os.environ["PYTHONDONTWRITEBYTECODE"]
        series.append(Series(ENV_BYTECODE, "same hook, caller's `PYTHONDONTWRITEBYTECODE=1`",
                             hook, caller, True))  # fmt: skip
    return series


@dataclass(slots=True)
class ServerSeries:
    prepare: list[float] = field(default_factory=list)
    capture: list[float] = field(default_factory=list)
    ready: dict[str, list[int]] = field(default_factory=dict)  # flavour -> [ready, total]


def ensure_loaded(target: Target, scope_id: str, items: Sequence[MemoryItem], workers: int) -> dict:
    n = len(items)
    head = head_revision(target, scope_id)
    if head == n:
        log(f"  scope already holds {n:,} entries: reused (same seed assumed)")
        return {"entries": 0, "seconds": 0.0, "per_second": 0.0, "reused": True}
    if head != 0:
        raise BenchError(f"scope {scope_id!r} is at revision {head}, expected 0 or {n}: "
                         "use a fresh --scope-id")  # fmt: skip
    stats = load_memories(target, scope_id, items, concurrency=workers)
    log(f"  loaded {stats.entries:,} entries in {stats.seconds:.1f} s ({stats.per_second:.0f}/s)")
    head = head_revision(target, scope_id)
    if head != n:
        raise BenchError(f"scope {scope_id!r} is at revision {head} after loading, expected {n}")
    return {"entries": stats.entries, "seconds": round(stats.seconds, 3),
            "per_second": round(stats.per_second, 1), "retries": stats.retries}  # fmt: skip


@dataclass(frozen=True, slots=True)
class CpuSnapshot:
    at: float
    busy: float  # CPU seconds the whole machine spent busy (all cores)
    known: float  # CPU seconds of the bench, its launcher and (when local) the runtime
    daemon_known: bool


def cpu_snapshot(daemon_pid: int | None, launcher_pid: int) -> CpuSnapshot:
    known = process_cpu_seconds(os.getpid()) + process_cpu_seconds(launcher_pid)
    if daemon_pid is not None:
        known += process_cpu_seconds(daemon_pid)
    return CpuSnapshot(
        time.perf_counter(), system_busy_cpu_seconds(), known, daemon_pid is not None
    )


def other_work(start: CpuSnapshot, end: CpuSnapshot, series: Sequence[Series]) -> dict[str, Any]:
    """How busy the machine was during the timed rounds, and how much of that was not us.

    Measured children's CPU comes from their rusage; everything else busy on the machine is
    other jobs (spec 08: machines are shared and noisy). Cores, i.e. CPU seconds per second.
    """
    seconds = max(end.at - start.at, 1e-9)
    busy = end.busy - start.busy
    ours = (end.known - start.known) + sum(sum(s.cpu) for s in series)
    return {
        "seconds": round(seconds, 1),
        "busy_cores": round(busy / seconds, 2),
        "other_cores": round(max(busy - ours, 0.0) / seconds, 2),
        "daemon_known": end.daemon_known,
    }


@contextlib.contextmanager
def _workspace() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="powercontext-hook-bench-") as tmp:
        yield Path(tmp)


def run(args: argparse.Namespace) -> dict[str, Any]:
    facts = machine_facts()
    command = command_line()
    loads: list[float] = [os.getloadavg()[0]]
    scope_id = args.scope_id or f"bench-hook-s{args.seed}-{time.strftime('%Y%m%dT%H%M%S')}"
    items = MemoryTextGenerator(args.seed).take(args.entries)
    prompts = PromptGenerator(args.seed, items[:VOCAB_ENTRIES]).take(args.warmup + args.samples)
    rng = random.Random(f"hook-order-{args.seed}")
    session_id = "%08x-%04x-4%03x-8%03x-%012x" % (  # noqa: UP031 - a uuid4-shaped seeded id
        rng.getrandbits(32), rng.getrandbits(16), rng.getrandbits(12), rng.getrandbits(12),
        rng.getrandbits(48),
    )  # fmt: skip
    data_dir = Path(args.data_dir).resolve() if args.data_dir else None
    bytecode = kit_has_bytecode(args.python or sys.executable)
    with contextlib.ExitStack() as stack:
        tmp = stack.enter_context(_workspace())
        home = data_dir
        if home is None and args.url is None and args.transport != "tcp":
            home = tmp / "daemon-home"  # the socket's and the agent token's place must be known
        target = stack.enter_context(open_target(args.url, args.token, None, home))
        if args.transport == "tcp":
            transport = Transport("tcp", None, None)
        else:
            socket_path = Path(args.socket).resolve() if args.socket else None
            if socket_path is None:
                assert home is not None
                socket_path = home / SOCKET_NAME
            transport = Transport(args.transport, socket_path, home if args.url is None else None)
        check_socket(transport)
        log(f"hook_latency: {target.description}, scope {scope_id}, N = {args.entries:,}, "
            f"{args.samples} rounds, host {args.host}, transport {transport.mode}")  # fmt: skip
        load = ensure_loaded(target, scope_id, items, args.loader_concurrency)
        project = tmp / "project"
        project.mkdir()
        env = child_env(target, scope_id, args.host, tmp, transport)
        tcp_env = {**env, **transport.tcp_settings(target)} if transport.mode == "both" else None
        series = build_series(args, env, tcp_env)
        server = ServerSeries()
        hook = next(s for s in series if s.key == HOOK)
        client = KeepAliveClient(target)
        launcher = Launcher(project)
        try:
            for prompt in (prompts[: args.warmup] or prompts[:1]) * 4:  # warm the daemon
                pack_content(*client.post(PREPARE_PATH, prepare_body(scope_id, prompt))[1:])
            for index, prompt in enumerate(prompts):
                timed = index >= args.warmup
                if index == args.warmup:
                    log(f"  warm-up done ({args.warmup} rounds); timing {args.samples} rounds")
                    cpu_start = cpu_snapshot(target.pid, launcher.pid)
                turn = f"turn-{index:05d}"
                order: list[Series | None] = [*series, None]  # None: the server requests
                rng.shuffle(order)
                injected: dict[str, str | None] = {}
                expected: str | None = None
                for s in order:
                    if s is None:
                        expected = measure_server(client, server, scope_id, args.host, prompt,
                                                  turn, timed)  # fmt: skip
                        continue
                    stdin = (
                        host_event(args.host, prompt, session_id, f"{turn}-{s.key}", project)
                        if s.is_hook
                        else b""
                    )
                    result = launcher.run(s.argv, stdin, s.env)
                    if timed:
                        s.record(result)
                    if not s.is_hook:
                        if result.returncode != 0:
                            raise BenchError(f"{s.label} exited {result.returncode}: "
                                             f"{result.stderr[-300:]!r}")  # fmt: skip
                        continue
                    content, problem = check_hook_run(result)
                    if problem is None:
                        injected[s.key] = content
                    elif timed:
                        s.problems.append(f"{turn}: {problem}")
                    else:
                        raise BenchError(f"{s.label} failed during warm-up: {problem}; "
                                         f"stderr {result.stderr[:300]!r}")  # fmt: skip
                if timed:
                    for s in series:
                        if s.key in injected:
                            s.valid += 1
                            s.injected += injected[s.key] is not None
                            s.matches_server += injected[s.key] == expected
                    loads.append(os.getloadavg()[0])
                    done = index - args.warmup + 1
                    if done % max(1, args.samples // 5) == 0 and done < args.samples:
                        log(f"  ... {done}/{args.samples} rounds, hook p50 so far "
                            f"{percentile(hook.wall, 50) * 1000:.1f} ms")  # fmt: skip
            launcher_memory = process_memory_kib(launcher.pid)
            others = other_work(cpu_start, cpu_snapshot(target.pid, launcher.pid), series)
        finally:
            client.close()
            launcher.close()
        description = target.description

    timed_prompts = prompts[args.warmup :]
    report = build_report(args, facts, command, description, scope_id, load, series, server,
                          timed_prompts, loads, bytecode, launcher_memory, others)  # fmt: skip
    report["config"]["transport"] = transport.mode
    report["config"]["transport_detail"] = transport.describe()
    if transport.mode == "both":
        report["transport_comparison"] = transport_comparison(series)
    return report


def transport_comparison(series: Sequence[Series]) -> dict[str, Any]:
    """``both``: the socket hook against the TCP hook, timed in the same rounds."""
    by_key = {s.key: s for s in series}
    unix, tcp = by_key[HOOK], by_key[HOOK_TCP]
    paired = [u - t for u, t in zip(unix.wall, tcp.wall, strict=True)]
    unix_p50, tcp_p50 = percentile(unix.wall, 50), percentile(tcp.wall, 50)
    return {
        "unix_wall_p50_ms": round(unix_p50 * 1000, 2),
        "tcp_wall_p50_ms": round(tcp_p50 * 1000, 2),
        "unix_minus_tcp_paired_p50_ms": round(percentile(paired, 50) * 1000, 2),
        "unix_over_tcp": round(unix_p50 / tcp_p50, 3),
    }


def measure_server(
    client: KeepAliveClient,
    server: ServerSeries,
    scope_id: str,
    host: str,
    prompt: Prompt,
    turn: str,
    timed: bool,
) -> str | None:
    """Time the hook's prepare request and a capture on the keep-alive connection.

    Returns the pack content the hook should inject for this prompt (``None`` for empty).
    """
    body = prepare_body(scope_id, prompt)
    client.ensure_open()
    seconds, status, data = client.post(PREPARE_PATH, body)
    content = pack_content(status, data)
    c_seconds, c_status, c_data = client.post(
        CAPTURE_PATH, capture_body(scope_id, host, prompt, turn)
    )
    if c_status != 202:
        raise BenchError(f"capture -> HTTP {c_status}: {c_data[:300]!r}")
    if timed:
        server.prepare.append(seconds)
        server.capture.append(c_seconds)
        counts = server.ready.setdefault(prompt.flavour, [0, 0])
        counts[0] += content is not None
        counts[1] += 1
    return content


# -- report ------------------------------------------------------------------------------------


def build_report(
    args: argparse.Namespace,
    facts: dict[str, Any],
    command: str,
    description: str,
    scope_id: str,
    load: dict[str, Any],
    series: list[Series],
    server: ServerSeries,
    prompts: list[Prompt],
    loads: list[float],
    bytecode: bool | None,
    launcher_memory: dict[str, int],
    others: dict[str, Any],
) -> dict[str, Any]:
    by_key = {s.key: s.as_json() for s in series}
    prepare = summarize_ms(server.prepare)
    capture = summarize_ms(server.capture)
    hook = by_key[HOOK]
    p50 = {k: v["wall_ms"]["p50"] for k, v in by_key.items()}
    chars = [len(p.text) for p in prompts]
    walls = {s.key: s.wall for s in series}
    cpus = {s.key: s.cpu for s in series}
    walls[SERVER] = server.prepare
    # Each part is "plus series − minus series" (the flow row also minus the server's prepare).
    # Differences of medians telescope: they add up to the hook's p50 by construction. The
    # median of the per-round differences is steadier on a noisy machine (both runs of a pair
    # happen within the same second), so it is shown next to it.
    parts: list[tuple[str, tuple[str, ...], tuple[str, ...]]] = [
        ("bare interpreter start-up (`python -S -c pass`)", (BARE,), ()),
        ("`site`: this venv's `.pth` files (`python -c pass` − `-S`)", (PASS,), (BARE,)),
        ("`msgspec` + `http.client` imports", (IMPORTS,), (PASS,)),
        ("hook kit's own modules (import)", (KIT,), (IMPORTS,)),
        ("running the flow without capture, minus the server's prepare (runpy, settings incl. "
         "lazy imports, scope, connect, request, pack check, output)",
         (NO_CAPTURE,), (KIT, SERVER)),
        ("server prepare (keep-alive)", (SERVER,), ()),
        ("prompt capture request (hook − hook with capture off)", (HOOK,), (NO_CAPTURE,)),
    ]  # fmt: skip

    def delta(
        values: dict[str, list[float]], plus: tuple[str, ...], minus: tuple[str, ...]
    ) -> tuple[float | None, float | None]:
        if any(k not in values for k in (*plus, *minus)):
            return None, None
        of_medians = sum(percentile(values[k], 50) for k in plus) - sum(
            percentile(values[k], 50) for k in minus
        )
        paired = [
            sum(values[k][i] for k in plus) - sum(values[k][i] for k in minus)
            for i in range(len(values[plus[0]]))
        ]
        return round(of_medians * 1000, 2), round(percentile(paired, 50) * 1000, 2)

    breakdown = []
    for part, plus, minus in parts:
        wall, wall_paired = delta(walls, plus, minus)
        cpu, cpu_paired = delta(cpus, plus, tuple(k for k in minus if k != SERVER))
        breakdown.append({"part": part, "wall_p50_delta": wall, "wall_paired_p50": wall_paired,
                          "cpu_p50_delta": cpu, "cpu_paired_p50": cpu_paired})  # fmt: skip
    paired_overhead = percentile(
        [h - q for h, q in zip(walls[HOOK], server.prepare, strict=True)], 50
    )
    report: dict[str, Any] = {
        "benchmark": "hook_latency",
        "machine": facts,
        "command": command,
        "target": description,
        "config": {
            "scope_id": scope_id,
            "entries": args.entries,
            "samples": args.samples,
            "warmup": args.warmup,
            "seed": args.seed,
            "host": args.host,
            "hook_command": by_key[HOOK]["argv"],
            "smoke": args.smoke,
            "loader_concurrency": args.loader_concurrency,
            "bytecode": "children use a PYTHONPYCACHEPREFIX cache in a temp dir (warm after the "
            "warm-up rounds), like an installed wheel's .pyc",
            "kit_pyc_in_tree": bytecode,
            "server_client": "http.client keep-alive, one connection",
            # Children inherit the launcher's peak RSS (vfork + exec): the floor of ru_maxrss.
            "launcher_peak_rss_kib": launcher_memory["hwm_kib"],
        },
        "load": load,
        "machine_cpu": others,
        "load_average_1m": {
            "start": loads[0],
            "end": loads[-1],
            "min": min(loads),
            "mean": round(sum(loads) / len(loads), 2),
            "max": max(loads),
        },
        "prompts": {
            "count": len(prompts),
            "chars": {"min": min(chars), "p50": percentile(chars, 50), "max": max(chars)},
            "ready_by_flavour": server.ready,
        },
        "processes": by_key,
        "server": {"prepare_ms": prepare, "capture_ms": capture},
        "overhead_ms": round(hook["wall_ms"]["p50"] - prepare["p50"], 3),
        "overhead_paired_p50_ms": round(paired_overhead * 1000, 3),
        "breakdown_ms": breakdown,
        "pass_vs_reference": round(p50[PASS] / REFERENCE_PASS_MS, 2),
    }
    hooks = [by_key[k] for k in HOOK_SERIES if k in by_key]
    report["all_hook_runs_valid"] = all(h["valid"] == h["runs"] for h in hooks)
    report["budgets"] = evaluate_budgets(report)
    return report


def evaluate_budgets(report: dict[str, Any]) -> list[dict[str, Any]]:
    """P1 verdicts for the measured hook (and, informationally, the plugin script)."""
    at = report["config"]["entries"] == BUDGET_N
    prepare = report["server"]["prepare_ms"]["p50"]
    rows: list[dict[str, Any]] = []
    for key in (HOOK, PLUGIN):
        proc = report["processes"].get(key)
        if proc is None:
            continue
        who = "hook" if key == HOOK else "plugin script"
        wall = proc["wall_ms"]["p50"]
        overhead = round(wall - prepare, 3)
        mib = round(proc["maxrss_kib"]["max"] / 1024, 1)
        rows += [
            {"id": "P1", "key": f"{key}.wall_p50", "what": f"{who}: wall p50, spawn → exit",
             "target": f"≤ {P1_P50_MS:g} ms", "measured": wall, "unit": "ms",
             "ok": wall <= P1_P50_MS, "applicable": at},
            {"id": "P1", "key": f"{key}.overhead",
             "what": f"{who}: own overhead (p50 − server prepare p50 {prepare:.2f} ms)",
             "target": f"≤ {P1_OVERHEAD_MS:g} ms", "measured": overhead, "unit": "ms",
             "ok": overhead <= P1_OVERHEAD_MS, "applicable": at},
            {"id": "P1", "key": f"{key}.rss",
             "what": f"{who}: peak RSS (max of {proc['runs']} runs)",
             "target": f"≤ {P1_RSS_MIB:g} MiB", "measured": mib, "unit": "MiB",
             "ok": mib <= P1_RSS_MIB, "applicable": at},
        ]  # fmt: skip
    return rows


def _verdict(row: dict[str, Any]) -> str:
    verdict = "met" if row["ok"] else "**missed**"
    return verdict if row["applicable"] else f"({verdict}; not the budget's N)"


def render_markdown(report: dict[str, Any]) -> str:
    m, cfg, la = report["machine"], report["config"], report["load_average_1m"]
    mc = report["machine_cpu"]
    procs, srv = report["processes"], report["server"]
    budget_rows = [
        [f"{r['id']}: {r['what']}", r["target"], f"{r['measured']:g} {r['unit']}", _verdict(r)]
        for r in report["budgets"]
    ]
    proc_rows = []
    for proc in procs.values():
        wall, cpu = proc["wall_ms"], proc["cpu_ms"]
        checked = (
            f"{proc['valid']}/{proc['runs']} valid, {proc['injected']} injected, "
            f"{proc['matches_server']} = server pack"
            if "valid" in proc
            else ""
        )
        proc_rows.append([
            proc["label"], proc["runs"], f"{wall['p50']:.1f}", f"{wall['p95']:.1f}",
            f"{cpu['p50']:.1f}", f"{proc['maxrss_kib']['max'] / 1024:.1f}", checked,
        ])  # fmt: skip
    for name, key in (("server: the hook's prepare request", "prepare_ms"),
                      ("server: a prompt capture", "capture_ms")):  # fmt: skip
        s = srv[key]
        proc_rows.append([name + " (keep-alive)", report["prompts"]["count"], f"{s['p50']:.2f}",
                          f"{s['p95']:.2f}", "", "", ""])  # fmt: skip
    breakdown_rows = [
        [b["part"], *("" if b[k] is None else f"{b[k]:.1f}" for k in
                      ("wall_p50_delta", "wall_paired_p50", "cpu_p50_delta", "cpu_paired_p50"))]
        for b in report["breakdown_ms"]
    ]  # fmt: skip
    ready = ", ".join(
        f"{flavour} {r}/{t} ready"
        for flavour, (r, t) in sorted(report["prompts"]["ready_by_flavour"].items())
    )
    chars = report["prompts"]["chars"]
    pass_p50, bare_p50 = procs[PASS]["wall_ms"]["p50"], procs[BARE]["wall_ms"]["p50"]
    hook_p50 = procs[HOOK]["wall_ms"]["p50"]
    load = report["load"]
    loaded = (
        "reused from --data-dir"
        if load.get("reused")
        else f"{load['entries']:,} entries loaded over HTTP in {load['seconds']:.1f} s"
    )
    lines = [
        "## UserPromptSubmit hook, whole process (P1)",
        "",
        "Generated by `bench/hook_latency.py --write-results`; edit outside the markers only.",
        "",
        f"- Date: {m['date']}",
        f"- Machine: {m['cpu_count']} CPUs ({m['cpu_model']}), {m['platform']}, "
        f"Python {m['python']}, SQLite {m['sqlite']}",
        f"- Target: {report['target']}; N = {cfg['entries']:,} entries in one scope ({loaded})",
        f"- Command: `{report['command']}`",
        f"- Hook: `{cfg['hook_command']}` (host `{cfg['host']}` event on stdin, "
        "`POWERCONTEXT_SCOPE_ID` set, plugin data dir and `XDG_CONFIG_HOME` "
        "in a temp dir; bytecode cached in a temp `PYTHONPYCACHEPREFIX` (ignored under `-I`), as "
        f"a wheel install has `.pyc`; the kit's installed tree has .pyc: {cfg['kit_pyc_in_tree']})",
        f"- Transport: {cfg.get('transport_detail', 'TCP loopback')}",
        f"- 1-minute load average: start {la['start']:.2f}, end {la['end']:.2f}, mean "
        f"{la['mean']:.2f}, max {la['max']:.2f}; during the timed rounds the machine was "
        f"{mc['busy_cores']:.2f} of {m['cpu_count']} cores busy, "
        f"{mc['other_cores']:.2f} of them with work other than this benchmark"
        + ("" if mc["daemon_known"] else " (including the runtime)")
        + " — other jobs share this machine",
        f"- Method: {cfg['warmup']} untimed warm-up rounds, then {cfg['samples']} rounds; each "
        "round runs every process below once (seeded random order) and the server requests "
        f"for the same prompt. Prompts: {chars['min']}-{chars['max']} characters (median "
        f"{chars['p50']:.0f}), half quoting a stored entry, half about unrelated topics "
        f"({ready} on the server). Wall = spawn → exit as the host sees it; CPU = the "
        "child's user + system time; RSS = `ru_maxrss` from `wait4` (children are spawned by "
        f"a bare launcher whose own peak, {cfg['launcher_peak_rss_kib'] / 1024:.1f} MiB, is "
        "the floor of that figure).",
        "",
        markdown_table(["budget (spec 08)", "target", "measured", "verdict"], budget_rows),
        "",
        markdown_table(
            [
                "process",
                "runs",
                "wall p50 ms",
                "wall p95 ms",
                "CPU p50 ms",
                "peak RSS MiB",
                "checks",
            ],
            proc_rows,
        ),
        "",
        "Where the hook's median goes: differences of the medians above (they add up to the "
        "hook's p50) and medians of the same differences taken per round (steadier: both runs "
        "of a pair happen within the same second). Single rows are noisy on a loaded machine.",
        "",
        markdown_table(
            ["part", "wall Δ of p50s", "wall paired p50", "CPU Δ of p50s", "CPU paired p50"],
            breakdown_rows,
        ),
        "",
        *transport_lines(report),
        "Reference points (spec 08's table next to this run, same interpreter): `python -c "
        f"pass` p50 {pass_p50:.1f} ms here ({pass_p50 / REFERENCE_PASS_MS:.1f}× the reference "
        f"≈ {REFERENCE_PASS_MS:g} ms), of which `site` {pass_p50 - bare_p50:.1f} ms "
        f"(`python -S -c pass` {bare_p50:.1f} ms); `import msgspec, http.client` "
        f"{procs[IMPORTS]['wall_ms']['p50']:.1f} ms (reference ≈ 36 / 38 ms for each alone); a "
        "process that starts, POSTs with http.client + msgspec and prints is 50–58 ms on the "
        f"reference machine, this hook {hook_p50:.1f} ms here. Ratios from this run: hook / "
        f"`python -c pass` = {hook_p50 / pass_p50:.1f}, hook / `import msgspec, http.client` = "
        f"{hook_p50 / procs[IMPORTS]['wall_ms']['p50']:.2f}.",
    ]
    return "\n".join(lines)


def transport_lines(report: dict[str, Any]) -> list[str]:
    """``both``: one paragraph comparing the socket hook with the TCP hook of the same rounds."""
    cmp = report.get("transport_comparison")
    if not cmp:
        return []
    return [
        f"Transport, same rounds: hook over the unix socket p50 {cmp['unix_wall_p50_ms']:.1f} ms, "
        f"over TCP {cmp['tcp_wall_p50_ms']:.1f} ms (ratio {cmp['unix_over_tcp']:.3f}; per-round "
        f"difference socket − TCP, median {cmp['unix_minus_tcp_paired_p50_ms']:+.2f} ms).",
        "",
    ]


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        report = run(args)
    except BenchError as exc:
        log(f"hook_latency failed: {exc}")
        return 1
    valid = report["all_hook_runs_valid"]
    if not valid:
        for key, proc in report["processes"].items():
            if proc.get("problems"):
                log(f"  {key}: {proc['runs'] - proc['valid']} invalid runs, e.g. "
                    f"{proc['problems'][0]}")  # fmt: skip
    section = SECTION if args.write_results and valid else None
    publish(report, render_markdown(report), section, as_json=args.json)
    return 0 if valid else 1


if __name__ == "__main__":
    sys.exit(main())
