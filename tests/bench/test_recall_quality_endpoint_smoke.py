"""Smoke test of ``bench/recall_quality.py --embeddings openai``: a user measures their own
OpenAI-compatible endpoint (docs/embeddings.md). The script runs as a subprocess, starts its
own daemon on the endpoint (here the stand-in server of tests/support/embedding_server.py,
answering bge-m3-sized vectors), asks the endpoint its dimension, and reports.

A small dataset written here keeps it quick; it checks that the channel was the endpoint
(every search hybrid, the model name sent, a cross-language question recalled through the
vector channel) and that the report says which endpoint it measured — never the figures of
the real dev set, which the stand-in's topic vectors say nothing about.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.embedding_server import EmbeddingServer, embedding_server

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "bench" / "recall_quality.py"

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

LINES = [
    {"type": "entry", "id": "e1", "kind": "convention",
     "text": "CI pipeline: GitHub Actions runs pytest on every pull request"},
    {"type": "entry", "id": "e2", "kind": "decision",
     "text": "Payment requests are idempotent so a retry never charges twice"},
    {"type": "entry", "id": "e3", "kind": "fact",
     "text": "The login flow uses OAuth and redirects to /auth/callback"},
    {"type": "query", "id": "q1", "category": "english", "query": "GitHub Actions pytest",
     "expected": ["e1"]},
    {"type": "query", "id": "q2", "category": "cross_language", "query": "持续集成流水线坏了",
     "expected": ["e1"]},
    {"type": "query", "id": "q3", "category": "paraphrase",
     "query": "will a repeated charge bill the customer twice", "expected": ["e2"]},
    {"type": "unrelated", "id": "u1", "query": "how long should bread dough rise"},
]  # fmt: skip


@pytest.fixture
def server() -> Iterator[EmbeddingServer]:
    with embedding_server() as running:
        running.dimension = 1024
        yield running


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("POWERCONTEXT_")}
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args],
        capture_output=True, text=True, timeout=290, cwd=REPO, env=env,
    )  # fmt: skip


def test_recall_quality_measures_a_users_endpoint(tmp_path: Path, server: EmbeddingServer) -> None:
    data = tmp_path / "dev.jsonl"
    data.write_text("".join(json.dumps(line) + "\n" for line in LINES), encoding="utf-8")
    proc = _run("--json", "--data", str(data), "--embeddings", "openai",
                "--embeddings-url", server.url, "--embeddings-model", "bge-m3")  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-5000:]
    report = json.loads(proc.stdout)
    assert report["config"]["embeddings"] == "openai"
    assert report["config"]["endpoint"] == f"bge-m3 at {server.url}"
    assert report["config"]["query_timeout"] == "30"
    assert report["search_modes"] == {"hybrid": 4}  # every prepare, none fell back
    assert report["issue_targets"]["cross_language"] == [1, 1]
    assert report["issue_targets"]["paraphrase"] == [1, 1]
    assert report["counts"]["unrelated_empty"] == [1, 1]
    assert "the endpoint answers vectors of 1024 dimensions" in proc.stderr
    assert server.last_model == "bge-m3"


@pytest.mark.parametrize(
    "args",
    [
        ("--embeddings", "openai"),
        ("--embeddings-url", "http://127.0.0.1:9/v1", "--embeddings-model", "m"),
        ("--embeddings", "openai", "--embeddings-url", "127.0.0.1:9/v1",
         "--embeddings-model", "m"),
    ],
)  # fmt: skip
def test_recall_quality_refuses_an_incomplete_endpoint(args: tuple[str, ...]) -> None:
    proc = _run(*args)
    assert proc.returncode == 2, proc.stderr
    assert "--embeddings" in proc.stderr
