"""Measure what a UserPromptSubmit hook costs the user (spec 08, P1), against a local stub.

    python shared_hook_kit/tools/measure_startup.py [--runs 40]

Prints medians (and p90) of whole-process wall time — spawn to exit, as a host sees it — for:
an empty interpreter, the bare imports, and the real hook answering a ready 606-byte pack (with
prompt capture) from a stub runtime that answers in microseconds, so the hook's own overhead is
what is measured. Also peak RSS of the hook process and the scope lookup (file walk versus
spawning ``git``). Machines here are noisy: compare numbers from the same run only.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PACK = "PowerContext prepared untrusted historical context.\n" + "x" * 554
READY = json.dumps(
    {
        "schema": "powercontext.prepared-context.v1",
        "status": "ready",
        "content": PACK,
        "content_bytes": len(PACK.encode()),
    }
).encode()
ACCEPTED = b'{"status":"accepted","source":{"name":"content","source_id":"x"},"position":1}'


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        body, status = (READY, 200) if self.path == "/v1/context/prepare" else (ACCEPTED, 202)
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def _time_process(argv: list[str], stdin: bytes, env: dict[str, str]) -> tuple[float, float, int]:
    """Wall and CPU (user + system) milliseconds from spawn to exit, and peak RSS in KiB."""
    started = time.perf_counter()
    process = subprocess.Popen(
        argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
    )
    assert process.stdin is not None and process.stdout is not None
    process.stdin.write(stdin)
    process.stdin.close()
    output = process.stdout.read()
    _, status, usage = os.wait4(process.pid, 0)
    elapsed = (time.perf_counter() - started) * 1000
    process.returncode = os.waitstatus_to_exitcode(status)
    assert process.returncode == 0, argv
    if argv[1] == "-m":
        assert json.loads(output)["hookSpecificOutput"]["additionalContext"] == PACK
    return elapsed, (usage.ru_utime + usage.ru_stime) * 1000, usage.ru_maxrss


def _summary(name: str, samples: list[float], cpu: list[float]) -> str:
    ordered = sorted(samples)
    p90 = ordered[int(len(ordered) * 0.9) - 1]
    return (
        f"{name:<44} wall p50 {statistics.median(samples):6.1f} ms  p90 {p90:6.1f} ms"
        f"   cpu p50 {statistics.median(cpu):6.1f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=40)
    args = parser.parse_args()

    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    work = tempfile.mkdtemp(prefix="pc-hook-bench-")
    project = os.path.join(work, "project")
    os.makedirs(os.path.join(project, ".git"))
    with open(os.path.join(project, ".git", "HEAD"), "w") as handle:
        handle.write("ref: refs/heads/main\n")
    with open(os.path.join(project, ".git", "config"), "w") as handle:
        handle.write('[remote "origin"]\n\turl = git@github.com:Owner/Repo.git\n')
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("POWERCONTEXT_")},
        "POWERCONTEXT_URL": f"http://127.0.0.1:{server.server_address[1]}",
        "POWERCONTEXT_TOKEN": "bench-token",
        "PLUGIN_DATA": os.path.join(work, "data"),
        "XDG_CONFIG_HOME": os.path.join(work, "config"),
    }
    event = json.dumps(
        {
            "session_id": "s",
            "turn_id": "t",
            "cwd": project,
            "hook_event_name": "UserPromptSubmit",
            "prompt": "how do we run the backend contract tests after a persistence change?",
        }
    ).encode()
    py = sys.executable
    cases = {
        "python -c pass": [py, "-c", "pass"],
        "import http.client, msgspec": [py, "-c", "import http.client, msgspec"],
        "import powercontext_hook_kit.runner": [py, "-c", "import powercontext_hook_kit.runner"],
        "hook user-prompt-submit (ready + capture)": [
            py,
            "-m",
            "powercontext_hook_kit",
            "hook",
            "codex",
            "user-prompt-submit",
        ],
    }
    results: dict[str, list[float]] = {name: [] for name in cases}
    cpu: dict[str, list[float]] = {name: [] for name in cases}
    rss: list[int] = []
    for _ in range(args.runs):  # interleaved, so load spikes hit every case alike
        for name, argv in cases.items():
            elapsed, used, peak = _time_process(argv, event, env)
            results[name].append(elapsed)
            cpu[name].append(used)
            if name.startswith("hook"):
                rss.append(peak)
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, {args.runs} runs each")
    for name, samples in results.items():
        print(_summary(name, samples, cpu[name]))
    base = statistics.median(results["python -c pass"])
    hook = statistics.median(results["hook user-prompt-submit (ready + capture)"])
    print(f"hook minus empty interpreter: {hook - base:.1f} ms; peak RSS {max(rss) / 1024:.1f} MiB")

    from powercontext_hook_kit.scope import resolve_scope

    started = time.perf_counter()
    for _ in range(200):
        resolve_scope(os.path.join(project))
    walk = (time.perf_counter() - started) / 200 * 1000
    started = time.perf_counter()
    for _ in range(20):
        subprocess.run(
            ["git", "-C", project, "config", "--get", "remote.origin.url"],
            capture_output=True,
            check=False,
        )
    spawn = (time.perf_counter() - started) / 20 * 1000
    print(f"scope lookup: walk + config parse {walk:.3f} ms; one `git config` spawn {spawn:.1f} ms")
    server.shutdown()


if __name__ == "__main__":
    main()
