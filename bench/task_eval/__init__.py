"""Task-benefit evaluation (RFC 0028 product acceptance, issue #19 item 2).

Fixed coding tasks in throw-away git repositories, each with seeded PowerContext Memory, a
prompt and an executable check, run through the real Claude Code and Codex CLIs in four arms:

* ``control``: the host without the plugin;
* ``treatment``: the plugin installed by its own ``install``, runtime up, the task's Memory;
* ``empty``: the plugin installed, runtime up, the scope holds no Memory (an empty pack);
* ``down``: the plugin installed, the runtime not running.

The model is either a deterministic scripted server (:mod:`.scripted`, what CI runs: it sees
only what the real CLI sends it, so treatment can beat control only if the real hook really
injected the pack) or the user's own model (``POWERCONTEXT_EVAL_MODEL``). Success comes from
the task's check on the repository after the turn, never from the pack; pack preparation,
injected bytes and hook latency are measured separately (:mod:`.harness`, :mod:`.report`).

Run: ``python -m bench.task_eval --help`` from the repository root; docs/evaluation.md.
The hosts, sandboxes and daemon come from ``tests/support`` (the machinery the real-host tests
use), so the evaluation and those tests can never drift apart.
"""
