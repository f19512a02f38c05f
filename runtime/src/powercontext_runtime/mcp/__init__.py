"""MCP front end: the curated tool allow-list served at ``/mcp`` (spec 03 § MCP).

``endpoint`` and ``tools`` load without the MCP SDK; ``server`` (the SDK's server and session
manager) is imported by the endpoint on the first MCP request.
"""

from .endpoint import McpEndpoint
from .tools import NEVER_EXPOSED, TOOLS, ToolSpec

__all__ = ["NEVER_EXPOSED", "TOOLS", "McpEndpoint", "ToolSpec"]
