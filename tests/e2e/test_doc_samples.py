"""Every sample output in README.md and docs/ is what a real run prints (issue 16 item 8).

A block marked ``<!-- sample: NAME -->`` must equal what ``tools/doc_samples.py`` gets from a
fresh throw-away user today: the real ``codex`` CLI, both plugins, a real ``powercontext
serve``, with only the volatile parts normalised. A failure means the page is stale: run
``make docs`` and read the diff (a changed sample may need its prose changed too).
"""

from __future__ import annotations

import pytest

from tests.support.hosts import HostCLIs
from tools import doc_samples

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def samples(host_clis: HostCLIs) -> dict[str, str]:
    """One real run of the whole story (≈ 20 s): every sample, normalised."""
    return doc_samples.generate(clis=host_clis)


def test_every_marker_names_a_known_sample_and_every_sample_is_shown() -> None:
    used = {block.name for block in doc_samples.all_blocks()}
    assert used - set(doc_samples.SAMPLES) == set(), "markers naming no sample"
    assert set(doc_samples.SAMPLES) - used == set(), "samples no page shows"


def test_every_marked_block_is_the_output_of_a_real_run(samples: dict[str, str]) -> None:
    assert set(samples) == set(doc_samples.SAMPLES)
    stale = doc_samples.stale(samples)
    report = "\n\n".join(f"{block.where()}: {block.name}\n{diff}" for block, diff in stale)
    assert not stale, f"stale samples (run `make docs`):\n\n{report}"


def test_nothing_of_the_machine_is_left_in_a_sample(samples: dict[str, str]) -> None:
    """Normalisation leaves only what any user would see: no temp dir, no checkout path, no
    port or duration of this run (generate() refuses leftover paths itself)."""
    for name, text in samples.items():
        assert "/tmp/" not in text and "pc-docs-" not in text, (name, text)
        assert "127.0.0.1:" not in text or "127.0.0.1:7411" in text, (name, text)


def test_the_rules_replace_only_what_they_name() -> None:
    """The id, time and duration rules keep the words around what they replace."""
    table = doc_samples.GENERIC_RULES
    line = (
        'mem_ent_0123456789abcdef0123 v1 at 2026-12-01T23:44:56.123Z in 146 ms {"duration_ms":4}'
        " mem_ent_short"
    )
    assert doc_samples.normalise("any", line, table) == (
        'mem_ent_… v1 at … in … ms {"duration_ms":…} mem_ent_short'
    )
    shaped = "cand_0123456789abcdef0123 2026-12-01T23:44:56.123Z"
    assert doc_samples.normalise("candidate-show", shaped, table) == (
        "cand_6d1f0e4b9a2c7e3f5a80 2026-12-01T20:41:07.512Z"
    )
