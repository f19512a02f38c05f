"""Host-neutral hook machinery shared by the Codex and Claude Code plugins.

Skeleton: the contract models, transport, diagnostics and flows land with issue 5.
"""

__version__ = "0.1.0"
