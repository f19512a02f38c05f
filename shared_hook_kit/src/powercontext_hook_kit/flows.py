"""Host-neutral hook flows: what a hook does, written once for every host.

``user_prompt_submit``: resolve the scope → recall a prepared pack for the prompt → capture the
prompt as a source → hand back the validated pack. Recall comes first so a prompt can never
recall itself, and capture is best-effort: its failure never changes what is injected. Every
failure path returns ``None`` (inject nothing) and records one diagnostic line.
"""

from __future__ import annotations

import hashlib
import time

import msgspec

from .contract import InvalidResponse, decode_prepared
from .diagnostics import Diagnostics, Event, Outcome, outcome_for
from .host import USER_PROMPT_SUBMIT, HostInfo, PromptEvent
from .scope import ScopeError, resolve_scope
from .settings import HookSettings
from .transport import Deadline, HttpOutcome, HttpResponse, post_json

__all__ = [
    "CAPTURE_PATH",
    "FLUSH_PATH",
    "PREPARE_PATH",
    "QUERY_MAX_CHARS",
    "SOURCE_CONTENT_MAX_CHARS",
    "prompt_source_id",
    "user_prompt_submit",
]

PREPARE_PATH = "/v1/context/prepare"
CAPTURE_PATH = "/v1/sources/content"
FLUSH_PATH = "/v1/memory/flush"
QUERY_MAX_CHARS = 8192
SOURCE_CONTENT_MAX_CHARS = 200_000
#: Stay under the runtime's default 1 MiB request limit even for escape-heavy prompts.
_CAPTURE_BODY_MAX_BYTES = 1_000_000
#: After these, the runtime is unreachable or refuses us: a capture would fail the same way and
#: only spend more of the user's time.
_NO_CAPTURE_AFTER: frozenset[Outcome] = frozenset(
    {"server_unavailable", "authentication_failed", "forbidden", "version_mismatch"}
)
_SOURCE_ID_DOMAIN = b"powercontext.user-prompt-source.v1"


class _Recall(msgspec.Struct, frozen=True):
    content: str | None
    outcome: Outcome


def _elapsed_ms(start: float) -> int:
    return int((time.monotonic() - start) * 1000)


def _frame(value: str | None) -> bytes:
    """One length-prefixed field, so no choice of values can collide with another."""
    if value is None:
        return b"N"
    data = value.encode("utf-8", "surrogatepass")
    return b"S" + str(len(data)).encode("ascii") + b":" + data


def prompt_source_id(
    host: str, scope_id: str, session_id: str | None, turn_id: str | None, prompt: str
) -> str:
    """``<host>-user-prompt:<sha256>`` over scope, session, turn and the full prompt.

    Deterministic, so a host retrying the same turn re-captures idempotently instead of
    duplicating; the prompt itself stays out of the id.
    """
    digest = hashlib.sha256(_SOURCE_ID_DOMAIN)
    for field in (scope_id, session_id, turn_id, prompt):
        digest.update(_frame(field))
    return f"{host}-user-prompt:{digest.hexdigest()}"


def _recall(
    scope_id: str,
    query: str,
    settings: HookSettings,
    diagnostics: Diagnostics,
    deadline: Deadline,
    bootstrap_receipt_id: str | None,
) -> _Recall:
    start = time.monotonic()
    request: dict[str, object] = {
        "scope_id": scope_id,
        "query": query,
        "max_bytes": settings.max_bytes,
    }
    if bootstrap_receipt_id is not None:
        request["bootstrap_receipt_id"] = bootstrap_receipt_id
    result = post_json(
        settings.endpoint,
        PREPARE_PATH,
        msgspec.json.encode(request),
        token=settings.token,
        deadline=deadline,
    )
    if not (isinstance(result, HttpResponse) and result.status == 200):
        return _fail("context_prepare", result, diagnostics, start)
    try:
        prepared = decode_prepared(result.body, settings.max_bytes)
    except InvalidResponse:
        diagnostics.record(
            "context_prepare", "invalid_response", http_status=200, duration_ms=_elapsed_ms(start)
        )
        return _Recall(None, "invalid_response")
    outcome: Outcome = "injected" if prepared.status == "ready" else "empty"
    diagnostics.record(
        "context_prepare",
        outcome,
        http_status=200,
        context_status=prepared.status,
        content_bytes=prepared.content_bytes,
        duration_ms=_elapsed_ms(start),
    )
    return _Recall(prepared.content, outcome)


def _fail(event: Event, result: HttpOutcome, diagnostics: Diagnostics, start: float) -> _Recall:
    outcome = outcome_for(result)
    diagnostics.record(event, outcome, http_status=result.status, duration_ms=_elapsed_ms(start))
    return _Recall(None, outcome)


def _capture_body(host: str, scope_id: str, source_id: str, prompt: str) -> bytes:
    """The capture request: the prompt (bounded) and content-free metadata.

    Prompts over the source limit, or whose JSON would exceed the runtime's request limit, are
    cut and flagged ``truncated`` so the extractor knows it saw a prefix.
    """
    content = prompt[:SOURCE_CONTENT_MAX_CHARS]
    truncated = len(content) < len(prompt)
    while True:
        metadata: dict[str, object] = {"host": host, "hook": USER_PROMPT_SUBMIT}
        if truncated:
            metadata["truncated"] = True
        body = msgspec.json.encode(
            {"scope_id": scope_id, "source_id": source_id, "content": content, "metadata": metadata}
        )
        if len(body) <= _CAPTURE_BODY_MAX_BYTES:
            return body
        # Escape-heavy text (control characters encode as \u00XX): shrink proportionally.
        keep = int(len(content) * _CAPTURE_BODY_MAX_BYTES / len(body) * 0.95)
        content = content[: max(keep, 1)]
        truncated = True


def _capture(
    event: PromptEvent,
    host: HostInfo,
    scope_id: str,
    prompt: str,
    settings: HookSettings,
    diagnostics: Diagnostics,
    deadline: Deadline,
) -> None:
    start = time.monotonic()
    source_id = prompt_source_id(host.name, scope_id, event.session_id, event.turn_id, prompt)
    body = _capture_body(host.name, scope_id, source_id, prompt)
    result = post_json(
        settings.endpoint, CAPTURE_PATH, body, token=settings.token, deadline=deadline
    )
    if isinstance(result, HttpResponse) and result.status == 202:
        diagnostics.record(
            "source_capture", "captured", http_status=202, duration_ms=_elapsed_ms(start)
        )
        if settings.flush_after_capture:
            _flush(scope_id, settings, diagnostics, deadline)
        return
    _fail("source_capture", result, diagnostics, start)


def _flush(
    scope_id: str, settings: HookSettings, diagnostics: Diagnostics, deadline: Deadline
) -> None:
    """Opt-in: let the runtime turn the captured prompt into Memory right away.

    Runs within what is left of the hook's deadline; a slow extractor only costs a diagnostic
    line (the capture is already journaled, so a later flush still processes it).
    """
    start = time.monotonic()
    body = msgspec.json.encode({"scope_id": scope_id})
    result = post_json(settings.endpoint, FLUSH_PATH, body, token=settings.token, deadline=deadline)
    if isinstance(result, HttpResponse) and result.status == 200:
        diagnostics.record(
            "memory_flush", "flushed", http_status=200, duration_ms=_elapsed_ms(start)
        )
        return
    _fail("memory_flush", result, diagnostics, start)


def user_prompt_submit(
    event: PromptEvent,
    host: HostInfo,
    settings: HookSettings,
    diagnostics: Diagnostics,
    deadline: Deadline,
    *,
    bootstrap_receipt_id: str | None = None,
) -> str | None:
    """The pack to inject for this prompt, or ``None``; never raises for runtime behaviour.

    ``bootstrap_receipt_id`` is the pending local bootstrap receipt (spec 05, recall
    de-duplication); the SessionStart flow will supply it, ``None`` until then.
    """
    prompt = event.prompt
    if prompt is None or not prompt.strip():
        diagnostics.record("context_prepare", "skipped")
        return None
    try:
        scope_id = resolve_scope(event.cwd, settings.scope_id)
    except ScopeError:
        scope_id = None
    if scope_id is None:
        diagnostics.record("context_prepare", "skipped")
        return None
    query = prompt.strip()[:QUERY_MAX_CHARS]
    recall = _recall(scope_id, query, settings, diagnostics, deadline, bootstrap_receipt_id)
    if not settings.capture_prompts:
        diagnostics.record("source_capture", "disabled")
    elif recall.outcome in _NO_CAPTURE_AFTER:
        diagnostics.record("source_capture", "skipped", quiet=True)
    else:
        try:
            _capture(event, host, scope_id, prompt, settings, diagnostics, deadline)
        except Exception:  # capture is best-effort: even a bug here must not cost the pack
            diagnostics.record("source_capture", "invalid_response")
    return recall.content
