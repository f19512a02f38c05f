"""What differs between hosts, as a small protocol — and the shared default both hosts fit.

Codex CLI and Claude Code send nearly the same hook events (spec 07, "Host facts"): only the
per-turn id of ``UserPromptSubmit`` is named differently (``turn_id`` vs ``prompt_id``),
``SessionStart`` carries ``session_id``, ``cwd`` and ``source`` on both, and both accept the same
``hookSpecificOutput`` envelope. A plugin therefore usually needs nothing more than
``StandardHostAdapter("codex")``; the :class:`HostAdapter` protocol exists so a host that
diverges later can be adapted without touching the flows.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

import msgspec

__all__ = [
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
]

USER_PROMPT_SUBMIT = "UserPromptSubmit"
SESSION_START = "SessionStart"
#: End of a turn in both hosts (docs/decisions/real-host-facts.md § 11): the task-result hook.
STOP = "Stop"

_HOST_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789-")
_MAX_ID_CHARS = 1024


class HostInfo(msgspec.Struct, frozen=True):
    """The integration name (``codex``, ``claude-code``): settings table, source ids, metadata."""

    name: str

    def __post_init__(self) -> None:
        name = self.name
        if not (0 < len(name) <= 64 and name[0] != "-" and set(name) <= _HOST_NAME_CHARS):
            raise ValueError("a host name is 1..64 of [a-z0-9-], starting with a letter or digit")


class PromptEvent(msgspec.Struct, frozen=True):
    """The host-neutral fields of a ``UserPromptSubmit`` event; ``None`` when absent or unusable.

    ``cwd`` is only ever the directory the *host* reported, and only if absolute.
    """

    prompt: str | None
    cwd: str | None
    session_id: str | None = None
    turn_id: str | None = None


class SessionStartEvent(msgspec.Struct, frozen=True):
    """The host-neutral fields of a ``SessionStart`` event; ``None`` when absent or unusable.

    ``source`` is the host's lifecycle word (``startup``, ``resume``, ``clear``, ``compact``,
    ``fork``…) passed through as given; the flow decides which ones it can bootstrap.
    """

    session_id: str | None
    cwd: str | None
    source: str | None


class StopEvent(msgspec.Struct, frozen=True):
    """The host-neutral fields of a ``Stop`` (end of turn) event; ``None`` when absent.

    ``turn_id`` is the host's id of the turn that ended (Codex ``turn_id``, Claude Code
    ``prompt_id``); ``transcript_path`` the host's own transcript file, only if absolute.
    """

    session_id: str | None
    cwd: str | None
    transcript_path: str | None
    turn_id: str | None = None
    #: The turn's final assistant text as the host reports it: the transcript is complete once
    #: it holds this (Claude Code may still be writing the turn's last lines when Stop runs).
    last_assistant_message: str | None = None


@runtime_checkable
class HostAdapter(Protocol):
    """How one host's hook events are read and its output is written."""

    @property
    def name(self) -> str:
        """The integration name, e.g. ``codex`` or ``claude-code``."""
        ...

    def hook_event_name(self, payload: Mapping[str, Any]) -> str | None:
        """The event the host says it is running (``UserPromptSubmit``…), if it says."""
        ...

    def prompt_event(self, payload: Mapping[str, Any]) -> PromptEvent:
        """Extract the prompt, working directory, session and turn ids from the event."""
        ...

    def session_start_event(self, payload: Mapping[str, Any]) -> SessionStartEvent:
        """Extract the session id, working directory and lifecycle source of a SessionStart."""
        ...

    def stop_event(self, payload: Mapping[str, Any]) -> StopEvent:
        """Extract the session, turn, working directory and transcript of a Stop event."""
        ...

    def render_output(self, hook_event_name: str, additional_context: str) -> bytes:
        """Exactly one compact JSON object that injects ``additional_context``."""
        ...


def _text(value: object, limit: int | None = None) -> str | None:
    """A usable string from untrusted JSON: non-empty, bounded, valid Unicode."""
    if not isinstance(value, str) or not value:
        return None
    if limit is not None and len(value) > limit:
        return None
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates from a lenient JSON decoder
        value = value.encode("utf-8", "replace").decode("utf-8")
    return value


def _cwd(payload: Mapping[str, Any]) -> str | None:
    """The host's working directory, only if absolute (never resolved against our own cwd)."""
    cwd = _text(payload.get("cwd"), 4096)
    return cwd if cwd is not None and os.path.isabs(cwd) and "\x00" not in cwd else None


_OUTPUT_ENCODER = msgspec.json.Encoder()


def hook_output(hook_event_name: str, additional_context: str) -> bytes:
    """``{"hookSpecificOutput":{"hookEventName":…,"additionalContext":…}}``, compact, UTF-8.

    Exactly these keys: Codex rejects output with unknown or missing keys.
    """
    return _OUTPUT_ENCODER.encode(
        {
            "hookSpecificOutput": {
                "hookEventName": hook_event_name,
                "additionalContext": additional_context,
            }
        }
    )


class StandardHostAdapter:
    """The field names and envelope shared by Codex CLI and Claude Code.

    ``turn_id_fields`` are tried in order for the per-turn id (Codex ``turn_id``, Claude Code
    ``prompt_id``); it only feeds the idempotent prompt-capture id.
    """

    def __init__(self, name: str, *, turn_id_fields: tuple[str, ...] = ("turn_id", "prompt_id")):
        HostInfo(name)  # validates the name
        self._name = name
        self._turn_id_fields = turn_id_fields

    @property
    def name(self) -> str:
        return self._name

    def hook_event_name(self, payload: Mapping[str, Any]) -> str | None:
        return _text(payload.get("hook_event_name"), 128)

    def prompt_event(self, payload: Mapping[str, Any]) -> PromptEvent:
        turn_id = None
        for field in self._turn_id_fields:
            turn_id = _text(payload.get(field), _MAX_ID_CHARS)
            if turn_id is not None:
                break
        return PromptEvent(
            prompt=_text(payload.get("prompt")),
            cwd=_cwd(payload),
            session_id=_text(payload.get("session_id"), _MAX_ID_CHARS),
            turn_id=turn_id,
        )

    def session_start_event(self, payload: Mapping[str, Any]) -> SessionStartEvent:
        return SessionStartEvent(
            session_id=_text(payload.get("session_id"), _MAX_ID_CHARS),
            cwd=_cwd(payload),
            source=_text(payload.get("source"), 64),
        )

    def stop_event(self, payload: Mapping[str, Any]) -> StopEvent:
        turn_id = None
        for field in self._turn_id_fields:
            turn_id = _text(payload.get(field), _MAX_ID_CHARS)
            if turn_id is not None:
                break
        transcript = _text(payload.get("transcript_path"), 4096)
        if transcript is not None and (not os.path.isabs(transcript) or "\x00" in transcript):
            transcript = None
        return StopEvent(
            session_id=_text(payload.get("session_id"), _MAX_ID_CHARS),
            cwd=_cwd(payload),
            transcript_path=transcript,
            turn_id=turn_id,
            last_assistant_message=_text(payload.get("last_assistant_message"), 65_536),
        )

    def render_output(self, hook_event_name: str, additional_context: str) -> bytes:
        return hook_output(hook_event_name, additional_context)

    def __repr__(self) -> str:
        return f"StandardHostAdapter({self._name!r})"
