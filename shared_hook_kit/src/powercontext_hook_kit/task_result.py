"""The bounded task result of one host turn, built from the host's own transcript (issue #31).

At the end of a turn (the hosts' ``Stop`` hook, ``docs/decisions/real-host-facts.md`` § 11) the
plugins record what the agent did as evidence (``POST /v1/task-results/record``): the user's
request, the files it changed (added/removed line counts), the commands it ran (exit status and
a short output tail) and an outcome. This module turns one transcript into that request body
and does nothing else: no I/O but one bounded read of the transcript's *tail*
(:data:`MAX_TRANSCRIPT_BYTES`), no network, no logging. It never raises for what is in the
file — a transcript it cannot read, or that holds no turn, gives ``None``.

Only the bounded fields of the contract leave the host: the goal, file paths (relative to the
session cwd when inside it), line counts, command lines, exit statuses and output tails, each
cut to its cap here (the runtime refuses anything over a cap, and redacts secrets before
storage). Tool inputs, file contents, assistant messages and everything else in the
transcript stay where they are.

Outcome (decided here, documented in ``docs/decisions/task-result-hook.md``):

* ``abandoned`` — the turn was interrupted, or it neither ran a command nor changed a file;
* ``failed`` — the last command of the turn failed, or a command that failed was run again and
  its last run failed too (the agent retried a check and it still fails);
* ``succeeded`` — otherwise. A command that failed once and was never run again (``grep``
  finding nothing, a probe) does not fail the turn: only checks the agent came back to count.
  A search that found nothing (``grep``/``rg``/``git grep``: status 1, no output) is an answer,
  not a failure, even as the turn's last command (``grep -rn old_name src/`` confirming that a
  rename left nothing behind).

A non-zero exit status, and ``-1`` (unknown: the host reported an error without a status), are
failures.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Iterator, Mapping
from typing import Annotated, Any, Literal

import msgspec

from .digest import sha256
from .files import read_regular_file_tail

__all__ = [
    "GOAL_MAX_CHARS",
    "MAX_CHANGES",
    "MAX_CHECKS",
    "MAX_TRANSCRIPT_BYTES",
    "OUTPUT_TAIL_CHARS",
    "TASK_RESULT_SPOOL_DIR",
    "TaskChange",
    "TaskCheck",
    "TaskResult",
    "TaskResultRequest",
    "TurnRef",
    "build_task_result",
    "is_task_result_body",
    "parse_transcript",
    "task_id_for",
]

#: How much of a transcript is read: its last 8 MiB. A turn's own lines sit at the end; a
#: session of hours can grow to hundreds of MiB, which no hook may read within its budget.
MAX_TRANSCRIPT_BYTES = 8 * 1024 * 1024
#: Lines longer than this are skipped undecoded (a pasted file, an image): no field we keep
#: comes from a line that long, and decoding it would cost the budget.
MAX_LINE_BYTES = 1024 * 1024

# The wire contract's caps (/work/notes/task-result-contract.md); past any of them the runtime
# answers 422, so every value is cut to them before sending.
GOAL_MAX_CHARS = 2000
PATH_MAX_CHARS = 512
COMMAND_MAX_CHARS = 1000
#: The contract allows 2000; the end of an output says whether a check passed, and less of it
#: means less of the agent's tool output (and of what a secret scanner might miss) leaves.
OUTPUT_TAIL_CHARS = 1000
MAX_CHANGES = 100
MAX_CHECKS = 50
MAX_LINES = 10_000_000
TASK_ID_MAX_CHARS = 128
_TASK_ID_DOMAIN = b"powercontext.task-result.v1"

Outcome = Literal["succeeded", "failed", "abandoned"]

_Goal = Annotated[str, msgspec.Meta(min_length=1, max_length=GOAL_MAX_CHARS)]
_Path = Annotated[str, msgspec.Meta(min_length=1, max_length=PATH_MAX_CHARS)]
_Command = Annotated[str, msgspec.Meta(min_length=1, max_length=COMMAND_MAX_CHARS)]
_Tail = Annotated[str, msgspec.Meta(max_length=2000)]
_Count = Annotated[int, msgspec.Meta(ge=0, le=MAX_LINES)]
_Exit = Annotated[int, msgspec.Meta(ge=-1, le=255)]
_Host = Annotated[str, msgspec.Meta(min_length=1, max_length=64, pattern=r"^[a-z0-9][a-z0-9._-]*$")]
_SessionRef = Annotated[str, msgspec.Meta(min_length=1, max_length=256)]
_TaskId = Annotated[
    str,
    msgspec.Meta(
        min_length=1, max_length=TASK_ID_MAX_CHARS, pattern=r"^[A-Za-z0-9][A-Za-z0-9._:-]*$"
    ),
]
_ScopeId = Annotated[str, msgspec.Meta(min_length=1, max_length=256)]


class TaskChange(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """One changed file: its path and how many lines the turn added and removed."""

    path: _Path
    added: _Count
    removed: _Count


class TaskCheck(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """One command the agent ran, in the order run: exit status (-1 = unknown) and output end."""

    command: _Command
    exit_status: _Exit
    output_tail: _Tail = ""


class TaskResult(msgspec.Struct, forbid_unknown_fields=True, frozen=True, omit_defaults=True):
    """The ``task`` object of ``record_task_result``, exactly as the contract has it."""

    goal: _Goal
    outcome: Outcome
    changes: Annotated[list[TaskChange], msgspec.Meta(max_length=MAX_CHANGES)] = []
    checks: Annotated[list[TaskCheck], msgspec.Meta(max_length=MAX_CHECKS)] = []
    host: _Host | None = None
    session_ref: _SessionRef | None = None


class TaskResultRequest(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """The whole ``POST /v1/task-results/record`` body."""

    scope_id: _ScopeId
    task_id: _TaskId
    task: TaskResult


_REQUEST_DECODER = msgspec.json.Decoder(TaskResultRequest)
#: The folder of the task-result spool in the plugin data dir (the capture spool's machinery).
TASK_RESULT_SPOOL_DIR = "task-result-spool"


def is_task_result_body(raw: bytes) -> bool:
    """Whether ``raw`` is a ``record_task_result`` body within the contract (spool entries)."""
    try:
        _REQUEST_DECODER.decode(raw)
    except (msgspec.MsgspecError, ValueError, TypeError, RecursionError):
        return False
    return True


class TurnRef(msgspec.Struct, frozen=True):
    """Which turn the hook fired for: the host's session id and, when the host says, the turn
    (Codex ``turn_id``, Claude Code ``prompt_id``); without one the transcript's last turn."""

    session_id: str | None = None
    turn_id: str | None = None


class _Turn:
    """What one turn did, as read from a transcript (unbounded until :func:`_bounded`)."""

    __slots__ = ("changes", "checks", "goal", "interrupted", "last_item", "turn_key")

    def __init__(self) -> None:
        self.goal: str | None = None
        self.turn_key: str | None = None  # the host's id of the turn
        self.last_item: str | None = None  # the id of the turn's last item (see task_id_for)
        self.interrupted = False
        self.checks: list[tuple[str, int, str]] = []
        self.changes: dict[str, list[int]] = {}

    def change(self, path: str, added: int, removed: int) -> None:
        counts = self.changes.setdefault(path, [0, 0])
        counts[0] += added
        counts[1] += removed


# --- reading ----------------------------------------------------------------------------------


def _records(data: bytes, complete: bool, needles: tuple[bytes, ...]) -> Iterator[dict[str, Any]]:
    """The JSON objects of the JSONL ``data`` whose line holds one of ``needles``.

    A tail that starts mid-file drops its first (partial) line; over-long, undecodable and
    non-object lines are skipped — a torn last line (the host still writing) included.
    """
    lines = data.split(b"\n")
    if not complete and lines:
        lines = lines[1:]
    for line in lines:
        if not line or len(line) > MAX_LINE_BYTES or not any(n in line for n in needles):
            continue
        try:
            record = msgspec.json.decode(line)
        except (msgspec.DecodeError, RecursionError):
            continue
        if isinstance(record, dict):
            yield record


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _blocks_text(content: object) -> str:
    """The text of a message's ``content``: a string, or the ``text`` of its blocks."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            block["text"]
            for block in content
            if isinstance(block, dict) and isinstance(block.get("text"), str)
        )
    return ""


def _line_count(text: object) -> int:
    if not isinstance(text, str) or not text:
        return 0
    return text.count("\n") + (0 if text.endswith("\n") else 1)


def _diff_counts(lines: Iterator[str]) -> tuple[int, int]:
    added = removed = 0
    for line in lines:
        if line.startswith("+") and not line.startswith("+++"):
            added += 1
        elif line.startswith("-") and not line.startswith("---"):
            removed += 1
    return added, removed


def _relative(path: str, cwd: str | None) -> str:
    """``path`` relative to the session cwd when inside it (no home folder leaves the host)."""
    if cwd and os.path.isabs(path):
        root = cwd.rstrip("/") + "/"
        if path.startswith(root):
            return path[len(root) :] or path
    return path


# --- Claude Code ------------------------------------------------------------------------------

#: Cheap pre-filter before decoding a line (either JSON spacing): user and assistant records.
#: Claude Code's ``api-request*`` bookkeeping lines (most of a transcript's bytes) hold
#: ``"role":"user"`` but no ``"type":"user"``, so they are skipped undecoded.
_CLAUDE_NEEDLES = (
    b'"type":"user"',
    b'"type":"assistant"',
    b'"type": "user"',
    b'"type": "assistant"',
)
_CLAUDE_EXIT = re.compile(r"\AExit code (-?\d+)\n?")
_CLAUDE_EDIT_TOOLS = frozenset({"Edit", "MultiEdit", "Write", "NotebookEdit"})
_CLAUDE_INTERRUPT = "[Request interrupted by user"


def _claude_prompt(record: Mapping[str, Any]) -> str | None:
    """The user's own prompt in a ``user`` record (not a tool result, not a meta message)."""
    if record.get("isMeta") or record.get("isSidechain") or record.get("toolUseResult"):
        return None
    message = record.get("message")
    if not isinstance(message, dict):
        return None
    content = message.get("content")
    if isinstance(content, list) and any(
        isinstance(b, dict) and b.get("type") == "tool_result" for b in content
    ):
        return None
    text = _blocks_text(content).strip()
    return text or None


def _claude_turn(records: Iterator[dict[str, Any]], ref: TurnRef, cwd: str | None) -> _Turn | None:
    turn: _Turn | None = None
    calls: dict[str, tuple[str, dict[str, Any]]] = {}
    for record in records:
        kind = record.get("type")
        if ref.session_id and record.get("sessionId") not in (None, ref.session_id):
            continue
        if kind == "user":
            prompt = _claude_prompt(record)
            if prompt is not None:
                if prompt.startswith(_CLAUDE_INTERRUPT):
                    if turn is not None:
                        turn.interrupted = True
                    continue
                prompt_id = _text(record.get("promptId"))
                if ref.turn_id is None or prompt_id == ref.turn_id:
                    turn = _Turn()
                    turn.goal = prompt
                    turn.turn_key = prompt_id or _text(record.get("uuid"))
                    turn.last_item = _text(record.get("uuid"))
                    calls = {}
                elif turn is not None:
                    turn = None  # a later prompt than the one asked for: its turn ended
                continue
            if turn is not None:
                _claude_results(record, calls, turn, cwd)
        elif kind == "assistant" and turn is not None:
            message = record.get("message")
            content = message.get("content") if isinstance(message, dict) else None
            for block in content if isinstance(content, list) else ():
                if isinstance(block, dict) and block.get("type") == "tool_use":
                    call_id, name = _text(block.get("id")), _text(block.get("name"))
                    arguments = block.get("input")
                    if call_id and name and isinstance(arguments, dict):
                        calls[call_id] = (name, arguments)
            turn.last_item = _text(record.get("uuid")) or turn.last_item
    return turn


def _claude_results(
    record: Mapping[str, Any],
    calls: dict[str, tuple[str, dict[str, Any]]],
    turn: _Turn,
    cwd: str | None,
) -> None:
    message = record.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    extra = record.get("toolUseResult")
    if isinstance(extra, dict) and extra.get("interrupted") is True:
        turn.interrupted = True
    for block in content if isinstance(content, list) else ():
        if not (isinstance(block, dict) and block.get("type") == "tool_result"):
            continue
        call = calls.pop(str(block.get("tool_use_id")), None)
        if call is None:
            continue
        name, arguments = call
        failed = block.get("is_error") is True
        output = _blocks_text(block.get("content"))
        if name == "Bash":
            command = _text(arguments.get("command"))
            if command is None:
                continue
            status = 0
            if failed:
                match = _CLAUDE_EXIT.match(output)
                status = int(match.group(1)) if match else -1
                output = output[match.end() :] if match else output
            turn.checks.append((command, status, output))
        elif name in _CLAUDE_EDIT_TOOLS and not failed:
            path = _text(arguments.get("file_path")) or _text(arguments.get("notebook_path"))
            if path is not None:
                added, removed = _claude_edit_counts(arguments, extra)
                turn.change(_relative(path, cwd), added, removed)
        turn.last_item = _text(record.get("uuid")) or turn.last_item


def _claude_edit_counts(arguments: Mapping[str, Any], extra: object) -> tuple[int, int]:
    """Lines added and removed by one Edit/MultiEdit/Write: from the host's ``structuredPatch``
    when it recorded one, else from the tool's input."""
    if isinstance(extra, dict):
        patch = extra.get("structuredPatch")
        if isinstance(patch, list) and patch:
            return _diff_counts(
                line
                for hunk in patch
                if isinstance(hunk, dict) and isinstance(hunk.get("lines"), list)
                for line in hunk["lines"]
                if isinstance(line, str)
            )
        if extra.get("type") == "create":
            return _line_count(extra.get("content")), 0
    if "content" in arguments:  # Write
        return _line_count(arguments.get("content")), 0
    edits = arguments.get("edits")
    pairs = edits if isinstance(edits, list) else [arguments]
    added = removed = 0
    for edit in pairs:
        if isinstance(edit, dict):
            added += _line_count(edit.get("new_string"))
            removed += _line_count(edit.get("old_string"))
    return added, removed


# --- Codex ------------------------------------------------------------------------------------

_CODEX_NEEDLES = (b'"item_completed"', b'"task_started"', b'"turn_aborted"')
_SHELL_WRAPPERS = frozenset({"bash", "sh", "zsh", "/bin/bash", "/bin/sh", "/bin/zsh"})


def _codex_command(item: Mapping[str, Any]) -> str | None:
    """The command line as the model wrote it: ``["/bin/bash", "-lc", "<cmd>"]`` → ``<cmd>``."""
    command = item.get("command")
    if isinstance(command, str):
        return command or None
    if isinstance(command, list) and all(isinstance(part, str) for part in command):
        if len(command) == 3 and command[0] in _SHELL_WRAPPERS and command[1] in ("-lc", "-c"):
            return command[2] or None
        return " ".join(command) or None
    return None


def _codex_turn(records: Iterator[dict[str, Any]], ref: TurnRef, cwd: str | None) -> _Turn | None:
    turns: dict[str, _Turn] = {}
    last_started: str | None = None
    for record in records:
        if record.get("type") != "event_msg":
            continue
        payload = record.get("payload")
        if not isinstance(payload, dict):
            continue
        turn_id = _text(payload.get("turn_id"))
        if turn_id is None or (ref.turn_id is not None and turn_id != ref.turn_id):
            continue
        kind = payload.get("type")
        turn = turns.get(turn_id)
        if kind == "task_started":
            turns[turn_id] = turn = _Turn()
            turn.turn_key = turn_id
            last_started = turn_id
            continue
        if turn is None:
            if ref.turn_id is None:
                continue  # a turn whose start is before the tail we read
            turns[turn_id] = turn = _Turn()
            turn.turn_key = turn_id
            last_started = turn_id
        if kind == "turn_aborted":
            turn.interrupted = True
        elif kind == "item_completed" and isinstance(payload.get("item"), dict):
            _codex_item(payload["item"], turn, cwd)
    return turns.get(ref.turn_id or last_started or "")


def _codex_item(item: Mapping[str, Any], turn: _Turn, cwd: str | None) -> None:
    kind = item.get("type")
    if kind == "UserMessage":
        if turn.goal is None:
            turn.goal = _blocks_text(item.get("content")).strip() or None
    elif kind == "CommandExecution":
        command = _codex_command(item)
        if command is None:
            return
        status = item.get("exit_code")
        if not isinstance(status, int) or isinstance(status, bool):
            status = -1
        output = item.get("aggregated_output")
        turn.checks.append((command, status, output if isinstance(output, str) else ""))
    elif kind == "FileChange" and item.get("status") == "completed":
        changes = item.get("changes")
        for path, change in changes.items() if isinstance(changes, dict) else ():
            if not isinstance(path, str) or not isinstance(change, dict):
                continue
            diff = change.get("unified_diff")
            if isinstance(diff, str):
                added, removed = _diff_counts(iter(diff.split("\n")))
            elif change.get("type") == "delete":
                added, removed = 0, _line_count(change.get("content"))
            else:
                added, removed = _line_count(change.get("content")), 0
            turn.change(_relative(path, cwd), added, removed)
    else:
        return
    turn.last_item = _text(item.get("id")) or turn.last_item


# --- the result ---------------------------------------------------------------------------------


_SEARCH_PROGRAMS = frozenset({"grep", "egrep", "fgrep", "rg", "ag", "ack"})


def _no_match(command: str, status: int, output: str) -> bool:
    """A search that found nothing: status 1 and no output from ``grep``, ``rg``, ``git grep``
    run on its own (after a pipe the status is the last program's, so those are not judged)."""
    if status != 1 or output.strip() or "|" in command:
        return False
    words = command.rsplit("&&", 1)[-1].split()
    if not words:
        return False
    program = words[0].rsplit("/", 1)[-1]
    return program in _SEARCH_PROGRAMS or (program == "git" and words[1:2] == ["grep"])


def _outcome(turn: _Turn) -> Outcome:
    if turn.interrupted or (not turn.checks and not turn.changes):
        return "abandoned"
    checks = [check for check in turn.checks if not _no_match(*check)]
    if checks[-1:] and checks[-1][1] != 0:
        return "failed"
    runs: dict[str, list[int]] = {}
    for command, status, _ in checks:
        runs.setdefault(command, []).append(status)
    for statuses in runs.values():
        if len(statuses) > 1 and any(s != 0 for s in statuses[:-1]) and statuses[-1] != 0:
            return "failed"
    return "succeeded"


def _cut_end(text: str, limit: int) -> str:
    """The last ``limit`` characters (the end of an output or a path says the most)."""
    return text if len(text) <= limit else text[-limit:]


def _clean(text: str) -> str:
    """No NUL or lone surrogates: the runtime stores canonical UTF-8 JSON."""
    return text.replace("\x00", "").encode("utf-8", "replace").decode("utf-8")


def task_id_for(host: str, session_id: str | None, turn: str | None, last_item: str | None) -> str:
    """``tr-<host>-<sha256 hex>`` over host, session, turn and the turn's last item id.

    Deterministic, so a retried hook or a spooled send records the same result once (the
    runtime answers 200 to the same id with the same payload). The last item is part of it
    because a host may resume a stopped turn (another Stop hook blocked it): that later
    ``Stop`` sees more of the turn and gets its own id instead of a 409 conflict.
    """
    digest = sha256(_TASK_ID_DOMAIN)
    for field in (host, session_id, turn, last_item):
        data = (field or "").encode("utf-8", "surrogatepass")
        digest.update(str(len(data)).encode("ascii") + b":" + data)
    return f"tr-{host}-{digest.hexdigest()[:40]}"


def _bounded(turn: _Turn, host: str, session_id: str | None) -> TaskResult | None:
    if turn.goal is None:
        return None
    goal = _clean(turn.goal.strip())[:GOAL_MAX_CHARS]
    if not goal.strip():
        return None
    checks = [
        TaskCheck(
            command=_clean(command)[:COMMAND_MAX_CHARS],
            exit_status=status if -1 <= status <= 255 else -1,
            output_tail=_cut_end(_clean(output.rstrip("\n")), OUTPUT_TAIL_CHARS),
        )
        for command, status, output in turn.checks
        if command.strip()
    ][-MAX_CHECKS:]
    changes = [
        TaskChange(
            path=_cut_end(_clean(path), PATH_MAX_CHARS),
            added=min(counts[0], MAX_LINES),
            removed=min(counts[1], MAX_LINES),
        )
        for path, counts in turn.changes.items()
        if path
    ][:MAX_CHANGES]
    session_ref = _clean(session_id)[:256] if session_id else None
    return TaskResult(
        goal=goal,
        outcome=_outcome(turn),
        changes=changes,
        checks=checks,
        host=host,
        session_ref=session_ref or None,
    )


def parse_transcript(
    data: bytes, host: str, ref: TurnRef, *, complete: bool = True, cwd: str | None = None
) -> tuple[TaskResult, str] | None:
    """``(task, task_id)`` for the turn ``ref`` in the transcript bytes ``data`` of ``host``
    (``claude-code`` JSONL or a Codex rollout), or ``None`` when there is no such turn or it
    has no request. ``complete`` says ``data`` is the whole file (else its first line is
    partial). Never raises for what ``data`` holds."""
    if host not in _TURN_READERS:
        return None
    start = _turn_start(data, host, ref)
    # A slice from a line start has no partial first line: only the whole tail may.
    parsed = _parse(data[start:], host, ref, start > 0 or complete, cwd)
    if parsed is None and start:  # the shortcut missed the turn's start: read it all
        parsed = _parse(data, host, ref, complete, cwd)
    return parsed


def _turn_start(data: bytes, host: str, ref: TurnRef) -> int:
    """Where the line that first names the turn begins (0 when unknown): the lines before it
    belong to earlier turns, so they need not be decoded. A plain byte search, written for the
    hosts' compact JSON; :func:`parse_transcript` falls back to the whole tail if it misses."""
    if ref.turn_id is None or '"' in ref.turn_id or "\\" in ref.turn_id:
        return 0
    key = b'"promptId":"' if host == "claude-code" else b'"turn_id":"'
    found = data.find(key + ref.turn_id.encode("utf-8", "replace") + b'"')
    if found < 0:
        return 0
    return data.rfind(b"\n", 0, found) + 1


def _parse(
    data: bytes, host: str, ref: TurnRef, complete: bool, cwd: str | None
) -> tuple[TaskResult, str] | None:
    needles, read_turn = _TURN_READERS[host]
    try:
        turn = read_turn(_records(data, complete, needles), ref, cwd)
        if turn is None:
            return None
        task = _bounded(turn, host, ref.session_id)
    except (ValueError, TypeError, KeyError, AttributeError, RecursionError):
        return None
    if task is None:
        return None
    return task, task_id_for(host, ref.session_id, turn.turn_key, turn.last_item)


_TURN_READERS = {
    "claude-code": (_CLAUDE_NEEDLES, _claude_turn),
    "codex": (_CODEX_NEEDLES, _codex_turn),
}


#: How often a transcript that does not hold the turn's last assistant message yet is re-read.
TRANSCRIPT_POLL_SECONDS = 0.05
#: The longest a Stop hook waits for the host to finish writing the turn to its transcript.
TRANSCRIPT_WAIT_SECONDS = 1.0


def _holds(data: bytes, message: str) -> bool:
    """Whether the transcript bytes hold ``message`` (its first 64 characters, as a JSON string
    body with or without ASCII escapes): the host has written the turn's last lines."""
    head = message[:64]
    forms = {json.dumps(head, ensure_ascii=False)[1:-1], json.dumps(head)[1:-1]}
    return any(form.encode("utf-8") in data for form in forms)


def _read_turn(
    transcript_path: str, last_message: str | None, wait_until: float
) -> tuple[bytes, bool] | None:
    """The transcript's tail, re-read until it holds the turn's last assistant message or
    ``wait_until`` (monotonic) passes. Claude Code can run Stop before its transcript has the
    turn's final tool results and reply (seen in CI: a recorded task without its passing
    check); the message the host hands the hook says what the end of the turn looks like."""
    while True:
        read = read_regular_file_tail(transcript_path, MAX_TRANSCRIPT_BYTES)
        if read is None or not last_message or _holds(read[0], last_message):
            return read
        if time.monotonic() + TRANSCRIPT_POLL_SECONDS > wait_until:
            return read  # parse what is there: the hook's budget comes first
        time.sleep(TRANSCRIPT_POLL_SECONDS)


def build_task_result(
    transcript_path: str,
    host: str,
    ref: TurnRef,
    scope_id: str,
    *,
    cwd: str | None = None,
    last_message: str | None = None,
    wait_until: float = 0.0,
) -> bytes | None:
    """The validated ``record_task_result`` body for the turn, or ``None`` (unreadable or
    empty transcript, no such turn, or a result the contract would refuse). With
    ``last_message`` (the Stop event's), the transcript is re-read until it holds it, up to
    ``wait_until`` (monotonic)."""
    read = _read_turn(transcript_path, last_message, wait_until)
    if read is None:
        return None
    data, complete = read
    parsed = parse_transcript(data, host, ref, complete=complete, cwd=cwd)
    if parsed is None:
        return None
    task, task_id = parsed
    body = msgspec.json.encode(TaskResultRequest(scope_id=scope_id, task_id=task_id, task=task))
    # The strict decoder the contract implies (caps, patterns, no unknown keys): what would be
    # refused with 422 is not sent.
    return body if is_task_result_body(body) else None
