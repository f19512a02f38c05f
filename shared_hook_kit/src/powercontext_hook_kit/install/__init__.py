"""Install, uninstall, doctor and bind: the host-neutral half of the plugins' command lines.

Both plugins do the same things around their hooks — render the packaged plugin folder with an
absolute hook command, register it with the host or merge it into the host's user config, find
and remove *only* their own entries again, check a machine end to end — and differ only in how
their host is driven. Everything that does not depend on the host lives here once; a plugin is a
:class:`HostIntegration` subclass that fills in the host-specific steps.

Rules every step follows, because these files belong to the user:

* A file is only ever replaced atomically (temporary file in the same folder, fsync,
  ``os.replace``); before the first change one copy of the previous version is kept next
  to it, and ``uninstall`` puts the host back exactly as it was (:mod:`.ledger`).
* A file that cannot be parsed is never rewritten: the step fails and says which file.
* Our entries are recognised by their command (``<python> -I -m <module> hook <name>``), never
  by position, so other hooks and settings are preserved byte-for-byte in meaning and order.
* Running a step twice changes nothing the second time, and every change is reported.
* TOML is never edited as text here: Codex's ``config.toml`` is changed only through Codex's own
  writer (its app-server), so comments and formatting the user wrote survive.

One module per concern; each imports only those above it in this list (and the kit's hook
modules), never one below:

* :mod:`.report` — :class:`Change`, :class:`Report`, :class:`InstallError`.
* :mod:`.user_files` — atomic writes, strict JSON.
* :mod:`.ledger` — what install found before changing anything; uninstall restores it.
* :mod:`.hook_commands` — the absolute hook command and the marker that recognises ours.
* :mod:`.hook_documents` — merging our handlers into ``{"hooks": …}`` documents and out again.
* :mod:`.plugin_folder` — rendering the packaged plugin template; the managed folder.
* :mod:`.host_cli` — running ``codex`` / ``claude``.
* :mod:`.doctor` — the host-neutral doctor checks.
* :mod:`.integration` — :class:`HostIntegration` and the install/uninstall/doctor flows.
* :mod:`.cli` — the shared command line, :func:`run_plugin_cli`.

Not on the hook's hot path: nothing here is imported by ``runner`` or ``entry`` (the kit's
package exports these names lazily, and the plugins' ``__main__`` answers ``hook`` before
importing this package), so the prompt-time hook keeps its lean start-up.
"""

from __future__ import annotations

from .cli import run_plugin_cli
from .doctor import (
    DOCTOR_PROMPT,
    Check,
    HookRegistration,
    bootstrap_check,
    dry_run_check,
    log_tail,
    runtime_checks,
    scope_check,
)
from .hook_commands import (
    HOOK_EVENTS,
    HOOK_TIMEOUT_SECONDS,
    hook_command,
    hook_command_verb,
    hook_events_text,
    mcp_command,
)
from .hook_documents import iter_hook_handlers, merge_hook_handlers, remove_hook_handlers
from .host_cli import CliResult, find_executable, run_cli
from .integration import HostIntegration, InstallContext
from .ledger import BACKUP_SUFFIX, InstallLedger
from .plugin_folder import (
    MANAGED_MARKER,
    MEMORY_SKILL_MARKDOWN,
    is_managed_tree,
    remove_managed_tree,
    render_plugin_files,
    same_tree,
    sync_managed_tree,
)
from .report import Change, InstallError, Report
from .user_files import atomic_write, dump_json, load_json_object

__all__ = [
    "BACKUP_SUFFIX",
    "DOCTOR_PROMPT",
    "HOOK_EVENTS",
    "HOOK_TIMEOUT_SECONDS",
    "MANAGED_MARKER",
    "MEMORY_SKILL_MARKDOWN",
    "Change",
    "Check",
    "CliResult",
    "HookRegistration",
    "HostIntegration",
    "InstallContext",
    "InstallError",
    "InstallLedger",
    "Report",
    "atomic_write",
    "bootstrap_check",
    "dry_run_check",
    "dump_json",
    "find_executable",
    "hook_command",
    "hook_command_verb",
    "hook_events_text",
    "is_managed_tree",
    "iter_hook_handlers",
    "load_json_object",
    "log_tail",
    "mcp_command",
    "merge_hook_handlers",
    "remove_hook_handlers",
    "remove_managed_tree",
    "render_plugin_files",
    "run_cli",
    "run_plugin_cli",
    "runtime_checks",
    "same_tree",
    "scope_check",
    "sync_managed_tree",
]
