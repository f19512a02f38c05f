"""Pre-authentication denial of service: what unauthenticated TCP clients can do to the daemon.

Three scenarios, each against a daemon this script starts (loopback only, bounded loops):

* ``header``: one request whose single header is ``--header-mib`` MiB (and ``--parallel``
  such requests at once). Reports how long the server took to refuse or answer, how many bytes
  it swallowed before it closed, the daemon's peak RSS (``VmHWM``) growth, and the worst
  latency of ``/health/live`` probes made meanwhile on another connection.
* ``slowloris``: ``--slow-connections`` connections that send a request head one byte per
  second. Reports how many the server closed within ``--slow-seconds`` and when.
* ``flood``: the daemon started with ``RLIMIT_NOFILE`` = ``--nofile`` (soft and hard), then
  ``--flood-connections`` slow connections held open (each re-opened as soon as the server
  closes it), and meanwhile ``--real-requests`` authenticated requests on fresh connections,
  each with a 5 s timeout. Reports how many real requests succeeded.

    python bench/preauth_dos.py [--scenarios header,slowloris,flood] [--json]
                                [--env NAME=VALUE ...] [--smoke]

``--env`` passes settings to the daemon (e.g. ``POWERCONTEXT_HEADER_TIMEOUT=2``). Run it on
a quiet machine; the numbers are a before/after comparison, not budgets (spec 08 has none).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import selectors
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import BenchError, log, machine_facts, process_memory_kib

HEAD = b"GET /health/live HTTP/1.1\r\nHost: localhost\r\n"


@dataclass(frozen=True)
class Daemon:
    url: str
    port: int
    token: str
    pid: int


@contextlib.contextmanager
def daemon(extra_env: dict[str, str], nofile: int | None = None) -> Iterator[Daemon]:
    """``powercontext serve`` in a temp dir; ``nofile`` lowers its file limit (soft and hard)."""
    with tempfile.TemporaryDirectory(prefix="pc-dos-") as tmp:
        home = Path(tmp) / "home"
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        env = {k: v for k, v in os.environ.items() if not k.startswith("POWERCONTEXT_")}
        env.update(extra_env)

        def limit_files() -> None:
            if nofile is not None:
                resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))

        args = [sys.executable, "-m", "powercontext_runtime.cli.main", "serve",
                "--port", str(port), "--data-dir", str(home)]  # fmt: skip
        with open(Path(tmp) / "stderr.log", "wb") as stderr:
            process = subprocess.Popen(
                args, stdout=subprocess.DEVNULL, stderr=stderr, env=env, preexec_fn=limit_files
            )
        url = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 60
            while True:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise BenchError("daemon did not start")
                with contextlib.suppress(httpx.HTTPError):
                    if httpx.get(url + "/health/ready", timeout=1).status_code == 200:
                        break
                time.sleep(0.05)
            token = (home / "auth" / "token").read_text().strip()
            yield Daemon(url, port, token, process.pid)
        finally:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


class Prober(threading.Thread):
    """``GET /health/live`` every 100 ms on fresh connections; records each latency or failure."""

    def __init__(self, url: str) -> None:
        super().__init__(daemon=True)
        self.url = url
        self.latencies: list[float] = []
        self.failures = 0
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.wait(0.1):
            started = time.perf_counter()
            try:
                httpx.get(self.url + "/health/live", timeout=30).raise_for_status()
                self.latencies.append(time.perf_counter() - started)
            except httpx.HTTPError:
                self.failures += 1


def _send_big_header(port: int, size: int) -> dict[str, Any]:
    """One request with a ``size``-byte header; how long until the server stopped it."""
    chunk = b"a" * (1 << 20)
    sent = 0
    started = time.perf_counter()
    outcome = "sent whole request"
    status = None
    with socket.create_connection(("127.0.0.1", port), timeout=120) as sock:
        try:
            sock.sendall(b"GET /v1/capabilities HTTP/1.1\r\nHost: localhost\r\nX-Pad: ")
            while sent < size:
                piece = chunk[: size - sent]
                sock.sendall(piece)
                sent += len(piece)
            sock.sendall(b"\r\n\r\n")
            first = sock.recv(64)
            status = first.split(b" ", 2)[1].decode() if first.startswith(b"HTTP/") else None
            outcome = f"answered {status}" if status else "closed without an answer"
        except (ConnectionResetError, BrokenPipeError):
            outcome = "closed by the server (reset)"
        except TimeoutError:
            outcome = "timed out"
    return {"seconds": round(time.perf_counter() - started, 2), "bytes_sent": sent,
            "outcome": outcome}  # fmt: skip


def scenario_header(args: argparse.Namespace, env: dict[str, str]) -> dict[str, Any]:
    results: dict[str, Any] = {}
    for parallel, mib in ((1, args.header_mib), (args.parallel, args.parallel_mib)):
        with daemon(env) as d:
            before = process_memory_kib(d.pid)["hwm_kib"]
            prober = Prober(d.url)
            prober.start()
            threads_out: list[dict[str, Any]] = []

            threads = [
                threading.Thread(
                    target=lambda out=threads_out, size=mib << 20, port=d.port: out.append(
                        _send_big_header(port, size)
                    )
                )
                for _ in range(parallel)
            ]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(timeout=300)
            prober.stop.set()
            prober.join()
            after = process_memory_kib(d.pid)["hwm_kib"]
            results[f"{parallel}x{mib}MiB"] = {
                "requests": threads_out,
                "peak_rss_growth_mib": round((after - before) / 1024, 1),
                "probe_max_ms": round(max(prober.latencies, default=0) * 1000, 1),
                "probe_failures": prober.failures,
            }
            log(f"header {parallel}x{mib} MiB: {results[f'{parallel}x{mib}MiB']}")
    return results


class SlowClients(threading.Thread):
    """``count`` connections that trickle a request head, one byte each ``interval`` seconds.

    With ``reopen`` a connection the server closes is opened again (a persistent attacker).
    Records the time from each connection's start to the server's close.
    """

    def __init__(self, port: int, count: int, interval: float, *, reopen: bool) -> None:
        super().__init__(daemon=True)
        self.port, self.count, self.interval, self.reopen = port, count, interval, reopen
        self.close_times: list[float] = []
        self.opened = 0
        self.open_now = 0
        self.stop = threading.Event()

    def _open(self, selector: selectors.BaseSelector) -> None:
        sock = socket.socket()
        sock.setblocking(False)
        with contextlib.suppress(BlockingIOError):
            sock.connect(("127.0.0.1", self.port))
        selector.register(sock, selectors.EVENT_READ, [time.monotonic(), 0])
        self.opened += 1

    def run(self) -> None:
        selector = selectors.DefaultSelector()
        for _ in range(self.count):
            self._open(selector)
        payload = HEAD + b"X-Slow: " + b"a" * 100_000
        try:
            while not self.stop.is_set():
                for key, _ in selector.select(timeout=self.interval):
                    try:
                        data = key.fileobj.recv(4096)  # type: ignore[union-attr]
                    except OSError:
                        data = b""
                    if not data:
                        started = key.data[0]
                        selector.unregister(key.fileobj)
                        key.fileobj.close()
                        self.close_times.append(time.monotonic() - started)
                        if self.reopen and not self.stop.is_set():
                            self._open(selector)
                now = time.monotonic()
                for key in list(selector.get_map().values()):
                    state = key.data
                    if now - state[0] >= state[1] * self.interval:
                        with contextlib.suppress(OSError):
                            key.fileobj.send(payload[state[1] : state[1] + 1])  # type: ignore[union-attr]
                        state[1] += 1
                self.open_now = len(selector.get_map())
        finally:
            for key in list(selector.get_map().values()):
                key.fileobj.close()
            selector.close()


def scenario_slowloris(args: argparse.Namespace, env: dict[str, str]) -> dict[str, Any]:
    with daemon(env) as d:
        slow = SlowClients(d.port, args.slow_connections, 1.0, reopen=False)
        slow.start()
        deadline = time.monotonic() + args.slow_seconds
        while time.monotonic() < deadline and len(slow.close_times) < args.slow_connections:
            time.sleep(0.5)
        slow.stop.set()
        slow.join()
        closed = sorted(slow.close_times)
        result = {
            "connections": args.slow_connections,
            "closed_by_server": len(closed),
            "bound_seconds": args.slow_seconds,
            "close_after_s_median": round(statistics.median(closed), 1) if closed else None,
        }
        log(f"slowloris: {result}")
        return result


def scenario_flood(args: argparse.Namespace, env: dict[str, str]) -> dict[str, Any]:
    with daemon(env, nofile=args.nofile) as d:
        slow = SlowClients(d.port, args.flood_connections, 2.0, reopen=True)
        slow.start()
        time.sleep(3)  # let the flood establish itself (this is a measurement, not a test)
        ok = failed = 0
        latencies = []
        for _ in range(args.real_requests):
            started = time.perf_counter()
            try:
                response = httpx.get(
                    d.url + "/v1/capabilities",
                    headers={"Authorization": f"Bearer {d.token}"},
                    timeout=5,
                )
                ok += response.status_code == 200
                failed += response.status_code != 200
                latencies.append(time.perf_counter() - started)
            except httpx.HTTPError:
                failed += 1
            time.sleep(0.25)
        slow.stop.set()
        slow.join()
        result = {
            "nofile": args.nofile,
            "slow_connections": args.flood_connections,
            "attacker_connections_opened": slow.opened,
            "real_ok": ok,
            "real_failed": failed,
            "real_p50_ms": round(statistics.median(latencies) * 1000, 1) if latencies else None,
        }
        log(f"flood: {result}")
        return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenarios", default="header,slowloris,flood")
    parser.add_argument("--env", action="append", default=[], help="NAME=VALUE for the daemon")
    parser.add_argument("--header-mib", type=int, default=128)
    parser.add_argument("--parallel", type=int, default=4)
    parser.add_argument("--parallel-mib", type=int, default=256)
    parser.add_argument("--slow-connections", type=int, default=50)
    parser.add_argument("--slow-seconds", type=float, default=40)
    parser.add_argument("--flood-connections", type=int, default=1100)
    parser.add_argument("--nofile", type=int, default=1024)
    parser.add_argument("--real-requests", type=int, default=60)
    parser.add_argument("--smoke", action="store_true", help="small sizes, seconds")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if args.smoke:
        args.header_mib, args.parallel, args.parallel_mib = 4, 2, 4
        args.slow_connections, args.slow_seconds = 5, 15
        args.flood_connections, args.nofile, args.real_requests = 100, 256, 5
    env = dict(item.split("=", 1) for item in args.env)
    runners = {"header": scenario_header, "slowloris": scenario_slowloris,
               "flood": scenario_flood}  # fmt: skip
    report: dict[str, Any] = {"machine": machine_facts(), "env": env}
    for name in args.scenarios.split(","):
        report[name] = runners[name](args, env)
    sys.stdout.write(json.dumps(report, indent=None if args.json else 2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
