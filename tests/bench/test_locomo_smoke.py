"""Smoke test of ``bench/locomo.py`` (spec 08 Q2, LoCoMo dev split), so the script never rots.

The LoCoMo data is research data that never enters the repository, so the bench runs here on a
tiny LoCoMo-shaped file written to ``tmp_path``: two sessions, five turns (one with a photo
caption), four scored questions and two the protocol leaves out (category 5; no evidence).
Its questions each share one distinctive word with the turns, so the figures below are worked
out by hand, and the test asserts the bench's numbers against them: hit@10, MRR, pack hit,
pack precision, items per pack, empty shares for the runtime's lexical mode, and the same
search figures for the in-process BM25 baseline. The hybrid mode (the local model) is checked
for a complete report, never for its figures. A missing data file is a clear skip, exit 0.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "bench" / "locomo.py"

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]


def _turn(dia_id: str, speaker: str, text: str, caption: str | None = None) -> dict:
    turn = {"speaker": speaker, "dia_id": dia_id, "text": text}
    if caption:
        turn["blip_caption"], turn["img_url"] = caption, ["https://example.invalid/p.jpg"]
    return turn


TINY = [
    {
        "sample_id": "conv-tiny",
        "conversation": {
            "speaker_a": "Alice",
            "speaker_b": "Bob",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [
                _turn("D1:1", "Alice", "I adopted a greyhound named Biscuit."),
                _turn("D1:2", "Bob", "Lovely! I started learning the cello.", "a wooden cello"),
                _turn("D1:3", "Alice", "The weather was rainy all weekend."),
            ],
            "session_2_date_time": "1:14 pm on 25 May, 2023",
            "session_2": [
                _turn("D2:1", "Bob", "My cello teacher lives in Lisbon."),
                _turn("D2:2", "Alice", "Biscuit loves the beach."),
            ],
        },
        "qa": [
            # Only D1:1 says "greyhound": rank 1, a pack of that one item.
            {"question": "Which greyhound?", "answer": "Biscuit", "evidence": ["D1:1"],
             "category": 4},
            # Only D2:1 says "Lisbon"; the evidence string is the dataset's "a; b" form.
            {"question": "Who lives in Lisbon?", "answer": "Bob's teacher",
             "evidence": ["D2:1; D1:2"], "category": 1},
            # Both cello turns match, neither is the evidence (the dataset's "D:1:3" form).
            {"question": "Anything about the cello?", "answer": "rain", "evidence": ["D:1:3"],
             "category": 2},
            # Nothing in the scope: empty search, empty pack.
            {"question": "Quantum chromodynamics?", "answer": "-", "evidence": ["D2:2"],
             "category": 3},
            {"question": "Which greyhound again?", "answer": "-", "evidence": ["D1:1"],
             "category": 5},  # category 5: not asked
            {"question": "Which cello?", "answer": "-", "evidence": [], "category": 4},
        ],
    }
]  # fmt: skip


def _run(*args: str, timeout: int = 240) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args],
        capture_output=True, text=True, timeout=timeout, cwd=REPO,
    )  # fmt: skip


@pytest.fixture
def tiny(tmp_path: Path) -> Path:
    path = tmp_path / "locomo-tiny.json"
    path.write_text(json.dumps(TINY), encoding="utf-8")
    return path


def test_lexical_and_bm25_figures_match_the_hand_computed_ones(tiny: Path, tmp_path: Path) -> None:
    details = tmp_path / "details.json"
    proc = _run("--data", str(tiny), "--modes", "lexical,bm25", "--json", "--details", str(details))
    assert proc.returncode == 0, proc.stderr[-5000:]
    report = json.loads(proc.stdout)
    assert report["config"] | {"conversations": 1, "turns": 5, "questions": 4} == report["config"]
    assert report["questions_by_category"] == {"1": 1, "2": 1, "3": 1, "4": 1}
    lexical = report["results"]["lexical"]
    # Ranks 1, 1, none, none (empty): hit@10 2/4, MRR (1 + 1) / 4; packs of 1, 1, 2, 0 items
    # of which 1, 1, 0, 0 cite an evidence turn.
    assert lexical["questions"] == 4
    assert lexical["hit_at_10"] == 0.5 and lexical["mrr"] == 0.5
    assert lexical["search_empty"] == 0.25
    assert lexical["pack_hit"] == 0.5
    assert lexical["pack_precision"] == 0.5  # 2 evidence items of 4
    assert lexical["pack_items_mean"] == 1.0  # 4 items over 4 answers
    assert lexical["pack_empty"] == 0.25
    assert lexical["pack_bytes_mean"] > 0 and lexical["fallbacks"] == 0
    assert lexical["search_p50_ms"] > 0 and lexical["prepare_p50_ms"] > 0
    # BM25 (k1 1.2, b 0.75): "which", "who", "in", "anything", "about", "quantum", … are
    # absent or rank as worked out here. Q1: only D1:1 has "greyhound" (rank 1). Q2: D2:1 has
    # "lives", "in" and "lisbon" (rank 1). Q3: D1:2 (cello twice) and D2:1 lead; "the" then
    # ranks D2:2 (5 tokens) above D1:3 (7 tokens): the evidence is 4th. Q4: no token matches.
    bm25 = report["results"]["bm25"]
    assert bm25["hit_at_10"] == 0.75
    assert bm25["mrr"] == round((1 + 1 + 1 / 4) / 4, 4)
    assert bm25["search_empty"] == 0.25
    assert "pack_hit" not in bm25
    per_question = json.loads(details.read_text())
    assert [q["lexical"]["rank"] for q in per_question] == [1, 1, None, None]
    assert [q["bm25"]["rank"] for q in per_question] == [1, 1, 4, None]
    assert [q["lexical"]["pack_items"] for q in per_question] == [1, 1, 2, 0]
    assert per_question[1]["evidence"] == ["D1:2", "D2:1"]  # "D2:1; D1:2" split
    assert per_question[2]["evidence"] == ["D1:3"]  # "D:1:3" read as D1:3
    targets = {t["what"]: t for t in report["targets"]}
    assert targets["lexical hit@10"]["ok"] is False and targets["hybrid hit@10"]["ok"] is None
    assert "## LoCoMo dev split (Q2)" in report["markdown"]


def test_the_hybrid_mode_reports_every_figure(tiny: Path) -> None:
    proc = _run("--data", str(tiny), "--modes", "hybrid", "--json")
    assert proc.returncode == 0, proc.stderr[-5000:]
    report = json.loads(proc.stdout)
    assert report["skipped"] == {} and report["load"]["embedded"] == 5
    hybrid = report["results"]["hybrid"]
    assert hybrid["questions"] == 4 and hybrid["fallbacks"] == 0
    for key in ("hit_at_10", "mrr", "pack_hit", "pack_precision", "pack_empty"):
        assert 0 <= hybrid[key] <= 1, key
    assert hybrid["hit_at_10"] >= 0.5  # the lexical channel's two hits survive the fusion
    assert report["config"]["embeddings"] == "local model"


def test_a_missing_data_file_is_a_clear_skip(tmp_path: Path) -> None:
    missing = tmp_path / "absent.json"
    proc = _run("--data", str(missing), "--json", timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["skipped_reason"].startswith("LoCoMo data not found")
    assert f"not found at {missing}: skipped" in proc.stderr


def test_endpoint_options_go_together() -> None:
    proc = _run("--embeddings-url", "http://127.0.0.1:9/v1", timeout=60)
    assert proc.returncode == 2 and "go together" in proc.stderr
