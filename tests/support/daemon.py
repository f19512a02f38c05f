"""Start and stop a real runtime process for end-to-end tests."""

from __future__ import annotations

import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Daemon:
    url: str
    home: Path
    process: subprocess.Popen[bytes]
    stderr_path: Path

    @property
    def token(self) -> str:
        return (self.home / "auth" / "token").read_text().strip()

    def env(self) -> dict[str, str]:
        """Environment for CLI subprocesses talking to this daemon."""
        env = dict(os.environ)
        env.update(POWERCONTEXT_HOME=str(self.home), POWERCONTEXT_URL=self.url)
        env.pop("POWERCONTEXT_TOKEN", None)
        return env

    def log_text(self) -> str:
        return self.stderr_path.read_text(encoding="utf-8", errors="replace")

    def client(self, token: str | None = None) -> httpx.Client:
        return httpx.Client(
            base_url=self.url,
            headers={"Authorization": f"Bearer {token or self.token}"},
            timeout=30,
        )

    def query(self, sql: str, *params: object) -> list[tuple[Any, ...]]:
        """Rows of the runtime's SQLite database, opened read-only: what the runtime stored,
        seen without going through the API under test."""
        database = f"file:{self.home / 'powercontext.db'}?mode=ro"
        with closing(sqlite3.connect(database, uri=True)) as db:
            return db.execute(sql, params).fetchall()

    def stop(self, sig: int = signal.SIGTERM) -> int:
        if self.process.poll() is None:
            self.process.send_signal(sig)
        return self.process.wait(timeout=30)


def wait_ready(url: str, process: subprocess.Popen[bytes], log: Path, timeout: float = 30) -> None:
    """Poll readiness (bounded): the daemon is usable once /health/ready answers 200."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError("daemon exited early:\n" + log.read_text(errors="replace")[-2000:])
        try:
            if httpx.get(url + "/health/ready", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.05)
    raise TimeoutError("daemon did not become ready")


@contextmanager
def start_daemon(
    home: Path, *, database_url: str | None = None, extra_env: dict[str, str] | None = None
) -> Iterator[Daemon]:
    port = free_port()
    home.mkdir(parents=True, exist_ok=True)
    log = home.parent / f"{home.name}-stderr.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith("POWERCONTEXT_")}
    env.update(extra_env or {})
    args = [sys.executable, "-m", "powercontext_runtime.cli.main", "serve",
            "--port", str(port), "--data-dir", str(home)]
    if database_url:
        args += ["--database-url", database_url]
    with open(log, "wb") as stderr:
        process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=stderr, env=env)
    daemon = Daemon(f"http://127.0.0.1:{port}", home, process, log)
    try:
        wait_ready(daemon.url, process, log)
        yield daemon
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
