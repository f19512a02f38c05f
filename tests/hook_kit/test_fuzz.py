"""Hook fuzzing (spec 08): mutated runtime answers never crash the hook or sneak a bad pack in.

A seeded mutator starts from valid responses and flips keys, types, statuses, byte counts,
encodings and bytes. Each body goes through ``decode_prepared`` and, when accepted, through the
output envelope. An independent oracle (stdlib ``json`` plus the spec's rules, written without
looking at the implementation) decides what *should* be accepted; the two must agree.
A smaller sample also runs end to end through ``run_hook`` against the stub runtime. The
generator and the agreement loop are shared with the bootstrap fuzz (``tests/support/fuzzing.py``);
this file holds what is particular to the prepared pack: its documents, mutations and oracle.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from powercontext_hook_kit import InvalidResponse, decode_prepared, hook_output
from tests.hook_kit.conftest import event, hook_env, run_in_process
from tests.hook_kit.stub import PREPARE, Reply, StubRuntime
from tests.support.fuzzing import (
    FUZZ_CHARACTERS,
    NOT_IN_A_PACK,
    Rejected,
    ResponseFuzzer,
    break_field,
    odd_values,
    random_text,
    ready_answer,
    strict_json,
)

SCHEMA = "powercontext.prepared-context.v1"
KEYS = ("schema", "status", "content", "content_bytes")
SEED = 20240607
CASES = 12_000

ALPHABET = FUZZ_CHARACTERS + (
    "BEGIN_POWERCONTEXT_PREPARED_CONTEXT_V1 END_POWERCONTEXT_PREPARED_CONTEXT_V1"
)
ODD_VALUES = odd_values(SCHEMA, ("ready", "empty", "skipped"), huge_float=True)


# --- the oracle ------------------------------------------------------------------------------


def oracle_accepts(body: bytes, budget: int) -> bool:
    """Spec 04/07 read literally: exact keys, exact types, the invariants, the budget."""
    try:
        document = strict_json(body)
    except Rejected:
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
    return len(encoded) == size and size <= budget and NOT_IN_A_PACK.isdisjoint(content)


# --- the mutator -----------------------------------------------------------------------------


def valid_document(rng: random.Random) -> dict[str, Any]:
    if rng.random() < 0.2:
        return {"schema": SCHEMA, "status": "empty", "content": None, "content_bytes": 0}
    return ready_answer(rng, SCHEMA, ALPHABET, 120)


def mutate_document(document: dict[str, Any], rng: random.Random) -> Any:
    key = rng.choice(KEYS)
    choice = rng.randrange(12)
    if choice < 3:
        unknown = ["citations", "mode", "Schema", "content ", "memory_ref"]
        break_field(document, key, choice, rng, unknown_keys=unknown, odd_values=ODD_VALUES)
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
        document["content"] = random_text(rng, ALPHABET, 40)  # bytes now likely wrong
    elif choice == 9:
        document["content"] = "x" * rng.randint(500, 9000)
        document["content_bytes"] = len(document["content"])  # maybe over budget
    elif choice == 10:
        return rng.choice([[document], "text", 3, None, {"error": document}])
    else:
        document["status"] = "empty" if document.get("status") == "ready" else "ready"
    return document


PREPARED = ResponseFuzzer(
    valid_document=valid_document,
    mutate_document=mutate_document,
    oracle_accepts=oracle_accepts,
    budgets=(512, 606, 8000, 32768),
    mutated_below=0.75,
    splices=(
        (b'"content_bytes": ', b'"content_bytes": 0'),  # a number with a leading zero
        (b'"content": "', b'"content": "\\udc80'),  # lone surrogate escape inside the content
    ),
)


# --- the properties --------------------------------------------------------------------------


def test_mutated_responses_are_accepted_exactly_when_valid() -> None:
    run = PREPARED.decode_cases(decode_prepared, InvalidResponse, seed=SEED, cases=CASES)
    for case in run.accepted:
        prepared = case.decoded
        if prepared.status == "ready":
            assert prepared.content is not None
            output = hook_output("UserPromptSubmit", prepared.content)
            assert b"\n" not in output
            envelope = json.loads(output)["hookSpecificOutput"]
            assert envelope == {
                "hookEventName": "UserPromptSubmit",
                "additionalContext": prepared.content,
            }
            assert len(prepared.content.encode("utf-8")) <= case.budget
    # The generator must exercise both sides meaningfully.
    accepted, rejected = len(run.accepted), run.rejected
    assert accepted > CASES // 20 and rejected > CASES // 2, (accepted, rejected)


def test_mutated_responses_end_to_end(stub: StubRuntime, tmp_path: Path) -> None:
    """The whole hook: exit 0, one envelope or nothing, injected only when the oracle agrees."""
    env = hook_env(stub.url, tmp_path / "data", POWERCONTEXT_CAPTURE_PROMPTS="0")
    for case in PREPARED.hook_cases(seed=SEED + 1, count=300, budgets=(512, 8000)):
        stub.replies[PREPARE] = Reply(200, case.body)
        run = run_in_process(event(), {**env, "POWERCONTEXT_MAX_BYTES": str(case.budget)})
        assert run.code == 0
        assert run.injected() == case.expected, (case.index, case.body[:200])
        if case.expected is None:
            outcome = run.outcome()
            assert outcome in ("empty", "invalid_response"), (case.index, outcome)
