"""Fixtures for tests that drive the real Claude Code and Codex CLIs offline.

The CLIs come from npm at pinned versions (see ``tests/support/hosts.py``). Where npm or its
registry is unreachable and no cached install exists, these tests skip — except under CI
(``CI`` set), where they must run and an unavailable npm is an error.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.hosts import (
    AnthropicStub,
    BlackholeProxy,
    HostCLIs,
    OpenAIResponsesStub,
    ensure_host_clis,
    hosts_unavailable_reason,
)

#: Wall-clock numbers collected by the tests, printed in the terminal summary.
TIMINGS: dict[str, list[float]] = {}


def record_timing(name: str, seconds: float) -> None:
    TIMINGS.setdefault(name, []).append(seconds)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "real_hosts: runs the real Claude Code / Codex CLIs (npm) against local stubs"
    )


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.real_hosts)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not TIMINGS:
        return
    terminalreporter.section("real host timings (s)")
    for name, values in sorted(TIMINGS.items()):
        shown = ", ".join(f"{v:.2f}" for v in values)
        terminalreporter.write_line(f"{name}: {shown}")


@pytest.fixture(scope="session")
def host_clis() -> HostCLIs:
    reason = hosts_unavailable_reason()
    if reason is not None:
        if os.environ.get("CI"):
            pytest.fail(f"real-host tests must run in CI: {reason}")
        pytest.skip(reason)
    started = time.monotonic()
    clis = ensure_host_clis()
    if clis.install_seconds is not None:
        record_timing("npm install (cold)", clis.install_seconds)
    else:
        record_timing("ensure_host_clis (warm)", time.monotonic() - started)
    return clis


@pytest.fixture
def proxy() -> Iterator[BlackholeProxy]:
    with BlackholeProxy() as running:
        yield running


@pytest.fixture
def anthropic_stub() -> Iterator[AnthropicStub]:
    stub = AnthropicStub()
    with stub:
        yield stub


@pytest.fixture
def openai_stub() -> Iterator[OpenAIResponsesStub]:
    stub = OpenAIResponsesStub()
    with stub:
        yield stub
