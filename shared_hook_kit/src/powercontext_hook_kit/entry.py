"""The hook process's entry point: prepare the interpreter, then run one hook (or the bridge).

Every prompt pays for this process's start-up, so it is trimmed here, once, for every plugin:

* ``typing_extensions`` is hidden before msgspec is imported. msgspec only uses it to understand
  annotations spelled with it, which the kit's wire contracts never use; importing it (and the
  ``inspect``/``ast``/``dis`` it pulls in) costs ~10 ms per prompt wherever it is installed,
  e.g. next to pydantic. The hook process imports nothing else that could want it.

Only the hook path and the MCP bridge (which the host starts with every session) come through
here: the install/doctor command lines run in ordinary interpreters.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

__all__ = ["prepare_interpreter", "run_hook_process", "run_mcp_bridge"]


def prepare_interpreter() -> None:
    """Trim what the hook's imports will load; call before anything imports msgspec."""
    if "msgspec" not in sys.modules:
        sys.modules.setdefault("typing_extensions", None)  # type: ignore[arg-type]


def run_hook_process(host: str, hook: str, options: Sequence[str] = ()) -> int:
    """Run ``hook`` (``user-prompt-submit`` / ``session-start`` / ``stop``) for a known ``host``;
    ``options`` are what ``install`` wrote after the hook name (``--bootstrap``).

    Always returns 0, like every hook entry: an unknown hook name is recorded as skipped.
    """
    prepare_interpreter()
    from .host import StandardHostAdapter
    from .runner import run_hook_main

    return run_hook_main(StandardHostAdapter(host), hook, options)


def run_mcp_bridge(host: str) -> int:
    """Serve the stdio MCP bridge (:mod:`.mcp_bridge`) for ``host`` until end of input."""
    prepare_interpreter()
    from .mcp_bridge import main

    return main(host)
