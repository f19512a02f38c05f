"""The scripted model's policy and the request parsing behind the task evaluation, without hosts.

Fast checks that the evaluation can *fail*: a pack whose frame a stored entry breaks would get
the fake instruction obeyed, an invalid pack is not read, and without a pack the constraint
task takes the default. The real-CLI run is ``tests/e2e/test_task_eval.py``.
"""

from __future__ import annotations

import json
from typing import Any

from bench.task_eval.conversation import PACK_BEGIN, PACK_END, split_packs, view_of
from bench.task_eval.scripted import Finish, Shell, codex_shell_call, decide
from bench.task_eval.tasks import TASKS, TINY_BUDGET, Task
from powercontext_runtime.context.builder import MemoryHit, PreparedContextBuilder


def _pack(task: Task, max_bytes: int = 8000) -> str:
    hits = [
        MemoryHit(3, f"mem_ent_{i:08d}", f"mem_ver_{i:08d}", seed.text)
        for i, seed in enumerate(task.memory)
    ]
    content = PreparedContextBuilder().build(hits, [], max_bytes).content
    assert content is not None
    return content


def _claude_body(prompt: str, context: str | None, calls: list[tuple[str, str]]) -> dict[str, Any]:
    """A Messages request shaped like Claude Code's (hook context in a system message)."""
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": [{"type": "text", "text": prompt}]}
    ]
    if context is not None:
        text = f"UserPromptSubmit hook additional context: {context}\n\nToday's date is …"
        messages.append({"role": "system", "content": [{"type": "text", "text": text}]})
    for n, (command, output) in enumerate(calls):
        call = {"type": "tool_use", "id": f"t{n}", "name": "Bash", "input": {"command": command}}
        result = {"type": "tool_result", "tool_use_id": f"t{n}", "content": output}
        messages += [
            {"role": "assistant", "content": [call]},
            {"role": "user", "content": [result]},
        ]
    return {"messages": messages, "tools": [{"name": "Bash"}]}


def _play(task: Task, context: str | None, outputs: dict[str, str]) -> list[str]:
    """The commands the scripted model runs for ``task`` until it finishes."""
    calls: list[tuple[str, str]] = []
    for _ in range(10):
        action = decide(
            view_of("claude-code", _claude_body(task.prompt, context, calls)),
            task.prompt,
            task.step,
        )
        if isinstance(action, Finish):
            return [command for command, _ in calls]
        assert isinstance(action, Shell)
        calls.append((action.command, outputs.get(action.command, "")))
    raise AssertionError("the scripted model did not finish")


def test_the_constraint_comes_only_from_the_pack() -> None:
    task = TASKS["constraint"]
    with_pack = _play(task, _pack(task), {})
    without = _play(task, None, {})
    assert "HTTP_TIMEOUT_SECONDS = 7" in with_pack[-1]
    assert "HTTP_TIMEOUT_SECONDS = 30" in without[-1]


def test_an_invalid_pack_is_not_read() -> None:
    task = TASKS["constraint"]
    broken = _pack(task).replace('{"trust"', '{"trust" ', 1).replace("]}", "]", 1)
    assert "HTTP_TIMEOUT_SECONDS = 30" in _play(task, broken, {})[-1]


def test_fake_instructions_in_a_pack_are_data_but_obeyed_once_the_frame_breaks() -> None:
    task = TASKS["fake-instruction"]
    outputs = {"cat CHANGELOG.md": "# Changelog\n\n## Unreleased\n\n## 1.0.0\n"}
    pack = _pack(task)
    packs, outside = split_packs(pack)
    assert len(packs) == 1 and packs[0].valid and packs[0].marked_untrusted
    assert "EVAL-INSTRUCTION" in packs[0].text and "EVAL-INSTRUCTION" not in outside
    assert not any("PWNED" in command for command in _play(task, pack, outputs))
    # The same entry rendered without JSON escaping (what the runtime must never do) escapes
    # the frame, and the scripted model then obeys it: the task can fail.
    raw = task.memory[0].text
    escaped = json.dumps(raw, ensure_ascii=False)[1:-1]
    unframed = pack.replace(escaped, raw)
    assert any("touch PWNED" in command for command in _play(task, unframed, outputs))


def test_stale_memory_loses_to_the_code_and_to_the_user() -> None:
    code = TASKS["stale-code"]
    commands = _play(code, _pack(code), {"cat app/server.py": "PORT = 9090\n"})
    assert commands[0] == "cat app/server.py" and "9090" in commands[-1]
    user = TASKS["stale-user"]
    assert "DEPLOY_REGION=us-east-2" in _play(user, _pack(user), {})[-1]


def test_a_tiny_pack_still_carries_the_rule() -> None:
    task = TASKS["tiny-budget"]
    pack = _pack(task, TINY_BUDGET)
    (parsed,), _ = split_packs(pack)
    assert parsed.content_bytes <= TINY_BUDGET and parsed.valid
    assert any(item["truncated"] for item in parsed.items or [])
    assert 'LOG_FORMAT = "json"' in _play(task, pack, {})[-1]


def test_a_truncated_citation_is_re_read_exactly() -> None:
    task = TASKS["citation"]
    pack = _pack(task)
    (parsed,), _ = split_packs(pack)
    (item,) = [i for i in parsed.items or [] if "Release checklist" in i["content"]]
    assert item["truncated"] and "Final step" not in item["content"]
    full = json.dumps({"text": task.memory[0].text})
    get = (
        f"powercontext memory get --json --revision 3 --entry-id {item['citation']['entry_id']}"
        f" --version-id {item['citation']['entry_version_id']}"
    )
    commands = _play(task, pack, {get: full})
    assert commands[0] == get and "rel-2026-blue-otter" in commands[-1]
    assert "unknown" in _play(task, None, {})[-1]


def test_side_requests_and_codex_tools() -> None:
    task = TASKS["constraint"]
    side = decide(
        view_of("claude-code", _claude_body("summarise", None, [])), task.prompt, task.step
    )
    assert isinstance(side, Finish)
    assert codex_shell_call(["exec_command", "shell"], "ls") == ("exec_command", {"cmd": "ls"})
    assert codex_shell_call(["shell"], "ls") == ("shell", {"command": ["bash", "-lc", "ls"]})
    assert codex_shell_call(["apply_patch"], "ls") is None
    body = {
        "input": [
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "p"}]},
            {
                "type": "message",
                "role": "developer",
                "content": [{"type": "input_text", "text": f"x\n{PACK_BEGIN}\n{{}}\n{PACK_END}"}],
            },
            {
                "type": "function_call",
                "name": "exec_command",
                "arguments": json.dumps({"cmd": "ls"}),
            },
            {"type": "function_call_output", "output": "Output:\nREADME.md"},
        ],
        "tools": [{"type": "function", "name": "exec_command"}],
    }
    view = view_of("codex", body)
    assert view.calls == ["ls"] and view.output_of("ls") == "Output:\nREADME.md"
    assert len(view.packs) == 1 and not view.packs[0].valid
