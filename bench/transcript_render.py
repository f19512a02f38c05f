"""Authored coding sessions rendered as the hosts' own transcripts (issue #31, "Measure").

``bench/data/distill_transcripts/*.json`` describe imaginary sessions compactly (a prompt,
steps, a final reply; README there). This module writes one such script as the file each host
would have written and the ``Stop`` event it would have handed the plugins' hook, so the bench
can run the *real* parser (``powercontext_hook_kit.task_result``) on it:

* **Claude Code** (``claude-code``): a session JSONL shaped like
  ``tests/fixtures/task_results/claude-code.transcript.jsonl`` (captured from the real CLI):
  the prompt as a ``user`` record with a ``promptId``; each step an ``assistant`` record with a
  ``tool_use`` block (``Bash``, ``Edit``, ``MultiEdit``, ``Write``) and a ``user`` record with
  its ``tool_result`` (``Exit code N`` first when a command failed, ``is_error``) and the
  host's ``toolUseResult`` (a ``structuredPatch`` for edits); a final ``assistant`` text.
* **Codex** (``codex``): a rollout JSONL shaped like ``codex.transcript.jsonl``: a
  ``task_started`` event per turn, ``exec_command`` function calls, ``item_completed`` events
  with a ``CommandExecution`` (``aggregated_output``, ``exit_code``) or, for a patch, a
  ``FileChange`` (``unified_diff`` per absolute path), ``function_call_output`` records, an
  ``AgentMessage`` at the end; ``turn_aborted`` when interrupted.

Both renderings of one script carry the same commands, outputs, exit statuses and edits, so
the parser must give the same task for both (the bench checks it). Deterministic: ids and
timestamps derive from the script's id, never from a clock or a random source.

Script steps (files are relative to the project folder, ``/home/user/project``):

* ``{"run": cmd, "exit": n, "output": text}`` — a shell command;
* ``{"edit": path, "old": a, "new": b}`` — one replacement (Claude Code ``Edit``);
  ``{"edit": path, "edits": [{"old", "new"}, …]}`` — several (``MultiEdit``); with
  ``"fails": true`` the host refuses it (old text not found) and nothing changes;
* ``{"write": path, "content": text}`` — a new file (``Write``; Codex ``*** Add File``);
* ``{"say": text}`` — assistant text between tool calls.

Any multi-line text (``output``, ``old``, ``new``, ``content``, ``files`` values) may be
written as a list of lines, joined with newlines, so the scripts stay readable.

A file an edit touches starts as the script's ``files[path]`` when given, else as the edit's
own ``old`` text; edits then apply in order, so diffs carry real line numbers and context.
"""

from __future__ import annotations

import datetime as dt
import difflib
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

__all__ = ["CWD", "HOSTS", "Rendered", "ScriptError", "render"]

HOSTS = ("claude-code", "codex")
#: The session's working directory, as in the real fixtures (their temp dirs scrubbed to it).
CWD = "/home/user/project"
_CLAUDE_VERSION = "2.1.328"
_CODEX_VERSION = "0.169.0"
_BASE_MS = 1_796_517_600_000  # 2026-12-06T00:40:00Z, the fixtures' day
_INTERRUPT = "[Request interrupted by user]"


class ScriptError(ValueError):
    """A session script that cannot be rendered (unknown step, an edit whose text is absent)."""


@dataclass(frozen=True, slots=True)
class Rendered:
    """One host's transcript bytes and the ``Stop`` event payload it would send the hook."""

    host: str
    transcript: bytes
    stop_event: dict[str, Any]


# -- shared: ids, clock, files -----------------------------------------------------------------


class _Ids:
    """Deterministic ids and timestamps from the script's id (uuid-shaped, sortable times)."""

    def __init__(self, seed: str) -> None:
        self._seed = seed
        self._n = 0
        self._ms = _BASE_MS

    def uuid(self) -> str:
        self._n += 1
        h = hashlib.sha256(f"{self._seed}/{self._n}".encode()).hexdigest()
        return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-a{h[17:20]}-{h[20:32]}"

    def short(self, n: int = 6) -> str:
        return self.uuid().replace("-", "")[:n]

    def tick(self, ms: int = 37) -> str:
        self._ms += ms
        return _iso(self._ms)

    @property
    def ms(self) -> int:
        return self._ms


def _iso(ms: int) -> str:
    t = dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC)
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


@dataclass(slots=True)
class _Edit:
    """One edit step resolved against the virtual files: the diff both hosts show."""

    path: str
    pairs: list[tuple[str, str]]
    before: str
    after: str
    failed: bool
    created: bool = False
    hunks: list[dict[str, Any]] = field(default_factory=list)

    @property
    def abs_path(self) -> str:
        return f"{CWD}/{self.path}"


def _lines(text: str) -> list[str]:
    return text.split("\n")[:-1] if text.endswith("\n") else text.split("\n")


def _hunks(before: str, after: str) -> list[dict[str, Any]]:
    """Unified-diff hunks (3 lines of context) as Claude Code's ``structuredPatch`` has them."""
    a, b = _lines(before), _lines(after)
    out = []
    for group in difflib.SequenceMatcher(None, a, b, autojunk=False).get_grouped_opcodes(3):
        lines: list[str] = []
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                lines += [" " + x for x in a[i1:i2]]
            if tag in ("replace", "delete"):
                lines += ["-" + x for x in a[i1:i2]]
            if tag in ("replace", "insert"):
                lines += ["+" + x for x in b[j1:j2]]
        i1, i2, j1, j2 = group[0][1], group[-1][2], group[0][3], group[-1][4]
        out.append(
            {
                "oldStart": i1 + 1,
                "oldLines": i2 - i1,
                "newStart": j1 + 1,
                "newLines": j2 - j1,
                "lines": lines,
            }
        )
    return out


class _Files:
    """The project's files as the session's edits leave them."""

    def __init__(self, initial: dict[str, str]) -> None:
        self._files = dict(initial)

    def edit(self, step: dict[str, Any]) -> _Edit:
        path = step["edit"]
        pairs = [(e["old"], e["new"]) for e in step["edits"]] if "edits" in step else []
        if "old" in step:
            pairs.append((step["old"], step["new"]))
        if not pairs:
            raise ScriptError(f"edit of {path} has no old/new text")
        before = self._files.get(path, pairs[0][0])
        failed = bool(step.get("fails"))
        after = before
        for old, new in pairs:
            if old not in after:
                if failed:
                    break
                raise ScriptError(f"edit of {path}: {old[:40]!r} is not in the file")
            after = after.replace(old, new, 1)
        if failed:
            return _Edit(path, pairs, before, before, True)
        self._files[path] = after
        return _Edit(path, pairs, before, after, False, hunks=_hunks(before, after))

    def write(self, step: dict[str, Any]) -> _Edit:
        path, content = step["write"], step["content"]
        if path in self._files:
            raise ScriptError(f"write of {path}: the file exists (scripts only create files)")
        self._files[path] = content
        return _Edit(path, [], "", content, False, created=True)


def _turns(script: dict[str, Any]) -> list[dict[str, Any]]:
    """Earlier turns (``before``) then the turn the Stop hook fires for."""
    last = {
        "prompt": script["prompt"],
        "steps": script["steps"],
        "final": script.get("final"),
        "interrupted": bool(script.get("interrupted")),
    }
    turns = [*script.get("before", []), last]
    return [{**t, "steps": [_normal(s) for s in t["steps"]]} for t in turns]


def _resolved(script: dict[str, Any]) -> list[list[tuple[dict[str, Any], _Edit | None]]]:
    """Each turn's steps with their edits resolved (files carry over between turns)."""
    files = _Files({p: _joined(v) for p, v in script.get("files", {}).items()})
    turns = []
    for turn in _turns(script):
        steps = []
        for step in turn["steps"]:
            if "run" in step:
                steps.append((step, None))
            elif "edit" in step:
                steps.append((step, files.edit(step)))
            elif "write" in step:
                steps.append((step, files.write(step)))
            elif "say" in step:
                steps.append((step, None))
            else:
                raise ScriptError(f"unknown step {sorted(step)}")
        turns.append(steps)
    return turns


def _joined(value: Any) -> Any:
    """A list of lines as one text (the scripts' readable form); anything else as it is."""
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return "\n".join(value)
    return value


def _normal(step: dict[str, Any]) -> dict[str, Any]:
    out = {k: _joined(v) for k, v in step.items()}
    if "edits" in out:
        out["edits"] = [{k: _joined(v) for k, v in e.items()} for e in out["edits"]]
    return out


def _dumps(record: dict[str, Any]) -> str:
    return json.dumps(record, ensure_ascii=False, separators=(",", ":"))


# -- Claude Code -------------------------------------------------------------------------------


def _claude(script: dict[str, Any]) -> Rendered:
    ids = _Ids(f"claude-code/{script['id']}")
    session = ids.uuid()
    common = {
        "userType": "external",
        "entrypoint": "sdk-cli",
        "cwd": CWD,
        "sessionId": session,
        "version": _CLAUDE_VERSION,
        "gitBranch": "main",
    }
    lines: list[str] = []
    parent: str | None = None
    prompt_id = ""
    n_msg = 0
    turns = _turns(script)

    def emit(record: dict[str, Any]) -> None:
        lines.append(_dumps(record))

    def assistant(content: list[dict[str, Any]], stop: str | None) -> str:
        nonlocal parent, n_msg
        n_msg += 1
        uid = ids.uuid()
        usage = {
            "input_tokens": 10,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
            "output_tokens": 3,
            "service_tier": "standard",
        }
        emit(
            {
                "parentUuid": parent,
                "isSidechain": False,
                "message": {
                    "id": f"msg_{ids.short(24)}",
                    "type": "message",
                    "role": "assistant",
                    "model": "claude-opus-5-5",
                    "content": content,
                    "stop_reason": stop,
                    "stop_sequence": None,
                    "usage": usage,
                },
                "requestId": f"req_{ids.short(24)}",
                "type": "assistant",
                "uuid": uid,
                "timestamp": ids.tick(),
                **common,
            }
        )
        parent = uid
        return uid

    def user(content: Any, extra: dict[str, Any], source: str | None) -> None:
        nonlocal parent
        uid = ids.uuid()
        record: dict[str, Any] = {
            "parentUuid": parent,
            "isSidechain": False,
            "promptId": prompt_id,
            "type": "user",
            "message": {"role": "user", "content": content},
            "uuid": uid,
            "timestamp": ids.tick(251),
        }
        record.update(extra)
        if source is not None:
            record["sourceToolAssistantUUID"] = source
        record.update(common)
        emit(record)
        parent = uid

    for t, (turn, steps) in enumerate(zip(turns, _resolved(script), strict=True)):
        prompt_id = ids.uuid()
        emit(
            {
                "type": "queue-operation",
                "operation": "enqueue",
                "timestamp": ids.tick(),
                "sessionId": session,
                "content": turn["prompt"],
            }
        )
        emit(
            {
                "type": "queue-operation",
                "operation": "dequeue",
                "timestamp": ids.tick(3),
                "sessionId": session,
            }
        )
        user(
            turn["prompt"],
            {
                "permissionMode": "default",
                "promptSource": "sdk",
                "turnPosition": {"promptIndex": t, "turnIndex": 1},
            },
            None,
        )
        if t == 0:
            emit(
                {
                    "parentUuid": parent,
                    "isSidechain": False,
                    "attachment": {"type": "date", "date": "2026-12-06"},
                    "type": "attachment",
                    "uuid": ids.uuid(),
                    "timestamp": ids.tick(2),
                    **common,
                }
            )
        for step, edit in steps:
            if "say" in step:
                assistant([{"type": "text", "text": step["say"]}], None)
                continue
            call = f"toolu_{ids.short(24)}"
            if "run" in step:
                content, extra = _claude_bash(step)
                tool = {
                    "name": "Bash",
                    "input": {"command": step["run"], "description": step.get("why", "")},
                }
                if not tool["input"]["description"]:
                    del tool["input"]["description"]
            else:
                assert edit is not None
                tool, content, extra = _claude_edit(step, edit)
            uid = assistant([{"type": "tool_use", "id": call, **tool}], "tool_use")
            block = {"tool_use_id": call, "type": "tool_result", **content}
            user([block], {"toolUseResult": extra}, uid)
        if turn.get("interrupted"):
            user([{"type": "text", "text": _INTERRUPT}], {}, None)
        elif turn.get("final"):
            assistant([{"type": "text", "text": turn["final"]}], "end_turn")
    path = f"/home/user/.claude/projects/-home-user-project/{session}.jsonl"
    last = turns[-1]
    event = {
        "session_id": session,
        "transcript_path": path,
        "cwd": CWD,
        "prompt_id": prompt_id,
        "permission_mode": "default",
        "hook_event_name": "Stop",
        "stop_hook_active": False,
        "last_assistant_message": None if last.get("interrupted") else last.get("final"),
    }
    return Rendered("claude-code", ("\n".join(lines) + "\n").encode(), event)


def _claude_bash(step: dict[str, Any]) -> tuple[dict[str, Any], Any]:
    output, status = step.get("output", ""), int(step["exit"])
    text = output.rstrip("\n")
    if status == 0:
        result = {
            "stdout": text,
            "stderr": "",
            "interrupted": False,
            "isImage": False,
            "noOutputExpected": False,
        }
        return {"content": text, "is_error": False}, result
    shown = f"Exit code {status}" + (f"\n{text}" if text else "")
    return {"content": shown, "is_error": True}, f"Error: {shown}"


def _claude_edit(step: dict[str, Any], edit: _Edit) -> tuple[dict[str, Any], dict[str, Any], Any]:
    path = edit.abs_path
    if edit.created:
        tool = {"name": "Write", "input": {"file_path": path, "content": edit.after}}
        extra = {
            "type": "create",
            "filePath": path,
            "content": edit.after,
            "structuredPatch": [],
            "originalFile": None,
        }
        return tool, {"content": f"File created successfully at: {path}"}, extra
    if "edits" in step:
        tool = {
            "name": "MultiEdit",
            "input": {
                "file_path": path,
                "edits": [
                    {"old_string": o, "new_string": n, "replace_all": False} for o, n in edit.pairs
                ],
            },
        }
    else:
        old, new = edit.pairs[0]
        tool = {
            "name": "Edit",
            "input": {
                "replace_all": False,
                "file_path": path,
                "old_string": old,
                "new_string": new,
            },
        }
    if edit.failed:
        why = "String to replace not found in file."
        shown = f"<tool_use_error>{why}\nString: {edit.pairs[0][0]}</tool_use_error>"
        return tool, {"content": shown, "is_error": True}, f"Error: {why}"
    if "edits" in step:
        message = f"Applied {len(edit.pairs)} edits to {path}"
        extra: dict[str, Any] = {
            "filePath": path,
            "edits": tool["input"]["edits"],
            "originalFileContents": edit.before,
            "structuredPatch": edit.hunks,
            "userModified": False,
        }
    else:
        message = (
            f"The file {path} has been updated successfully. (file state is current in your "
            "context — no need to Read it back)"
        )
        extra = {
            "filePath": path,
            "oldString": edit.pairs[0][0],
            "newString": edit.pairs[0][1],
            "originalFile": edit.before,
            "structuredPatch": edit.hunks,
            "userModified": False,
            "replaceAll": False,
        }
    return tool, {"content": message}, extra


# -- Codex -------------------------------------------------------------------------------------


def _codex(script: dict[str, Any]) -> Rendered:
    ids = _Ids(f"codex/{script['id']}")
    thread = ids.uuid()
    lines: list[str] = []
    ordinal = 0
    turns = _turns(script)
    turn_id = ""

    def emit(kind: str, payload: dict[str, Any], ms: int = 5) -> None:
        nonlocal ordinal
        lines.append(
            _dumps(
                {"timestamp": ids.tick(ms), "ordinal": ordinal, "type": kind, "payload": payload}
            )
        )
        ordinal += 1

    def completed(item: dict[str, Any]) -> None:
        emit(
            "event_msg",
            {
                "type": "item_completed",
                "thread_id": thread,
                "turn_id": turn_id,
                "item": item,
                "started_at_ms": ids.ms,
                "completed_at_ms": ids.ms + 1,
            },
        )

    def call(arguments: dict[str, Any]) -> str:
        call_id = f"call_{ids.short(24)}"
        emit(
            "response_item",
            {
                "type": "function_call",
                "status": "completed",
                "id": f"fc_{ids.short(24)}",
                "name": "exec_command",
                "arguments": json.dumps(arguments),
                "call_id": call_id,
            },
        )
        return call_id

    def output(call_id: str, text: str) -> None:
        emit(
            "response_item",
            {
                "type": "function_call_output",
                "id": f"fco_{ids.short(24)}",
                "call_id": call_id,
                "output": text,
            },
        )

    def agent(text: str) -> None:
        mid = f"msg_{ids.short(24)}"
        completed({"type": "AgentMessage", "id": mid, "content": [{"type": "Text", "text": text}]})
        emit(
            "response_item",
            {
                "type": "message",
                "status": "completed",
                "id": mid,
                "role": "assistant",
                "content": [{"type": "output_text", "text": text, "annotations": []}],
            },
        )

    emit(
        "session_meta",
        {
            "session_id": thread,
            "id": thread,
            "timestamp": _iso(ids.ms),
            "cwd": CWD,
            "originator": "codex_exec",
            "cli_version": _CODEX_VERSION,
            "source": "exec",
            "model_provider": "powercontext_stub",
        },
    )
    for t, (turn, steps) in enumerate(zip(turns, _resolved(script), strict=True)):
        turn_id = ids.uuid()
        emit(
            "event_msg",
            {
                "type": "task_started",
                "turn_id": turn_id,
                "started_at": ids.ms // 1000,
                "model_context_window": 258400,
            },
        )
        if t == 0:
            env = f"<environment_context>\n  <cwd>{CWD}</cwd>\n  <shell>bash</shell>\n</environment_context>"  # noqa: E501
            emit(
                "response_item",
                {
                    "type": "message",
                    "role": "user",
                    "content": [{"type": "input_text", "text": env}],
                },
            )
        emit(
            "turn_context",
            {
                "turn_id": turn_id,
                "cwd": CWD,
                "approval_policy": "never",
                "model": "gpt-stub",
                "sandbox_policy": {"type": "danger-full-access"},
            },
        )
        emit(
            "response_item",
            {
                "type": "message",
                "id": f"msg_{ids.short(24)}",
                "role": "user",
                "content": [{"type": "input_text", "text": turn["prompt"]}],
            },
        )
        completed(
            {
                "type": "UserMessage",
                "id": ids.uuid(),
                "content": [{"type": "text", "text": turn["prompt"], "text_elements": []}],
            }
        )
        for step, edit in steps:
            if "say" in step:
                agent(step["say"])
            elif "run" in step:
                _codex_run(step, ids, call, completed, output)
            else:
                assert edit is not None
                _codex_patch(edit, ids, call, completed, output)
        if turn.get("interrupted"):
            emit("event_msg", {"type": "turn_aborted", "turn_id": turn_id, "reason": "interrupted"})
            continue
        if turn.get("final"):
            agent(turn["final"])
        if t < len(turns) - 1:
            emit(
                "event_msg",
                {
                    "type": "task_complete",
                    "turn_id": turn_id,
                    "last_agent_message": turn.get("final"),
                },
            )
    day = _iso(_BASE_MS)[:10].replace("-", "/")
    path = f"/home/user/.codex/sessions/{day}/rollout-2026-12-06T00-40-00-{thread}.jsonl"
    last = turns[-1]
    event = {
        "session_id": thread,
        "turn_id": turn_id,
        "transcript_path": path,
        "cwd": CWD,
        "hook_event_name": "Stop",
        "model": "gpt-stub",
        "permission_mode": "bypassPermissions",
        "stop_hook_active": False,
        "last_assistant_message": None if last.get("interrupted") else last.get("final"),
    }
    return Rendered("codex", ("\n".join(lines) + "\n").encode(), event)


def _codex_run(step: dict[str, Any], ids: _Ids, call: Any, completed: Any, output: Any) -> None:
    command, status = step["run"], int(step["exit"])
    text = step.get("output", "")
    aggregated = text if not text or text.endswith("\n") else text + "\n"
    call_id = call({"cmd": command})
    completed(
        {
            "type": "CommandExecution",
            "id": call_id,
            "process_id": str(10_000 + ids.ms % 50_000),
            "command": ["/bin/bash", "-lc", command],
            "cwd": f"file://{CWD}",
            "parsed_cmd": [{"type": "unknown", "cmd": command}],
            "source": "unified_exec_startup",
            "status": "completed" if status == 0 else "failed",
            "aggregated_output": aggregated,
            "exit_code": status,
            "duration": {"secs": 0, "nanos": 8000},
        }
    )
    tokens = max(1, len(aggregated) // 4)
    output(
        call_id,
        f"Chunk ID: {ids.short()}\nWall time: 0.0000 seconds\nProcess exited with code {status}\n"
        f"Original token count: {tokens}\nOutput:\n{aggregated}",
    )


def _patch_text(edit: _Edit) -> str:
    """The ``apply_patch`` envelope the model sends for this edit."""
    if edit.created:
        body = "\n".join("+" + line for line in _lines(edit.after))
        return f"*** Begin Patch\n*** Add File: {edit.path}\n{body}\n*** End Patch"
    hunks = edit.hunks or [
        {"lines": [*("-" + o for o in _lines(old)), *("+" + n for n in _lines(new))]}
        for old, new in edit.pairs
    ]
    body = "\n".join("@@\n" + "\n".join(h["lines"]) for h in hunks)
    return f"*** Begin Patch\n*** Update File: {edit.path}\n{body}\n*** End Patch"


def _unified(edit: _Edit) -> str:
    out = []
    for h in edit.hunks:
        out.append(f"@@ -{h['oldStart']},{h['oldLines']} +{h['newStart']},{h['newLines']} @@")
        out.extend(h["lines"])
    return "\n".join(out) + "\n"


def _codex_patch(edit: _Edit, ids: _Ids, call: Any, completed: Any, output: Any) -> None:
    call_id = call({"cmd": f"apply_patch <<'PATCH'\n{_patch_text(edit)}\nPATCH"})
    if edit.failed:
        why = f"apply_patch verification failed: Failed to find expected lines in {edit.path}"
        change: dict[str, Any] = {"type": "update", "unified_diff": "", "move_path": None}
        completed(
            {
                "type": "FileChange",
                "id": call_id,
                "changes": {edit.abs_path: change},
                "status": "failed",
                "stdout": "",
                "stderr": why,
            }
        )
        output(call_id, f"Wall time: 0.0000 seconds\nOutput:\nExit code: 1\nOutput:\n{why}\n")
        return
    if edit.created:
        change = {"type": "add", "content": edit.after}
        mark = "A"
    else:
        change = {"type": "update", "unified_diff": _unified(edit), "move_path": None}
        mark = "M"
    done = f"Success. Updated the following files:\n{mark} {edit.path}\n"
    completed(
        {
            "type": "FileChange",
            "id": call_id,
            "changes": {edit.abs_path: change},
            "status": "completed",
            "stdout": done,
            "stderr": "",
        }
    )
    output(
        call_id,
        f"Wall time: 0.0000 seconds\nOutput:\nExit code: 0\nWall time: 0 seconds\nOutput:\n{done}",
    )


# -- entry -------------------------------------------------------------------------------------


def render(script: dict[str, Any], host: str) -> Rendered:
    """``script`` as ``host`` (``claude-code`` or ``codex``) would have recorded it."""
    if host == "claude-code":
        return _claude(script)
    if host == "codex":
        return _codex(script)
    raise ScriptError(f"unknown host {host!r}")
