"""PowerContext plugin for OpenAI Codex CLI.

The hook itself is the shared kit's (``powercontext_hook_kit``) with the standard adapter: Codex
sends ``turn_id`` and accepts exactly the ``hookSpecificOutput`` envelope, which is what the kit
prints. This package adds the Codex-specific install, uninstall and doctor steps
(:mod:`powercontext_codex.integration`) and ships the plugin folder (``plugin/``).

Kept import-free: ``python -m powercontext_codex hook …`` runs before every prompt.
"""

__version__ = "0.1.0"
