"""Fixtures for the end-to-end suite: one real daemon shared by every test of a module.

Tests in a module stay independent by writing to their own scope ids (``helpers.new_scope``),
so sharing the process only saves start-up time; it never couples test outcomes.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.daemon import Daemon, start_daemon


@pytest.fixture(scope="module")
def module_daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    """A real ``powercontext serve`` process for the whole module (auth on, temp data dir)."""
    with start_daemon(tmp_path_factory.mktemp("e2e") / "daemon-home") as running:
        yield running
