"""What does the Stop (task-result) hook cost at the end of each turn? (issue #31 item 2)

The hosts run the Stop hook as a fresh process when a turn ends and wait for it, so the cost is
whole-process, spawn to exit: read the host's event, one bounded read of the transcript's tail
(at most 8 MiB), parse the turn, POST ``/v1/task-results/record`` once. Budget (spec 07's hook
deadline): well inside 2 s; the aim is the UserPromptSubmit hook's P1 figures (wall p50 ≤ 80 ms).

Workload, per host: the real transcript the CLI wrote for a scripted session (a check fails,
``calc.py`` is edited, the check passes: ``tests/fixtures/task_results``), grown to
``--mib`` MiB (default 32, four times the read cap) by earlier turns of the same session —
copies of its lines — so the hook reads a full 8 MiB tail, as after hours of work. The turn
the hook records is the file's last, as at a real Stop.

Series (``--samples`` each, in a seeded random order so machine noise hits all alike):

* ``hook``: ``python -m powercontext_hook_kit hook <host> stop`` with the host's real Stop stdin,
  against a local stub runtime answering ``201`` (stdlib, in this process's threads), wall time
  spawn → exit; stdout must be empty, stderr empty, exit 0, and the stub must have got the
  request — otherwise the run is invalid and the measurement fails;
* ``hook_off``: the same with ``POWERCONTEXT_RECORD_TASK_RESULTS=0`` (start-up + settings);
* ``python``: ``python -c pass`` (the interpreter alone);
* ``parse``: in-process ``build_task_result`` on the same file (the read + parse share).

Usage (project venv; Markdown or ``--json`` on stdout, progress on stderr)::

    .venv/bin/python bench/hook_task_result.py
    .venv/bin/python bench/hook_task_result.py --smoke --json   # seconds, for CI smoke

Not wired into ``bench/run_all.py`` yet: add ``("hook_task_result", ["--smoke", "--json"])`` to
its smoke list and a full entry next to ``hook_latency`` to run it with the others.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import machine_facts, markdown_table, summarize_ms

FIXTURES = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "task_results"
HOSTS = ("claude-code", "codex")
RECORD_PATH = "/v1/task-results/record"
_RECORDED = json.dumps(
    {
        "status": "recorded",
        "source": {"name": "task-result", "source_id": "task-result/x"},
        "position": 1,
        "redactions": 0,
    }
).encode()


class _Stub(ThreadingHTTPServer):
    daemon_threads = True
    received = 0


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        status = 201 if self.path == RECORD_PATH else 404
        if status == 201:
            self.server.received += 1  # type: ignore[attr-defined]
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(_RECORDED)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(_RECORDED)


def grown_transcript(host: str, folder: Path, mib: float) -> Path:
    """The host's real transcript, preceded by copies of its lines up to ``mib`` MiB — earlier
    turns, each with its own turn id (as a real session's are)."""
    real = (FIXTURES / f"{host}.transcript.jsonl").read_bytes()
    event = json.loads((FIXTURES / f"{host}.stop-event.json").read_text("utf-8"))
    turn = (event.get("turn_id") or event["prompt_id"]).encode()
    path = folder / f"{host}.jsonl"
    with path.open("wb") as file:
        written = 0
        while written + len(real) < mib * 1024 * 1024:
            file.write(real.replace(turn, turn[:-6] + b"%06d" % (written % 999_999)))
            written += len(real)
        file.write(real)
    return path


def stop_event(host: str, transcript: Path, cwd: str) -> bytes:
    event = json.loads((FIXTURES / f"{host}.stop-event.json").read_text("utf-8"))
    event.update(transcript_path=str(transcript), cwd=cwd)
    return json.dumps(event).encode()


def _run(argv: list[str], stdin: bytes, env: dict[str, str]) -> tuple[float, bool]:
    started = time.perf_counter()
    done = subprocess.run(argv, input=stdin, env=env, capture_output=True, check=False)
    elapsed = time.perf_counter() - started
    return elapsed, done.returncode == 0 and not done.stdout and not done.stderr


def measure(samples: int, mib: float, seed: int) -> dict[str, Any]:
    from powercontext_hook_kit.task_result import TurnRef, build_task_result

    python = sys.executable
    stub = _Stub(("127.0.0.1", 0), _Handler)
    threading.Thread(target=stub.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{stub.server_address[1]}"
    results: dict[str, Any] = {"machine": machine_facts(), "mib": mib, "hosts": {}}
    rng = random.Random(seed)
    try:
        with tempfile.TemporaryDirectory(prefix="pc-bench-tr-") as temp:
            root = Path(temp)
            cwd = root / "project"
            cwd.mkdir()
            base_env = {
                key: value
                for key, value in os.environ.items()
                if not key.startswith(("POWERCONTEXT_", "PLUGIN_", "CLAUDE_PLUGIN_"))
            }
            base_env.update(
                POWERCONTEXT_URL=url,
                POWERCONTEXT_TOKEN="bench-token",
                POWERCONTEXT_SCOPE_ID="git:example.com/bench/task-results",
                PLUGIN_DATA=str(root / "plugin-data"),
                XDG_CONFIG_HOME=str(root / "config"),
                XDG_STATE_HOME=str(root / "state"),
                PYTHONPYCACHEPREFIX=str(root / "pycache"),
            )
            for host in HOSTS:
                transcript = grown_transcript(host, root, mib)
                stdin = stop_event(host, transcript, str(cwd))
                event = json.loads(stdin)
                ref = TurnRef(event["session_id"], event.get("turn_id") or event.get("prompt_id"))
                hook = [python, "-m", "powercontext_hook_kit", "hook", host, "stop"]
                series: dict[str, tuple[list[str], dict[str, str]]] = {
                    "hook": (hook, base_env),
                    "hook_off": (hook, {**base_env, "POWERCONTEXT_RECORD_TASK_RESULTS": "0"}),
                    "python": ([python, "-c", "pass"], base_env),
                }
                _run(hook, stdin, base_env)  # warm the bytecode cache
                times: dict[str, list[float]] = {name: [] for name in [*series, "parse"]}
                invalid = 0
                before = stub.received
                for _ in range(samples):
                    order = list(series)
                    rng.shuffle(order)
                    for name in order:
                        argv, env = series[name]
                        elapsed, ok = _run(argv, stdin, env)
                        invalid += not ok
                        times[name].append(elapsed)
                    started = time.perf_counter()
                    body = build_task_result(str(transcript), host, ref, "s", cwd=str(cwd))
                    times["parse"].append(time.perf_counter() - started)
                    invalid += body is None
                sent = stub.received - before
                if sent != samples:
                    invalid += abs(samples - sent)
                results["hosts"][host] = {
                    "transcript_bytes": transcript.stat().st_size,
                    "invalid_runs": invalid,
                    "series": {name: summarize_ms(values) for name, values in times.items()},
                }
                print(f"{host}: done", file=sys.stderr)
    finally:
        stub.shutdown()
        stub.server_close()
    return results


def render(results: dict[str, Any]) -> str:
    rows = []
    for host, data in results["hosts"].items():
        for name, stats in data["series"].items():
            rows.append([host, name, f"{stats['p50']:.1f}", f"{stats['p95']:.1f}"])
    facts = results["machine"]
    return (
        f"Stop (task-result) hook, transcript {results['mib']} MiB (8 MiB tail read), "
        f"{facts['cpu_count']} CPUs, {facts['date']}\n\n"
        + markdown_table(["host", "series", "p50 ms", "p95 ms"], rows)
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--samples", type=int, default=30)
    parser.add_argument("--mib", type=float, default=32.0)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--smoke", action="store_true", help="3 samples, 1 MiB")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if args.smoke:
        args.samples, args.mib = 3, 1.0
    results = measure(args.samples, args.mib, args.seed)
    print(json.dumps(results, indent=2) if args.json else render(results))
    return 1 if any(d["invalid_runs"] for d in results["hosts"].values()) else 0


if __name__ == "__main__":
    sys.exit(main())
