"""PowerContext plugin for Claude Code (skeleton until issue 5)."""

__version__ = "0.1.0"
