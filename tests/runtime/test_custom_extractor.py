"""Your own flush extractor: ``POWERCONTEXT_EXTRACTOR=package.module:Name`` (issue 19 item 1).

The daemon imports the object the path names, refuses to start when it cannot, and treats
what the extractor returns like a model's answer: anything but entries citing the window, or
any exception, is ``extraction_unavailable`` with the cursor left where it was.
"""

from __future__ import annotations

import logging
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from powercontext_runtime.composition import Runtime
from powercontext_runtime.contract.flush import FlushMemoryRequest
from powercontext_runtime.contract.memory import CaptureSourceRequest, ListMemoryEntriesRequest
from powercontext_runtime.errors import UnavailableError
from powercontext_runtime.extraction import ExtractorLoadError, load_extractor
from powercontext_runtime.settings import ConfigError, Settings

SCOPE = "git:example.com/acme/custom-extractor"
SECRET = "the prompt text that must never reach a log"

MODULE = f'''
from powercontext_runtime.errors import UnavailableError
from powercontext_runtime.extraction import ExtractedEntry

#: What the next call returns (a test sets it); "raise" raises with the prompt in the message.
NEXT = None


class Decisions:
    """decision: lines become `decision` entries."""

    name = "decisions"

    def __call__(self, sources):
        if NEXT == "raise":
            raise RuntimeError("{SECRET}")
        if NEXT == "unavailable":
            raise UnavailableError("down", code="extraction_unavailable")
        if NEXT is not None:
            return NEXT
        return [
            ExtractedEntry("decision", line.split(":", 1)[1].strip(), (s.source_id,))
            for s in sources
            for line in s.content.splitlines()
            if line.lower().startswith("decision:")
        ]


ready = Decisions()
not_callable = object()


class Nameless:
    def __call__(self, sources):
        return []


class Broken:
    name = "broken"

    def __init__(self):
        raise ValueError("{SECRET}")
'''


@pytest.fixture
def module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A fresh importable module of extractors; its name is unique per test."""
    name = f"pc_test_extractors_{tmp_path.name.replace('-', '_')}"
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(MODULE), "utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield name
    sys.modules.pop(name, None)


@pytest.fixture
def custom_runtime(module: str, tmp_path: Path) -> Iterator[Runtime]:
    env = {"POWERCONTEXT_EXTRACTOR": f"{module}:Decisions"}
    settings = Settings.load(env=env, home=tmp_path / "home")
    runtime = Runtime.open(settings)
    try:
        yield runtime
    finally:
        runtime.close()


def _capture(runtime: Runtime, source_id: str, content: str) -> None:
    runtime.sources.capture(
        CaptureSourceRequest(scope_id=SCOPE, source_id=source_id, content=content)
    )


def _entries(runtime: Runtime) -> list[tuple[str, str, list[str]]]:
    listed = runtime.memory.list(ListMemoryEntriesRequest(scope_id=SCOPE))
    return [(e.kind, e.text, [r.source_id for r in e.source_refs]) for e in listed.entries]


def test_the_setting_keeps_an_object_path_as_written(tmp_path: Path) -> None:
    settings = Settings.load(env={"POWERCONTEXT_EXTRACTOR": "acme.memory:TicketExtractor"},
                             home=tmp_path)  # fmt: skip
    assert settings.extractor == "acme.memory:TicketExtractor"
    assert Settings.load(env={"POWERCONTEXT_EXTRACTOR": "Directives"}, home=tmp_path).extractor \
        == "directives"  # fmt: skip


@pytest.mark.parametrize("value", ["acme.memory", "acme:", ":Name", "acme memory:X", "a-b:C"])
def test_anything_else_is_a_configuration_error(tmp_path: Path, value: str) -> None:
    with pytest.raises(ConfigError, match=r"package\.module:Attribute"):
        Settings.load(env={"POWERCONTEXT_EXTRACTOR": value}, home=tmp_path)


def test_a_class_is_instantiated_and_an_object_used_as_it_is(module: str) -> None:
    assert load_extractor(f"{module}:Decisions").name == "decisions"
    ready = load_extractor(f"{module}:ready")
    assert ready is sys.modules[module].ready


@pytest.mark.parametrize(
    ("attribute", "message"),
    [
        ("Missing", "cannot be loaded: module .* has no attribute 'Missing'"),
        ("not_callable", "must be callable and have a name"),
        ("Nameless", "must be callable and have a name"),
        ("Broken", r"cannot be created \(ValueError\)"),
    ],
)
def test_an_unusable_extractor_is_refused_by_name(
    module: str, attribute: str, message: str
) -> None:
    with pytest.raises(ExtractorLoadError, match=message) as caught:
        load_extractor(f"{module}:{attribute}")
    assert SECRET not in str(caught.value)


def test_the_runtime_does_not_open_with_a_missing_module(tmp_path: Path) -> None:
    settings = Settings.load(env={"POWERCONTEXT_EXTRACTOR": "no_such_module_here:X"},
                             home=tmp_path / "home")  # fmt: skip
    with pytest.raises(ConfigError, match="No module named 'no_such_module_here'"):
        Runtime.open(settings)


def test_flush_writes_what_the_custom_extractor_found(custom_runtime: Runtime) -> None:
    _capture(custom_runtime, "p1", "Decision: the importer runs nightly\nremember: not this")
    _capture(custom_runtime, "p2", "nothing to keep")
    result = custom_runtime.flush.flush(FlushMemoryRequest(scope_id=SCOPE))
    assert (result.status, result.current_cursor) == ("processed", 2)
    assert custom_runtime.flush.extractor_name == "decisions"
    assert _entries(custom_runtime) == [("decision", "the importer runs nightly", ["p1"])]


@pytest.mark.parametrize(
    "answer",
    [
        "raise",
        "unavailable",
        "not a list",
        "entry_outside_window",
        "no_evidence",
        "not_entries",
        "too_many",
    ],
)
def test_a_failing_custom_extractor_leaves_the_cursor(
    custom_runtime: Runtime, module: str, answer: str, caplog: pytest.LogCaptureFixture
) -> None:
    from powercontext_runtime.extraction import ExtractedEntry

    extractors = sys.modules[module]
    extractors.NEXT = {
        "not a list": ("decision", "x", ("p1",)),
        "entry_outside_window": [ExtractedEntry("fact", "x", ("elsewhere",))],
        "no_evidence": [ExtractedEntry("fact", "x", ())],
        "not_entries": [{"kind": "fact", "text": "x", "source_ids": ["p1"]}],
        "too_many": [ExtractedEntry("fact", f"x {i}", ("p1",)) for i in range(501)],
    }.get(answer, answer)
    _capture(custom_runtime, "p1", f"Decision: keep this\n{SECRET}")
    with caplog.at_level(logging.WARNING), pytest.raises(UnavailableError) as caught:
        custom_runtime.flush.flush(FlushMemoryRequest(scope_id=SCOPE))
    assert caught.value.code == "extraction_unavailable"
    assert _entries(custom_runtime) == []
    assert SECRET not in caplog.text and SECRET not in caught.value.message
    # The window is still there: once the extractor works, the same prompt is processed.
    extractors.NEXT = None
    after = custom_runtime.flush.flush(FlushMemoryRequest(scope_id=SCOPE))
    assert (after.previous_cursor, after.current_cursor) == (0, 1)
    assert _entries(custom_runtime) == [("decision", "keep this", ["p1"])]
