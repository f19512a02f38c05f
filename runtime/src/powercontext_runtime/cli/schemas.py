"""The shapes the CLI takes as JSON (proposals, Handoff content), for ``--help`` and the docs.

The examples are real: tests submit each one through the CLI against a running daemon, and
check that docs/review.md and docs/bootstrap.md show the very same documents.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = [
    "EXPERIENCE_EXAMPLE",
    "HANDOFF_EXAMPLE",
    "SKILL_EXAMPLE",
    "TASK_RESULT_EXAMPLE",
    "experience_epilog",
    "handoff_epilog",
    "revise_epilog",
    "skill_epilog",
    "task_result_epilog",
]

EXPERIENCE_EXAMPLE: dict[str, Any] = {
    "situation": "Changing a route or a contract model of the runtime",
    "action": "Ran make openapi and committed runtime/openapi/powercontext.json with the change",
    "outcome": "The OpenAPI drift test passed on the first CI run",
    "lesson": "After changing a route or a contract model, regenerate the OpenAPI document",
}

SKILL_EXAMPLE: dict[str, Any] = {
    "name": "regenerate-openapi",
    "description": "Keep the committed OpenAPI document in step with the routes",
    "instructions": "Run make openapi.\n"
    "Commit runtime/openapi/powercontext.json together with the change that caused it.",
    "validation": [
        "test_committed_openapi_matches_the_app passes",
        "git status shows no other generated file",
    ],
}

HANDOFF_EXAMPLE: dict[str, Any] = {
    "schema": "powercontext.handoff.v1",
    "objective": "List approved Experience and Skills from the CLI",
    "state": [
        "The HTTP operations list_experiences and list_skills exist",
        "The CLI verbs experience list and skill list are not written yet",
    ],
    "disposition": "continuable",
    "next_action": "Write the CLI verbs and their end-to-end tests",
    "omissions": ["The MCP documentation was not reviewed"],
}

#: docs/review.md's task.json: the task result its command-line session records and cites.
TASK_RESULT_EXAMPLE: dict[str, Any] = {
    "task_id": "run-42",
    "task": {
        "goal": "Add a route for order refunds and keep the OpenAPI document in step",
        "outcome": "succeeded",
        "changes": [
            {"path": "shop/routes/refunds.py", "added": 48, "removed": 0},
            {"path": "openapi.json", "added": 31, "removed": 2},
        ],
        "checks": [
            {"command": "make openapi", "exit_status": 0},
            {
                "command": "DATABASE_URL=postgres://shop:hunter2@localhost/shop make test",
                "exit_status": 0,
                "output_tail": "212 passed in 9.84s",
            },
        ],
        "host": "codex",
        "session_ref": "codex-session-7f3a",
    },
}

_EXPERIENCE_SHAPE = """\
  experience  {"situation": TEXT, "action": TEXT, "outcome": TEXT, "lesson": TEXT}
              each 1..8000 characters, not blank"""

_SKILL_SHAPE = """\
  skill       {"name": TEXT, "description": TEXT, "instructions": TEXT,
               "validation": [TEXT, ...]}
              name 1..128 characters, description 0..2000 (may be ""), instructions
              1..32000, validation 1..32 steps of 1..2000 characters; only the
              description may be blank"""

_EVIDENCE = """\
Evidence: 1..32 references in total, each existing in this scope: --source-ref SOURCE_ID
(a source captured there; task-result/ID is the task result recorded as ID by
powercontext task-result record) and --artifact-ref FAMILY:ID:REVISION (a Memory revision
the scope has reached, or one of its Experience, Skill or Handoff revisions). The proposal
waits in the Review Inbox until a reviewer approves it (powercontext candidate list)."""


def _document(example: dict[str, Any]) -> str:
    return json.dumps(example, ensure_ascii=False, indent=2)


def experience_epilog() -> str:
    return f"""\
An Experience is four fields, each 1..8000 characters and not blank: --situation (what was
going on), --action (what was done), --outcome (what happened), --lesson (what to do next
time). The same proposal as JSON (for candidate revise --proposal):

{_document(EXPERIENCE_EXAMPLE)}

{_EVIDENCE}

example:
  powercontext experience propose --source-ref task-result/run-42 \\
      --situation "{EXPERIENCE_EXAMPLE["situation"]}" \\
      --action "…" --outcome "…" --lesson "…"
"""


def skill_epilog() -> str:
    return f"""\
A Skill is --name (1..128 characters), --description (0..2000), --instructions (1..32000;
- reads standard input) and one --validation per step (1..32 steps of 1..2000 characters).
The same proposal as JSON (for candidate revise --proposal):

{_document(SKILL_EXAMPLE)}

{_EVIDENCE}
Approving a Skill grants no execution or installation right.

example:
  powercontext skill propose --name regenerate-openapi --instructions - \\
      --validation "test_committed_openapi_matches_the_app passes" \\
      --source-ref task-result/run-42 < instructions.md
"""


def revise_epilog() -> str:
    return f"""\
--proposal is the candidate family's full new content, a JSON object given inline, as @FILE,
or as - for standard input (no other keys; every field is required):

{_EXPERIENCE_SHAPE}
{_SKILL_SHAPE}

--source-ref / --artifact-ref replace the evidence; omitted, it is carried over.

example (experience.json):
{_document(EXPERIENCE_EXAMPLE)}

  powercontext candidate revise cand_… --expected-version 1 --proposal @experience.json
"""


def handoff_epilog() -> str:
    return f"""\
CONTENT is a powercontext.handoff.v1 JSON object, given inline, as @FILE, or as - for
standard input (no other keys):

  schema       "powercontext.handoff.v1"                                required
  objective    TEXT, 1..8192 characters                                 required
  state        [TEXT, ...]: 1..64 statements of 1..2000 characters      required
  disposition  "continuable" | "blocked" | "complete"                   required
  next_action  TEXT, 1..2000 characters                                 optional
  omissions    [TEXT, ...]: 0..64 statements of what was left out       optional

--base is the revision this one continues (omit it only for the scope's first Handoff); a
stale base is refused with artifact_conflict, whose details name the current revision.

example (handoff.json):
{_document(HANDOFF_EXAMPLE)}

  powercontext handoff commit @handoff.json             # the first: revision 1
  powercontext handoff commit @handoff.json --base 1    # continues it: revision 2
"""


def task_result_epilog() -> str:
    return f"""\
The task result is one JSON object given as @FILE, or as - for standard input (the scope
comes from --scope; no other keys):

  task_id   optional. ID: 1..128 of A-Z a-z 0-9 . _ : - (the first a letter or digit).
            The same ID with the same task again changes nothing; with another task it
            is refused (task_result_conflict). Omitted, the runtime makes one.
  task      required. An object:

    goal         required. TEXT, 1..2000 characters: what the task set out to do
    outcome      required. "succeeded" | "failed" | "abandoned"
    changes      0..100 of {{"path": 1..512 characters, "added": N, "removed": N}},
                 N 0..10,000,000 lines (default [])
    checks       0..50 of {{"command": 1..1000 characters, "exit_status": -1..255
                 (-1 unknown), "output_tail": 0..2000 characters}}, in the order run
                 (default [])
    host         optional. 1..64 of a-z 0-9 . _ - (e.g. codex, claude-code)
    session_ref  optional. 1..256 characters: the host's session

Secrets (tokens and keys, passwords and tokens in assignments and options,
Authorization headers, private-key blocks, passwords in URLs) are replaced by [REDACTED]
before anything is stored. The task result is stored immutably as the source
task-result/ID: cite it with --source-ref task-result/ID.

example (task.json):
{_document(TASK_RESULT_EXAMPLE)}

  powercontext task-result record @task.json
"""
