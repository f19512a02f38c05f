"""Fixtures for the end-to-end suite: one real daemon shared by every test of a module, and
the throw-away users of the real-host tests.

Tests in a module stay independent by writing to their own scope ids (``helpers.new_scope``),
so sharing the process only saves start-up time; it never couples test outcomes.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.hosts.conftest import host_clis, proxy  # noqa: F401  (shared fixtures)
from tests.support.daemon import Daemon, start_daemon
from tests.support.hosts import BlackholeProxy, HostCLIs
from tests.support.plugin_sandbox import PluginUserFactory, real_host_user


@pytest.fixture(scope="module")
def module_daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    """A real ``powercontext serve`` process for the whole module (auth on, temp data dir)."""
    with start_daemon(tmp_path_factory.mktemp("e2e") / "daemon-home") as running:
        yield running


@pytest.fixture
def plugin_user(
    tmp_path: Path,
    host_clis: HostCLIs,  # noqa: F811
    proxy: BlackholeProxy,  # noqa: F811
) -> PluginUserFactory:
    """``plugin_user(host, runtime)``: a throw-away user of ``host``'s plugin with the real host
    CLI (from npm; skipped where npm is unreachable, outside CI), pointed at ``runtime``."""
    return functools.partial(real_host_user, root=tmp_path, clis=host_clis, proxy=proxy)
