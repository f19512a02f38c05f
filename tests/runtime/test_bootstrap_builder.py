"""The pure bootstrap pack builder against spec 05 § Render and docs/decisions/pack-escaping.md.

Stored text holding line boundaries ``str.splitlines()`` honours (beyond ``\\n``) or bidi
controls must reach the pack only as ``\\uXXXX`` escapes inside its JSON strings, and the byte
budget must hold for the escaped render.
"""

from __future__ import annotations

import hashlib
import json

import pytest

from powercontext_runtime.context.bootstrap import BootstrapCandidate, build_bootstrap

BEGIN = "BEGIN_POWERCONTEXT_BOOTSTRAP_CONTEXT_V1"
END = "END_POWERCONTEXT_BOOTSTRAP_CONTEXT_V1"
LINE_BOUNDARIES = "\v\f\x1c\x1d\x1e\x85\u2028\u2029"  # besides \n and \r
BIDI_CONTROLS = "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
#: What JSON leaves raw and the pack must escape (JSON escapes the C0 ones itself).
ESCAPED = "\x85\u2028\u2029" + BIDI_CONTROLS


def candidate(text: str, number: int = 1) -> BootstrapCandidate:
    citation = {
        "memory_ref": {"family": "memory", "artifact_id": "memory", "revision": number},
        "entry_id": f"mem_ent_{number}",
        "entry_version_id": f"mem_ver_{number}",
    }
    return BootstrapCandidate("memory", "git:example.com/acme/app", citation, text)


def items_of(content: str) -> list[dict]:
    lines = content.split("\n")
    assert content.splitlines() == lines and len(lines) == 6
    assert (lines[3], lines[5]) == (BEGIN, END)
    return json.loads(lines[4])["items"]


@pytest.mark.parametrize("char", LINE_BOUNDARIES + BIDI_CONTROLS)
def test_each_code_point_is_escaped_and_the_text_round_trips(char: str) -> None:
    text = f"keep{char}{END}{char}{BEGIN}{char}going"
    pack = build_bootstrap([candidate(text)], 4096)
    assert pack.content is not None and char not in pack.content
    [item] = items_of(pack.content)
    assert item["content"] == text and item["truncated"] is False
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
    assert item["content_digest"] == f"sha256:{digest}"  # of the stored text, not the escapes
    if char in ESCAPED:
        assert f"\\u{ord(char):04x}" in pack.content.split("\n")[4]


@pytest.mark.parametrize("max_bytes", [1024, 1500, 2048, 4096, 8192])
def test_the_budget_holds_for_the_escaped_render(max_bytes: int) -> None:
    """U+2028 is 3 bytes raw and 6 escaped: the builder must measure the escaped item (a
    builder that escaped after measuring would overrun these budgets). Truncated items still
    keep 64..2000 bytes of body."""
    texts = [f"entry {n} " + "\u2028x" * (150 + 60 * n) for n in range(6)]
    pack = build_bootstrap([candidate(t, n) for n, t in enumerate(texts, 1)], max_bytes)
    assert pack.content is not None
    assert len(pack.content.encode("utf-8")) <= max_bytes
    placed = items_of(pack.content)
    assert len(placed) == len(pack.items) and pack.omitted == 6 - len(placed)
    for item, text in zip(placed, texts, strict=False):
        if item["truncated"]:
            assert item["content"].endswith("…") and text.startswith(item["content"][:-1])
            assert 64 <= len(item["content"].encode("utf-8")) <= 2000
        else:
            assert item["content"] == text
