"""``powercontext-claude-code`` (``python -m powercontext_claude_code``): install, doctor, hook…

``hook <name> [--bootstrap]`` is what Claude Code runs before every prompt, so it takes a
short path that imports only the kit's hook entry (not argparse, subprocess or the install
machinery) and always exits 0.

``mcp`` is the stdio MCP server Claude Code starts with every session (the kit's bridge to the
runtime's ``/mcp``); it takes the same short path.
"""

from __future__ import annotations

import sys

HOST = "claude-code"


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) >= 2 and args[0] == "hook":
        from powercontext_hook_kit.entry import run_hook_process

        return run_hook_process(HOST, args[1], args[2:])
    if args == ["mcp"]:
        from powercontext_hook_kit.entry import run_mcp_bridge

        return run_mcp_bridge(HOST)
    from powercontext_hook_kit.install import run_plugin_cli

    from .integration import ClaudeCodeIntegration

    return run_plugin_cli(ClaudeCodeIntegration(), args)


if __name__ == "__main__":
    sys.exit(main())
