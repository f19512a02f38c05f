"""``powercontext-codex`` (``python -m powercontext_codex``): install, doctor, bind, hook…

``hook <name> [--bootstrap]`` is what Codex runs before every prompt, so it takes a short
path that imports only the kit's hook runner (not argparse, subprocess or the install
machinery) and always exits 0.

``mcp`` is the stdio MCP server Codex starts with every session (the kit's bridge to the
runtime's ``/mcp``); it takes the same short path.
"""

from __future__ import annotations

import sys

HOST = "codex"


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) >= 2 and args[0] == "hook":
        from powercontext_hook_kit.entry import run_hook_process

        return run_hook_process(HOST, args[1], args[2:])
    if args == ["mcp"]:
        from powercontext_hook_kit.entry import run_mcp_bridge

        return run_mcp_bridge(HOST)
    from powercontext_hook_kit.install import run_plugin_cli

    from .integration import CodexIntegration

    return run_plugin_cli(CodexIntegration(), args)


if __name__ == "__main__":
    sys.exit(main())
