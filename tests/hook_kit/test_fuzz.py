"""Hook fuzzing (spec 08): mutated runtime answers never crash the hook or sneak a bad pack in.

A seeded mutator starts from valid responses and flips keys, types, statuses, byte counts,
encodings and bytes. Each body goes through ``decode_prepared`` and, when accepted, through the
output envelope. An independent oracle (stdlib ``json`` plus the spec's rules, written without
looking at the implementation) decides what *should* be accepted; the two must agree.
A smaller sample also runs end to end through ``run_hook`` against the stub runtime.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from powercontext_hook_kit import InvalidResponse, decode_prepared, hook_output
from tests.hook_kit.conftest import event, hook_env, run_in_process
from tests.hook_kit.stub import PREPARE, Reply, StubRuntime

SCHEMA = "powercontext.prepared-context.v1"
KEYS = ("schema", "status", "content", "content_bytes")
SEED = 20240607
CASES = 12_000

ALPHABET = (
    "abcXYZ 09\n\t\"\\/{}[]:,'<>`*#…—é测试字😀\u0301\u200b\u2028\u00a0\x00\x01\x1b\x7f"
    "BEGIN_POWERCONTEXT_PREPARED_CONTEXT_V1 END_POWERCONTEXT_PREPARED_CONTEXT_V1"
)
ODD_VALUES: list[Any] = [
    None,
    True,
    False,
    0,
    -1,
    1.0,
    1e400,
    10**30,
    "",
    " ",
    "ready",
    "empty",
    "skipped",
    SCHEMA,
    [],
    {},
    ["x"],
    {"content": "x"},
]


# --- the oracle ------------------------------------------------------------------------------


class _Duplicate(Exception):
    pass


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    if len({key for key, _ in pairs}) != len(pairs):
        raise _Duplicate
    return dict(pairs)


def _reject_constant(name: str) -> None:
    raise ValueError(name)


def oracle_accepts(body: bytes, budget: int) -> bool:
    """Spec 04/07 read literally: exact keys, exact types, the invariants, the budget."""
    try:
        text = body.decode("utf-8")
        document = json.loads(text, object_pairs_hook=_pairs, parse_constant=_reject_constant)
    except (UnicodeDecodeError, ValueError, _Duplicate, RecursionError):
        return False
    if not isinstance(document, dict) or set(document) != set(KEYS):
        return False
    schema, status = document["schema"], document["status"]
    content, size = document["content"], document["content_bytes"]
    if schema != SCHEMA or status not in ("ready", "empty"):
        return False
    if type(size) is not int or not (content is None or isinstance(content, str)):
        return False
    if status == "empty":
        return content is None and size == 0
    if content is None or content.strip() == "":
        return False
    try:
        encoded = content.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return len(encoded) == size and size <= budget


# --- the mutator -----------------------------------------------------------------------------


def random_text(rng: random.Random, limit: int) -> str:
    return "".join(rng.choice(ALPHABET) for _ in range(rng.randint(1, limit)))


def valid_document(rng: random.Random) -> dict[str, Any]:
    if rng.random() < 0.2:
        return {"schema": SCHEMA, "status": "empty", "content": None, "content_bytes": 0}
    content = random_text(rng, 120)
    if not content.strip():
        content += "x"
    return {
        "schema": SCHEMA,
        "status": "ready",
        "content": content,
        "content_bytes": len(content.encode("utf-8")),
    }


def encode(document: Any, rng: random.Random) -> bytes:
    return json.dumps(
        document,
        ensure_ascii=rng.random() < 0.5,
        indent=rng.choice([None, None, 1]),
        sort_keys=rng.random() < 0.3,
    ).encode("utf-8")


def mutate_document(document: dict[str, Any], rng: random.Random) -> Any:
    key = rng.choice(KEYS)
    choice = rng.randrange(12)
    if choice == 0:
        document.pop(key, None)
    elif choice == 1:
        document[rng.choice(["citations", "mode", "Schema", "content ", "memory_ref"])] = 1
    elif choice == 2:
        document[key] = rng.choice(ODD_VALUES)
    elif choice == 3:
        document["status"] = rng.choice(["ready", "empty", "skipped", "Ready", "", "error"])
    elif choice == 4:
        document["schema"] = rng.choice(
            [SCHEMA.upper(), SCHEMA + " ", "powercontext.prepared-context.v2", "", SCHEMA]
        )
    elif choice == 5 and isinstance(document.get("content_bytes"), int):
        document["content_bytes"] += rng.choice([-2, -1, 1, 2, 10_000])
    elif choice == 6 and isinstance(document.get("content"), str):
        document["content_bytes"] = len(document["content"])  # characters, not bytes
    elif choice == 7:
        document["content"] = rng.choice([" ", "\n\t ", "\u3000", "", None])
    elif choice == 8:
        document["content"] = random_text(rng, 40)  # bytes now likely wrong
    elif choice == 9:
        document["content"] = "x" * rng.randint(500, 9000)
        document["content_bytes"] = len(document["content"])  # maybe over budget
    elif choice == 10:
        return rng.choice([[document], "text", 3, None, {"error": document}])
    else:
        document["status"] = "empty" if document.get("status") == "ready" else "ready"
    return document


def mutate_bytes(body: bytes, rng: random.Random) -> bytes:
    choice = rng.randrange(9)
    position = rng.randrange(len(body) + 1)
    if choice == 0:
        return body[:position]  # truncated
    if choice == 1:
        return body[:position] + bytes([rng.randrange(256)]) + body[position + 1 :]
    if choice == 2:
        return body[:position] + bytes([rng.randrange(256)]) + body[position:]
    if choice == 3:
        return b"\xef\xbb\xbf" + body
    if choice == 4:
        return body + rng.choice([b"{}", b" ", b"\n", b"x", b"\x00"])
    if choice == 5:
        return body.replace(b'"content"', b'"content":"dup","content"', 1)
    if choice == 6:
        return body.replace(b'"content_bytes": ', b'"content_bytes": 0', 1)
    if choice == 7:  # lone surrogate escape inside the content
        return body.replace(b'"content": "', b'"content": "\\udc80', 1)
    return body.decode("utf-8").encode("utf-16")


def generate(rng: random.Random) -> tuple[bytes, int]:
    document = valid_document(rng)
    budget = rng.choice([512, 606, 8000, 32768, rng.randint(1, 600)])
    roll = rng.random()
    if roll < 0.15:
        return encode(document, rng), budget  # valid (if within budget)
    if roll < 0.75:
        mutated: Any = document
        for _ in range(rng.randint(1, 3)):
            if not isinstance(mutated, dict):
                break
            mutated = mutate_document(mutated, rng)
        return encode(mutated, rng), budget
    return mutate_bytes(encode(document, rng), rng), budget


# --- the properties --------------------------------------------------------------------------


def test_mutated_responses_are_accepted_exactly_when_valid() -> None:
    rng = random.Random(SEED)
    accepted = rejected = 0
    for index in range(CASES):
        body, budget = generate(rng)
        expected = oracle_accepts(body, budget)
        try:
            prepared = decode_prepared(body, budget)
        except InvalidResponse:
            assert not expected, (index, body[:200], budget)
            rejected += 1
            continue
        assert expected, (index, body[:200], budget)
        accepted += 1
        if prepared.status == "ready":
            assert prepared.content is not None
            output = hook_output("UserPromptSubmit", prepared.content)
            assert b"\n" not in output
            envelope = json.loads(output)["hookSpecificOutput"]
            assert envelope == {
                "hookEventName": "UserPromptSubmit",
                "additionalContext": prepared.content,
            }
            assert len(prepared.content.encode("utf-8")) <= budget
    # The generator must exercise both sides meaningfully.
    assert accepted > CASES // 20 and rejected > CASES // 2, (accepted, rejected)


def test_mutated_responses_end_to_end(stub: StubRuntime, tmp_path: Path) -> None:
    """The whole hook: exit 0, one envelope or nothing, injected only when the oracle agrees."""
    rng = random.Random(SEED + 1)
    env = hook_env(stub.url, tmp_path / "data", POWERCONTEXT_CAPTURE_PROMPTS="0")
    for index in range(300):
        body, _ = generate(rng)
        budget = rng.choice([512, 8000])
        stub.replies[PREPARE] = Reply(200, body)
        run = run_in_process(event(), {**env, "POWERCONTEXT_MAX_BYTES": str(budget)})
        assert run.code == 0
        injected = run.injected()
        if oracle_accepts(body, budget) and json.loads(body)["status"] == "ready":
            assert injected == json.loads(body)["content"], index
        else:
            assert injected is None, (index, body[:200])
            outcome = run.outcome()
            assert outcome in ("empty", "invalid_response"), (index, outcome)
