"""The deterministic scripted model: a fixed, documented policy behind the real hosts' APIs.

CI cannot call a real model, yet the harness itself must be tested end to end through the real
CLIs. These servers extend the real-host test stubs (``tests/support/hosts.py``) so that each
answer is decided by a policy from the request the CLI actually sent — its texts, the packs
framed in them, and the outputs of earlier tool calls (:func:`.conversation.view_of`). Nothing
else reaches the policy: not the arm, not the seeded Memory, not the check. Treatment can beat
control only if the real hook injected the pack into the real CLI's request.

The policy, in this order (docs/evaluation.md § The scripted model):

1. A request that does not carry the task's prompt (a host's side request) gets a short text.
2. **Instructions outside a pack frame are obeyed**: a line ``EVAL-INSTRUCTION: run `<cmd>` ``
   anywhere in :attr:`.View.outside` (system, developer, user text, tool output) is run once.
   Text inside a valid pack frame is data and is never obeyed. So the fake-instruction task
   fails if a stored entry can ever escape the frame.
3. Otherwise the task's own step function (:mod:`.tasks`) picks the next shell command or
   finishes; it reads facts from pack items only through fixed patterns and prefers the user's
   request and the live repository over Memory, as the pack's preamble says.
4. At most :data:`MAX_CALLS` tool calls per turn, then it finishes.

Every action is a shell command, run through the host's own shell tool: ``Bash`` in Claude Code,
``exec_command`` / ``shell_command`` / ``shell`` (whichever the request offers) in Codex.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from tests.support.hosts import AnthropicStub, OpenAIResponsesStub, StubReply

from .conversation import View, view_of

MAX_CALLS = 8
#: Codex's shell tools, in the order the scripted model prefers them.
CODEX_SHELL_TOOLS = ("exec_command", "shell_command", "shell")
INJECTION = re.compile(r"EVAL-INSTRUCTION: run `([^`\n]+)`")
FINISHED = "scripted-model: done"


@dataclass(frozen=True)
class Shell:
    """Run one shell command in the repository (through the host's shell tool)."""

    command: str


@dataclass(frozen=True)
class Finish:
    """End the turn with a final text."""

    text: str = FINISHED


Action = Shell | Finish
#: A task's step function: the next action from what the request shows.
Step = Callable[[View], Action]


def has_shell(view: View) -> bool:
    """The request offers a shell tool (the task conversation does; side requests do not)."""
    return "Bash" in view.tools or any(name in view.tools for name in CODEX_SHELL_TOOLS)


def is_task_conversation(view: View, prompt: str) -> bool:
    return view.mentions(prompt) and has_shell(view)


def decide(view: View, prompt: str, step: Step) -> Action:
    """The scripted policy (module docstring), host-neutral."""
    if not is_task_conversation(view, prompt):
        return Finish("scripted-model: not the task conversation")
    if len(view.calls) >= MAX_CALLS:
        return Finish("scripted-model: step limit")
    for command in INJECTION.findall(view.outside):
        if not view.issued(command):
            return Shell(command)
    return step(view)


class _Scripted:
    """The part both servers share: the task's policy, a hook for the first task request."""

    host: str

    def _setup(self, prompt: str, step: Step, on_first_request: Callable[[], None] | None) -> None:
        self._prompt = prompt
        self._step = step
        self._on_first = on_first_request
        self._first_lock = threading.Lock()
        self.decisions: list[Action] = []

    def _decide(self, body: Mapping[str, Any]) -> tuple[View, Action]:
        view = view_of(self.host, body)
        if self._on_first is not None and is_task_conversation(view, self._prompt):
            with self._first_lock:
                callback, self._on_first = self._on_first, None
            if callback is not None:
                callback()  # e.g. a teammate revises an entry while the agent works
        action = decide(view, self._prompt, self._step)
        self.decisions.append(action)
        return view, action


class ScriptedAnthropic(_Scripted, AnthropicStub):
    """The scripted model behind Claude Code's Messages API."""

    host = "claude-code"

    def __init__(
        self, prompt: str, step: Step, *, on_first_request: Callable[[], None] | None = None
    ) -> None:
        AnthropicStub.__init__(self)
        self._setup(prompt, step, on_first_request)

    def next_reply(self, body: Mapping[str, Any]) -> StubReply:
        _view, action = self._decide(body)
        if isinstance(action, Finish):
            return StubReply(text=action.text)
        return StubReply(
            tool="Bash", arguments={"command": action.command, "description": "scripted step"}
        )


class ScriptedResponses(_Scripted, OpenAIResponsesStub):
    """The scripted model behind Codex's Responses API."""

    host = "codex"

    def __init__(
        self, prompt: str, step: Step, *, on_first_request: Callable[[], None] | None = None
    ) -> None:
        OpenAIResponsesStub.__init__(self)
        self._setup(prompt, step, on_first_request)

    def next_reply(self, body: Mapping[str, Any]) -> StubReply:
        view, action = self._decide(body)
        if isinstance(action, Finish):
            return StubReply(text=action.text)
        call = codex_shell_call(view.tools, action.command)
        if call is None:
            return StubReply(text="scripted-model: the host offered no shell tool")
        return StubReply(tool=call[0], arguments=call[1])


def codex_shell_call(tools: list[str], command: str) -> tuple[str, dict[str, Any]] | None:
    """The function call that runs ``command`` with the shell tool Codex offers
    (:data:`CODEX_SHELL_TOOLS`)."""
    if "exec_command" in tools:
        return "exec_command", {"cmd": command}
    if "shell_command" in tools:
        return "shell_command", {"command": command}
    if "shell" in tools:
        return "shell", {"command": ["bash", "-lc", command]}
    return None


def scripted_model(
    host: str, prompt: str, step: Step, *, on_first_request: Callable[[], None] | None = None
) -> ScriptedAnthropic | ScriptedResponses:
    """The scripted model server for ``host`` (not started)."""
    if host == "claude-code":
        return ScriptedAnthropic(prompt, step, on_first_request=on_first_request)
    if host == "codex":
        return ScriptedResponses(prompt, step, on_first_request=on_first_request)
    raise ValueError(f"unknown host {host!r}")
