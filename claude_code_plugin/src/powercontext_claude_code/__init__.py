"""PowerContext plugin for Claude Code.

The hook itself is the shared kit's (``powercontext_hook_kit``) with the standard adapter: Claude
Code sends ``prompt_id`` and accepts the ``hookSpecificOutput`` envelope the kit prints. This
package adds the Claude Code-specific install, uninstall and doctor steps
(:mod:`powercontext_claude_code.integration`) and ships the plugin folder (``plugin/``).

Kept import-free: ``python -m powercontext_claude_code hook …`` runs before every prompt.
"""

__version__ = "0.1.0"
