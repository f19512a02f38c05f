"""PowerContext plugin for OpenAI Codex CLI (skeleton until issue 5)."""

__version__ = "0.1.0"
