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
    "experience_epilog",
    "handoff_epilog",
    "revise_epilog",
    "skill_epilog",
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
(a source captured there) and --artifact-ref FAMILY:ID:REVISION (a Memory revision the scope
has reached, or one of its Experience, Skill or Handoff revisions). The proposal waits in the
Review Inbox until a reviewer approves it (powercontext candidate list)."""


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
