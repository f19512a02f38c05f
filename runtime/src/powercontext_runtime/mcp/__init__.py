"""MCP front end: the curated tool allow-list served at ``/mcp`` (spec 03 § MCP)."""

from .server import McpEndpoint, build_server
from .tools import NEVER_EXPOSED, TOOLS, ToolSpec

__all__ = ["NEVER_EXPOSED", "TOOLS", "McpEndpoint", "ToolSpec", "build_server"]
