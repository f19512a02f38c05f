"""Start a throwaway seekdb (OceanBase kernel, MySQL protocol) server.

Used by the test suite and by developers who want a local OceanBase-mode database::

    from tools.seekdb import SeekdbServer

    with SeekdbServer() as server:
        engine = sqlalchemy.create_engine(server.url)

or from a shell (prints the URL on one line, runs until Ctrl-C / SIGTERM)::

    python tools/seekdb.py [--port N] [--dir DIR] [--database NAME] [--keep]

The binary ships inside the ``pylibseekdb`` wheel (PyPI).  Only the standard library is used,
plus ``pymysql`` (a dependency of ``pylibseekdb``) for the readiness probe.

Facts this module relies on (measured, see docs/decisions/oceanbase-facts.md):

* seekdb 1.4.0 listens on exactly one TCP port (MySQL protocol, bound to 0.0.0.0) plus the unix
  socket ``<base-dir>/run/sql.sock``.  The ``rpc_port`` parameter (default 2882) is not bound by
  this single-node build; it is still given a free port so two instances never share one.
* A busy port makes seekdb exit (status 1) after about a second ("fail to start net frame");
  meanwhile a probe on that port may reach the *other* server, so readiness is only accepted
  when ``SELECT @@socket`` names this instance's own base directory.
* ``log_disk_size=1G`` makes it exit at once (OB_RESOURCE_UNIT_VALUE_INVALID) with nothing on
  stdout; the reason is only in ``<base-dir>/log/seekdb.log``.
* That log is written by a background thread (``enable_async_syslog``, default true) which
  can lose its last lines when the process exits: a loaded CI machine once found no ERROR line
  at all. ``--parameter enable_async_syslog=false`` writes synchronously.
* Without ``TELEMETRY_ENABLED=false`` in its environment it tries to report to a remote
  endpoint at bootstrap (a DNS lookup is visible with strace); the variable stops that.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import importlib.util
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import deque
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType

__all__ = ["SeekdbError", "SeekdbServer", "find_seekdb_binary"]

DEFAULT_DATABASE = "powercontext"
DEFAULT_READY_TIMEOUT = 180.0  # generous: tests must hold at load average 10 on 2 cores
DEFAULT_STOP_TIMEOUT = 15.0
_POLL_INTERVAL = 0.1
_PORT_RETRIES = 3
_STDOUT_LOG = "seekdb.stdout.log"
_NET_FRAME_FAILURE = "fail to start net frame"
_DATABASE_NAME = re.compile(r"^[A-Za-z0-9_]{1,64}$")
_PR_SET_PDEATHSIG = 1


class SeekdbError(RuntimeError):
    """seekdb could not be found, started, or stopped."""


def find_seekdb_binary() -> Path:
    """Return the ``seekdb`` executable shipped inside the installed ``pylibseekdb`` package.

    The package is located without importing it (its C extension is not needed here).
    """
    spec = importlib.util.find_spec("pylibseekdb")
    if spec is None or not spec.submodule_search_locations:
        raise SeekdbError(
            "the Python package 'pylibseekdb' is not installed; it ships the seekdb server "
            "binary (pip install pylibseekdb)"
        )
    for location in spec.submodule_search_locations:
        candidate = Path(location) / "seekdb"
        if candidate.is_file():
            if not os.access(candidate, os.X_OK):
                raise SeekdbError(f"{candidate} exists but is not executable")
            return candidate
    locations = ", ".join(spec.submodule_search_locations)
    raise SeekdbError(f"no 'seekdb' executable inside the pylibseekdb package ({locations})")


def _free_ports(count: int) -> list[int]:
    """Pick ``count`` distinct TCP ports that are currently free on every interface.

    seekdb binds 0.0.0.0, so the probe binds the wildcard address too.  All probe sockets stay
    open until every port is chosen, so the ports are distinct.
    """
    with contextlib.ExitStack() as stack:
        ports = []
        for _ in range(count):
            sock = stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            sock.bind(("", 0))
            ports.append(sock.getsockname()[1])
        return ports


def _port_is_free(port: int) -> bool:
    """True if nothing listens on ``port`` (SO_REUSEADDR ignores TIME_WAIT leftovers)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("", port))
        except OSError:
            return False
        return True


def _tail(path: Path, lines: int) -> list[str]:
    try:
        with path.open("r", encoding="utf-8", errors="replace") as handle:
            return [line.rstrip("\n") for line in deque(handle, maxlen=lines)]
    except OSError:
        return []


#: How long a still-running server's failure message waits for the reason to reach its log.
_LOG_SETTLE_SECONDS = 5.0


def _error_lines(path: Path, limit: int) -> list[str]:
    """The last ``limit`` ERROR/EDIAG lines of seekdb's own log, shortened for a message."""
    found: deque[str] = deque(maxlen=limit)
    try:
        with path.open("r", encoding="utf-8", errors="replace") as handle:
            for line in handle:
                if "] ERROR " in line or "] EDIAG " in line:
                    found.append(line.split(" BACKTRACE:", 1)[0].rstrip()[:400])
    except OSError:
        pass
    return list(found)


def _parent_death_signal() -> object:
    """A preexec_fn that makes the child receive SIGTERM when this process dies (Linux only)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        prctl = libc.prctl
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def _preexec() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
        if os.getppid() != parent:  # the parent died before prctl took effect
            os._exit(1)

    return _preexec


class SeekdbServer:
    """A seekdb server process owned by this object; use it as a context manager.

    ``base_dir``: the server's working directory.  ``None`` creates a temporary one, removed on
    stop unless ``keep_dir`` is true.  A directory given by the caller is never removed; if it
    already holds a seekdb instance, that instance's data is reused (restart).

    ``port``: the MySQL-protocol port; ``None`` picks a free one (and, in a temporary
    directory, retries with new ports if another process takes it first).

    ``parameters``: extra ``--parameter KEY=VALUE`` server parameters, e.g.
    ``{"_lcl_op_interval": "30ms"}`` to turn on deadlock detection (seekdb's default, 5s,
    detected no deadlock within 60 s here, so both sides wait for their lock timeout).

    ``die_with_parent``: on Linux the server gets SIGTERM when the *thread* that started it
    exits, so an interrupted test run cannot leak a server.  Start the server from a thread that
    outlives it (normally the main thread), or pass ``False``.
    """

    def __init__(
        self,
        database: str = DEFAULT_DATABASE,
        *,
        port: int | None = None,
        base_dir: str | os.PathLike[str] | None = None,
        keep_dir: bool = False,
        memory_budget: str = "1G",
        log_disk_size: str = "2G",
        ready_timeout: float = DEFAULT_READY_TIMEOUT,
        stop_timeout: float = DEFAULT_STOP_TIMEOUT,
        parameters: Mapping[str, str] | None = None,
        binary: str | os.PathLike[str] | None = None,
        die_with_parent: bool = True,
    ) -> None:
        if not _DATABASE_NAME.match(database):
            raise ValueError(f"database name must match {_DATABASE_NAME.pattern}: {database!r}")
        self.database = database
        self.requested_port = port
        self.keep_dir = keep_dir
        self.memory_budget = memory_budget
        self.log_disk_size = log_disk_size
        self.ready_timeout = ready_timeout
        self.stop_timeout = stop_timeout
        self.die_with_parent = die_with_parent
        self.parameters = dict(parameters or {})
        self._binary = Path(binary) if binary is not None else None
        self._given_dir = Path(base_dir) if base_dir is not None else None
        self.base_dir: Path | None = None
        self.port: int | None = None
        self.rpc_port: int | None = None
        self.process: subprocess.Popen[bytes] | None = None
        self.startup_seconds: float | None = None
        self.stop_seconds: float | None = None
        self._owns_dir = False
        self._stdout = None

    # -- public -------------------------------------------------------------------------------

    @property
    def url(self) -> str:
        """SQLAlchemy URL of the created database (user root, no password)."""
        if self.port is None:
            raise SeekdbError("the server is not started")
        return f"mysql+pymysql://root@127.0.0.1:{self.port}/{self.database}?charset=utf8mb4"

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    @property
    def log_path(self) -> Path:
        """seekdb's own log (the place to look when it misbehaves)."""
        return self._dir() / "log" / "seekdb.log"

    @property
    def stdout_path(self) -> Path:
        return self._dir() / _STDOUT_LOG

    def rss_bytes(self) -> int | None:
        """Resident set size of the server process (Linux /proc), or None if unknown."""
        if self.process is None or self.process.poll() is not None:
            return None
        try:
            status = Path(f"/proc/{self.process.pid}/status").read_text()
        except OSError:
            return None
        match = re.search(r"^VmRSS:\s+(\d+)\s+kB", status, re.MULTILINE)
        return int(match.group(1)) * 1024 if match else None

    def start(self) -> SeekdbServer:
        if self.process is not None:
            raise SeekdbError("the server is already started")
        binary = self._binary or find_seekdb_binary()
        began = time.monotonic()
        deadline = began + self.ready_timeout
        # Retry with new ports only in a fresh temporary directory: a half-bootstrapped
        # base dir cannot be started again.
        retry = self.requested_port is None and self._given_dir is None
        attempts = _PORT_RETRIES if retry else 1
        try:
            for attempt in range(1, attempts + 1):
                self._prepare_dir()
                if self.requested_port is None:
                    self.port, self.rpc_port = _free_ports(2)
                else:
                    self.port = self.requested_port
                    self.rpc_port = next(p for p in _free_ports(2) if p != self.port)
                self._spawn(binary)
                try:
                    self._wait_ready(deadline)
                    break
                except _PortTaken:
                    self._terminate()
                    self._remove_dir()
                    if attempt == attempts:
                        raise SeekdbError(
                            f"port {self.port} is used by another process "
                            f"(tried {attempts} port(s))"
                        ) from None
            self._create_database()
        except BaseException:
            self.stop()
            raise
        self.startup_seconds = time.monotonic() - began
        return self

    def stop(self) -> None:
        """Terminate the server (SIGTERM, then SIGKILL after ``stop_timeout``); idempotent."""
        began = time.monotonic()
        stopped = self._terminate()
        if stopped:
            self.stop_seconds = time.monotonic() - began
        self._remove_dir()

    def __enter__(self) -> SeekdbServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- internals ----------------------------------------------------------------------------

    def _dir(self) -> Path:
        if self.base_dir is None:
            raise SeekdbError("the server has no base directory yet")
        return self.base_dir

    def _prepare_dir(self) -> None:
        if self._given_dir is not None:
            self._given_dir.mkdir(parents=True, exist_ok=True)
            self.base_dir = self._given_dir.resolve()
            self._owns_dir = False
        else:
            self.base_dir = Path(tempfile.mkdtemp(prefix="seekdb-")).resolve()
            self._owns_dir = True

    def _spawn(self, binary: Path) -> None:
        base_dir = self._dir()
        command = [
            str(binary),
            f"--base-dir={base_dir}",
            "--port",
            str(self.port),
            "--nodaemon",
            "--parameter",
            f"memory_budget={self.memory_budget}",
            "--parameter",
            f"log_disk_size={self.log_disk_size}",
            "--parameter",
            f"rpc_port={self.rpc_port}",
        ]
        for key, value in self.parameters.items():
            command += ["--parameter", f"{key}={value}"]
        env = dict(os.environ, TELEMETRY_ENABLED="false")
        self._stdout = (base_dir / _STDOUT_LOG).open("ab")
        self.process = subprocess.Popen(
            command,
            cwd=base_dir,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=self._stdout,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # a terminal's Ctrl-C reaches us, and we stop it in order
            preexec_fn=_parent_death_signal() if self.die_with_parent else None,
        )

    def _connect(self, timeout: float):  # -> pymysql.connections.Connection
        import pymysql

        return pymysql.connect(
            host="127.0.0.1",
            port=self.port,
            user="root",
            password="",
            connect_timeout=max(1, int(timeout)),
            read_timeout=max(1, int(timeout)),
            write_timeout=max(1, int(timeout)),
            autocommit=True,
        )

    def _served_socket(self, timeout: float) -> str:
        """The unix socket path of whichever server answers on our port."""
        connection = self._connect(timeout)
        try:
            with connection.cursor() as cursor:
                cursor.execute("SELECT @@socket")
                row = cursor.fetchone()
        finally:
            connection.close()
        return str(row[0] or "") if row else ""

    def _wait_ready(self, deadline: float) -> None:
        """Poll a real MySQL-protocol connection until it reaches *this* instance."""
        import pymysql

        assert self.process is not None
        own_socket = os.path.realpath(self._dir() / "run" / "sql.sock")
        last_error: Exception | None = None
        foreign = False  # another server answered on our port
        while True:
            code = self.process.poll()
            if code is not None:
                # The log does not always hold the bind failure (it is written asynchronously),
                # so a port that is still taken after our exit counts as a collision too.
                log_says = _NET_FRAME_FAILURE in "\n".join(_error_lines(self.log_path, 50))
                if log_says or foreign or not _port_is_free(self.port):
                    raise _PortTaken()
                raise SeekdbError(
                    self._exit_message(f"seekdb exited during start-up (status {code})")
                )
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            try:
                served_socket = self._served_socket(min(5.0, remaining))
            except pymysql.err.MySQLError as error:
                last_error = error
            else:
                if os.path.realpath(served_socket) == own_socket:
                    return
                # Another server answers on this port; ours will fail to bind and exit.
                foreign = True
                last_error = SeekdbError(f"port {self.port} is served by another instance")
            time.sleep(_POLL_INTERVAL)
        raise SeekdbError(
            self._exit_message(
                f"seekdb was not ready within {self.ready_timeout:.0f} s (last error: {last_error})"
            )
        )

    def _create_database(self) -> None:
        # Default character set only: the collation is left at the server default on purpose,
        # so the store must declare utf8mb4_bin on its identifier columns itself.
        connection = self._connect(30)
        try:
            with connection.cursor() as cursor:
                cursor.execute(
                    f"CREATE DATABASE IF NOT EXISTS `{self.database}` DEFAULT CHARACTER SET utf8mb4"
                )
        finally:
            connection.close()

    def _exit_message(self, headline: str) -> str:
        removed = self._owns_dir and not self.keep_dir
        note = " (removed on stop; keep_dir=True or --keep keeps it)" if removed else ""
        parts = [headline, f"base dir: {self.base_dir}{note}"]
        stdout_tail = _tail(self.stdout_path, 20)
        if stdout_tail:
            parts.append(f"--- tail of {self.stdout_path} ---")
            parts.extend(stdout_tail)
        exited = self.process is not None and self.process.poll() is not None
        errors = _error_lines(self.log_path, 8)
        # A running server may not have written its reason yet: give it a bounded moment. An
        # exited one has written all it ever will.
        settle_by = time.monotonic() + _LOG_SETTLE_SECONDS
        while not errors and not exited and time.monotonic() < settle_by:
            time.sleep(_POLL_INTERVAL)
            errors = _error_lines(self.log_path, 8)
        if errors:
            parts.append(f"--- last errors in {self.log_path} ---")
            parts.extend(errors)
        elif exited:
            # seekdb logs from a background thread that can lose its last lines at exit (a
            # loaded CI machine once lost every one): say so rather than leave a gap.
            parts.append(
                f"{self.log_path} holds no ERROR line: seekdb's asynchronous log writer may have "
                "lost the last lines at exit (--parameter enable_async_syslog=false keeps them)"
            )
        return "\n".join(parts)

    def _terminate(self) -> bool:
        """Stop the process if running; return True if it was running."""
        process = self.process
        if process is None:
            return False
        was_running = process.poll() is None
        if was_running:
            with contextlib.suppress(ProcessLookupError):
                process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=self.stop_timeout)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    process.kill()
                process.wait()
        self.process = None
        if self._stdout is not None:
            self._stdout.close()
            self._stdout = None
        return was_running

    def _remove_dir(self) -> None:
        if self.base_dir is not None and self._owns_dir and not self.keep_dir:
            shutil.rmtree(self.base_dir, ignore_errors=True)
            self.base_dir = None
            self._owns_dir = False


class _PortTaken(Exception):
    """Our seekdb could not bind its port (another process took it after we picked it)."""


class _Stop(Exception):
    pass


def _raise_stop(signum: int, frame: object) -> None:
    raise _Stop(signum)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Run a throwaway seekdb server, print its SQLAlchemy URL, stop on Ctrl-C."
    )
    parser.add_argument("--port", type=int, help="MySQL-protocol port (default: a free one)")
    parser.add_argument("--dir", help="base directory to use and keep (default: a temporary one)")
    parser.add_argument("--database", default=DEFAULT_DATABASE, help="database to create")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    parser.add_argument(
        "--parameter",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra seekdb server parameter (repeatable)",
    )
    parser.add_argument("--ready-timeout", type=float, default=DEFAULT_READY_TIMEOUT)
    args = parser.parse_args(argv)
    parameters = {}
    for item in args.parameter:
        key, sep, value = item.partition("=")
        if not sep or not key:
            parser.error(f"--parameter expects KEY=VALUE, got {item!r}")
        parameters[key] = value

    # SIGINT explicitly too: a shell starts background jobs with SIGINT ignored.
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, _raise_stop)
    server = SeekdbServer(
        args.database,
        port=args.port,
        base_dir=args.dir,
        keep_dir=args.keep,
        parameters=parameters,
        ready_timeout=args.ready_timeout,
        die_with_parent=True,
    )
    try:
        try:
            server.start()
        except SeekdbError as error:
            print(f"seekdb: {error}", file=sys.stderr)
            return 1
        print(server.url, flush=True)
        print(
            f"seekdb: pid {server.pid}, dir {server.base_dir}, ready in "
            f"{server.startup_seconds:.2f} s; Ctrl-C to stop",
            file=sys.stderr,
            flush=True,
        )
        assert server.process is not None
        code = server.process.wait()
        print(server._exit_message(f"seekdb exited unexpectedly (status {code})"), file=sys.stderr)
        return 1
    except _Stop:
        return 0
    finally:
        for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(signum, signal.SIG_IGN)  # let the bounded stop below finish
        kept = server.base_dir if (server.keep_dir or args.dir) else None
        server.stop()
        if server.stop_seconds is not None:
            print(f"seekdb: stopped in {server.stop_seconds:.2f} s", file=sys.stderr)
        if kept is not None:
            print(f"seekdb: kept {kept}", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
