"""Bootstrap fuzzing: mutated ``powercontext.bootstrap-context.v1`` answers never get a bad pack in.

Same method as ``test_fuzz.py`` for the prepared pack (shared in ``tests/support/fuzzing.py``):
a seeded mutator starts from valid responses (ready, empty, skipped, with memory and handoff
items) and breaks keys, types, enums, byte counts, digests, receipts, items and raw bytes. An
independent oracle (stdlib ``json`` and spec 05 read literally) decides what should be accepted;
``decode_bootstrap`` must agree on every body and may raise nothing but ``InvalidResponse``. A
smaller sample runs through the whole hook.
"""

from __future__ import annotations

import hashlib
import json
import random
from pathlib import Path
from typing import Any

from powercontext_hook_kit import InvalidResponse, hook_output
from powercontext_hook_kit.contract import decode_bootstrap, decode_receipt
from tests.hook_kit.bootstrap_support import (
    BOOTSTRAP,
    RECEIPTS,
    receipt_body,
    run_session_start,
    session_event,
)
from tests.hook_kit.conftest import hook_env
from tests.hook_kit.stub import Reply, StubRuntime
from tests.support.fuzzing import (
    FUZZ_CHARACTERS,
    NOT_IN_A_PACK,
    Rejected,
    ResponseFuzzer,
    break_field,
    encode,
    odd_values,
    random_text,
    ready_answer,
    strict_json,
)

SCHEMA = "powercontext.bootstrap-context.v1"
KEYS = (
    "schema",
    "status",
    "content",
    "content_bytes",
    "pack_digest",
    "items",
    "omitted",
    "receipt",
)
ITEM_KEYS = ("kind", "scope_id", "citation", "content_digest", "truncated")
RECEIPT_KEYS = ("receipt_id", "state", "ephemeral")
SEED = 20250105
CASES = 8_000

ALPHABET = FUZZ_CHARACTERS + (
    "BEGIN_POWERCONTEXT_BOOTSTRAP_CONTEXT_V1 END_POWERCONTEXT_BOOTSTRAP_CONTEXT_V1"
)
ODD_VALUES = odd_values(SCHEMA, ("ready", "skipped", "pending"))


def sha(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


# --- the oracle ------------------------------------------------------------------------------


def _all_strings_unicode(value: Any) -> bool:
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return False
        return True
    if isinstance(value, list):
        return all(_all_strings_unicode(item) for item in value)
    if isinstance(value, dict):
        return all(_all_strings_unicode(k) and _all_strings_unicode(v) for k, v in value.items())
    return True


def _is_int(value: Any) -> bool:
    return type(value) is int


def _is_digest(value: Any) -> bool:
    return (
        isinstance(value, str)
        and len(value) == 71
        and value.startswith("sha256:")
        and all(ch in "0123456789abcdef" for ch in value[7:])
    )


def _is_receipt_id(value: Any) -> bool:
    return (
        isinstance(value, str) and 1 <= len(value) <= 128 and all("!" <= ch <= "~" for ch in value)
    )


def _item_ok(item: Any) -> bool:
    return (
        isinstance(item, dict)
        and set(item) == set(ITEM_KEYS)
        and item["kind"] in ("handoff", "memory")
        and isinstance(item["scope_id"], str)
        and item["scope_id"] != ""
        and isinstance(item["citation"], dict)
        and _is_digest(item["content_digest"])
        and type(item["truncated"]) is bool
    )


def oracle_accepts(body: bytes, budget: int) -> bool:
    """Spec 05/07 read literally: exact keys and types, the invariants, the budget."""
    try:
        document = strict_json(body)
    except Rejected:
        return False
    if not _all_strings_unicode(document):
        return False
    if not isinstance(document, dict) or set(document) != set(KEYS):
        return False
    receipt = document["receipt"]
    if not (isinstance(receipt, dict) and set(receipt) == set(RECEIPT_KEYS)):
        return False
    if not (
        _is_receipt_id(receipt["receipt_id"])
        and receipt["state"] in ("pending", "skipped", "injected", "failed")
        and type(receipt["ephemeral"]) is bool
    ):
        return False
    if receipt["ephemeral"] and receipt["state"] != "skipped":
        return False
    content, size, pack_digest = document["content"], document["content_bytes"], None
    pack_digest = document["pack_digest"]
    items, omitted = document["items"], document["omitted"]
    if document["schema"] != SCHEMA or document["status"] not in ("ready", "empty", "skipped"):
        return False
    if not (content is None or isinstance(content, str)) or not _is_int(size):
        return False
    if not (pack_digest is None or isinstance(pack_digest, str)):
        return False
    if not (isinstance(items, list) and all(_item_ok(item) for item in items)):
        return False
    if not (_is_int(omitted) and omitted >= 0):
        return False
    if document["status"] != "ready":
        if content is not None or size != 0 or pack_digest is not None or items:
            return False
        if receipt["state"] == "pending":
            return False
        return document["status"] == "skipped" or receipt["state"] == "skipped"
    if content is None or content.strip() == "":
        return False
    if len(content.encode("utf-8")) != size or size > budget:
        return False
    if not NOT_IN_A_PACK.isdisjoint(content):
        return False
    return (
        pack_digest == sha(content)
        and len(items) > 0
        and receipt["state"] == "pending"
        and receipt["ephemeral"] is False
    )


# --- the mutator -----------------------------------------------------------------------------


def random_item(rng: random.Random, index: int) -> dict[str, Any]:
    text = random_text(rng, ALPHABET, 30)
    if rng.random() < 0.2:
        citation: dict[str, Any] = {
            "artifact_ref": {"family": "handoff", "artifact_id": "handoff", "revision": index + 1}
        }
        kind = "handoff"
    else:
        citation = {
            "memory_ref": {"family": "memory", "artifact_id": "memory", "revision": index + 3},
            "entry_id": f"mem_ent_{index}",
            "entry_version_id": f"mem_ver_{index}",
        }
        kind = "memory"
    return {
        "kind": kind,
        "scope_id": rng.choice(["git:example.com/a/b", "local:sha256:" + "ab" * 32, "测试"]),
        "citation": citation,
        "content_digest": sha(text),
        "truncated": rng.random() < 0.3,
    }


def valid_document(rng: random.Random) -> dict[str, Any]:
    receipt_id = rng.choice([f"rcpt_{rng.getrandbits(128):032x}", "r", "~" * 128])
    roll = rng.random()
    if roll < 0.25:
        ephemeral = rng.random() < 0.5
        state = "skipped" if ephemeral else rng.choice(["skipped", "injected", "failed"])
        status = "empty" if state == "skipped" and rng.random() < 0.5 else "skipped"
        return {
            "schema": SCHEMA,
            "status": status,
            "content": None,
            "content_bytes": 0,
            "pack_digest": None,
            "items": [],
            "omitted": rng.choice([0, 0, 3]),
            "receipt": {"receipt_id": receipt_id, "state": state, "ephemeral": ephemeral},
        }
    document = ready_answer(rng, SCHEMA, ALPHABET, 150)
    return {
        **document,
        "pack_digest": sha(document["content"]),
        "items": [random_item(rng, index) for index in range(rng.randint(1, 4))],
        "omitted": rng.choice([0, 1, 7]),
        "receipt": {"receipt_id": receipt_id, "state": "pending", "ephemeral": False},
    }


def _mutate_mapping(mapping: dict[str, Any], keys: tuple[str, ...], rng: random.Random) -> None:
    key = rng.choice(keys)
    unknown = ["content", "Kind", "extra", "state ", "ephemeral_"]
    break_field(mapping, key, rng.randrange(3), rng, unknown_keys=unknown, odd_values=ODD_VALUES)


def mutate_document(document: dict[str, Any], rng: random.Random) -> Any:
    choice = rng.randrange(24)
    receipt = document.get("receipt")
    items = document.get("items")
    content = document.get("content")
    if choice == 0:
        _mutate_mapping(document, KEYS, rng)
    elif choice == 1 and isinstance(receipt, dict):
        _mutate_mapping(receipt, RECEIPT_KEYS, rng)
    elif choice == 2 and isinstance(items, list) and items and isinstance(items[0], dict):
        _mutate_mapping(rng.choice(items), ITEM_KEYS, rng)
    elif choice == 3:
        document["status"] = rng.choice(["ready", "empty", "skipped", "Ready", "", "partial"])
    elif choice == 4:
        document["schema"] = rng.choice(
            [SCHEMA.upper(), SCHEMA + " ", "powercontext.prepared-context.v1", SCHEMA]
        )
    elif choice == 5 and isinstance(document.get("content_bytes"), int):
        document["content_bytes"] += rng.choice([-2, -1, 1, 2, 10_000])
    elif choice == 6 and isinstance(content, str):
        document["content_bytes"] = len(content)  # characters, not bytes
    elif choice == 7:
        document["content"] = rng.choice([" ", "\n\t ", "\u3000", "", None])
    elif choice == 8:
        document["content"] = random_text(rng, ALPHABET, 40)  # bytes and digest now likely wrong
    elif choice == 9:  # a different pack, consistently described: valid if within budget
        text = random_text(rng, ALPHABET, 60) + "x"
        document.update(
            content=text, content_bytes=len(text.encode("utf-8")), pack_digest=sha(text)
        )
    elif choice == 10:
        text = "y" * rng.randint(500, 9000)
        document.update(content=text, content_bytes=len(text), pack_digest=sha(text))
    elif choice == 11 and isinstance(content, str):
        document["pack_digest"] = rng.choice(
            [sha(content).upper(), sha(content)[:-1], sha(content + "x"), "sha1:" + "0" * 64, None]
        )
    elif choice == 12:
        document["items"] = rng.choice([[], None, {}, "items", [None], [[]]])
    elif choice == 13 and isinstance(items, list) and items and isinstance(items[0], dict):
        rng.choice(items)["content_digest"] = rng.choice(
            ["sha256:" + "A" * 64, "sha256:" + "a" * 63, "sha256:", "md5:" + "0" * 64, ""]
        )
    elif choice == 14 and isinstance(items, list) and items and isinstance(items[0], dict):
        rng.choice(items)["citation"] = rng.choice([[], "mem_1", None, {}, {"x": [1, {"y": 2}]}])
    elif choice == 15 and isinstance(items, list) and items and isinstance(items[0], dict):
        rng.choice(items)["kind"] = rng.choice(["transcript", "Memory", "handoff", "memory"])
    elif choice == 16 and isinstance(receipt, dict):
        receipt["state"] = rng.choice(["pending", "skipped", "injected", "failed", "done"])
    elif choice == 17 and isinstance(receipt, dict):
        receipt["ephemeral"] = not receipt.get("ephemeral")
    elif choice == 18 and isinstance(receipt, dict):
        receipt["receipt_id"] = rng.choice(["", " ", "a" * 128, "a" * 129, "é", "x\n", "rcpt 1"])
    elif choice == 19:
        document["omitted"] = rng.choice([-1, 0, 5, 1.0, True, None, 10**30])
    elif choice == 20:
        return rng.choice([[document], "text", 3, None, {"pack": document}])
    elif choice == 21:  # turn a ready pack into a "not ready" one that keeps part of it
        document["status"] = rng.choice(["empty", "skipped"])
        if rng.random() < 0.5:
            document.update(content=None, content_bytes=0, pack_digest=None)
    elif choice == 22 and isinstance(items, list) and items:
        items.append(dict(items[0]) if isinstance(items[0], dict) else items[0])
    else:
        document["status"] = "ready" if document.get("status") != "ready" else "skipped"
    return document


BOOTSTRAP_ANSWERS = ResponseFuzzer(
    valid_document=valid_document,
    mutate_document=mutate_document,
    oracle_accepts=oracle_accepts,
    budgets=(512, 4096, 8192),
    mutated_below=0.8,
    splices=(
        (b'"state": "', b'"state": "pending", "state": "'),  # a duplicate key
        (b'"scope_id": "', b'"scope_id": "\\udc80'),  # lone surrogate escape in a string
    ),
)


# --- the properties --------------------------------------------------------------------------


def test_mutated_bootstrap_responses_are_accepted_exactly_when_valid() -> None:
    run = BOOTSTRAP_ANSWERS.decode_cases(decode_bootstrap, InvalidResponse, seed=SEED, cases=CASES)
    ready = 0
    for case in run.accepted:
        pack = case.decoded
        if pack.status == "ready":
            ready += 1
            assert pack.content is not None
            encoded = pack.content.encode("utf-8")
            assert len(encoded) == pack.content_bytes <= case.budget
            assert pack.pack_digest == sha(pack.content)
            assert pack.receipt.state == "pending" and not pack.receipt.ephemeral
            envelope = json.loads(hook_output("SessionStart", pack.content))
            assert envelope["hookSpecificOutput"]["additionalContext"] == pack.content
        else:
            assert pack.content is None and pack.items == () and pack.pack_digest is None
    accepted, rejected = len(run.accepted), run.rejected
    assert accepted > CASES // 20 and rejected > CASES // 2 and ready > CASES // 40, (
        accepted,
        rejected,
        ready,
    )


def test_mutated_receipt_answers_raise_only_invalid_response() -> None:
    rng = random.Random(SEED + 2)
    accepted = 0
    for _ in range(3_000):
        document: Any = {"receipt_id": "rcpt_1", "state": "injected"}
        choice = rng.randrange(5)
        if choice == 0:
            document[rng.choice(["receipt_id", "state"])] = rng.choice([*ODD_VALUES, "failed"])
        elif choice == 1:
            document["extra"] = 1
        elif choice == 2:
            document.pop(rng.choice(["receipt_id", "state"]))
        elif choice == 3:
            document = rng.choice([[document], None, "x"])
        body = encode(document, rng)
        if rng.random() < 0.3:
            body = BOOTSTRAP_ANSWERS.mutate_bytes(body, rng)
        try:
            recorded = decode_receipt(body)
        except InvalidResponse:
            continue
        accepted += 1
        assert recorded.state in ("injected", "failed")
        assert 1 <= len(recorded.receipt_id) <= 128
    assert accepted > 100


def test_mutated_bootstrap_responses_end_to_end(stub: StubRuntime, tmp_path: Path) -> None:
    """The whole hook: exit 0, one envelope or nothing, injected only when the oracle agrees."""
    env = hook_env(stub.url, tmp_path / "data", POWERCONTEXT_BOOTSTRAP="1")
    for case in BOOTSTRAP_ANSWERS.hook_cases(seed=SEED + 1, count=250, budgets=(512, 4096)):
        stub.replies[BOOTSTRAP] = Reply(200, case.body)
        try:
            claimed = json.loads(case.body)["receipt"]["receipt_id"]
            stub.replies[RECEIPTS] = Reply(200, receipt_body(claimed))
        except (ValueError, KeyError, TypeError):
            stub.replies[RECEIPTS] = Reply(200, receipt_body())
        run = run_session_start(
            session_event(), {**env, "POWERCONTEXT_BOOTSTRAP_MAX_BYTES": str(case.budget)}
        )
        assert run.code == 0
        assert run.injected("SessionStart") == case.expected, (case.index, case.body[:300])
        if case.expected is None:
            assert run.outcome("context_bootstrap") in ("empty", "skipped", "invalid_response"), (
                case.index,
                run.lines,
            )
