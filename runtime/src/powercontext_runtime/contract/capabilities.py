"""What a token may do (spec 03 § Authentication; which operation needs which: services/auth.py).

Kept apart from the services so the CLI can name them without loading the database stack.
"""

from __future__ import annotations

from typing import Literal

__all__ = ["AGENT_CAPABILITIES", "ALL_CAPABILITIES", "Capability"]

Capability = Literal["read", "write", "propose", "review", "admin"]

#: Every capability, in the order they are listed and documented.
ALL_CAPABILITIES: tuple[Capability, ...] = ("read", "write", "propose", "review", "admin")
#: What an agent's token (the hook's and the MCP tools') holds: it may read and write Memory
#: and propose Experience and Skills, but a person reviews (the Review Inbox's whole point).
AGENT_CAPABILITIES: tuple[Capability, ...] = ("read", "write", "propose")
