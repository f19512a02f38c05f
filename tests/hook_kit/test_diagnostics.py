"""Diagnostic lines and the log file; the runner's guard against every failure, even bugs."""

from __future__ import annotations

import io
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from powercontext_hook_kit import (
    OUTCOMES,
    Diagnostics,
    HostAdapter,
    PromptEvent,
    StandardHostAdapter,
    outcome_for,
    run_hook,
)
from powercontext_hook_kit.diagnostics import LOG_FILE_NAME
from powercontext_hook_kit.transport import HttpFailure, HttpResponse
from tests.hook_kit.conftest import (
    DEBUG_OUTCOMES,
    KIT_OUTCOMES,
    SPEC_OUTCOMES,
    event,
    hook_env,
    parse_lines,
)
from tests.hook_kit.stub import PREPARE, Reply, StubRuntime, prepared_body


def test_the_outcome_set_is_the_spec_set_plus_debug_success() -> None:
    assert set(OUTCOMES) == SPEC_OUTCOMES | KIT_OUTCOMES | DEBUG_OUTCOMES


@pytest.mark.parametrize(
    ("result", "outcome"),
    [
        (HttpFailure("timeout"), "server_unavailable"),
        (HttpFailure("connection_failed"), "server_unavailable"),
        (HttpFailure("untrusted_socket"), "server_unavailable"),  # refused: nothing was sent
        (HttpFailure("oversize", 200), "invalid_response"),
        (HttpFailure("redirect", 302), "invalid_response"),
        (HttpFailure("malformed"), "invalid_response"),
        (HttpResponse(401, b""), "authentication_failed"),
        (HttpResponse(403, b""), "forbidden"),
        (HttpResponse(404, b""), "version_mismatch"),
        (HttpResponse(500, b""), "server_unavailable"),
        (HttpResponse(503, b""), "server_unavailable"),
        (HttpResponse(599, b""), "server_unavailable"),
        (HttpResponse(422, b""), "invalid_response"),
        (HttpResponse(200, b""), "invalid_response"),
    ],
)
def test_outcome_mapping(result: HttpFailure | HttpResponse, outcome: str) -> None:
    assert outcome_for(result) == outcome


def test_one_line_per_operation(tmp_path: Path) -> None:
    stream = io.StringIO()
    diagnostics = Diagnostics("powercontext.codex.user-prompt-submit", stream)
    diagnostics.record("context_prepare", "empty", http_status=200, content_bytes=0)
    diagnostics.record("context_prepare", "invalid_response")
    diagnostics.record("source_capture", "captured")  # success: silent without debug
    assert diagnostics.recorded("source_capture")
    diagnostics.record("source_capture", "server_unavailable")  # a failure after it still shows
    diagnostics.record("source_capture", "invalid_response")
    outcomes = [line["outcome"] for line in parse_lines(stream.getvalue())]
    assert outcomes == ["empty", "server_unavailable"]


def test_writing_never_raises(tmp_path: Path) -> None:
    class Broken(io.StringIO):
        def write(self, text: str) -> int:
            raise BrokenPipeError

    blocked = tmp_path / "file-not-dir"
    blocked.write_text("")
    diagnostics = Diagnostics("c", Broken(), log_dir=lambda: str(blocked / "sub"))
    diagnostics.record("context_prepare", "server_unavailable")

    def explode() -> str:
        raise RuntimeError("no data dir")

    Diagnostics("c", io.StringIO(), log_dir=explode).record("context_prepare", "skipped")


def test_the_log_file_rotates_and_stays_bounded(tmp_path: Path) -> None:
    folder = tmp_path / "plugin-data" / "nested"  # created on demand
    for _ in range(6000):
        diagnostics = Diagnostics("powercontext.codex.x", None, log_dir=lambda: str(folder))
        diagnostics.record("context_prepare", "server_unavailable", duration_ms=12)
    current = folder / LOG_FILE_NAME
    previous = folder / f"{LOG_FILE_NAME}.1"
    assert previous.exists()
    assert current.stat().st_size <= 256 * 1024 + 200
    assert previous.stat().st_size <= 256 * 1024 + 200
    assert sorted(p.name for p in folder.iterdir()) == [LOG_FILE_NAME, f"{LOG_FILE_NAME}.1"]
    for line in current.read_text().splitlines():
        assert json.loads(line)["outcome"] == "server_unavailable"
    assert (current.stat().st_mode & 0o777) == 0o600


class ExplodingAdapter(StandardHostAdapter):
    def __init__(self, where: str) -> None:
        super().__init__("codex")
        self.where = where

    def prompt_event(self, payload: Mapping[str, Any]) -> PromptEvent:
        if self.where == "event":
            raise KeyError("bug while reading the event")
        return super().prompt_event(payload)

    def render_output(self, hook_event_name: str, additional_context: str) -> bytes:
        raise RuntimeError("bug while rendering")


@pytest.mark.parametrize("where", ["event", "output"])
def test_bugs_become_a_diagnostic_and_exit_zero(
    stub: StubRuntime, tmp_path: Path, where: str
) -> None:
    stub.replies[PREPARE] = Reply(200, prepared_body(None if where == "event" else "x"))
    adapter: HostAdapter = ExplodingAdapter(where)
    stdout, stderr = io.BytesIO(), io.StringIO()
    stdin = io.BytesIO(json.dumps(event()).encode())
    env = hook_env(stub.url, tmp_path)
    code = run_hook(adapter, "user-prompt-submit", stdin, stdout, stderr, env)
    assert (code, stdout.getvalue()) == (0, b"")
    lines = [line for line in parse_lines(stderr.getvalue()) if line["event"] == "context_prepare"]
    assert [line["outcome"] for line in lines] == ["invalid_response"]


def test_an_unknown_hook_name_is_skipped(tmp_path: Path) -> None:
    stdout, stderr = io.BytesIO(), io.StringIO()
    code = run_hook(
        StandardHostAdapter("codex"), "pre-tool-use", io.BytesIO(b"{}"), stdout, stderr, {}
    )
    assert (code, stdout.getvalue()) == (0, b"")
    assert parse_lines(stderr.getvalue())[0]["outcome"] == "skipped"


def test_the_adapter_protocol_is_satisfied() -> None:
    assert isinstance(StandardHostAdapter("claude-code"), HostAdapter)
    with pytest.raises(ValueError):
        StandardHostAdapter("Claude Code")
