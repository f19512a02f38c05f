"""The data dir is private whatever the umask (issue 15 #4): 0700 folders, 0600 files, and a
data dir an older release left world-readable is tightened at start-up, with a log line."""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from powercontext_runtime.composition import Runtime
from powercontext_runtime.contract.memory import RememberMemoryRequest
from powercontext_runtime.files import write_private_file
from powercontext_runtime.settings import Settings


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture(params=[0o022, 0o002, 0o000])
def loose_umask(request: pytest.FixtureRequest) -> Iterator[int]:
    previous = os.umask(request.param)
    try:
        yield request.param
    finally:
        os.umask(previous)


def _open_and_write(home: Path) -> None:
    rt = Runtime.open(Settings.load(env={}, home=home))
    try:
        rt.ensure_local_token()
        rt.memory.remember(RememberMemoryRequest(scope_id="s", kind="fact", text="private"))
        database = home / "powercontext.db"
        companions = [database, *(database.with_name(database.name + s) for s in ("-wal", "-shm"))]
        assert all(path.exists() for path in companions)  # WAL mode, connection open
        assert [mode(path) for path in companions] == [0o600] * 3
    finally:
        rt.close()


def test_a_new_data_dir_is_private_under_any_umask(tmp_path: Path, loose_umask: int) -> None:
    home = tmp_path / "nested" / "home"
    _open_and_write(home)
    assert mode(home) == 0o700 and mode(home.parent) == 0o700  # a missing parent too
    assert mode(home / "auth") == 0o700
    assert {p.name: mode(p) for p in (home / "auth").iterdir()} == {
        "token": 0o600,
        "agent-token": 0o600,
    }
    assert not list((home / "auth").glob("*.tmp"))


def test_an_existing_loose_data_dir_is_tightened_and_logged(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    home = tmp_path / "home"
    _open_and_write(home)
    os.chmod(home, 0o755)
    os.chmod(home / "auth", 0o755)
    os.chmod(home / "auth" / "token", 0o644)
    os.chmod(home / "powercontext.db", 0o644)
    with caplog.at_level(logging.WARNING, logger="powercontext.files"):
        rt = Runtime.open(Settings.load(env={}, home=home))
        rt.close()
    assert mode(home) == 0o700 and mode(home / "auth") == 0o700
    assert mode(home / "auth" / "token") == 0o600 and mode(home / "powercontext.db") == 0o600
    [record] = [r for r in caplog.records if r.getMessage() == "data_dir_permissions_tightened"]
    assert record.count == 4  # type: ignore[attr-defined]
    assert sorted(record.files) == [".", "auth", "auth/token", "powercontext.db"]  # type: ignore[attr-defined]


def test_a_private_dir_is_left_alone(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    home = tmp_path / "home"
    _open_and_write(home)
    with caplog.at_level(logging.WARNING, logger="powercontext.files"):
        Runtime.open(Settings.load(env={}, home=home)).close()
    assert not [r for r in caplog.records if r.getMessage() == "data_dir_permissions_tightened"]


def test_a_database_outside_the_data_dir_keeps_its_folder_mode(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o755)
    os.chmod(shared, 0o755)
    url = f"sqlite:///{shared / 'team.db'}"
    Runtime.open(Settings.load(env={}, home=tmp_path / "home", database_url=url)).close()
    assert mode(shared) == 0o755  # not ours to change
    assert mode(shared / "team.db") == 0o600


def test_a_private_file_replaces_atomically_and_never_widens(tmp_path: Path) -> None:
    target = tmp_path / "auth" / "token"
    write_private_file(target, "one\n")
    os.chmod(target, 0o644)  # an old, loose file is replaced by a private one
    write_private_file(target, "two\n")
    assert target.read_text() == "two\n" and mode(target) == 0o600
    assert sorted(p.name for p in target.parent.iterdir()) == ["token"]


def test_tightening_only_removes_bits(tmp_path: Path) -> None:
    """A database its owner made read-only stays read-only (0444 → 0400, never 0600): the
    start-up write check, not the permission fix, is what reports it."""
    from powercontext_runtime.files import secure_data_dir

    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    database = home / "powercontext.db"
    database.touch()
    os.chmod(database, 0o444)
    assert secure_data_dir(home, database) == ["powercontext.db"]
    assert mode(database) == 0o400
