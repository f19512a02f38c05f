"""A scripted coding session through the real hosts: a check fails, the agent edits, it passes.

The end-of-turn hooks (issue #31 item 2) build a task result from the host's own transcript, so
their tests need transcripts the real CLIs wrote for a session that actually ran tools. The
model stubs here answer each request of the task conversation with the next step of a fixed
script, chosen by how many tool results the request already carries (side requests — no tools,
or not the task prompt — get a plain text):

1. run the check (``sh check.sh``), which fails (exit 1) while ``calc.py`` subtracts: the
   failing test is ``tests/test_cart.py::test_total`` (the cart's total adds with ``calc.add``),
   so the fix is in another file than the one the failure names — a lesson the offline
   distiller proposes (``fail-then-pass``: "when this test fails, look at ``calc.py``");
2. edit ``calc.py`` — Claude Code: ``Read`` then ``Edit`` (Edit refuses a file it has not read);
   Codex: ``apply_patch`` through its shell tool, which Codex intercepts and applies itself;
3. run the check again, which passes;
4. finish with a text.

:func:`write_task_repo` lays out the working tree those steps expect. Used by the fixture
generator (``tests/fixtures/task_results/regenerate.py``) and the real-host end-to-end test.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tests.support.hosts import AnthropicStub, OpenAIResponsesStub, StubReply

TASK_PROMPT = "Fix the add function in calc.py so that check.sh passes."
CHECK_COMMAND = "sh check.sh"
FINAL_TEXT = "Fixed: add now adds; check.sh passes."
BUGGY = "def add(a, b):\n    return a - b\n"
FIXED = "def add(a, b):\n    return a + b\n"
#: The check's last output lines, failing and passing, as ``pytest -q`` prints them.
FAILING_OUTPUT = "FAILED tests/test_cart.py::test_total - assert -1 == 5\n1 failed in 0.02s"
PASSING_OUTPUT = "1 passed in 0.01s"
#: The test the check runs, and the code under it: the cart's total adds with ``calc.add``.
CART = "from calc import add\n\n\ndef total(price, shipping):\n    return add(price, shipping)\n"
TEST_CART = "from cart import total\n\n\ndef test_total():\n    assert total(2, 3) == 5\n"
#: A stand-in for ``pytest -q`` (the hosts' sandboxes need not have pytest): it prints what
#: pytest would for ``tests/test_cart.py`` with the ``calc.py`` at hand.
CHECK_SCRIPT = (
    "if grep -q 'return a + b' calc.py; then\n"
    f"  echo '{PASSING_OUTPUT}'\n"
    "else\n"
    + "".join(f"  echo '{line}'\n" for line in FAILING_OUTPUT.splitlines())
    + "  exit 1\nfi\n"
)
_PATCH = (
    "apply_patch <<'PATCH'\n*** Begin Patch\n*** Update File: calc.py\n@@\n def add(a, b):\n"
    "-    return a - b\n+    return a + b\n*** End Patch\nPATCH"
)


def write_task_repo(work: Path) -> Path:
    """The working tree the script edits: a buggy ``calc.py``, the cart and its test, and
    ``check.sh``."""
    (work / "tests").mkdir(parents=True, exist_ok=True)
    (work / "calc.py").write_text(BUGGY, encoding="utf-8")
    (work / "cart.py").write_text(CART, encoding="utf-8")
    (work / "tests" / "test_cart.py").write_text(TEST_CART, encoding="utf-8")
    (work / "check.sh").write_text(CHECK_SCRIPT, encoding="utf-8")
    return work


def _mentions_prompt(value: Any) -> bool:
    if isinstance(value, str):
        return TASK_PROMPT in value
    if isinstance(value, Mapping):
        return any(_mentions_prompt(item) for item in value.values())
    if isinstance(value, list):
        return any(_mentions_prompt(item) for item in value)
    return False


class TaskSessionAnthropic(AnthropicStub):
    """The script behind Claude Code's Messages API (``work`` is the session cwd)."""

    def __init__(self, work: Path) -> None:
        super().__init__()
        self.work = work

    def next_reply(self, body: Mapping[str, Any]) -> StubReply:
        if not body.get("tools") or not _mentions_prompt(body.get("messages")):
            return StubReply(text="side request")
        done = sum(
            1
            for message in body.get("messages") or []
            if isinstance(message.get("content"), list)
            for block in message["content"]
            if isinstance(block, dict) and block.get("type") == "tool_result"
        )
        target = str(self.work / "calc.py")
        steps = [
            StubReply(tool="Bash", arguments={"command": CHECK_COMMAND, "description": "check"}),
            StubReply(tool="Read", arguments={"file_path": target}),
            StubReply(
                tool="Edit",
                arguments={
                    "file_path": target,
                    "old_string": "return a - b",
                    "new_string": "return a + b",
                },
            ),
            StubReply(tool="Bash", arguments={"command": CHECK_COMMAND, "description": "check"}),
        ]
        return steps[done] if done < len(steps) else StubReply(text=FINAL_TEXT)


class TaskSessionResponses(OpenAIResponsesStub):
    """The script behind Codex's Responses API (its shell tool is ``exec_command``)."""

    def next_reply(self, body: Mapping[str, Any]) -> StubReply:
        tools = {t.get("name") for t in body.get("tools") or [] if isinstance(t, dict)}
        if "exec_command" not in tools or not _mentions_prompt(body.get("input")):
            return StubReply(text="side request")
        done = sum(
            1
            for item in body.get("input") or []
            if isinstance(item, dict)
            and item.get("type") in ("function_call_output", "custom_tool_call_output")
        )
        steps = [
            StubReply(tool="exec_command", arguments={"cmd": CHECK_COMMAND}),
            StubReply(tool="exec_command", arguments={"cmd": _PATCH}),
            StubReply(tool="exec_command", arguments={"cmd": CHECK_COMMAND}),
        ]
        return steps[done] if done < len(steps) else StubReply(text=FINAL_TEXT)


def task_session_model(host: str, work: Path) -> TaskSessionAnthropic | TaskSessionResponses:
    """The scripted model server for ``host`` (not started)."""
    if host == "claude-code":
        return TaskSessionAnthropic(work)
    if host == "codex":
        return TaskSessionResponses()
    raise ValueError(f"unknown host {host!r}")
