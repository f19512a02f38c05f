"""Fixtures for the Claude Code plugin: a throw-away user (``$HOME/.claude``) and a real runtime.

``powercontext-claude-code`` always runs as a subprocess of a :class:`ClaudeSandbox`, whose
environment is built from scratch, so the developer's own Claude settings, PowerContext token
or data dirs can never leak in or be touched. The fixtures ``sandbox``, ``live`` and
``runtime_daemon`` are shared with ``tests/codex`` (``tests/support/plugin_sandbox.py``);
``plugin_host`` makes them Claude Code's.
"""

from __future__ import annotations

import functools

import pytest

from tests.hosts.conftest import host_clis, proxy  # noqa: F401  (shared fixtures)
from tests.support.plugin_sandbox import (  # noqa: F401  (shared fixtures)
    ClaudeSandbox,
    live,
    plugin_handlers,
    runtime_daemon,
    sandbox,
)

MODULE = ClaudeSandbox.module
PLUGIN_ID = "powercontext@powercontext-local"
#: ``our_handlers(document, event="UserPromptSubmit")``: our plugin's handlers in a document.
our_handlers = functools.partial(plugin_handlers, MODULE)


@pytest.fixture(scope="package")
def plugin_host() -> str:
    return ClaudeSandbox.host
