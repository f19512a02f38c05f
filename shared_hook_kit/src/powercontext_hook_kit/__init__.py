"""Host-neutral hook machinery shared by the Codex and Claude Code plugins (spec 07).

The plugins are thin adapters: they pick a :class:`HostAdapter` (usually
``StandardHostAdapter("codex")`` / ``StandardHostAdapter("claude-code")``) and call
:func:`run_hook_main` for ``hook user-prompt-submit`` / ``hook session-start`` / ``hook stop``
(the turn's task result, :mod:`.task_result`). Everything
else — settings, scope resolution, the strict pack contracts, the bootstrap receipt store, the
capture spool, the deadline-bounded loopback transport, content-free diagnostics and the process
contract (one JSON object or nothing, exit 0) — lives here once.

Start-up is the hook's main cost, so the hot path imports only the standard library and msgspec
(``tomllib``, ``json`` and, off Linux, ``platformdirs`` only when needed), and this package's
names are resolved lazily: importing one submodule never loads the others, so the hook entry
(:mod:`.entry`) can prepare the interpreter before msgspec is imported, and the install/doctor
machinery stays off the hook path. Numbers: ``bench/RESULTS.md`` (P1).
"""

__version__ = "0.1.0"

#: Public name → the submodule that defines it; loaded on first access (PEP 562).
_EXPORTS: dict[str, str] = {
    **dict.fromkeys(
        [
            "BOOTSTRAP_CONTEXT_SCHEMA",
            "PREPARED_CONTEXT_SCHEMA",
            "BootstrapContext",
            "InvalidResponse",
            "PreparedContext",
            "RecordedReceipt",
            "decode_bootstrap",
            "decode_prepared",
            "decode_receipt",
        ],
        "contract",
    ),
    **dict.fromkeys(["OUTCOMES", "Diagnostics", "outcome_for"], "diagnostics"),
    **dict.fromkeys(
        ["prompt_source_id", "record_task_result", "session_start", "user_prompt_submit"], "flows"
    ),
    **dict.fromkeys(
        [
            "SESSION_START",
            "STOP",
            "USER_PROMPT_SUBMIT",
            "HostAdapter",
            "HostInfo",
            "PromptEvent",
            "SessionStartEvent",
            "StandardHostAdapter",
            "StopEvent",
            "hook_output",
        ],
        "host",
    ),
    "ReceiptStore": "receipts",
    **dict.fromkeys(["TurnRef", "build_task_result", "parse_transcript"], "task_result"),
    **dict.fromkeys(["CaptureSpool", "SpoolStatus", "spool_status"], "spool"),
    **dict.fromkeys(["HOOK_NAMES", "run_hook", "run_hook_main"], "runner"),
    **dict.fromkeys(
        [
            "ScopeError",
            "bind",
            "explain_scope",
            "find_repository",
            "normalize_remote_url",
            "resolve_scope",
            "unbind",
        ],
        "scope",
    ),
    **dict.fromkeys(
        [
            "HookSettings",
            "SettingsError",
            "agent_token_file",
            "config_file_path",
            "plugin_data_dir",
            "runtime_data_dir",
            "runtime_socket_path",
        ],
        "settings",
    ),
    **dict.fromkeys(
        [
            "Deadline",
            "Endpoint",
            "HttpFailure",
            "HttpResponse",
            "UnixEndpoint",
            "parse_loopback_url",
            "parse_runtime_url",
            "post_json",
        ],
        "transport",
    ),
    **dict.fromkeys(
        [
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
        ],
        "install",
    ),
}


def __getattr__(name: str) -> object:
    module_name = _EXPORTS.get(name)
    if module_name is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f".{module_name}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])


__all__ = ["__version__", *sorted(_EXPORTS)]
