"""A data dir another local user made, or could replace, is refused (issue 30 #4).

With ``POWERCONTEXT_HOME`` in a folder another user created (0777, an empty 0666
``powercontext.db`` in it), the daemon used to warn and serve: that user then read every
scope's memory and inserted a token row that authenticated. Now ``powercontext serve`` — and
every command that opens the data dir — stops with one sentence and exit 1 before anything is
read or written, and ``doctor`` names the cause (docs/security.md § Files).

The other user is uid 65534 (nobody): these tests need root to hand files to it (CI runs as
root), and run the other user's part as that uid (``setpriv``) where it matters.
"""

from __future__ import annotations

import os
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.daemon import free_port, start_daemon

NOBODY = 65534


def _require_root() -> None:
    if os.geteuid() == 0:
        return
    if os.environ.get("CI"):
        pytest.fail("CI runs as root: these tests must not be skipped there")
    pytest.skip("needs root to give files to another user (uid 65534)")


@pytest.fixture
def shared_tmp() -> Iterator[Path]:
    """A folder in /tmp that is, like /tmp, sticky and world-writable (any user may create in
    it; only an entry's owner may rename it) — pytest's 0700 tmp_path is out of another user's
    reach."""
    _require_root()
    folder = Path(tempfile.mkdtemp(prefix="pc-owner-"))
    os.chmod(folder, 0o1777)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _as_nobody(script: str) -> None:
    """Run ``script`` in a shell as uid/gid 65534 with no supplementary groups, umask 0."""
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.fail("setpriv (util-linux) is needed to act as another user")
    subprocess.run(
        [setpriv, f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups",
         "sh", "-c", f"umask 0 && {script}"],
        check=True, cwd="/", timeout=60,
    )  # fmt: skip


def _listing(folder: Path) -> dict[str, tuple[int, int, int]]:
    """Every name under ``folder`` with its owner, mode and size: what "nothing was written"
    compares."""
    result = {}
    for path in sorted(folder.rglob("*")):
        info = path.lstat()
        name = str(path.relative_to(folder))
        result[name] = (info.st_uid, stat.S_IMODE(info.st_mode), info.st_size)
    return result


def _cli(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("POWERCONTEXT_")}
    return subprocess.run(
        [sys.executable, "-m", "powercontext_runtime.cli.main", *args, "--data-dir", str(home)],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip


def _assert_refused(done: subprocess.CompletedProcess[str], *fragments: str) -> None:
    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr  # one sentence, no traceback, no log line
    assert lines[0].startswith("powercontext: ") and lines[0].endswith("(data_dir_unsafe)")
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    assert done.stdout == ""


def test_serve_refuses_a_data_dir_another_user_created(shared_tmp: Path) -> None:
    home = shared_tmp / "home"
    _as_nobody(f"mkdir -m 0777 {home} && : > {home}/powercontext.db && chmod 0666 {home}/*")
    before = _listing(shared_tmp)
    assert before["home/powercontext.db"] == (NOBODY, 0o666, 0)
    serve = _cli("serve", "--port", str(free_port()), home=home)
    _assert_refused(serve, f"the data dir {home} belongs to another user (uid {NOBODY})")
    token = _cli("token", "create", "--name", "t", "--scope", "*", home=home)
    _assert_refused(token, f"uid {NOBODY}")
    doctor = _cli("doctor", "--token", "pc_x_y", home=home)
    assert doctor.returncode == 1, doctor.stderr
    assert doctor.stdout.splitlines() == [
        f"FAIL data_dir: the data dir {home} belongs to another user (uid {NOBODY}), who could "
        "read every scope's memory and add tokens: nothing was read or written; move it away, "
        "or choose a data dir of your own (POWERCONTEXT_HOME, --data-dir)"
    ]  # and nothing else: no token was sent to a socket there
    assert _listing(shared_tmp) == before  # no socket, no token file, no tightening


@pytest.mark.parametrize("name", ["powercontext.db", "auth/token", "powercontext.sock"])
def test_a_file_of_another_user_in_my_data_dir_is_refused(shared_tmp: Path, name: str) -> None:
    """Even as root, who could chmod it: its owner may hold it open or change it back."""
    home = shared_tmp / "home"
    (home / "auth").mkdir(parents=True, mode=0o700)
    target = home / name
    if name.endswith(".sock"):  # a stale socket another user bound
        with socket.socket(socket.AF_UNIX) as listener:
            listener.bind(str(target))
    else:
        target.touch(mode=0o600)
    os.chown(target, NOBODY, NOBODY)
    before = _listing(shared_tmp)
    serve = _cli("serve", "--port", str(free_port()), home=home)
    _assert_refused(serve, f"{target} belongs to another user (uid {NOBODY})")
    assert _listing(shared_tmp) == before


def test_a_folder_above_the_data_dir_others_may_write_is_refused(shared_tmp: Path) -> None:
    """A non-sticky 0777 parent lets anyone rename the data dir away and put theirs (and a
    socket the hooks would talk to) in its place; a sticky one (/tmp) does not."""
    parent = shared_tmp / "open"
    parent.mkdir()
    os.chmod(parent, 0o777)
    home = parent / "home"
    serve = _cli("serve", "--port", str(free_port()), home=home)
    _assert_refused(serve, f"{parent}, a folder above the data dir", "writable by other users")
    assert not home.exists()
    os.chmod(parent, 0o1777)  # sticky: only an entry's owner may rename or remove it
    with start_daemon(home) as daemon, daemon.client() as client:
        assert client.get("/v1/capabilities").status_code == 200
