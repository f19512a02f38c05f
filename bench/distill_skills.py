"""Skill proposals from approved Experience (issue #31 item 5): precision of proposed groups.

In process, pure, about a second. The Experiences are what the offline distiller proposes from
``bench/data/distill_sessions`` and a reviewer would keep (a proposal matching a labelled
keeper, as in ``distill_quality.py``), all treated as approved in **one** scope. That is
pessimistic: the sessions come from many imaginary repositories, so topics that would never
meet in one project (two teams' npm builds) can be grouped here.

Two pools:

* ``approved``: one Experience per keeper group — what the worker's dedup leaves (near-duplicate
  sessions become one candidate, hence one Experience);
* ``twice``: every matching lesson its own Experience, as if near-duplicates had been approved
  separately: the extra Experiences must not make Skills of their own.

Labels (:data:`SKILL_LABELS`, by hand, before looking at the proposals): sets of keeper groups
whose Experiences a reviewer would accept as one Skill. A proposed group is **correct** when
all its Experiences' keeper groups lie in one labelled set and it holds at least two different
keeper groups (two copies of one lesson are no procedure). precision = correct / proposed;
recall = labelled sets with ≥ 2 proposable members that some correct proposal covers. The
threshold :data:`~powercontext_runtime.distill.skills.MIN_EXPERIENCES` is swept (2, 3) for
calibration.

    .venv/bin/python bench/distill_skills.py            # Markdown on stdout
    .venv/bin/python bench/distill_skills.py --verbose  # every proposal (stderr)
    .venv/bin/python bench/distill_skills.py --json
    .venv/bin/python bench/distill_skills.py --write-results  # block distill-skills

The report's ``goals.precision`` (≥ 70 %, at the default minimum, pool ``approved``) is the
verdict ``bench/run_all.py`` shows in its summary.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from _common import command_line, log, machine_facts, markdown_table, publish
from distill_quality import DEFAULT_DATA, Session, load, matches

from powercontext_runtime.contract.review import ProposeSkillRequest
from powercontext_runtime.distill import TaskInput, propose_lessons
from powercontext_runtime.distill import skills as skills_module
from powercontext_runtime.distill.failures import looks_secret
from powercontext_runtime.distill.skills import ApprovedExperienceView, propose_skills

#: Keeper groups a reviewer would accept together as one Skill (bench/data/distill_sessions).
#: alembic: write the revision, apply it, then test. web build: build (with the heap it
#: needs) before the e2e suite. Everything else stands alone: a pointer to a fix, a flag, a
#: prior command of its own tool. Deliberately *not* together: npm-legacy-peer with
#: npm-ci-vitest (two ways of installing, not two steps), compose-db with docker-platform
#: (different docker work).
SKILL_LABELS: dict[str, frozenset[str]] = {
    "alembic migrations": frozenset({"alembic-upgrade", "alembic-revision", "alembic-merge"}),
    "web build": frozenset({"build-before-e2e", "node-heap"}),
}
PRECISION_GOAL = 0.70
SECTION = "distill-skills"


def pool(
    sessions: list[Session], *, twice: bool
) -> tuple[list[ApprovedExperienceView], dict[str, str]]:
    """The approved Experiences (views) and ``{ref: keeper group}``, from the lessons that
    match a labelled keeper (only those would have been approved)."""
    views: list[ApprovedExperienceView] = []
    group_of: dict[str, str] = {}
    seen: set[str] = set()
    for session in sessions:
        task = TaskInput.from_mapping(session.task)
        for lesson in propose_lessons(f"task-result/{session.id}", task):
            keeper = next((k for k in session.keep if matches(lesson, k)), None)
            if keeper is None:
                continue  # a reviewer would have rejected it: never approved
            if not twice and keeper.group in seen:
                continue
            seen.add(keeper.group)
            ref = f"experience:exp_{session.id.replace('-', '_')}:1"
            views.append(ApprovedExperienceView(ref, *lesson.proposal().values()))
            group_of[ref] = keeper.group
    return views, group_of


def evaluate(views: list[ApprovedExperienceView], group_of: dict[str, str]) -> dict[str, Any]:
    proposals = propose_skills(views)
    again = propose_skills(list(reversed(views)))
    if again != proposals:
        raise SystemExit("propose_skills depends on input order")
    rows = []
    correct = 0
    covered: set[str] = set()
    for skill in proposals:
        groups = {group_of[ref] for ref in skill.evidence}
        label = next((n for n, members in SKILL_LABELS.items() if groups <= members), None)
        ok = label is not None and len(groups) >= 2
        correct += ok
        if ok:
            covered.add(label)
        ProposeSkillRequest.model_validate(  # within the contract's limits, or this raises
            {
                "scope_id": "bench",
                "proposal": skill.proposal(),
                "artifact_refs": skill.artifact_refs(),
            }
        )
        leaks = any(looks_secret(t) for t in (skill.instructions, *skill.validation))
        rows.append(
            {
                "group": skill.group,
                "name": skill.name,
                "keeper_groups": sorted(groups),
                "label": label,
                "correct": ok,
                "leaks": leaks,
                "instructions": skill.instructions,
                "validation": list(skill.validation),
            }
        )
    present = {group_of[ref] for ref in group_of}
    proposable = [n for n, members in SKILL_LABELS.items() if len(members & present) >= 2]
    return {
        "experiences": len(views),
        "proposed": len(proposals),
        "correct": correct,
        "precision": correct / len(proposals) if proposals else None,
        "labelled_proposable": len(proposable),
        "labelled_found": len(covered & set(proposable)),
        "leaking": sum(r["leaks"] for r in rows),
        "proposals": rows,
    }


def run() -> dict[str, Any]:
    sessions = load(DEFAULT_DATA)
    report: dict[str, Any] = {"benchmark": "distill_skills", "sweep": {}}
    default = skills_module.MIN_EXPERIENCES
    try:
        for minimum in (2, 3):
            skills_module.MIN_EXPERIENCES = minimum  # the sweep only: the module reads it per call
            report["sweep"][minimum] = {
                name: evaluate(*pool(sessions, twice=twice))
                for name, twice in (("approved", False), ("twice", True))
            }
    finally:
        skills_module.MIN_EXPERIENCES = default
    report["min_experiences"] = default
    judged = report["sweep"][default]["approved"]
    precision = judged["precision"]
    report["goals"] = {
        "precision": {
            "target": PRECISION_GOAL,
            "measured": precision,
            "correct": judged["correct"],
            "proposed": judged["proposed"],
            "ok": precision is not None and precision >= PRECISION_GOAL,
        }
    }
    return report


def _pct(value: float | None, num: int, den: int) -> str:
    return "— (0/0)" if value is None else f"{100 * value:.1f} % ({num}/{den})"


def render(report: dict[str, Any]) -> str:
    rows = []
    for minimum, pools in report["sweep"].items():
        for name, r in pools.items():
            rows.append(
                [
                    f"{minimum}{' (default)' if minimum == report['min_experiences'] else ''}",
                    name,
                    r["experiences"],
                    r["proposed"],
                    _pct(r["precision"], r["correct"], r["proposed"]),
                    f"{r['labelled_found']}/{r['labelled_proposable']}",
                    r["leaking"],
                    ", ".join(f"{p['group']} {p['keeper_groups']}" for p in r["proposals"]),
                ]
            )
    facts = report["machine"]
    return "\n".join(
        [
            "## Skill proposals from approved Experience (issue #31 item 5)",
            "",
            "Generated by `bench/distill_skills.py --write-results`; edit outside the markers "
            "only.",
            "",
            f"- Date: {facts['date']}; command: `{report['command']}`",
            "",
            f"Precision goal ≥ {100 * PRECISION_GOAL:.0f} %; one pessimistic scope holding "
            "every session's kept lessons (bench/distill_skills.py docstring).",
            "",
            markdown_table(
                [
                    "min Experiences",
                    "pool",
                    "Experiences",
                    "proposed",
                    "precision",
                    "labelled Skills found",
                    "leaks",
                    "groups (keeper groups)",
                ],
                rows,
            ),
        ]
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--verbose", action="store_true")
    parser.add_argument(
        "--write-results", action="store_true", help=f"rewrite the `{SECTION}` block of RESULTS.md"
    )
    args = parser.parse_args(argv)
    report = run()
    report.update(machine=machine_facts(), command=command_line())
    if args.verbose:
        for pools in report["sweep"].values():
            for proposal in pools["approved"]["proposals"]:
                log(f"--- {proposal['name']} correct={proposal['correct']}")
                log(proposal["instructions"])
    publish(report, render(report), SECTION if args.write_results else None, as_json=args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
