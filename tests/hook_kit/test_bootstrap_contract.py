"""``decode_bootstrap`` / ``decode_receipt`` accept exactly the documented answers (spec 05)."""

from __future__ import annotations

import json

import pytest

from powercontext_hook_kit.contract import (
    InvalidResponse,
    decode_bootstrap,
    decode_receipt,
    is_receipt_id,
)
from tests.hook_kit.bootstrap_support import (
    PACK,
    PACK_ITEMS,
    RECEIPT_ID,
    bootstrap_body,
    bootstrap_document,
    digest,
    receipt_body,
    render,
)
from tests.support.fuzzing import NOT_IN_A_PACK

HANDOFF_ITEM = {
    "kind": "handoff",
    "scope_id": "git:example.com/acme/app",
    "citation": {"artifact_ref": {"family": "handoff", "artifact_id": "handoff", "revision": 2}},
    "content_digest": digest("Objective: ship"),
    "truncated": False,
}


def test_a_ready_pack_is_accepted_unchanged() -> None:
    pack = decode_bootstrap(bootstrap_body(), 4096)
    assert (pack.status, pack.content, pack.content_bytes) == ("ready", PACK, len(PACK.encode()))
    assert pack.pack_digest == digest(PACK)
    assert [item.kind for item in pack.items] == ["memory", "memory"]
    assert pack.items[0].citation == PACK_ITEMS[0]["citation"]
    assert (pack.receipt.receipt_id, pack.receipt.state, pack.receipt.ephemeral) == (
        RECEIPT_ID,
        "pending",
        False,
    )


def test_a_handoff_item_and_omissions_are_accepted() -> None:
    body = bootstrap_body(items=[HANDOFF_ITEM, *PACK_ITEMS], omitted=3)
    pack = decode_bootstrap(body, 4096)
    assert pack.items[0].kind == "handoff" and pack.omitted == 3


def test_the_budget_is_inclusive() -> None:
    size = len(PACK.encode("utf-8"))
    assert decode_bootstrap(bootstrap_body(), size).content == PACK
    with pytest.raises(InvalidResponse):
        decode_bootstrap(bootstrap_body(), size - 1)


@pytest.mark.parametrize(
    "document",
    [
        bootstrap_document(None),
        bootstrap_document(None, ephemeral=True),
        bootstrap_document(None, state="injected"),
        bootstrap_document(None, state="failed"),
        bootstrap_document(None, status="empty"),
        bootstrap_document(None, status="empty", ephemeral=True, omitted=4),
    ],
)
def test_not_ready_answers_are_accepted(document: dict) -> None:
    pack = decode_bootstrap(json.dumps(document).encode(), 512)
    assert (pack.content, pack.content_bytes, pack.pack_digest, pack.items) == (None, 0, None, ())


def test_key_order_and_whitespace_do_not_matter() -> None:
    document = bootstrap_document()
    body = json.dumps(dict(reversed(list(document.items()))), indent=2).encode()
    assert decode_bootstrap(body, 4096).content == PACK


@pytest.mark.parametrize(
    "body",
    [
        b"",
        b"null",
        b"{}",
        b"\xef\xbb\xbf" + bootstrap_body(),
        bootstrap_body() + b"{}",
        bootstrap_body(content_bytes=float(len(PACK.encode()))),
        bootstrap_body(omitted=True),
        bootstrap_body(omitted=1.0),
        bootstrap_body(items=[{**PACK_ITEMS[0], "truncated": 0}]),
        bootstrap_body(ephemeral=1),  # type: ignore[arg-type]
        bootstrap_body(receipt_id=""),
        bootstrap_body(receipt_id="rcpt_é"),
        bootstrap_body(items=[{**PACK_ITEMS[0], "scope_id": ""}]),
        bootstrap_body(pack_digest="sha256:" + "0" * 64),
        bootstrap_body(None, status="empty", state="failed"),
        bootstrap_body(None, ephemeral=True, state="injected"),
        bootstrap_body("x", items=PACK_ITEMS, state="skipped"),
        bootstrap_body().replace(b'"receipt": {', b'"receipt": {"state": "injected", ', 1),
    ],
)
def test_malformed_bodies_raise_invalid_response_only(body: bytes) -> None:
    with pytest.raises(InvalidResponse):
        decode_bootstrap(body, 8192)


@pytest.mark.parametrize("char", sorted(NOT_IN_A_PACK))
def test_a_pack_with_a_raw_line_boundary_or_bidi_control_is_refused(char: str) -> None:
    text = f"Deploys need{char}a green build"
    escaped, items = render([text])
    assert char not in escaped  # the spec'd render writes it as a \u escape …
    pack = decode_bootstrap(bootstrap_body(escaped, items=items), 4096)
    assert json.loads(pack.content.split("\n")[4])["items"][0]["content"] == text
    raw = escaped.replace("Deploys need", f"Deploys need{char}")  # … a raw one is refused
    with pytest.raises(InvalidResponse) as caught:
        decode_bootstrap(bootstrap_body(raw, items=items), 4096)
    assert "line separator or bidi control" in str(caught.value)


def test_error_messages_never_echo_the_body() -> None:
    for body in (
        bootstrap_body("SECRET-SENTINEL", content_bytes=3),
        bootstrap_body(receipt_id="SECRET SENTINEL"),
        bootstrap_body(schema="SECRET-SENTINEL"),
    ):
        with pytest.raises(InvalidResponse) as caught:
            decode_bootstrap(body, 8192)
        assert "SENTINEL" not in str(caught.value)


def test_receipt_answers() -> None:
    recorded = decode_receipt(receipt_body())
    assert (recorded.receipt_id, recorded.state) == (RECEIPT_ID, "injected")
    assert decode_receipt(receipt_body(state="failed")).state == "failed"
    for body in (
        b"{}",
        receipt_body(state="pending"),
        receipt_body(state="skipped"),
        receipt_body(""),
        b'{"receipt_id":"r","state":"injected","receipt_id":"s"}',
        b'{"receipt_id":"r","state":"injected","extra":null}',
        b'{"receipt_id":1,"state":"injected"}',
        b'{"error":{"code":"receipt_conflict"}}',
    ):
        with pytest.raises(InvalidResponse):
            decode_receipt(body)


@pytest.mark.parametrize(
    ("value", "ok"),
    [
        ("rcpt_1", True),
        ("~" * 128, True),
        ("x" * 129, False),
        ("", False),
        ("a b", False),
        ("a\n", False),
        ("é", False),
        (None, False),
        (7, False),
    ],
)
def test_receipt_ids(value: object, ok: bool) -> None:
    assert is_receipt_id(value) is ok
