"""The task-result parser on transcripts the real CLIs wrote, and on hostile ones (issue #31).

``tests/fixtures/task_results/`` holds one real transcript per host (Claude Code 2.1.328,
Codex 0.169.0) of a scripted session — a check fails, the agent edits ``calc.py``, the check
passes — with the Stop hook's stdin of the same run (``regenerate.py`` re-captures them).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import msgspec
import pytest

from powercontext_hook_kit.task_result import (
    GOAL_MAX_CHARS,
    MAX_CHECKS,
    MAX_TRANSCRIPT_BYTES,
    OUTPUT_TAIL_CHARS,
    TurnRef,
    build_task_result,
    is_task_result_body,
    parse_transcript,
)
from tests.support.task_session import (
    CHECK_COMMAND,
    FAILING_OUTPUT,
    PASSING_OUTPUT,
    TASK_PROMPT,
)

FIXTURES = Path(__file__).parents[1] / "fixtures" / "task_results"
HOSTS = ["claude-code", "codex"]
SCOPE = "git:example.com/acme/app"


def stop_event(host: str) -> dict[str, Any]:
    return json.loads((FIXTURES / f"{host}.stop-event.json").read_text("utf-8"))


def transcript(host: str) -> bytes:
    return (FIXTURES / f"{host}.transcript.jsonl").read_bytes()


def ref_of(host: str) -> TurnRef:
    event = stop_event(host)
    return TurnRef(event["session_id"], event.get("turn_id") or event.get("prompt_id"))


def parse(host: str, data: bytes, **kwargs: Any) -> dict[str, Any] | None:
    kwargs.setdefault("cwd", stop_event(host)["cwd"])
    parsed = parse_transcript(data, host, ref_of(host), **kwargs)
    return None if parsed is None else msgspec.to_builtins(parsed[0])


@pytest.mark.parametrize("host", HOSTS)
def test_real_transcript_gives_the_bounded_task(host: str) -> None:
    task = parse(host, transcript(host))
    assert task == {  # what the script did (tests/support/task_session.py)
        "goal": TASK_PROMPT,
        "outcome": "succeeded",
        "changes": [{"path": "calc.py", "added": 1, "removed": 1}],
        "checks": [
            {"command": CHECK_COMMAND, "exit_status": 1, "output_tail": FAILING_OUTPUT},
            {"command": CHECK_COMMAND, "exit_status": 0, "output_tail": PASSING_OUTPUT},
        ],
        "host": host,
        "session_ref": stop_event(host)["session_id"],
    }


@pytest.mark.parametrize("host", HOSTS)
def test_task_id_is_deterministic_and_valid(host: str) -> None:
    first = parse_transcript(transcript(host), host, ref_of(host))
    second = parse_transcript(transcript(host), host, ref_of(host))
    assert first is not None and second is not None
    assert first[1] == second[1]
    assert first[1].startswith(f"tr-{host}-") and len(first[1]) <= 128
    other = parse_transcript(
        transcript(host), host, TurnRef("another-session", ref_of(host).turn_id)
    )
    assert other is None or other[1] != first[1]


@pytest.mark.parametrize("host", HOSTS)
def test_build_reads_the_file_and_validates_the_body(host: str, tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_bytes(transcript(host))
    body = build_task_result(str(path), host, ref_of(host), SCOPE, cwd=stop_event(host)["cwd"])
    assert body is not None and is_task_result_body(body)
    document = json.loads(body)
    assert set(document) == {"scope_id", "task_id", "task"}
    assert document["scope_id"] == SCOPE


@pytest.mark.parametrize("host", HOSTS)
def test_nothing_beyond_the_bounded_fields_leaves(host: str) -> None:
    """File contents, tool inputs other than commands, assistant text, the system prompt and
    absolute paths stay in the transcript."""
    parsed = parse_transcript(transcript(host), host, ref_of(host), cwd=stop_event(host)["cwd"])
    assert parsed is not None
    sent = msgspec.json.encode(parsed[0]).decode()
    for absent in (
        "def add",
        "return a",
        "Fixed: add now adds",
        "/home/user",
        "Begin Patch",
        "You are",
        "environment_context",
    ):
        assert absent not in sent


@pytest.mark.parametrize("host", HOSTS)
def test_turn_without_the_passing_rerun_is_failed(host: str) -> None:
    """Cut the transcript right after the edit: the check failed and was never re-run, and the
    last command failed — ``failed``. Cut after the first check only — ``failed`` too."""
    lines = transcript(host).splitlines(keepends=True)
    marker = PASSING_OUTPUT.encode()
    cut = next(i for i, line in enumerate(lines) if marker in line)
    # Drop every line from the passing run on (and the later ones).
    task = parse(host, b"".join(lines[:cut]))
    assert task is not None
    assert task["outcome"] == "failed"
    assert [c["exit_status"] for c in task["checks"]] == [1]


@pytest.mark.parametrize("host", HOSTS)
def test_other_turn_or_session_is_not_recorded(host: str) -> None:
    assert (
        parse_transcript(transcript(host), host, TurnRef(ref_of(host).session_id, "nope")) is None
    )


@pytest.mark.parametrize("host", HOSTS)
@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"\n\n",
        b"not json\n{\n",
        b'[1,2,3]\n"string"\n42\n',
        b'{"type":"user","message":{"content":7}}\n',
        b'{"type":"event_msg","payload":{"type":"item_completed","turn_id":3,"item":[]}}\n',
        b'{"type":"user","message":{"role":"user","content":[{"type":"tool_result"}]}}\n',
        b"\xff\xfe\x00garbage" * 1000,
        b"[" * 100_000 + b"\n",
    ],
    ids=[
        "empty",
        "blank",
        "not-json",
        "non-objects",
        "wrong-types",
        "codex-wrong-types",
        "result-without-call",
        "binary",
        "deep-nesting",
    ],
)
def test_malformed_transcripts_give_nothing_and_never_raise(host: str, data: bytes) -> None:
    assert parse_transcript(data, host, TurnRef("s", None)) is None


@pytest.mark.parametrize("host", HOSTS)
def test_torn_and_huge_lines_are_skipped(host: str) -> None:
    """A torn last line (the host still writing) and an over-long line in the middle do not
    cost the rest of the turn."""
    lines = transcript(host).splitlines(keepends=True)
    huge = b'{"type":"user","x":"' + b"a" * (2 * 1024 * 1024) + b'"}\n'
    data = b"".join([*lines[:-1], huge, lines[-1], lines[-1][: len(lines[-1]) // 2]])
    task = parse(host, data)
    assert task is not None and task["outcome"] == "succeeded"


@pytest.mark.parametrize("host", HOSTS)
def test_tail_read_is_bounded(host: str, tmp_path: Path) -> None:
    """A transcript far larger than the read limit: only its tail is read, and the turn (at the
    end) is still found."""
    path = tmp_path / "big.jsonl"
    filler = b'{"type":"progress","data":"' + b"x" * 1000 + b'"}\n'
    with path.open("wb") as file:
        for _ in range(MAX_TRANSCRIPT_BYTES // len(filler) + 100):
            file.write(filler)
        file.write(transcript(host))
    assert os.path.getsize(path) > MAX_TRANSCRIPT_BYTES
    body = build_task_result(str(path), host, ref_of(host), SCOPE, cwd=stop_event(host)["cwd"])
    assert body is not None and json.loads(body)["task"]["outcome"] == "succeeded"


def test_unreadable_paths_give_nothing(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for path in (tmp_path / "missing.jsonl", tmp_path, fifo):
        assert build_task_result(str(path), "codex", TurnRef("s", "t"), SCOPE) is None
    assert parse_transcript(transcript("codex"), "other-host", ref_of("codex")) is None


def _claude_turn(prompt: str, calls: list[tuple[str, dict[str, Any], str, bool]]) -> bytes:
    """A minimal Claude Code turn in the real line shapes: one prompt, then tool calls."""
    lines = [
        {
            "type": "user",
            "promptId": "p1",
            "uuid": "u0",
            "sessionId": "s",
            "message": {"role": "user", "content": prompt},
        },
    ]
    for n, (name, arguments, output, failed) in enumerate(calls, start=1):
        lines.append(
            {
                "type": "assistant",
                "uuid": f"a{n}",
                "sessionId": "s",
                "message": {
                    "role": "assistant",
                    "content": [
                        {"type": "tool_use", "id": f"t{n}", "name": name, "input": arguments}
                    ],
                },
            }
        )
        lines.append(
            {
                "type": "user",
                "promptId": "p1",
                "uuid": f"r{n}",
                "sessionId": "s",
                "toolUseResult": {"stdout": output},
                "message": {
                    "role": "user",
                    "content": [
                        {
                            "type": "tool_result",
                            "tool_use_id": f"t{n}",
                            "content": output,
                            "is_error": failed,
                        }
                    ],
                },
            }
        )
    return b"".join(json.dumps(line).encode() + b"\n" for line in lines)


def _claude(prompt: str, calls: list[tuple[str, dict[str, Any], str, bool]]) -> dict[str, Any]:
    data = _claude_turn(prompt, calls)
    parsed = parse_transcript(data, "claude-code", TurnRef("s", "p1"), cwd="/w")
    assert parsed is not None
    return msgspec.to_builtins(parsed[0])


def test_caps_are_applied_before_sending() -> None:
    long_output = "head " + "x" * 10_000 + " THE-END"
    calls = [
        ("Bash", {"command": f"make test-{n} " + "y" * 2000}, long_output, False)
        for n in range(MAX_CHECKS + 10)
    ]
    task = _claude("g" * (GOAL_MAX_CHARS * 3), calls)
    assert len(task["goal"]) == GOAL_MAX_CHARS
    assert len(task["checks"]) == MAX_CHECKS
    assert task["checks"][-1]["command"].startswith(f"make test-{MAX_CHECKS + 9} ")
    assert all(len(c["command"]) <= 1000 for c in task["checks"])
    tail = task["checks"][0]["output_tail"]
    assert len(tail) == OUTPUT_TAIL_CHARS and tail.endswith("THE-END")


def test_secrets_only_travel_inside_bounded_fields() -> None:
    """The runtime redacts secrets; the hook must still send nothing beyond the bounded fields:
    a secret in a file written, or in an edit, never appears; one in a command's output does
    (only its tail) — for the runtime to redact."""
    secret = "sk-live-SENTINELSECRET0123456789"
    calls = [
        ("Write", {"file_path": "/w/.env", "content": f"API_KEY={secret}\n"}, "ok", False),
        ("Edit", {"file_path": "/w/a.py", "old_string": "x", "new_string": secret}, "ok", False),
        ("Bash", {"command": "pytest"}, "1 passed", False),
    ]
    task = _claude("deploy it", calls)
    assert secret not in json.dumps(task)
    assert task["changes"] == [
        {"path": ".env", "added": 1, "removed": 0},
        {"path": "a.py", "added": 1, "removed": 1},
    ]


@pytest.mark.parametrize(
    ("calls", "outcome"),
    [
        ([], "abandoned"),
        ([("Read", {"file_path": "/w/a"}, "x", False)], "abandoned"),
        (
            [
                ("Bash", {"command": "grep nope a"}, "Exit code 1\n", True),
                ("Bash", {"command": "pytest"}, "ok", False),
            ],
            "succeeded",
        ),
        (
            [
                ("Bash", {"command": "pytest"}, "Exit code 2\nboom", True),
                ("Bash", {"command": "ls"}, "a", False),
                ("Bash", {"command": "pytest"}, "Exit code 1\nboom", True),
                ("Bash", {"command": "ls"}, "a", False),
            ],
            "failed",
        ),
        ([("Bash", {"command": "pytest"}, "Exit code 1\nboom", True)], "failed"),
        ([("Bash", {"command": "pytest"}, "permission denied", True)], "failed"),
        ([("Write", {"file_path": "/w/n.py", "content": "a\nb\n"}, "ok", False)], "succeeded"),
        (
            [
                ("Bash", {"command": "pytest"}, "3 passed", False),
                ("Bash", {"command": "grep -rn old_name src/"}, "Exit code 1", True),
            ],
            "succeeded",
        ),
        (
            [
                ("Bash", {"command": "pytest"}, "3 passed", False),
                ("Bash", {"command": "cd app && rg -n old_name"}, "Exit code 1", True),
            ],
            "succeeded",
        ),
        (
            [
                ("Bash", {"command": "pytest"}, "3 passed", False),
                (
                    "Bash",
                    {"command": "grep -rn x nope/"},
                    "Exit code 2\ngrep: nope/: No such",
                    True,
                ),
            ],
            "failed",
        ),
        (
            [
                ("Bash", {"command": "pytest"}, "3 passed", False),
                ("Bash", {"command": "pytest | grep FAILED"}, "Exit code 1", True),
            ],
            "failed",
        ),
        (
            [
                ("Bash", {"command": "pytest"}, "3 passed", False),
                ("Bash", {"command": "make lint"}, "Exit code 1", True),
            ],
            "failed",
        ),
    ],
    ids=[
        "nothing",
        "read-only",
        "probe-then-pass",
        "retried-still-fails",
        "last-fails",
        "unknown-status",
        "changes-only",
        "last-search-finds-nothing",
        "last-search-after-cd-finds-nothing",
        "last-search-errors",
        "piped-search-is-not-judged",
        "last-silent-failure",
    ],
)
def test_outcome_rules(calls: list[tuple[str, dict[str, Any], str, bool]], outcome: str) -> None:
    task = _claude("do it", calls)
    assert task["outcome"] == outcome
    if any(call[2] == "permission denied" for call in calls):
        assert task["checks"][0]["exit_status"] == -1


def test_interrupted_turn_is_abandoned() -> None:
    data = _claude_turn("do it", [("Bash", {"command": "pytest"}, "ok", False)])
    interrupt = {
        "type": "user",
        "uuid": "i",
        "sessionId": "s",
        "message": {
            "role": "user",
            "content": [{"type": "text", "text": "[Request interrupted by user]"}],
        },
    }
    data += json.dumps(interrupt).encode() + b"\n"
    parsed = parse_transcript(data, "claude-code", TurnRef("s", "p1"))
    assert parsed is not None and parsed[0].outcome == "abandoned"


def test_codex_aborted_turn_is_abandoned() -> None:
    lines = transcript("codex").splitlines(keepends=True)
    turn = ref_of("codex").turn_id
    aborted = {
        "type": "event_msg",
        "payload": {"type": "turn_aborted", "turn_id": turn, "reason": "interrupted"},
    }
    task = parse("codex", b"".join(lines) + json.dumps(aborted).encode() + b"\n")
    assert task is not None and task["outcome"] == "abandoned"


def test_without_a_turn_id_the_last_turn_is_taken() -> None:
    for host in HOSTS:
        parsed = parse_transcript(transcript(host), host, TurnRef(ref_of(host).session_id, None))
        assert parsed is not None and parsed[0].outcome == "succeeded"


def _partial_then_whole(monkeypatch: pytest.MonkeyPatch, whole: bytes, cut: int) -> list[int]:
    """The transcript as the host was still writing it: the first read lacks the turn's last
    lines, later reads have them. Returns the list the reads are counted in."""
    import powercontext_hook_kit.task_result as module

    reads: list[int] = []
    partial = b"\n".join(whole.split(b"\n")[:cut]) + b"\n"

    def read(path: str, limit: int) -> tuple[bytes, bool]:
        reads.append(limit)
        return (partial if len(reads) == 1 else whole), True

    monkeypatch.setattr(module, "read_regular_file_tail", read)
    monkeypatch.setattr(module.time, "sleep", lambda _seconds: None)
    return reads


def test_the_transcript_is_read_again_until_it_holds_the_turn_s_last_message(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Claude Code ran Stop before its transcript had the turn's passing check (CI): the hook
    waits, within its budget, for the last assistant message the event names."""
    import time

    host = "claude-code"
    event = stop_event(host)
    whole = transcript(host)
    reads = _partial_then_whole(monkeypatch, whole, cut=21)
    body = build_task_result(
        "/t.jsonl", host, ref_of(host), SCOPE, cwd=event["cwd"],
        last_message=event["last_assistant_message"], wait_until=time.monotonic() + 30,
    )  # fmt: skip
    assert body is not None and len(reads) == 2
    task = json.loads(body)["task"]
    assert task["outcome"] == "succeeded"
    assert [c["exit_status"] for c in task["checks"]] == [1, 0]


def test_a_transcript_that_never_catches_up_is_parsed_as_it_is_once_the_wait_is_over(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import time

    host = "claude-code"
    event = stop_event(host)
    reads = _partial_then_whole(monkeypatch, transcript(host), cut=21)
    body = build_task_result(
        "/t.jsonl", host, ref_of(host), SCOPE, cwd=event["cwd"],
        last_message=event["last_assistant_message"], wait_until=time.monotonic() - 1,
    )  # fmt: skip
    assert body is not None and len(reads) == 1  # no budget left: no second read
    assert [c["exit_status"] for c in json.loads(body)["task"]["checks"]] == [1]
    # Without the message (an older host) the first read is the one parsed, as before.
    reads.clear()
    assert build_task_result("/t.jsonl", host, ref_of(host), SCOPE, cwd=event["cwd"])
    assert len(reads) == 1
