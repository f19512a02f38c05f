"""flush_memory: captured sources become Memory exactly once (spec 06 § Extraction, issue 8)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from powercontext_runtime.composition import Runtime
from powercontext_runtime.contract.flush import FlushMemoryRequest
from powercontext_runtime.contract.memory import (
    CaptureSourceRequest,
    ListMemoryEntriesRequest,
)
from powercontext_runtime.errors import UnavailableError
from powercontext_runtime.extraction import CapturedSource, ExtractedEntry
from powercontext_runtime.extraction.directives import DirectivesExtractor
from powercontext_runtime.extraction.openai_compatible import OpenAICompatibleExtractor
from powercontext_runtime.search.analyzer import document_terms
from powercontext_runtime.services.flush import FlushService
from powercontext_runtime.store.flush import FlushStore
from powercontext_runtime.store.memory import MemoryStore
from tests.support.chat_model import FakeChatModel

SCOPE = "git:example.com/acme/flush"


def capture(rt: Runtime, source_id: str, content: str) -> int:
    request = CaptureSourceRequest(scope_id=SCOPE, source_id=source_id, content=content)
    return rt.sources.capture(request).position


def entries(rt: Runtime) -> list[tuple[str, str, list[str]]]:
    listed = rt.memory.list(ListMemoryEntriesRequest(scope_id=SCOPE))
    return [(e.kind, e.text, [r.source_id for r in e.source_refs]) for e in listed.entries]


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("remember: run make lint before pushing", "run make lint before pushing"),
        ("Remember : use uv", "use uv"),
        ("REMEMBER：全角冒号", "全角冒号"),
        ("记住：提交前运行单元测试", "提交前运行单元测试"),
        ("记住: 半角冒号也行", "半角冒号也行"),
        ("#remember deploys need a ticket", "deploys need a ticket"),
        ("#Remember: tabs\tare fine", "tabs\tare fine"),
        ("- remember: bullets are fine", "bullets are fine"),
        ("  > remember: quoted lines too", "quoted lines too"),
    ],
)
def test_directives_are_recognised(line: str, expected: str) -> None:
    source = CapturedSource(1, "p1", f"some preamble\n{line}\ntrailing text")
    assert DirectivesExtractor()([source]) == [ExtractedEntry("convention", expected, ("p1",))]


@pytest.mark.parametrize(
    "content",
    [
        "please remember: nothing here",
        "I remember: no",
        "remember:",
        "remember:    ",
        "remembering: no",
        "#remembered this",
    ],
)
def test_non_directives_are_ignored(content: str) -> None:
    assert DirectivesExtractor()([CapturedSource(1, "p1", content)]) == []


def test_flush_turns_directives_into_cited_conventions(runtime: Runtime) -> None:
    capture(runtime, "p1", "Fix the build.\nremember: run make lint before pushing")
    capture(runtime, "p2", "no directive in this one")
    capture(runtime, "p3", "记住：提交前运行单元测试")
    first = runtime.flush.flush(FlushMemoryRequest(scope_id=SCOPE))
    assert (first.status, first.previous_cursor, first.current_cursor) == ("processed", 0, 3)
    assert (first.high_watermark, first.processed_source_count) == (3, 3)
    assert first.memory is not None and first.memory.revision == 2
    assert entries(runtime) == [
        ("convention", "run make lint before pushing", ["p1"]),
        ("convention", "提交前运行单元测试", ["p3"]),
    ]
    again = runtime.flush.flush(FlushMemoryRequest(scope_id=SCOPE))
    assert (again.status, again.previous_cursor, again.current_cursor) == ("idle", 3, 3)
    assert again.memory == first.memory
    # The same directive captured again later is a no-op for Memory, but moves the cursor.
    capture(runtime, "p4", "remember: run make lint before pushing")
    later = runtime.flush.flush(FlushMemoryRequest(scope_id=SCOPE))
    assert (later.status, later.current_cursor, later.memory) == ("processed", 4, first.memory)


def test_windows_are_bounded(runtime: Runtime) -> None:
    for i in range(5):
        capture(runtime, f"p{i}", f"remember: fact number {i}")
    first = runtime.flush.flush(FlushMemoryRequest(scope_id=SCOPE, max_sources=2))
    assert (first.current_cursor, first.processed_source_count, first.high_watermark) == (2, 2, 5)
    rest = runtime.flush.flush(FlushMemoryRequest(scope_id=SCOPE))
    assert (rest.previous_cursor, rest.current_cursor) == (2, 5)
    assert [text for _, text, _ in entries(runtime)] == [f"fact number {i}" for i in range(5)]


def test_an_empty_scope_is_idle(runtime: Runtime) -> None:
    result = runtime.flush.flush(FlushMemoryRequest(scope_id="never-captured"))
    assert (result.status, result.current_cursor, result.memory) == ("idle", 0, None)


class _FakeModel(FakeChatModel):
    """The shared fake endpoint (tests/support/chat_model.py), answering in the extractor's
    schema."""

    def answer(self, entries: Any) -> None:
        self.answer_content(
            entries if isinstance(entries, str) else json.dumps({"entries": entries})
        )


@pytest.fixture
def model() -> Iterator[_FakeModel]:
    fake = _FakeModel()
    yield fake
    fake.close()


def _model_flush(runtime: Runtime, model: _FakeModel, timeout: float = 5) -> FlushService:
    extractor = OpenAICompatibleExtractor(model.url, "test-model", "sk-test", timeout)
    return FlushService(FlushStore(runtime.db, MemoryStore(runtime.db, document_terms)), extractor)


def test_openai_compatible_extractor_writes_validated_entries(
    sqlite_runtime: Runtime, model: _FakeModel
) -> None:
    runtime = sqlite_runtime
    capture(runtime, "p1", "We decided to use OceanBase for the team deployment.")
    capture(runtime, "p2", "Lint with ruff.")
    model.answer(
        [
            {
                "kind": "decision",
                "text": "The team deployment uses OceanBase",
                "source_ids": ["p1"],
            },
            {"kind": "convention", "text": "Lint with ruff"},
        ]
    )
    result = _model_flush(runtime, model).flush(FlushMemoryRequest(scope_id=SCOPE))
    assert result.status == "processed"
    assert entries(runtime) == [
        ("decision", "The team deployment uses OceanBase", ["p1"]),
        ("convention", "Lint with ruff", ["p1", "p2"]),
    ]
    sent = model.requests[0]
    assert sent["model"] == "test-model" and sent["response_format"] == {"type": "json_object"}
    assert "OceanBase" in sent["messages"][1]["content"]


@pytest.mark.parametrize(
    "failure",
    [
        "invalid_json",
        "not_an_object",
        "unknown_source",
        "oversize",
        "too_many",
        "http_500",
        "blank_text",
        "timeout",
    ],
)
def test_extractor_failures_leave_the_cursor(
    sqlite_runtime: Runtime, model: _FakeModel, failure: str
) -> None:
    runtime = sqlite_runtime
    capture(runtime, "p1", "We decided to use OceanBase.")
    if failure == "invalid_json":
        model.answer("{not json")
    elif failure == "not_an_object":
        model.answer('["a list"]')
    elif failure == "unknown_source":
        model.answer([{"kind": "fact", "text": "x", "source_ids": ["elsewhere"]}])
    elif failure == "oversize":
        model.answer([{"kind": "fact", "text": "x" * 300_000}])
    elif failure == "too_many":
        model.answer([{"kind": "fact", "text": f"fact {i}"} for i in range(51)])
    elif failure == "http_500":
        model.reply = (500, b'{"error": "boom"}')
    elif failure == "blank_text":
        model.answer([{"kind": "fact", "text": "   "}])
    else:
        model.answer([{"kind": "fact", "text": "late"}])
        model.slow = True
    service = _model_flush(runtime, model, timeout=0.5)
    with pytest.raises(UnavailableError) as caught:
        service.flush(FlushMemoryRequest(scope_id=SCOPE))
    assert caught.value.code == "extraction_unavailable"
    assert "OceanBase" not in caught.value.message
    assert entries(runtime) == []
    # The window is still there: a working extractor processes it afterwards.
    model.slow = False
    model.answer([{"kind": "decision", "text": "Use OceanBase"}])
    after = _model_flush(runtime, model).flush(FlushMemoryRequest(scope_id=SCOPE))
    assert (after.previous_cursor, after.current_cursor) == (0, 1)
