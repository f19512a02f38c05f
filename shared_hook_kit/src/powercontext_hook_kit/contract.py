"""Strict wire models for what the runtime sends back to a hook, and the checks types cannot do.

Everything the hook injects comes from here, so nothing is accepted on trust: the response must
be exactly the documented object (no missing, extra or duplicated keys, no type coercion, no
unknown schema or status), and the invariants of spec 04 must hold. The hook never trims,
re-selects or re-renders a pack; when any check fails the whole response is refused and nothing
is injected. The bootstrap and receipt response models of spec 05 belong in this module too.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

__all__ = [
    "PREPARED_CONTEXT_SCHEMA",
    "InvalidResponse",
    "PreparedContext",
    "decode_prepared",
]

PREPARED_CONTEXT_SCHEMA = "powercontext.prepared-context.v1"


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


def _utf8_length(text: str) -> int:
    try:
        return len(text.encode("utf-8"))
    except UnicodeEncodeError as exc:  # lone surrogates cannot be injected as UTF-8
        raise InvalidResponse("content is not valid Unicode") from exc


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
    return prepared
