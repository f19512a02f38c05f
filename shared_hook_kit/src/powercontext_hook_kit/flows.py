"""Host-neutral hook flows: what a hook does, written once for every host.

``user_prompt_submit``: resolve the scope → recall a prepared pack for the prompt (passing the
session's delivered bootstrap receipt once, so recall does not repeat it) → hand the validated
pack to the caller's ``inject`` (the runner prints it) → deliver what the capture spool holds →
capture the prompt as a source. Recall comes first so a prompt can never recall itself, and
capture is best-effort: its failure never changes what is injected. A prompt the runtime could
not take because it was down is kept in the capture spool (:mod:`.spool`) and delivered, oldest
first, by the next hook run whose runtime answers — before that run's own prompt, so the
journal keeps the order in which prompts were written.

``session_start`` (spec 05 § Host side): resolve the scope → ask for the bootstrap pack (always,
even when the user's switch is off, so a pending receipt of a replayed event is finalised) →
validate strictly → claim the receipt ``pending → injected`` → only then hand back the pack and
remember the receipt for the next prompt.

Every failure path returns ``None`` (inject nothing) and records one diagnostic line.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import msgspec

from .contract import (
    BootstrapContext,
    InvalidResponse,
    decode_bootstrap,
    decode_next_handoff,
    decode_prepared,
    decode_receipt,
)
from .diagnostics import Diagnostics, Event, Outcome, outcome_for
from .digest import sha256, text_sha256
from .host import USER_PROMPT_SUBMIT, HostInfo, PromptEvent, SessionStartEvent, StopEvent
from .receipts import ReceiptStore
from .scope import ScopeError, resolve_scope
from .settings import HookSettings
from .spool import CaptureSpool, Verdict
from .transport import Deadline, HttpFailure, HttpOutcome, HttpResponse, post_json

__all__ = [
    "BOOTSTRAP_LIFECYCLES",
    "BOOTSTRAP_PATH",
    "BOOTSTRAP_PROFILE",
    "CAPTURE_PATH",
    "EVENT_ID_MAX_CHARS",
    "FLUSH_PATH",
    "HANDOFF_NEXT_PATH",
    "PREPARE_PATH",
    "QUERY_MAX_CHARS",
    "RECEIPTS_PATH",
    "SOURCE_CONTENT_MAX_CHARS",
    "TASK_RESULT_PATH",
    "bootstrap_event_id",
    "prompt_source_id",
    "record_task_result",
    "session_start",
    "user_prompt_submit",
]

PREPARE_PATH = "/v1/context/prepare"
BOOTSTRAP_PATH = "/v1/context/bootstrap"
RECEIPTS_PATH = "/v1/context/bootstrap/receipts"
#: Which Handoff revision the user queued for this scope's next session (docs/bootstrap.md).
HANDOFF_NEXT_PATH = "/v1/handoff/next"
BOOTSTRAP_PROFILE = "powercontext.scope-bootstrap.v1"
#: The lifecycle words the runtime accepts; a host ``source`` outside them is not bootstrapped.
BOOTSTRAP_LIFECYCLES: frozenset[str] = frozenset(
    {"startup", "resume", "clear", "compact", "restore", "fork"}
)
EVENT_ID_MAX_CHARS = 256
CAPTURE_PATH = "/v1/sources/content"
FLUSH_PATH = "/v1/memory/flush"
#: ``record_task_result`` (issue #31): 201 new, 200 the same task id and payload again.
TASK_RESULT_PATH = "/v1/task-results/record"
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
#: Delivering the spool may take at most this much of one hook run (and never more than its
#: deadline leaves): a long backlog drains over a few prompts instead of stalling one.
SPOOL_DELIVERY_SECONDS = 0.5
#: Below this much time left a delivery request could hardly finish: leave it for the next run.
_DELIVERY_MIN_SECONDS = 0.05
#: Answers to a spooled capture that mean it can never be accepted: ``409 source_conflict`` (a
#: different payload holds its source id), 413/422 (refused as it is), 403 (this token may not
#: write its scope — resending with the same token cannot help).
_NEVER_ACCEPTED: frozenset[int] = frozenset({403, 409, 413, 422})
#: "Not now": the runtime is not serving (503), or it refuses the token (401) or does not know
#: the endpoint (404, an old runtime) — a configuration to fix, not a reason to lose prompts.
_DEFER_STATUSES: frozenset[int] = frozenset({401, 404, 503})


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
    digest = sha256(_SOURCE_ID_DOMAIN)
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


class _SpoolRun:
    """What this hook run did with the capture spool, for its one ``capture_spool`` line."""

    __slots__ = (
        "delivered",
        "dropped",
        "event",
        "failure",
        "pending",
        "spooled",
        "started",
        "touched",
    )

    def __init__(self, event: Event = "capture_spool") -> None:
        self.event: Event = event
        self.started = time.monotonic()
        self.touched = False  # anything to report at all
        self.spooled = 0
        self.delivered = 0
        self.dropped = 0
        self.pending = 0
        self.failure: HttpOutcome | None = None  # the answer that stopped delivery

    def record(self, diagnostics: Diagnostics) -> None:
        """One line at most: ``dropped`` (always written: prompts were lost), else the failure
        that stopped delivery, else ``delivered`` / ``spooled`` (debug only)."""
        if not self.touched:
            return
        outcome: Outcome
        status = None
        if self.dropped:
            outcome = "dropped"
        elif self.failure is not None:
            outcome = outcome_for(self.failure)
            status = self.failure.status
        elif self.delivered:
            outcome = "delivered"
        elif self.spooled:
            outcome = "spooled"
        else:
            return
        diagnostics.record(
            self.event,
            outcome,
            http_status=status,
            duration_ms=_elapsed_ms(self.started),
            spooled=self.spooled,
            delivered=self.delivered,
            dropped=self.dropped,
            pending=self.pending,
        )


def _spool_prompt(spool: CaptureSpool, body: bytes, run: _SpoolRun) -> None:
    report = spool.append(body)
    run.touched = True
    run.spooled += int(report.spooled)
    run.dropped += report.dropped
    run.pending = report.pending


def _delivery_verdict(result: HttpOutcome, accepted: frozenset[int] = frozenset({202})) -> Verdict:
    if isinstance(result, HttpResponse):
        if result.status in accepted:
            return "delivered"
        if result.status in _NEVER_ACCEPTED:
            return "rejected"
        if result.status in _DEFER_STATUSES:
            return "deferred"
        return "failed"  # a 500 or another status this endpoint does not give
    if isinstance(result, HttpFailure) and outcome_for(result) == "server_unavailable":
        return "deferred"  # refused, missing socket, timeout: nothing (or nothing known) arrived
    return "failed"  # a malformed, oversized or redirected answer


def _deliver_spool(
    spool: CaptureSpool,
    settings: HookSettings,
    deadline: Deadline,
    run: _SpoolRun,
    *,
    path: str = CAPTURE_PATH,
    accepted: frozenset[int] = frozenset({202}),
) -> bool:
    """Send the spooled requests to ``path``, oldest first, within
    :data:`SPOOL_DELIVERY_SECONDS` and the deadline; whether entries remain (or another process
    is delivering them). ``accepted`` are the statuses that acknowledge one."""
    window = Deadline(min(deadline.at, time.monotonic() + SPOOL_DELIVERY_SECONDS))

    def send(body: bytes) -> Verdict:
        result = post_json(settings.endpoint, path, body, token=settings.token, deadline=window)
        verdict = _delivery_verdict(result, accepted)
        if verdict in ("deferred", "failed"):
            run.failure = result
        return verdict

    report = spool.deliver(send, lambda: window.remaining() > _DELIVERY_MIN_SECONDS)
    if report.delivered or report.dropped or report.busy or report.stopped or report.pending:
        run.touched = True
    run.delivered += report.delivered
    run.dropped += report.dropped
    run.pending = report.pending
    return report.busy or report.pending > 0


def _capture(
    event: PromptEvent,
    host: HostInfo,
    scope_id: str,
    prompt: str,
    settings: HookSettings,
    diagnostics: Diagnostics,
    deadline: Deadline,
    spool: CaptureSpool | None,
    run: _SpoolRun,
) -> None:
    """Deliver the spool, then capture this prompt — or spool it behind a backlog that is
    still waiting (order is kept), or when the runtime turned out to be unavailable."""
    start = time.monotonic()
    source_id = prompt_source_id(host.name, scope_id, event.session_id, event.turn_id, prompt)
    body = _capture_body(host.name, scope_id, source_id, prompt)
    can_spool = spool is not None and settings.capture_spool
    backlog = _deliver_spool(spool, settings, deadline, run) if spool is not None else False
    if backlog and spool is not None and can_spool:
        _spool_prompt(spool, body, run)
        diagnostics.record("source_capture", "skipped", quiet=True)  # the spool line says why
        if run.delivered and settings.flush_after_capture:
            _flush(scope_id, settings, diagnostics, deadline)
        return
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
    if spool is not None and can_spool and outcome_for(result) == "server_unavailable":
        _spool_prompt(spool, body, run)


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
    receipts: ReceiptStore | None = None,
    spool: CaptureSpool | None = None,
    inject: Callable[[str], None] | None = None,
) -> str | None:
    """The pack to inject for this prompt, or ``None``; never raises for runtime behaviour.

    ``bootstrap_receipt_id`` de-duplicates recall against a delivered bootstrap pack (spec 05).
    When the caller does not pass one, the session's receipt is taken from ``receipts`` and,
    once the prepare call was made — whatever its outcome — consumed there, so only the first
    prompt after a SessionStart sends it (later prompts must not hide entries again).

    ``inject`` is called with the pack as soon as recall has validated it — before the spool is
    delivered and the prompt captured, so neither can delay what the user gets (the runner
    prints it there). With ``spool``, a prompt the runtime could not take because it is
    unavailable (recall or capture: refused, missing socket, timeout, 5xx) is kept there, and
    when recall got an answer the spool is delivered first (see :func:`_capture`). Nothing is
    spooled when capture is off, after 401/403/404 (resending would not help), or when the
    ``capture_spool`` setting is off.
    """
    prompt = event.prompt
    if prompt is None or not prompt.strip():
        diagnostics.record("context_prepare", "skipped")
        return None
    try:
        scope_id = resolve_scope(event.cwd, settings.scope_id, deadline=deadline)
    except ScopeError:
        scope_id = None
    if scope_id is None:
        diagnostics.record("context_prepare", "skipped")
        return None
    query = prompt.strip()[:QUERY_MAX_CHARS]
    local_receipt = None
    if bootstrap_receipt_id is None and receipts is not None:
        local_receipt = bootstrap_receipt_id = receipts.get(event.session_id)
    try:
        recall = _recall(scope_id, query, settings, diagnostics, deadline, bootstrap_receipt_id)
    finally:
        if local_receipt is not None and receipts is not None:
            receipts.consume(event.session_id, local_receipt)
    try:
        if inject is not None and recall.content is not None:
            inject(recall.content)
    finally:  # even a bug while printing the pack must not cost the prompt its capture
        _capture_turn(
            event, host, scope_id, prompt, settings, diagnostics, deadline, spool, recall.outcome
        )
    return recall.content


def _capture_turn(
    event: PromptEvent,
    host: HostInfo,
    scope_id: str,
    prompt: str,
    settings: HookSettings,
    diagnostics: Diagnostics,
    deadline: Deadline,
    spool: CaptureSpool | None,
    recall_outcome: Outcome,
) -> None:
    if not settings.capture_prompts:
        diagnostics.record("source_capture", "disabled")  # and the spool is neither fed nor sent
        return
    run = _SpoolRun()
    try:
        if recall_outcome in _NO_CAPTURE_AFTER:
            # Down: keep the prompt for later (no second request to a runtime that just failed).
            # Refused (401/403/404): the capture would be refused the same way; nothing is kept.
            spooling = recall_outcome == "server_unavailable" and settings.capture_spool
            if spooling and spool is not None:
                source_id = prompt_source_id(
                    host.name, scope_id, event.session_id, event.turn_id, prompt
                )
                _spool_prompt(spool, _capture_body(host.name, scope_id, source_id, prompt), run)
            diagnostics.record("source_capture", "skipped", quiet=True)
        else:
            _capture(event, host, scope_id, prompt, settings, diagnostics, deadline, spool, run)
    except Exception:  # capture is best-effort: even a bug here must not cost the pack
        diagnostics.record("source_capture", "invalid_response")
    run.record(diagnostics)


# --- SessionStart ------------------------------------------------------------------------------


def bootstrap_event_id(source: str, session_id: str | None) -> str | None:
    """The stable per-event identity the runtime de-duplicates bootstrap requests by, or ``None``.

    Only ``startup`` has one: a fresh session id names exactly one start. ``resume``, ``clear``,
    ``compact``, ``fork`` and ``restore`` reuse (or inherit) a session id that already named an
    earlier event, so sending it would make the runtime treat a *new* lifecycle event as a
    replay and answer ``skipped``. An id longer than the runtime accepts is replaced by its
    sha256, which stays just as stable.
    """
    if source != "startup" or session_id is None:
        return None
    if len(session_id) <= EVENT_ID_MAX_CHARS:
        return session_id
    return f"sha256:{text_sha256(session_id)}"


def _forget(receipts: ReceiptStore | None, session_id: str | None) -> None:
    if receipts is not None:
        receipts.clear(session_id)


def session_start(
    event: SessionStartEvent,
    host: HostInfo,
    settings: HookSettings,
    diagnostics: Diagnostics,
    deadline: Deadline,
    *,
    receipts: ReceiptStore | None = None,
    handoff_ref: dict[str, object] | None = None,
) -> str | None:
    """The bootstrap pack to inject at SessionStart, or ``None``; never raises for runtime
    behaviour.

    The runtime is asked even when ``settings.bootstrap`` is off (``enabled:false``): that is
    how a pending receipt of a replayed event gets finalised as ``skipped``. A ``ready`` pack is
    returned only after its receipt was claimed ``pending → injected``; then its id is stored in
    ``receipts`` for the next prompt. A replayed, already injected event keeps the local receipt
    only if it is the one already stored; every other outcome clears it, so a stale receipt
    never de-duplicates a later prompt. ``handoff_ref`` names one Handoff revision
    (``{"family":"handoff","artifact_id":"handoff","revision":N}``); without one, and with
    bootstrap on, the revision the user queued for the next session is asked for and named
    (the runtime never picks a Handoff by itself; claiming the pack consumes the queue).
    """
    session_id = event.session_id
    source = event.source
    if source is None or source not in BOOTSTRAP_LIFECYCLES:
        diagnostics.record("context_bootstrap", "skipped")
        _forget(receipts, session_id)
        return None
    try:
        scope_id = resolve_scope(event.cwd, settings.scope_id, deadline=deadline)
    except ScopeError:
        scope_id = None
    if scope_id is None:
        diagnostics.record("context_bootstrap", "skipped")
        _forget(receipts, session_id)
        return None
    start = time.monotonic()
    if handoff_ref is None and settings.bootstrap:
        lookup = _queued_handoff(scope_id, settings, diagnostics, deadline)
        if lookup.failure is not None:
            _fail("context_bootstrap", lookup.failure, diagnostics, start)
            _forget(receipts, session_id)
            return None
        handoff_ref = lookup.ref
    request = {
        "scope_id": scope_id,
        "enabled": settings.bootstrap,
        "profile": BOOTSTRAP_PROFILE,
        "lifecycle": source,
        "integration": host.name,
        "event_id": bootstrap_event_id(source, session_id),
        "max_bytes": settings.bootstrap_max_bytes,
        "handoff_ref": handoff_ref,
    }
    result = post_json(
        settings.endpoint,
        BOOTSTRAP_PATH,
        msgspec.json.encode(request),
        token=settings.token,
        deadline=deadline,
    )
    if not (isinstance(result, HttpResponse) and result.status == 200):
        _fail("context_bootstrap", result, diagnostics, start)
        _forget(receipts, session_id)
        return None
    try:
        pack = decode_bootstrap(result.body, settings.bootstrap_max_bytes)
        if pack.status == "ready" and not settings.bootstrap:
            raise InvalidResponse("a ready pack although bootstrap was not enabled")
    except InvalidResponse:
        diagnostics.record(
            "context_bootstrap", "invalid_response", http_status=200, duration_ms=_elapsed_ms(start)
        )
        _forget(receipts, session_id)
        return None
    if pack.status != "ready":
        _not_ready(pack, session_id, settings, diagnostics, receipts, start)
        return None
    return _claim_and_deliver(
        pack, scope_id, session_id, settings, diagnostics, deadline, receipts, start
    )


class _HandoffLookup(msgspec.Struct, frozen=True):
    ref: dict[str, object] | None = None
    #: Set when the runtime cannot serve this session at all: bootstrap would fail the same way.
    failure: HttpOutcome | None = None


#: Lookup outcomes that mean the bootstrap request itself would fail too.
_RUNTIME_REFUSED: frozenset[Outcome] = frozenset(
    {"server_unavailable", "authentication_failed", "forbidden"}
)


def _queued_handoff(
    scope_id: str, settings: HookSettings, diagnostics: Diagnostics, deadline: Deadline
) -> _HandoffLookup:
    """The Handoff the user queued for this scope's next session, as a ``handoff_ref``.

    A runtime that is down or refuses the token ends the SessionStart here (one
    ``context_bootstrap`` line, as if bootstrap itself had failed); an older runtime (404) or
    an invalid answer only costs the Handoff: bootstrap goes on without one.
    """
    start = time.monotonic()
    result = post_json(
        settings.endpoint,
        HANDOFF_NEXT_PATH,
        msgspec.json.encode({"scope_id": scope_id}),
        token=settings.token,
        deadline=deadline,
    )
    if not (isinstance(result, HttpResponse) and result.status == 200):
        if outcome_for(result) in _RUNTIME_REFUSED:
            return _HandoffLookup(failure=result)
        diagnostics.record(
            "handoff_lookup",
            outcome_for(result),
            http_status=result.status,
            duration_ms=_elapsed_ms(start),
        )
        return _HandoffLookup()
    try:
        revision = decode_next_handoff(result.body, scope_id)
    except InvalidResponse:
        diagnostics.record(
            "handoff_lookup", "invalid_response", http_status=200, duration_ms=_elapsed_ms(start)
        )
        return _HandoffLookup()
    if revision is None:
        return _HandoffLookup()
    return _HandoffLookup({"family": "handoff", "artifact_id": "handoff", "revision": revision})


def _not_ready(
    pack: BootstrapContext,
    session_id: str | None,
    settings: HookSettings,
    diagnostics: Diagnostics,
    receipts: ReceiptStore | None,
    start: float,
) -> None:
    """``empty``/``skipped``: inject nothing; keep the local receipt only for a replayed,
    already delivered event whose receipt is the one this session already holds."""
    outcome: Outcome = (
        "disabled" if not settings.bootstrap else ("empty" if pack.status == "empty" else "skipped")
    )
    diagnostics.record(
        "context_bootstrap",
        outcome,
        http_status=200,
        context_status=pack.status,
        content_bytes=0,
        duration_ms=_elapsed_ms(start),
    )
    if receipts is None:
        return
    receipt = pack.receipt
    replayed_delivery = pack.status == "skipped" and receipt.state == "injected"
    if replayed_delivery and receipts.get(session_id) == receipt.receipt_id:
        return
    receipts.clear(session_id)


def _claim_and_deliver(
    pack: BootstrapContext,
    scope_id: str,
    session_id: str | None,
    settings: HookSettings,
    diagnostics: Diagnostics,
    deadline: Deadline,
    receipts: ReceiptStore | None,
    start: float,
) -> str | None:
    """Claim ``pending → injected``; the pack goes out only if the runtime confirms the claim.

    A claim the runtime refuses (409: another process delivered it, or it was finalised) or
    cannot confirm means someone else may have delivered this pack, or nobody should: inject
    nothing. There is no retry — a second claim is always refused by design.
    """
    content = pack.content
    receipt_id = pack.receipt.receipt_id
    assert content is not None  # guaranteed by decode_bootstrap for a ready pack
    claim_start = time.monotonic()
    body = msgspec.json.encode(
        {"scope_id": scope_id, "receipt_id": receipt_id, "state": "injected"}
    )
    result = post_json(
        settings.endpoint, RECEIPTS_PATH, body, token=settings.token, deadline=deadline
    )
    outcome: Outcome
    if isinstance(result, HttpResponse) and result.status == 200:
        try:
            recorded = decode_receipt(result.body)
            if recorded.receipt_id != receipt_id or recorded.state != "injected":
                raise InvalidResponse("the claim answer names another receipt or state")
        except InvalidResponse:
            outcome = "invalid_response"
        else:
            outcome = "injected"
    elif isinstance(result, HttpResponse) and result.status == 409:
        outcome = "receipt_rejected"
    else:
        outcome = outcome_for(result)
    diagnostics.record(
        "bootstrap_receipt",
        outcome,
        http_status=result.status,
        duration_ms=_elapsed_ms(claim_start),
    )
    # The bootstrap call itself worked; its line only repeats the claim's verdict, so it is
    # written quietly (debug) unless the pack goes out.
    diagnostics.record(
        "context_bootstrap",
        outcome,
        http_status=200,
        context_status="ready",
        content_bytes=pack.content_bytes,
        duration_ms=_elapsed_ms(start),
        quiet=outcome != "injected",
    )
    if outcome != "injected":
        _forget(receipts, session_id)
        return None
    if receipts is not None:
        receipts.put(session_id, receipt_id)  # failure only costs one de-duplication
    return content


# --- Stop: the turn's task result ----------------------------------------------------------------

#: ``record_task_result`` acknowledges with 201 (new) or 200 (the same id and payload again).
_TASK_RESULT_ACCEPTED: frozenset[int] = frozenset({200, 201})


def record_task_result(
    event: StopEvent,
    host: HostInfo,
    settings: HookSettings,
    diagnostics: Diagnostics,
    deadline: Deadline,
    *,
    spool: CaptureSpool | None = None,
) -> bool:
    """Record the bounded task result of the turn that just ended; whether the runtime took it.

    Resolve the scope → build the body from the host's transcript (:mod:`.task_result`: one
    bounded read, nothing beyond the contract's bounded fields) → deliver what the task-result
    ``spool`` holds → post this one, or keep it in the spool behind a backlog or while the
    runtime is unavailable (refused, missing socket, timeout, 5xx). The body is idempotent by
    its derived ``task_id``, so a resend is harmless. Off with ``record_task_results``; nothing
    is spooled with ``capture_spool`` off. One ``task_result`` line at most (plus the spool's);
    never raises for runtime behaviour or for what the transcript holds.
    """
    if not settings.record_task_results:
        diagnostics.record("task_result", "disabled")
        return False
    if event.transcript_path is None or event.cwd is None:
        diagnostics.record("task_result", "skipped")
        return False
    try:
        scope_id = resolve_scope(event.cwd, settings.scope_id, deadline=deadline)
    except ScopeError:
        scope_id = None
    if scope_id is None:
        diagnostics.record("task_result", "skipped")
        return False
    from .task_result import (  # only the Stop hook needs it
        TRANSCRIPT_WAIT_SECONDS,
        TurnRef,
        build_task_result,
    )

    start = time.monotonic()
    body = build_task_result(
        event.transcript_path,
        host.name,
        TurnRef(session_id=event.session_id, turn_id=event.turn_id),
        scope_id,
        cwd=event.cwd,
        last_message=event.last_assistant_message,
        # Waiting for the host's last transcript lines may use at most half of what is left:
        # the rest is for delivering the result.
        wait_until=start + min(TRANSCRIPT_WAIT_SECONDS, deadline.remaining() / 2),
    )
    if body is None:
        diagnostics.record("task_result", "no_task_result", duration_ms=_elapsed_ms(start))
        return False
    run = _SpoolRun("task_result_spool")
    can_spool = spool is not None and settings.capture_spool
    try:
        backlog = False
        if spool is not None:
            backlog = _deliver_spool(
                spool,
                settings,
                deadline,
                run,
                path=TASK_RESULT_PATH,
                accepted=_TASK_RESULT_ACCEPTED,
            )
        if backlog and spool is not None and can_spool:
            _spool_prompt(spool, body, run)  # behind the waiting ones: order is kept
            diagnostics.record("task_result", "spooled", duration_ms=_elapsed_ms(start))
            return False
        result = post_json(
            settings.endpoint, TASK_RESULT_PATH, body, token=settings.token, deadline=deadline
        )
        if isinstance(result, HttpResponse) and result.status in _TASK_RESULT_ACCEPTED:
            diagnostics.record(
                "task_result",
                "recorded",
                http_status=result.status,
                duration_ms=_elapsed_ms(start),
            )
            return True
        _fail("task_result", result, diagnostics, start)
        if spool is not None and can_spool and outcome_for(result) == "server_unavailable":
            _spool_prompt(spool, body, run)
        return False
    finally:
        run.record(diagnostics)
