"""Storage faults through a real ``powercontext serve`` process.

* A write lock held by another process: writes answer a typed 503 "busy" within the busy
  timeout (not a 500 after 30 s), readiness says not ready, and both recover when the lock goes.
* A database in a folder the daemon may not write (SQLite cannot create its WAL files there):
  ``serve`` exits 1 with one line that names the cause, ``doctor`` fails the database check,
  and once the folder is writable again the daemon starts.

Root ignores file modes, so as root the folder is made read-only by a read-only bind mount in a
mount namespace of the command's own (``unshare``): the kernel's EROFS, invisible to anything
else. As any other user it is the folder's mode.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from powercontext_runtime.composition import Runtime
from powercontext_runtime.settings import Settings
from tests.support.daemon import Daemon, free_port, wait_ready

pytestmark = pytest.mark.e2e

SCOPE = "git:example.com/acme/storage-daemon"
SECRET = "zq-daemon-storage-sentinel"

Wrap = Callable[[list[str]], list[str]]


def _remember(client: httpx.Client, text: str) -> httpx.Response:
    return client.post(
        "/v1/memory/remember", json={"scope_id": SCOPE, "kind": "fact", "text": text}
    )


def test_a_held_write_lock_is_a_503_busy_and_readiness_follows_it(daemon: Daemon) -> None:
    """Before: the daemon waited 30 s for the lock, then answered 500, and stayed ready."""
    with daemon.client() as client:
        assert _remember(client, f"Deploy with blue green {SECRET}").status_code == 200
        locker = sqlite3.connect(daemon.home / "powercontext.db", isolation_level=None)
        try:
            locker.execute("BEGIN IMMEDIATE")
            busy = _remember(client, "Rotate the signing keys")
            assert busy.status_code == 503, busy.text
            assert busy.json()["error"]["code"] == "database_unavailable"
            assert "busy" in busy.json()["error"]["message"]
            ready = httpx.get(daemon.url + "/health/ready", timeout=30)
            assert (ready.status_code, ready.json()["error"]["code"]) == (503, "runtime_not_ready")
            assert httpx.get(daemon.url + "/health/live", timeout=30).status_code == 200
        finally:
            locker.close()
        assert _remember(client, "Rotate the signing keys").status_code == 200
        assert httpx.get(daemon.url + "/health/ready", timeout=30).status_code == 200
    assert SECRET not in daemon.log_text()


@contextmanager
def _read_only_folder(folder: Path) -> Iterator[Wrap]:
    """Yields a wrapper that makes a command line run with ``folder`` read-only for it."""
    if os.geteuid() != 0:
        folder.chmod(0o555)
        try:
            yield lambda argv: argv
        finally:
            folder.chmod(0o755)
        return
    unshare = shutil.which("unshare")
    if unshare is None or subprocess.run([unshare, "--mount", "true"]).returncode != 0:
        pytest.skip("running as root without `unshare --mount`: no way to deny root a write")
    script = 'mount --bind -o ro "$0" "$0" && exec "$@"'
    yield lambda argv: [unshare, "--mount", "--propagation", "private", "sh", "-c", script,
                        str(folder), *argv]  # fmt: skip


def _cli(*args: str, data_dir: Path, database: Path) -> list[str]:
    return [sys.executable, "-m", "powercontext_runtime.cli.main", *args,
            "--data-dir", str(data_dir), "--database-url", f"sqlite:///{database}"]  # fmt: skip


def test_the_daemon_refuses_a_database_it_cannot_write_and_doctor_says_so(
    tmp_path: Path,
) -> None:
    """Before: the same refusal said only "the database is unavailable"."""
    home, folder = tmp_path / "home", tmp_path / "db"
    database = folder / "powercontext.db"
    # An existing database, closed cleanly: no WAL files are left beside it.
    Runtime.open(Settings.load(env={}, home=home, database_url=f"sqlite:///{database}")).close()
    assert [p.name for p in folder.iterdir()] == ["powercontext.db"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("POWERCONTEXT_")}

    def run(wrap: Wrap, *args: str) -> subprocess.CompletedProcess[str]:
        command = wrap(_cli(*args, data_dir=home, database=database))
        # The timeout only bounds a daemon that wrongly starts: it would serve forever.
        return subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)

    with _read_only_folder(folder) as wrap:
        refused = run(wrap, "serve", "--port", str(free_port()))
        assert refused.returncode == 1, refused.stderr
        assert "Traceback" not in refused.stderr
        last_line = refused.stderr.strip().splitlines()[-1]
        assert last_line.startswith("powercontext: the database "), refused.stderr
        assert "check the permissions" in last_line
        assert last_line.endswith("(database_unavailable)")

        doctor = run(wrap, "doctor", "--json", "--url", f"http://127.0.0.1:{free_port()}")
        assert doctor.returncode == 1, doctor.stderr
        checks = {c["check"]: c for c in json.loads(doctor.stdout)["checks"]}
        assert not checks["database"]["ok"]
        assert "check the permissions" in checks["database"]["detail"]

    # Writable again: the same command starts.
    port = free_port()
    log = tmp_path / "serve-stderr.log"
    with open(log, "wb") as stderr:
        serve = _cli("serve", "--port", str(port), data_dir=home, database=database)
        process = subprocess.Popen(serve, env=env, stdout=subprocess.DEVNULL, stderr=stderr)
    try:
        wait_ready(f"http://127.0.0.1:{port}", process, log)
    finally:
        process.terminate()
        process.wait(timeout=30)
