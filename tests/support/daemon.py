"""Start and stop a real runtime process for end-to-end tests."""

from __future__ import annotations

import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import closing, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from powercontext_runtime.local_socket import SOCKET_NAME, SocketAddress


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
    #: The unix socket the daemon serves besides TCP (``<home>/powercontext.sock`` unless the
    #: test moved it with POWERCONTEXT_SOCKET / --socket; None when turned off).
    socket_path: Path | None = field(default=None)

    @property
    def unix_url(self) -> str:
        assert self.socket_path is not None, "this daemon serves no unix socket"
        return f"unix:{self.socket_path}"

    @property
    def token(self) -> str:
        """The operator's local token (every capability)."""
        return (self.home / "auth" / "token").read_text().strip()

    @property
    def agent_token(self) -> str:
        """The agents' local token (hooks, MCP tools: read, write, propose — no review)."""
        return (self.home / "auth" / "agent-token").read_text().strip()

    def env(self) -> dict[str, str]:
        """Environment for CLI subprocesses talking to this daemon."""
        env = dict(os.environ)
        env.update(POWERCONTEXT_HOME=str(self.home), POWERCONTEXT_URL=self.url)
        env.pop("POWERCONTEXT_TOKEN", None)
        return env

    def log_text(self) -> str:
        return self.stderr_path.read_text(encoding="utf-8", errors="replace")

    def log_text_with(self, *fragments: str, timeout: float = 60) -> str:
        """The log once it holds every fragment (or at the deadline): an access-log line is
        written after its response went out, so a client can read the answer first."""
        deadline = time.monotonic() + timeout
        text = self.log_text()
        while not all(f in text for f in fragments) and time.monotonic() < deadline:
            time.sleep(0.05)
            text = self.log_text()
        return text

    def client(self, token: str | None = None) -> httpx.Client:
        return httpx.Client(
            base_url=self.url,
            headers={"Authorization": f"Bearer {token or self.token}"},
            timeout=30,
        )

    @contextmanager
    def unix_client(self, token: str | None = None) -> Iterator[httpx.Client]:
        """An httpx client over the unix socket (``Host: localhost``), long paths included."""
        assert self.socket_path is not None, "this daemon serves no unix socket"
        with (
            SocketAddress(self.socket_path) as address,
            httpx.Client(
                base_url="http://localhost",
                transport=httpx.HTTPTransport(uds=address.address),
                headers={"Authorization": f"Bearer {token or self.token}"},
                timeout=30,
            ) as client,
        ):
            yield client

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


def wait_ready(url: str, process: subprocess.Popen[bytes], log: Path, timeout: float = 180) -> None:
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
    home: Path,
    *,
    database_url: str | None = None,
    extra_env: dict[str, str] | None = None,
    extra_args: Sequence[str] = (),
    preexec_fn: Callable[[], None] | None = None,
) -> Iterator[Daemon]:
    """``powercontext serve`` on a free TCP port and (by default) ``<home>/powercontext.sock``.

    ``extra_args`` are appended to the command line; ``preexec_fn`` runs in the child before
    exec (e.g. to lower its ``RLIMIT_NOFILE``).
    """
    port = free_port()
    home.mkdir(parents=True, exist_ok=True)
    log = home.parent / f"{home.name}-stderr.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith("POWERCONTEXT_")}
    env.update(extra_env or {})
    args = [
        sys.executable,
        "-m",
        "powercontext_runtime.cli.main",
        "serve",
        "--port",
        str(port),
        "--data-dir",
        str(home),
    ]
    if database_url:
        args += ["--database-url", database_url]
    args += list(extra_args)
    with open(log, "wb") as stderr:
        process = subprocess.Popen(
            args, stdout=subprocess.DEVNULL, stderr=stderr, env=env, preexec_fn=preexec_fn
        )
    socket_path = _socket_path(home, env.get("POWERCONTEXT_SOCKET"), list(extra_args))
    daemon = Daemon(f"http://127.0.0.1:{port}", home, process, log, socket_path)
    try:
        wait_ready(daemon.url, process, log)
        yield daemon
    finally:
        stop_process(process)


def stop_process(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM (the daemon's graceful stop), SIGKILL after 15 s; nothing if it already exited."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _socket_path(home: Path, from_env: str | None, extra_args: list[str]) -> Path | None:
    """Where the daemon puts its unix socket (``--socket`` beats POWERCONTEXT_SOCKET)."""
    value = from_env
    if "--socket" in extra_args:
        value = extra_args[extra_args.index("--socket") + 1]
    if value is None:
        return home / SOCKET_NAME if hasattr(socket, "AF_UNIX") else None
    return None if value.strip().lower() == "off" else Path(value).absolute()
