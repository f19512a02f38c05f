"""``python -m powercontext_hook_kit hook <host> <hook>`` / ``mcp <host>``: run a hook, or the
MCP bridge, by hand or from a test.

``<hook>`` is ``user-prompt-submit``, ``session-start`` or ``stop`` (:data:`~.runner.HOOK_NAMES`).

Uses :class:`StandardHostAdapter`, which fits both Codex CLI and Claude Code. Like every hook
entry point it exits 0 even on a usage error: a misregistered hook must never block a prompt.
"""

from __future__ import annotations

import sys

from .entry import prepare_interpreter

prepare_interpreter()

from .host import HostInfo, StandardHostAdapter  # noqa: E402  (after the interpreter is prepared)
from .runner import HOOK_NAMES, run_hook_main  # noqa: E402

_USAGE = (
    f"usage: python -m powercontext_hook_kit hook <host> <{'|'.join(sorted(HOOK_NAMES))}>\n"
    "       python -m powercontext_hook_kit mcp <host>"
)


def main(argv: list[str]) -> int:
    if len(argv) == 2 and argv[0] == "mcp":
        try:
            HostInfo(argv[1])
        except ValueError:
            print(_USAGE, file=sys.stderr)
            return 2
        from .mcp_bridge import main as run_bridge

        return run_bridge(argv[1])
    if len(argv) != 3 or argv[0] != "hook" or argv[2] not in HOOK_NAMES:
        print(_USAGE, file=sys.stderr)
        return 0
    try:
        adapter = StandardHostAdapter(argv[1])
    except ValueError:
        print(_USAGE, file=sys.stderr)
        return 0
    return run_hook_main(adapter, argv[2])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
