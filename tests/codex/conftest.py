"""Fixtures for the Codex plugin: a throw-away user (HOME, CODEX_HOME) and a real runtime.

``powercontext-codex`` always runs as a subprocess of a :class:`CodexSandbox`, whose environment
is built from scratch, so the developer's own Codex config, PowerContext token or data dirs can
never leak in or be touched. The fixtures ``sandbox``, ``live`` and ``runtime_daemon`` are
shared with ``tests/claude_code`` (``tests/support/plugin_sandbox.py``); ``plugin_host`` makes
them Codex's.
"""

from __future__ import annotations

import functools

import pytest

from tests.hosts.conftest import host_clis, proxy  # noqa: F401  (shared fixtures)
from tests.support.plugin_sandbox import (  # noqa: F401  (shared fixtures)
    CodexSandbox,
    live,
    plugin_handlers,
    runtime_daemon,
    sandbox,
)

MODULE = CodexSandbox.module
#: ``our_handlers(document, event="UserPromptSubmit")``: our plugin's handlers in a document.
our_handlers = functools.partial(plugin_handlers, MODULE)


@pytest.fixture(scope="package")
def plugin_host() -> str:
    return CodexSandbox.host
