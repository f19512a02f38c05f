"""Strict wire models for what the runtime sends back to a hook, and the checks types cannot do.

Everything the hook injects comes from here, so nothing is accepted on trust: the response must
be exactly the documented object (no missing, extra or duplicated keys, no type coercion, no
unknown schema or status), and the invariants of specs 04 and 05 must hold. The hook never
trims, re-selects or re-renders a pack; when any check fails the whole response is refused and
nothing is injected.

Four answers are decoded here: the prepared pack of ``UserPromptSubmit``
(``powercontext.prepared-context.v1``), the bootstrap pack of ``SessionStart``
(``powercontext.bootstrap-context.v1``), the answer to a bootstrap receipt claim, and which
Handoff revision waits for the next session (``POST /v1/handoff/next``).
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

from .digest import sha256

__all__ = [
    "BOOTSTRAP_CONTEXT_SCHEMA",
    "NEVER_RAW_IN_A_PACK",
    "PREPARED_CONTEXT_SCHEMA",
    "RECEIPT_ID_MAX_CHARS",
    "BootstrapContext",
    "BootstrapItem",
    "BootstrapReceipt",
    "InvalidResponse",
    "PreparedContext",
    "RecordedReceipt",
    "decode_bootstrap",
    "decode_next_handoff",
    "decode_prepared",
    "decode_receipt",
    "is_receipt_id",
]

PREPARED_CONTEXT_SCHEMA = "powercontext.prepared-context.v1"
BOOTSTRAP_CONTEXT_SCHEMA = "powercontext.bootstrap-context.v1"
#: The runtime refuses longer receipt ids in a claim and in ``bootstrap_receipt_id``.
RECEIPT_ID_MAX_CHARS = 128


class InvalidResponse(ValueError):
    """The runtime's answer does not satisfy the contract; it must not be injected.

    The message names the violated rule only — never a value from the body, which may contain
    stored content.
    """


class PreparedContext(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """``powercontext.prepared-context.v1`` exactly as the runtime sends it (spec 04)."""

    schema: Literal["powercontext.prepared-context.v1"]
    status: Literal["ready", "empty"]
    content: str | None
    content_bytes: int


_PREPARED_DECODER = msgspec.json.Decoder(PreparedContext)


def _reject_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    keys = [key for key, _ in pairs]
    if len(set(keys)) != len(keys):
        raise InvalidResponse("response repeats a key")
    return dict(pairs)


def _check_single_object(body: bytes) -> None:
    """Refuse duplicated keys, which msgspec silently collapses (last one wins).

    Two parsers reading ``{"content":"a","content":"b"}`` may disagree on what was sent, so the
    key set is only "exact" when every key appears once. Only run after msgspec accepted the
    body, so the second parse is cheap and never sees untyped garbage.
    """
    import json  # lazy: only reached for bodies msgspec already accepted

    try:
        json.loads(body, object_pairs_hook=_reject_duplicate_keys)
    except InvalidResponse:
        raise
    except (ValueError, RecursionError) as exc:
        raise InvalidResponse("response is not a single JSON object") from exc


def _utf8(text: str) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:  # lone surrogates cannot be injected as UTF-8
        raise InvalidResponse("content is not valid Unicode") from exc


def _utf8_length(text: str) -> int:
    return len(_utf8(text))


#: What a runtime pack never holds raw (the runtime escapes it inside the JSON strings): every
#: line boundary of ``str.splitlines()`` other than ``\n``, and the bidi controls. A pack that
#: does comes from a runtime that does not escape them; the hook never re-renders a pack, so it
#: refuses it (nothing injected, the host goes on) rather than let a reader that splits lines
#: differently see a marker line the wrapper never wrote.
NEVER_RAW_IN_A_PACK = frozenset(
    "\r\v\f\x1c\x1d\x1e\x85\u2028\u2029"  # line boundaries besides \n
    "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"  # bidi
)


def _check_lines(content: str) -> None:
    if not NEVER_RAW_IN_A_PACK.isdisjoint(content):
        raise InvalidResponse("the pack holds a raw line separator or bidi control")


def decode_prepared(body: bytes, requested_max_bytes: int) -> PreparedContext:
    """Decode and validate a ``prepare_context`` response against the budget the hook asked for.

    Raises :class:`InvalidResponse` — and nothing else — for any body that is not a valid pack.
    """
    try:
        prepared = _PREPARED_DECODER.decode(body)
    except (msgspec.MsgspecError, ValueError, TypeError, RecursionError) as exc:
        raise InvalidResponse("response does not match powercontext.prepared-context.v1") from exc
    _check_single_object(body)
    if prepared.status == "empty":
        if prepared.content is not None or prepared.content_bytes != 0:
            raise InvalidResponse("an empty pack must have null content and zero bytes")
        return prepared
    content = prepared.content
    if content is None or not content.strip():
        raise InvalidResponse("a ready pack must have non-blank content")
    if _utf8_length(content) != prepared.content_bytes:
        raise InvalidResponse("content_bytes differs from the UTF-8 length of content")
    if prepared.content_bytes > requested_max_bytes:
        raise InvalidResponse("the pack exceeds the requested byte budget")
    _check_lines(content)
    return prepared


# --- SessionStart: the bootstrap pack and its receipt (spec 05) ------------------------------


class BootstrapItem(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """One delivered item: which immutable content it cites and whether its body was cut."""

    kind: Literal["handoff", "memory"]
    scope_id: str
    citation: dict[str, Any]
    content_digest: str
    truncated: bool


class BootstrapReceipt(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """The server's delivery receipt for this bootstrap request."""

    receipt_id: str
    state: Literal["pending", "skipped", "injected", "failed"]
    ephemeral: bool


class BootstrapContext(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """``powercontext.bootstrap-context.v1`` exactly as the runtime sends it (spec 05)."""

    schema: Literal["powercontext.bootstrap-context.v1"]
    status: Literal["ready", "empty", "skipped"]
    content: str | None
    content_bytes: int
    pack_digest: str | None
    items: tuple[BootstrapItem, ...]
    omitted: int
    receipt: BootstrapReceipt


class RecordedReceipt(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """The answer to ``POST /v1/context/bootstrap/receipts``: the receipt's new state."""

    receipt_id: str
    state: Literal["injected", "failed"]


class _HandoffRef(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    family: Literal["handoff"]
    artifact_id: Literal["handoff"]
    revision: int


class _NextHandoff(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    scope_id: str
    handoff_ref: _HandoffRef | None
    queued_at: int | None


_BOOTSTRAP_DECODER = msgspec.json.Decoder(BootstrapContext)
_NEXT_HANDOFF_DECODER = msgspec.json.Decoder(_NextHandoff)
_RECEIPT_DECODER = msgspec.json.Decoder(RecordedReceipt)
_HEX = frozenset("0123456789abcdef")
_DIGEST_PREFIX = "sha256:"


def _is_digest(value: str) -> bool:
    """``sha256:`` and 64 lowercase hex digits: the runtime's canonical spelling, nothing else."""
    return (
        len(value) == len(_DIGEST_PREFIX) + 64
        and value.startswith(_DIGEST_PREFIX)
        and set(value[len(_DIGEST_PREFIX) :]) <= _HEX
    )


def is_receipt_id(value: object) -> bool:
    """1..128 visible ASCII characters: what the runtime accepts back and a file can hold.

    A receipt id is stored locally and sent back later, so anything that could not be sent
    back (too long, whitespace, control or non-ASCII characters) is refused up front.
    """
    return (
        isinstance(value, str)
        and 0 < len(value) <= RECEIPT_ID_MAX_CHARS
        and all(0x21 <= ord(ch) <= 0x7E for ch in value)
    )


def decode_bootstrap(body: bytes, requested_max_bytes: int) -> BootstrapContext:
    """Decode and validate a bootstrap response against the budget the hook asked for.

    Beyond the exact shape: ``ready`` carries non-blank content whose UTF-8 length is
    ``content_bytes`` (≤ the budget), ``pack_digest`` is its sha256, at least one item, and a
    *pending*, non-ephemeral receipt (only such a receipt can be claimed before injecting).
    ``empty``/``skipped`` carry no content, no digest, no items and a receipt that is not
    pending (``empty`` always ``skipped``); only ``skipped`` receipts may be ephemeral.
    Raises :class:`InvalidResponse` — and nothing else — for any body that breaks a rule.
    """
    try:
        pack = _BOOTSTRAP_DECODER.decode(body)
    except (msgspec.MsgspecError, ValueError, TypeError, RecursionError) as exc:
        raise InvalidResponse("response does not match powercontext.bootstrap-context.v1") from exc
    _check_single_object(body)
    if pack.omitted < 0:
        raise InvalidResponse("omitted must not be negative")
    receipt = pack.receipt
    if not is_receipt_id(receipt.receipt_id):
        raise InvalidResponse("the receipt id is not 1..128 visible ASCII characters")
    if receipt.ephemeral and receipt.state != "skipped":
        raise InvalidResponse("only a skipped receipt can be ephemeral")
    for item in pack.items:
        if not item.scope_id:
            raise InvalidResponse("an item has an empty scope id")
        if not _is_digest(item.content_digest):
            raise InvalidResponse("an item's content digest is not sha256:<64 hex>")
    if pack.status != "ready":
        if pack.content is not None or pack.content_bytes != 0 or pack.pack_digest is not None:
            raise InvalidResponse("a pack that is not ready must have no content and no digest")
        if pack.items:
            raise InvalidResponse("a pack that is not ready must have no items")
        if receipt.state == "pending":
            raise InvalidResponse("a pack that is not ready cannot leave a pending receipt")
        if pack.status == "empty" and receipt.state != "skipped":
            raise InvalidResponse("an empty pack must have a skipped receipt")
        return pack
    content = pack.content
    if content is None or not content.strip():
        raise InvalidResponse("a ready pack must have non-blank content")
    encoded = _utf8(content)
    if len(encoded) != pack.content_bytes:
        raise InvalidResponse("content_bytes differs from the UTF-8 length of content")
    if pack.content_bytes > requested_max_bytes:
        raise InvalidResponse("the pack exceeds the requested byte budget")
    if pack.pack_digest != _DIGEST_PREFIX + sha256(encoded).hexdigest():
        raise InvalidResponse("pack_digest is not the sha256 of content")
    _check_lines(content)
    if not pack.items:
        raise InvalidResponse("a ready pack must list its items")
    if receipt.state != "pending" or receipt.ephemeral:
        raise InvalidResponse("a ready pack must come with a pending, stored receipt")
    return pack


def decode_receipt(body: bytes) -> RecordedReceipt:
    """Decode the answer to a receipt claim; :class:`InvalidResponse` for anything else.

    The caller still compares ``receipt_id`` and ``state`` with what it asked for.
    """
    try:
        recorded = _RECEIPT_DECODER.decode(body)
    except (msgspec.MsgspecError, ValueError, TypeError, RecursionError) as exc:
        raise InvalidResponse("response does not match the receipt answer") from exc
    _check_single_object(body)
    if not is_receipt_id(recorded.receipt_id):
        raise InvalidResponse("the receipt id is not 1..128 visible ASCII characters")
    return recorded


def decode_next_handoff(body: bytes, scope_id: str) -> int | None:
    """The Handoff revision queued for ``scope_id``'s next session, or ``None``.

    The answer must name the scope that was asked about and a positive revision; anything else
    raises :class:`InvalidResponse` (the hook then bootstraps without a Handoff).
    """
    try:
        answer = _NEXT_HANDOFF_DECODER.decode(body)
    except (msgspec.MsgspecError, ValueError, TypeError, RecursionError) as exc:
        raise InvalidResponse("response does not match the next-handoff answer") from exc
    _check_single_object(body)
    if answer.scope_id != scope_id:
        raise InvalidResponse("the next-handoff answer names another scope")
    if answer.handoff_ref is None:
        return None
    if answer.handoff_ref.revision < 1:
        raise InvalidResponse("a handoff revision must be positive")
    return answer.handoff_ref.revision
