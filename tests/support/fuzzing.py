"""Seeded fuzzing of the runtime's JSON answers, as the hook reads them.

``tests/hook_kit/test_fuzz.py`` (the prepared pack) and ``test_bootstrap_fuzz.py`` (the
bootstrap pack) use the same method; this module is that method, once:

* a seeded generator starts from valid answers and mutates the document (answer-specific) or the
  encoded bytes (truncation, stray bytes, BOM, trailing junk, UTF-16, two answer-specific
  splices);
* an independent oracle (stdlib ``json`` and the spec read literally, never the hook's code)
  says what must be accepted; :meth:`ResponseFuzzer.decode_cases` checks that the hook's decoder
  agrees on every body.

Each answer describes itself with a :class:`ResponseFuzzer`. Everything here draws from the
``random.Random`` it is given in a fixed order, so a seed always yields the same cases.
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

T = TypeVar("T")

#: Characters the generated texts are made of: JSON syntax, escapes, controls, NUL, combining
#: and zero-width marks, line separators, a bidi override and non-BMP characters. Each answer
#: adds its markers.
FUZZ_CHARACTERS = (
    "abcXYZ 09\n\t\"\\/{}[]:,'<>`*#…—é测试字😀\u0301\u200b\u2028\u00a0\x00\x01\x1b\x7f\x85\u202e"
)
#: Never raw in a pack (docs/decisions/pack-escaping.md): every line boundary of
#: ``str.splitlines()`` besides ``\n``, and the bidi controls. The runtime escapes them inside
#: the JSON strings, so a pack holding one raw is refused.
NOT_IN_A_PACK = frozenset(
    "\r\v\f\x1c\x1d\x1e\x85\u2028\u2029"
    "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
)


def odd_values(schema: str, statuses: Sequence[str], *, huge_float: bool = False) -> list[Any]:
    """Values of the wrong type or meaning to put where a field belongs: falsy ones, numbers that
    are not plain ints, near-miss statuses, the schema id, empty and non-empty containers.

    ``huge_float`` adds ``1e400`` (infinity once decoded). The order is part of each seed's cases.
    """
    numbers: list[Any] = [0, -1, 1.0, *([1e400] if huge_float else []), 10**30]
    return [
        None,
        True,
        False,
        *numbers,
        "",
        " ",
        *statuses,
        schema,
        [],
        {},
        ["x"],
        {"content": "x"},
    ]


def random_text(rng: random.Random, alphabet: str, limit: int) -> str:
    """1 to ``limit`` characters drawn from ``alphabet``."""
    return "".join(rng.choice(alphabet) for _ in range(rng.randint(1, limit)))


def ready_answer(rng: random.Random, schema: str, alphabet: str, limit: int) -> dict[str, Any]:
    """The fields every valid ``ready`` answer starts with: the schema, the status, a non-blank
    random content of 1 to ``limit`` characters (none :data:`NOT_IN_A_PACK`) and its exact
    UTF-8 size."""
    content = "".join(ch for ch in random_text(rng, alphabet, limit) if ch not in NOT_IN_A_PACK)
    if not content.strip():
        content += "x"
    return {
        "schema": schema,
        "status": "ready",
        "content": content,
        "content_bytes": len(content.encode("utf-8")),
    }


def break_field(
    mapping: dict[str, Any],
    key: str,
    fault: int,
    rng: random.Random,
    *,
    unknown_keys: Sequence[str],
    odd_values: Sequence[Any],
) -> None:
    """One of the three field faults every answer is tested with, picked by ``fault``: 0 drops
    ``key``, 1 adds a key the spec does not allow, 2 gives ``key`` a value of the wrong kind."""
    if fault == 0:
        mapping.pop(key, None)
    elif fault == 1:
        mapping[rng.choice(unknown_keys)] = 1
    else:
        mapping[key] = rng.choice(odd_values)


def encode(document: Any, rng: random.Random) -> bytes:
    """``document`` as UTF-8 JSON in one of the shapes a server may send (escaped or raw
    non-ASCII, compact or indented, keys sorted or not)."""
    return json.dumps(
        document,
        ensure_ascii=rng.random() < 0.5,
        indent=rng.choice([None, None, 1]),
        sort_keys=rng.random() < 0.3,
    ).encode("utf-8")


# --------------------------------------------------------------------------------------------
# The oracle's JSON
# --------------------------------------------------------------------------------------------


class Rejected(Exception):
    """The body is not JSON the spec allows (the oracle's verdict: not accepted)."""


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    if len({key for key, _ in pairs}) != len(pairs):
        raise Rejected("duplicate key")
    return dict(pairs)


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise Rejected(text)
    return value


def _no_constant(name: str) -> None:
    raise Rejected(name)


def strict_json(body: bytes) -> Any:
    """``body`` decoded the way the specs define a valid answer: UTF-8, no duplicate keys, no
    ``NaN``/``Infinity`` and no number that overflows to infinity. Raises :class:`Rejected`."""
    try:
        return json.loads(
            body.decode("utf-8"),
            object_pairs_hook=_unique_keys,
            parse_float=_finite,
            parse_constant=_no_constant,
        )
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise Rejected(str(exc)) from exc


# --------------------------------------------------------------------------------------------
# One answer under fuzz
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Accepted(Generic[T]):
    """A generated body that the oracle and the decoder both accepted."""

    index: int
    body: bytes
    budget: int
    decoded: T


@dataclass(frozen=True)
class DecodeRun(Generic[T]):
    """What :meth:`ResponseFuzzer.decode_cases` saw: the accepted cases, and how many the
    decoder rightly refused."""

    accepted: list[Accepted[T]]
    rejected: int


@dataclass(frozen=True)
class HookCase:
    """One answer for a run of the whole hook, and the pack the hook must inject for it
    (``None``: nothing may be injected)."""

    index: int
    body: bytes
    budget: int
    expected: str | None


@dataclass(frozen=True)
class ResponseFuzzer:
    """How one kind of answer is generated, broken and judged.

    ``budgets``: byte budgets to pick from, besides a random one of 1 to 600. ``mutated_below``:
    rolls under 0.15 encode a valid document, under this a mutated one, the rest break the bytes.
    ``splices``: two ``(old, new)`` byte replacements (first occurrence) that break this answer
    in ways the generic byte faults do not (duplicate keys, bad numbers, lone surrogates).
    """

    valid_document: Callable[[random.Random], dict[str, Any]]
    mutate_document: Callable[[dict[str, Any], random.Random], Any]
    oracle_accepts: Callable[[bytes, int], bool]
    budgets: tuple[int, ...]
    mutated_below: float
    splices: tuple[tuple[bytes, bytes], tuple[bytes, bytes]]

    def mutate_bytes(self, body: bytes, rng: random.Random) -> bytes:
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
        if choice in (6, 7):
            old, new = self.splices[choice - 6]
            return body.replace(old, new, 1)
        return body.decode("utf-8").encode("utf-16")

    def generate(self, rng: random.Random) -> tuple[bytes, int]:
        """One ``(body, budget)``: valid, a mutated document, or broken bytes."""
        document = self.valid_document(rng)
        budget = rng.choice([*self.budgets, rng.randint(1, 600)])
        roll = rng.random()
        if roll < 0.15:
            return encode(document, rng), budget  # valid (if within budget)
        if roll < self.mutated_below:
            mutated: Any = document
            for _ in range(rng.randint(1, 3)):
                if not isinstance(mutated, dict):
                    break
                mutated = self.mutate_document(mutated, rng)
            return encode(mutated, rng), budget
        return self.mutate_bytes(encode(document, rng), rng), budget

    def expected_pack(self, body: bytes, budget: int) -> str | None:
        """The text the whole hook must inject for this answer: its content when the oracle
        accepts a ``ready`` answer, else nothing."""
        if self.oracle_accepts(body, budget) and json.loads(body)["status"] == "ready":
            return str(json.loads(body)["content"])
        return None

    def hook_cases(self, *, seed: int, count: int, budgets: Sequence[int]) -> Iterator[HookCase]:
        """``count`` answers for end-to-end runs of the hook, each with a budget from
        ``budgets`` (the hook is given that budget, so the generator's own is not used)."""
        rng = random.Random(seed)
        for index in range(count):
            body, _ = self.generate(rng)
            budget = rng.choice(budgets)
            yield HookCase(index, body, budget, self.expected_pack(body, budget))

    def decode_cases(
        self, decode: Callable[[bytes, int], T], invalid: type[Exception], *, seed: int, cases: int
    ) -> DecodeRun[T]:
        """Generate ``cases`` bodies from ``seed`` and assert that ``decode`` accepts exactly
        those the oracle accepts, refusing the others with ``invalid`` and nothing else."""
        rng = random.Random(seed)
        accepted: list[Accepted[T]] = []
        rejected = 0
        for index in range(cases):
            body, budget = self.generate(rng)
            expected = self.oracle_accepts(body, budget)
            try:
                decoded = decode(body, budget)
            except invalid:
                assert not expected, (index, body[:300], budget)
                rejected += 1
                continue
            assert expected, (index, body[:300], budget)
            accepted.append(Accepted(index, body, budget, decoded))
        return DecodeRun(accepted, rejected)
