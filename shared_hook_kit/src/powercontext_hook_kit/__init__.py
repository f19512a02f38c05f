"""Host-neutral hook machinery shared by the Codex and Claude Code plugins (spec 07).

The plugins are thin adapters: they pick a :class:`HostAdapter` (usually
``StandardHostAdapter("codex")`` / ``StandardHostAdapter("claude-code")``) and call
:func:`run_hook_main` for ``hook user-prompt-submit`` / ``hook session-start``. Everything
else — settings, scope resolution, the strict pack contracts, the bootstrap receipt store, the
deadline-bounded loopback transport, content-free diagnostics and the process contract (one JSON
object or nothing, exit 0) — lives here once.

Start-up is the hook's main cost, so the hot path imports only the standard library and msgspec;
``platformdirs``, ``tomllib``, ``subprocess`` and ``json`` are imported lazily when needed. The
install/doctor machinery of the plugins' command lines (``install``) is exported lazily too.
Measured on a loaded 2-core machine (details in ``shared_hook_kit/README.md``): the kit's own
imports add ≈ 6 ms CPU to the ``http.client + msgspec`` floor, a whole hook run (recall +
capture) ≈ 19 ms more than that floor, peak RSS 23 MiB.
"""

from .contract import (
    BOOTSTRAP_CONTEXT_SCHEMA,
    PREPARED_CONTEXT_SCHEMA,
    BootstrapContext,
    InvalidResponse,
    PreparedContext,
    RecordedReceipt,
    decode_bootstrap,
    decode_prepared,
    decode_receipt,
)
from .diagnostics import OUTCOMES, Diagnostics, outcome_for
from .flows import prompt_source_id, session_start, user_prompt_submit
from .host import (
    SESSION_START,
    USER_PROMPT_SUBMIT,
    HostAdapter,
    HostInfo,
    PromptEvent,
    SessionStartEvent,
    StandardHostAdapter,
    hook_output,
)
from .receipts import ReceiptStore
from .runner import HOOK_NAMES, run_hook, run_hook_main
from .scope import (
    ScopeError,
    bind,
    explain_scope,
    find_repository,
    normalize_remote_url,
    resolve_scope,
    unbind,
)
from .settings import HookSettings, SettingsError, config_file_path, plugin_data_dir
from .transport import Deadline, Endpoint, HttpFailure, HttpResponse, parse_loopback_url, post_json

__version__ = "0.1.0"

#: Names of :mod:`powercontext_hook_kit.install`, loaded on first use (not on the hook path).
_INSTALL_EXPORTS = frozenset(
    {
        "Change",
        "Check",
        "HookRegistration",
        "HostIntegration",
        "InstallContext",
        "InstallError",
        "Report",
        "hook_command",
        "hook_command_verb",
        "merge_hook_handlers",
        "remove_hook_handlers",
        "run_plugin_cli",
    }
)


def __getattr__(name: str) -> object:
    if name in _INSTALL_EXPORTS:
        from . import install

        return getattr(install, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "HOOK_NAMES",
    "OUTCOMES",
    "PREPARED_CONTEXT_SCHEMA",
    "USER_PROMPT_SUBMIT",
    "Deadline",
    "Diagnostics",
    "Endpoint",
    "HookSettings",
    "HostAdapter",
    "HostInfo",
    "HttpFailure",
    "HttpResponse",
    "InvalidResponse",
    "PreparedContext",
    "PromptEvent",
    "ScopeError",
    "SettingsError",
    "StandardHostAdapter",
    "__version__",
    "bind",
    "config_file_path",
    "decode_prepared",
    "explain_scope",
    "find_repository",
    "hook_output",
    "normalize_remote_url",
    "outcome_for",
    "parse_loopback_url",
    "plugin_data_dir",
    "post_json",
    "prompt_source_id",
    "resolve_scope",
    "run_hook",
    "run_hook_main",
    "unbind",
    "user_prompt_submit",
    "BOOTSTRAP_CONTEXT_SCHEMA",
    "SESSION_START",
    "BootstrapContext",
    "ReceiptStore",
    "RecordedReceipt",
    "SessionStartEvent",
    "decode_bootstrap",
    "decode_receipt",
    "session_start",
    *sorted(_INSTALL_EXPORTS),
]
