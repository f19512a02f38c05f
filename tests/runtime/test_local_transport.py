"""The local transport and the pre-auth limits, in process: settings, defaults, socket binding,
long paths and the connection budget's eviction order (issue 15, items 5 and 6)."""

from __future__ import annotations

import os
import socket
import stat
import sys
from pathlib import Path

import pytest

from powercontext_runtime.client._common import Endpoint, default_token, default_url
from powercontext_runtime.local_socket import SocketAddress, max_address_bytes, parse_unix_url
from powercontext_runtime.serving.limits import (
    PEEK_LIMIT,
    ConnectionLimits,
    Unread,
    _Budget,
    connection_budget,
    peek_unread,
)
from powercontext_runtime.serving.listeners import (
    FD_RESERVE,
    ListenError,
    open_listeners,
    raise_file_limit,
)
from powercontext_runtime.settings import ConfigError, Settings, default_unix_socket

unix_only = pytest.mark.skipif(not hasattr(socket, "AF_UNIX"), reason="needs unix sockets")


@unix_only
def test_the_socket_defaults_to_the_data_dir_and_can_be_moved_or_turned_off(
    tmp_path: Path,
) -> None:
    base = {"POWERCONTEXT_HOME": str(tmp_path)}
    settings = Settings.load(env=base)
    assert settings.unix_socket == tmp_path / "powercontext.sock"
    assert settings.unix_url == f"unix:{tmp_path / 'powercontext.sock'}"
    assert Settings.load(env={**base, "POWERCONTEXT_SOCKET": "off"}).unix_socket is None
    assert Settings.load(env=base, unix_socket="OFF").unix_socket is None
    moved = Settings.load(env={**base, "POWERCONTEXT_SOCKET": str(tmp_path / "x.sock")})
    assert moved.unix_socket == tmp_path / "x.sock"
    assert Settings.load(env=base, unix_socket="rel.sock").unix_socket == Path.cwd() / "rel.sock"
    assert default_unix_socket(base) == tmp_path / "powercontext.sock"


def test_limit_settings_have_defaults_and_environment_names(tmp_path: Path) -> None:
    base = {"POWERCONTEXT_HOME": str(tmp_path)}
    settings = Settings.load(env=base)
    assert (settings.max_header_bytes, settings.header_timeout, settings.body_timeout) == (
        65536,
        10.0,
        30.0,
    )
    assert (settings.max_connections, settings.max_pending_connections) == (1024, 128)
    tuned = Settings.load(
        env={
            **base,
            "POWERCONTEXT_MAX_HEADER_BYTES": "8192",
            "POWERCONTEXT_HEADER_TIMEOUT": "2.5",
            "POWERCONTEXT_BODY_TIMEOUT": "5",
            "POWERCONTEXT_MAX_CONNECTIONS": "64",
            "POWERCONTEXT_MAX_PENDING_CONNECTIONS": "16",
        }
    )
    assert (tuned.max_header_bytes, tuned.header_timeout, tuned.body_timeout) == (8192, 2.5, 5.0)
    assert (tuned.max_connections, tuned.max_pending_connections) == (64, 16)


@pytest.mark.parametrize(
    "env",
    [
        {"POWERCONTEXT_SOCKET": ""},
        {"POWERCONTEXT_SOCKET": "  "},
        {"POWERCONTEXT_MAX_HEADER_BYTES": "100"},
        {"POWERCONTEXT_MAX_HEADER_BYTES": "64k"},
        {"POWERCONTEXT_HEADER_TIMEOUT": "0"},
        {"POWERCONTEXT_BODY_TIMEOUT": "-1"},
        {"POWERCONTEXT_MAX_CONNECTIONS": "8"},
        {"POWERCONTEXT_MAX_PENDING_CONNECTIONS": "0"},
    ],
)
def test_bad_transport_settings_are_errors(tmp_path: Path, env: dict[str, str]) -> None:
    with pytest.raises(ConfigError):
        Settings.load(env={"POWERCONTEXT_HOME": str(tmp_path), **env})


@unix_only
def test_clients_default_to_the_socket_and_never_to_tcp_unless_told(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in [k for k in os.environ if k.startswith("POWERCONTEXT_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("POWERCONTEXT_HOME", str(tmp_path))
    assert default_url() == f"unix:{tmp_path / 'powercontext.sock'}"
    other = tmp_path / "other"
    assert default_url(home=other) == f"unix:{other / 'powercontext.sock'}"
    (tmp_path / "other" / "auth").mkdir(parents=True)
    (tmp_path / "other" / "auth" / "token").write_text("pc_other\n")
    assert default_token(home=tmp_path / "other") == "pc_other"
    monkeypatch.setenv("POWERCONTEXT_SOCKET", "off")
    assert default_url() == "http://127.0.0.1:7411"
    monkeypatch.setenv("POWERCONTEXT_URL", "http://127.0.0.1:9999")
    assert default_url() == "http://127.0.0.1:9999"


def test_the_public_defaults_name_the_operator_or_the_agent_token(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``powercontext_runtime.client.default_token``: what examples/mcp_session.py uses."""
    from powercontext_runtime import client

    for name in [k for k in os.environ if k.startswith("POWERCONTEXT_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("POWERCONTEXT_HOME", str(tmp_path))
    assert client.default_token() is None and client.default_token(agent=True) is None
    (tmp_path / "auth").mkdir()
    (tmp_path / "auth" / "token").write_text("pc_operator\n")
    (tmp_path / "auth" / "agent-token").write_text("pc_agent\n")
    assert client.default_token() == "pc_operator"
    assert client.default_token(agent=True) == "pc_agent"
    monkeypatch.setenv("POWERCONTEXT_TOKEN", "pc_explicit")  # an explicit token always wins
    assert client.default_token(agent=True) == "pc_explicit"
    assert client.default_url is default_url


@unix_only
def test_a_unix_url_becomes_a_socket_transport_with_host_localhost(tmp_path: Path) -> None:
    endpoint = Endpoint(f"unix:{tmp_path / 'powercontext.sock'}")
    assert endpoint.base_url == "http://localhost"
    assert endpoint.uds == str(tmp_path / "powercontext.sock")
    endpoint.close()
    plain = Endpoint("http://127.0.0.1:7411")
    assert (plain.base_url, plain.uds) == ("http://127.0.0.1:7411", None)
    for bad in ("unix:relative.sock", "unix://host/path", "unix:"):
        with pytest.raises(ConfigError):
            Endpoint(bad)
    assert parse_unix_url("http://x") is None


@unix_only
def test_long_socket_paths_go_through_the_directory(tmp_path: Path) -> None:
    directory = tmp_path / ("d" * 80) / ("e" * 40)
    directory.mkdir(parents=True)
    path = directory / "powercontext.sock"
    assert len(os.fsencode(path)) > max_address_bytes()
    if not sys.platform.startswith("linux"):
        with pytest.raises(ValueError):
            SocketAddress(path)
        return
    with SocketAddress(path) as address, socket.socket(socket.AF_UNIX) as server:
        assert address.address.startswith("/proc/self/fd/")
        server.bind(address.address)
        server.listen(1)
        with socket.socket(socket.AF_UNIX) as client:
            client.connect(address.address)
    assert stat.S_ISSOCK(os.lstat(path).st_mode)
    missing = SocketAddress(tmp_path / ("m" * 120) / "powercontext.sock", missing_ok=True)
    assert missing.address == str(tmp_path / ("m" * 120) / "powercontext.sock")


@unix_only
def test_listeners_bind_a_private_socket_replace_stale_ones_and_refuse_live_ones(
    tmp_path: Path,
) -> None:
    path = tmp_path / "home" / "powercontext.sock"
    first = open_listeners("127.0.0.1", 0, path, 16)
    try:
        info = os.lstat(path)
        assert stat.S_ISSOCK(info.st_mode) and stat.S_IMODE(info.st_mode) == 0o600
        assert stat.S_IMODE(os.stat(path.parent).st_mode) == 0o700
        assert first.unix_url == f"unix:{path}"
        with pytest.raises(ListenError, match="already listening"):
            open_listeners("127.0.0.1", 0, path, 16)
        with pytest.raises(ListenError, match="already in use"):
            open_listeners("127.0.0.1", first.tcp.getsockname()[1], None, 16)
    finally:
        first.close()
    assert not path.exists()

    stale = socket.socket(socket.AF_UNIX)
    stale.bind(str(path))
    stale.close()  # the file stays: a crashed daemon's leftover
    second = open_listeners("127.0.0.1", 0, path, 16)
    second.close()

    path.write_text("not a socket")
    with pytest.raises(ListenError, match="not a socket"):
        open_listeners("127.0.0.1", 0, path, 16)
    assert path.read_text() == "not a socket"


def test_the_connection_budget_stays_inside_the_descriptor_limit() -> None:
    assert connection_budget(1024, 2, None) == 1024
    assert connection_budget(1024, 2, 256) == (256 - FD_RESERVE) // 2
    assert connection_budget(1024, 1, 1_000_000) == 1024
    assert connection_budget(1024, 2, 100) == 8  # never below a usable minimum
    soft = raise_file_limit()
    if soft is not None:
        import resource

        assert resource.getrlimit(resource.RLIMIT_NOFILE)[0] == soft


class _Connection:
    """Stands in for a protocol in the budget: eviction closes it (releases it)."""

    def __init__(self, budget: _Budget, name: str, *, unread: Unread = Unread.PART) -> None:
        self.budget, self.name, self.evicted = budget, name, ""
        self.pending = unread  # what waits in the kernel buffer, not read yet
        self.peeks = 0

    def unread(self) -> Unread:
        self.peeks += 1
        return self.pending

    def evict(self, code: str) -> None:
        self.evicted = code
        self.budget.release(self)  # type: ignore[arg-type]


def _limits(max_connections: int, max_pending: int) -> ConnectionLimits:
    return ConnectionLimits(
        max_head_bytes=65536,
        head_timeout=10,
        body_timeout=30,
        max_connections=max_connections,
        max_pending=max_pending,
    )


def test_at_capacity_the_oldest_waiting_connection_that_spoke_goes_first() -> None:
    budget = _Budget(_limits(max_connections=3, max_pending=100))
    silent, talker, busy = (_Connection(budget, n) for n in ("silent", "talker", "busy"))
    for n, connection in enumerate((silent, talker, busy)):
        assert budget.admit(connection, float(n))  # type: ignore[arg-type]
    budget.heard_from(talker)  # type: ignore[arg-type]
    budget.mark_busy(busy)  # type: ignore[arg-type]
    newcomer = _Connection(budget, "new")
    assert budget.admit(newcomer, 3.0)  # type: ignore[arg-type]
    assert talker.evicted == "evicted_at_capacity" and not silent.evicted
    another = _Connection(budget, "another")
    assert budget.admit(another, 4.0)  # type: ignore[arg-type]
    assert silent.evicted  # then the oldest silent one; the busy one never
    budget.mark_busy(newcomer)  # type: ignore[arg-type]
    budget.mark_busy(another)  # type: ignore[arg-type]
    refused = _Connection(budget, "refused")
    assert not budget.admit(refused, 5.0)  # type: ignore[arg-type]
    assert not busy.evicted and refused not in budget.open


def test_a_silent_connection_whose_request_already_arrived_is_not_closed() -> None:
    """A loaded loop can accept a burst before it reads a real client's request: the real
    one is then the oldest *silent* connection, but its bytes wait in the kernel (CI saw a
    real request closed so, under a flood of 300 slow connections)."""
    budget = _Budget(_limits(max_connections=3, max_pending=100))
    real = _Connection(budget, "real", unread=Unread.HEAD)
    flood = [_Connection(budget, f"slow{n}") for n in range(2)]
    for n, connection in enumerate((real, *flood)):
        assert budget.admit(connection, float(n))  # type: ignore[arg-type]
    assert budget.admit(_Connection(budget, "new"), 3.0)  # type: ignore[arg-type]
    assert not real.evicted and flood[0].evicted == "evicted_at_capacity"
    real.pending = Unread.PART  # read, and still silent: an attacker's empty connection now
    assert budget.admit(_Connection(budget, "next"), 4.0)  # type: ignore[arg-type]
    assert real.evicted == "evicted_at_capacity"


def test_a_trickler_goes_before_a_connection_that_has_sent_nothing_yet() -> None:
    """A real client descheduled between its connect and its send has nothing in the kernel;
    a trickler has part of a head there: the trickler goes, even when it is younger (CI saw
    the real one closed under a flood whose every socket had sent a byte)."""
    budget = _Budget(_limits(max_connections=3, max_pending=100))
    real = _Connection(budget, "real", unread=Unread.NOTHING)
    old, young = (_Connection(budget, n) for n in ("old-trickler", "young-trickler"))
    for n, connection in enumerate((real, old, young)):
        assert budget.admit(connection, float(n))  # type: ignore[arg-type]
    assert budget.admit(_Connection(budget, "new", unread=Unread.HEAD), 3.0)  # type: ignore[arg-type]
    assert old.evicted and not real.evicted
    assert budget.admit(_Connection(budget, "next", unread=Unread.HEAD), 4.0)  # type: ignore[arg-type]
    assert young.evicted and not real.evicted
    # Then nothing-sent goes before a whole head, whatever the age.
    assert budget.admit(_Connection(budget, "last"), 5.0)  # type: ignore[arg-type]
    assert real.evicted == "evicted_at_capacity"


def test_when_every_silent_connection_has_its_request_the_oldest_still_goes() -> None:
    """Protecting arrived requests never turns into refusing the newcomer: with nobody else
    to close, the oldest silent connection goes, as before."""
    budget = _Budget(_limits(max_connections=2, max_pending=100))
    first, second = (_Connection(budget, n, unread=Unread.HEAD) for n in ("first", "second"))
    assert budget.admit(first, 0.0) and budget.admit(second, 1.0)  # type: ignore[arg-type]
    assert budget.admit(_Connection(budget, "new"), 2.0)  # type: ignore[arg-type]
    assert first.evicted == "evicted_at_capacity" and not second.evicted


def test_a_peek_tells_a_whole_head_from_part_of_one_and_from_nothing() -> None:
    """The real system calls behind :class:`Unread`, on a connected pair of sockets; the peek
    consumes nothing and leaves the socket as it was."""
    ours, theirs = socket.socketpair()
    with ours, theirs:
        ours.setblocking(False)
        assert peek_unread(ours, 65536) is Unread.NOTHING
        theirs.sendall(b"GET /v1/capabilities HTTP/1.1\r\nHost: x\r\n")
        assert peek_unread(ours, 65536) is Unread.PART
        theirs.sendall(b"\r\n")
        assert peek_unread(ours, 65536) is Unread.HEAD
        assert peek_unread(ours, 65536) is Unread.HEAD  # still there: only peeked
        assert ours.recv(65536).endswith(b"\r\n\r\n") and not ours.getblocking()
        theirs.close()
        assert peek_unread(ours, 65536) is Unread.PART  # the peer is gone
    assert peek_unread(ours, 65536) is Unread.PART  # and so is our descriptor


def test_choosing_a_silent_connection_peeks_at_a_bounded_number() -> None:
    """A flood that sends nothing makes every silent connection look alike: one accept at
    capacity then peeks at no more than PEEK_LIMIT of them, and closes the oldest."""
    total = PEEK_LIMIT * 3
    budget = _Budget(_limits(max_connections=total, max_pending=10 * total))
    quiet = [_Connection(budget, f"q{n}", unread=Unread.NOTHING) for n in range(total)]
    for n, connection in enumerate(quiet):
        assert budget.admit(connection, float(n))  # type: ignore[arg-type]
    assert budget.admit(_Connection(budget, "new"), float(total))  # type: ignore[arg-type]
    assert quiet[0].evicted and sum(c.peeks for c in quiet) == PEEK_LIMIT
    assert not any(c.evicted for c in quiet[1:])


def test_too_many_waiting_connections_shed_the_old_ones_after_a_grace() -> None:
    budget = _Budget(_limits(max_connections=100, max_pending=2))
    first, second, third = (_Connection(budget, n) for n in "abc")
    assert budget.admit(first, 0.0)  # type: ignore[arg-type]
    assert budget.admit(second, 0.1)  # type: ignore[arg-type]
    assert budget.admit(third, 0.2)  # type: ignore[arg-type]
    assert not first.evicted  # a burst is accepted: nobody has waited a second yet
    fourth = _Connection(budget, "d")
    assert budget.admit(fourth, 5.0)  # type: ignore[arg-type]
    assert first.evicted == second.evicted == "evicted_waiting" and not third.evicted
