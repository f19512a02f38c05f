"""The daemon's unix-domain socket as the default local transport (issue 15, item 5).

A TCP port is anybody's while the daemon is down; the socket file in the private data dir is
not. These tests run real ``powercontext serve`` processes and real CLI processes: the socket
is 0600 and serves the API, clients and the CLI use it by default and never fall back to TCP,
long data-dir paths work, a stale socket is replaced, a live one is not stolen, and workers
serve on both sockets.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from powercontext_runtime.client import (
    AsyncPowerContextClient,
    PowerContextClient,
    UnavailableError,
)
from powercontext_runtime.local_socket import SocketAddress, max_address_bytes
from powercontext_runtime.settings import DEFAULT_PORT
from tests.e2e.helpers import new_scope
from tests.support.daemon import Daemon, free_port, start_daemon

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(not hasattr(socket, "AF_UNIX"), reason="needs unix sockets"),
]


def _local_env(home: Path, **extra: str) -> dict[str, str]:
    """A CLI environment with the daemon's data dir and no URL: the defaults decide."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("POWERCONTEXT_")}
    env.update(POWERCONTEXT_HOME=str(home), **extra)
    return env


def _cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "powercontext_runtime.cli.main", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    with start_daemon(tmp_path_factory.mktemp("local") / "home") as running:
        yield running


def test_the_socket_is_a_0600_socket_in_the_data_dir(daemon: Daemon) -> None:
    assert daemon.socket_path == daemon.home / "powercontext.sock"
    info = os.lstat(daemon.socket_path)
    assert stat.S_ISSOCK(info.st_mode)
    assert stat.S_IMODE(info.st_mode) == 0o600
    assert info.st_uid == os.geteuid()


def test_the_api_is_served_over_the_socket_with_auth(daemon: Daemon) -> None:
    with daemon.unix_client() as client:
        assert client.get("/health/ready").json()["status"] == "ready"
        assert client.get("/v1/capabilities").status_code == 200
        scope = new_scope("uds")
        written = client.post(
            "/v1/memory/remember", json={"scope_id": scope, "kind": "fact", "text": "Via UDS."}
        )
        assert written.status_code == 200, written.text
    with daemon.unix_client(token="pc_000000000000_wrong") as wrong:
        assert wrong.get("/v1/capabilities").status_code == 401


def test_a_minimal_http11_client_with_host_localhost_is_served(daemon: Daemon) -> None:
    """What the hook kit sends: one request, ``Host: localhost``, ``Connection: close``."""
    assert daemon.socket_path is not None
    request = (
        "GET /v1/capabilities HTTP/1.1\r\nHost: localhost\r\n"
        f"Authorization: Bearer {daemon.token}\r\nConnection: close\r\n\r\n"
    ).encode()
    with SocketAddress(daemon.socket_path) as address, socket.socket(socket.AF_UNIX) as sock:
        sock.settimeout(30)
        sock.connect(address.address)
        sock.sendall(request)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 200 "), answer[:200]


def test_the_cli_defaults_to_the_socket(daemon: Daemon) -> None:
    env = _local_env(daemon.home, POWERCONTEXT_SCOPE_ID=new_scope("cli-uds"))
    remembered = _cli(env, "memory", "remember", "Deploys go through the socket.", "--json")
    assert remembered.returncode == 0, remembered.stderr
    found = _cli(env, "memory", "search", "deploys socket", "--json")
    assert found.returncode == 0, found.stderr
    assert [h["text"] for h in json.loads(found.stdout)["hits"]] == [
        "Deploys go through the socket."
    ]
    doctor = _cli(env, "doctor", "--json")
    assert doctor.returncode == 0, doctor.stdout + doctor.stderr
    checks = {c["check"]: c for c in json.loads(doctor.stdout)["checks"]}
    assert checks["daemon"]["ok"] and f"unix:{daemon.socket_path}" in checks["daemon"]["detail"]


def test_the_python_clients_default_to_the_socket(
    daemon: Daemon, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in [k for k in os.environ if k.startswith("POWERCONTEXT_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("POWERCONTEXT_HOME", str(daemon.home))
    with PowerContextClient() as client:
        assert client.url == f"unix:{daemon.socket_path}"
        assert client.get_capabilities().artifact_families  # the token came from the home

    async def scenario() -> str:
        async with AsyncPowerContextClient() as client:
            assert (await client.get_readiness()).status == "ready"
            return client.url

    assert asyncio.run(scenario()) == f"unix:{daemon.socket_path}"


@contextmanager
def _recording_listener(server: socket.socket) -> Iterator[list[int]]:
    """Accept on ``server`` and count the connections made to it: the "another local process
    holds the port" of the attack."""
    accepted: list[int] = []
    server.listen(16)
    server.settimeout(0.1)
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            accepted.append(1)
            conn.close()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield accepted
    finally:
        stop.set()
        thread.join(timeout=10)


def test_a_missing_socket_is_unreachable_and_nothing_goes_over_tcp(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No daemon: the client and the CLI report ``runtime_unreachable`` — and a listener on
    the default TCP port (the attacker) receives no connection, so no token and no prompt."""
    home = tmp_path / "nobody-home"
    (home / "auth").mkdir(parents=True)
    (home / "auth" / "token").write_text("pc_secret_that_must_stay_home\n")
    impostor = socket.socket()
    try:
        impostor.bind(("127.0.0.1", DEFAULT_PORT))
    except OSError:
        impostor.close()
        pytest.skip(f"port {DEFAULT_PORT} is in use on this machine")
    with impostor, _recording_listener(impostor) as accepted:
        for name in [k for k in os.environ if k.startswith("POWERCONTEXT_")]:
            monkeypatch.delenv(name)
        monkeypatch.setenv("POWERCONTEXT_HOME", str(home))
        with PowerContextClient(timeout=5) as client, pytest.raises(UnavailableError) as caught:
            client.get_capabilities()
        assert caught.value.code == "runtime_unreachable"
        assert str(home / "powercontext.sock") in caught.value.message

        env = _local_env(home, POWERCONTEXT_SCOPE_ID="e2e:nobody")
        done = _cli(env, "memory", "search", "anything")
        assert done.returncode == 1 and "runtime_unreachable" in done.stderr, done.stderr
        doctor = _cli(env, "doctor", "--json")
        daemon_check = {c["check"]: c for c in json.loads(doctor.stdout)["checks"]}["daemon"]
        assert daemon_check["ok"] is False
        assert f"unix:{home / 'powercontext.sock'}" in daemon_check["detail"]
        assert accepted == []


def test_an_explicit_http_url_still_uses_tcp(daemon: Daemon) -> None:
    env = _local_env(daemon.home, POWERCONTEXT_URL=daemon.url)
    doctor = _cli(env, "doctor", "--json")
    checks = {c["check"]: c for c in json.loads(doctor.stdout)["checks"]}
    assert checks["daemon"]["ok"] and daemon.url in checks["daemon"]["detail"]
    with PowerContextClient(daemon.unix_url, token=daemon.token) as client:
        assert client.get_readiness().status == "ready"


def test_a_long_data_dir_path_works(tmp_path: Path) -> None:
    """A data dir whose socket path does not fit in ``sun_path`` (Linux: reached through
    ``/proc/self/fd``), on the server and in the clients."""
    if not sys.platform.startswith("linux"):
        pytest.skip("long socket paths are refused with an error outside Linux")
    home = tmp_path / ("d" * 60) / ("e" * 60) / "home"
    assert len(os.fsencode(home / "powercontext.sock")) > max_address_bytes()
    with start_daemon(home) as running:
        assert stat.S_ISSOCK(os.lstat(home / "powercontext.sock").st_mode)
        with running.unix_client() as client:
            assert client.get("/v1/capabilities").status_code == 200
        found = _cli(_local_env(home, POWERCONTEXT_SCOPE_ID=new_scope("long")), "memory", "list")
        assert found.returncode == 0, found.stderr
    assert not (home / "powercontext.sock").exists()


def test_a_stale_socket_file_is_replaced(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    stale = socket.socket(socket.AF_UNIX)
    stale.bind(str(home / "powercontext.sock"))  # bound, never listened, closed: a crash's
    stale.close()
    with start_daemon(home) as running, running.unix_client() as client:
        assert client.get("/health/live").status_code == 200


def test_a_live_socket_is_not_stolen_and_a_busy_port_is_a_clear_error(daemon: Daemon) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("POWERCONTEXT_")}
    base = [sys.executable, "-m", "powercontext_runtime.cli.main", "serve"]
    second = subprocess.run(
        [*base, "--port", str(free_port()), "--data-dir", str(daemon.home)],
        env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert second.returncode == 1
    assert "already listening" in second.stderr and str(daemon.socket_path) in second.stderr
    busy = subprocess.run(
        [*base, "--port", daemon.url.rsplit(":", 1)[1], "--data-dir", str(daemon.home / "x")],
        env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert busy.returncode == 1 and "already in use" in busy.stderr, busy.stderr
    assert "PowerContext runtime:" not in second.stdout + busy.stdout
    with daemon.unix_client() as client:  # the first daemon kept its socket
        assert client.get("/health/live").status_code == 200


def test_the_ready_line_names_both_sockets_once_they_accept(tmp_path: Path) -> None:
    """The ready line is printed only after both sockets listen: connecting right after
    reading it succeeds without any retry. A clean stop removes the socket file."""
    home = tmp_path / "home"
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("POWERCONTEXT_")}
    process = subprocess.Popen(
        [sys.executable, "-m", "powercontext_runtime.cli.main", "serve",
         "--port", str(port), "--data-dir", str(home)],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert line.startswith(
            f"PowerContext runtime: http://127.0.0.1:{port} and unix:{home / 'powercontext.sock'}"
        ), line
        with socket.create_connection(("127.0.0.1", port), timeout=5):
            pass
        with socket.socket(socket.AF_UNIX) as sock:
            sock.connect(str(home / "powercontext.sock"))
    finally:
        process.terminate()
        assert process.wait(timeout=30) == 0
    assert not (home / "powercontext.sock").exists()


def test_socket_off_serves_tcp_only(tmp_path: Path) -> None:
    with start_daemon(tmp_path / "home", extra_args=["--socket", "off"]) as running:
        assert running.socket_path is None
        assert not (running.home / "powercontext.sock").exists()
        assert httpx.get(running.url + "/health/live", timeout=30).status_code == 200


def test_workers_serve_on_both_sockets(tmp_path: Path) -> None:
    with start_daemon(tmp_path / "home", extra_env={"POWERCONTEXT_WORKERS": "2"}) as running:
        for _ in range(8):  # fresh connections, spread over the workers by the kernel
            with running.unix_client() as client:
                assert client.get("/v1/capabilities").status_code == 200
            assert httpx.get(running.url + "/health/ready", timeout=30).status_code == 200
        env = _local_env(running.home, POWERCONTEXT_SCOPE_ID=new_scope("workers-uds"))
        assert _cli(env, "memory", "list").returncode == 0
        assert running.stop() == 0
    assert not (tmp_path / "home" / "powercontext.sock").exists()


def _python_for_anyone() -> str:
    """An interpreter another user may run (this venv's may sit in root's home)."""
    for candidate in (sys.executable, shutil.which("python3") or "", "/usr/bin/python3"):
        mode = os.stat(candidate).st_mode if candidate and os.path.exists(candidate) else 0
        if mode & stat.S_IXOTH and all(
            os.stat(parent).st_mode & stat.S_IXOTH for parent in Path(candidate).resolve().parents
        ):
            return candidate
    pytest.skip("no Python interpreter that another user may run")


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to connect as another user")
def test_a_peer_running_as_another_user_is_refused(tmp_path: Path) -> None:
    """Defence in depth behind the 0600 file: even through a socket someone made world
    writable, a process of another uid is disconnected before it can send a request."""
    shared = Path(tempfile.mkdtemp(prefix="pc-shared-"))  # /tmp: reachable by any user
    os.chmod(shared, 0o777)
    path = shared / "pc.sock"
    with start_daemon(tmp_path / "home", extra_args=["--socket", str(path)]) as running:
        os.chmod(path, 0o666)
        probe = (
            "import socket, sys\n"
            "s = socket.socket(socket.AF_UNIX); s.settimeout(30); s.connect(sys.argv[1])\n"
            "try:\n"
            "    s.sendall(b'GET /health/live HTTP/1.1\\r\\nHost: localhost\\r\\n\\r\\n')\n"
            "    print(repr(s.recv(100)))\n"
            "except OSError:\n"
            "    print('error')\n"
        )
        done = subprocess.run(
            [_python_for_anyone(), "-I", "-c", probe, str(path)], cwd="/",
            capture_output=True, text=True, timeout=60, user=65534, group=65534,
        )  # fmt: skip
        assert done.stdout.strip() in ("b''", "error"), done.stdout + done.stderr
        with running.unix_client() as client:  # its owner is still served
            assert client.get("/health/live").status_code == 200
    shutil.rmtree(shared, ignore_errors=True)
