"""``powercontext candidate|experience|skill …``: the Review Inbox from the command line."""

from __future__ import annotations

import argparse
import os
from typing import Any

from ..contract.limits import TASK_RESULT_PREFIX
from ..contract.review import Candidate
from .output import (
    UsageError,
    artifact_text,
    emit,
    field_lines,
    json_argument,
    read_stdin,
    scoped_client,
    visible,
)
from .schemas import experience_epilog, revise_epilog, skill_epilog

#: The order people read a proposal's fields in (stored proposals come back sorted by key).
FIELD_ORDER = {
    "experience": ("situation", "action", "outcome", "lesson"),
    "skill": ("name", "description", "instructions", "validation"),
}
_RAW = argparse.RawDescriptionHelpFormatter


def add_parsers(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:  # type: ignore[type-arg]
    scoped = argparse.ArgumentParser(add_help=False, parents=[common])
    scoped.add_argument(
        "--scope",
        default=os.environ.get("POWERCONTEXT_SCOPE_ID"),
        help="scope id (default: POWERCONTEXT_SCOPE_ID)",
    )
    evidence = argparse.ArgumentParser(add_help=False)
    evidence.add_argument(
        "--source-ref",
        action="append",
        default=[],
        dest="source_refs",
        metavar="SOURCE_ID",
        help="captured source id, or task-result/ID for a recorded task result (repeatable)",
    )
    evidence.add_argument(
        "--artifact-ref",
        action="append",
        default=[],
        dest="artifact_refs",
        metavar="FAMILY:ID:REVISION",
        help="artifact reference (repeatable)",
    )
    evidence.add_argument("--reason", help="an (untrusted) note for the reviewer")

    candidate = sub.add_parser("candidate", help="review Experience and Skill candidates")
    verbs = candidate.add_subparsers(dest="verb", required=True, metavar="VERB")
    p = verbs.add_parser("list", help="the Review Inbox", parents=[scoped])
    p.add_argument("--status", default="pending", choices=["pending", "approved", "rejected"])
    p.add_argument("--family", choices=["experience", "skill"])
    p.add_argument("--limit", type=int, default=50)
    p.add_argument("--cursor")
    p.set_defaults(handler=_list)
    p = verbs.add_parser(
        "show",
        help="one candidate (current or --version): proposal, evidence, reason",
        parents=[scoped],
    )
    p.add_argument("candidate_id")
    p.add_argument("--version", type=int)
    p.set_defaults(handler=_show)
    for verb, help_text in (
        ("approve", "approve exactly --expected-version"),
        ("reject", "reject with a reason"),
        ("revise", "replace the proposal (a new pending version)"),
    ):
        extra: dict[str, Any] = (
            {"epilog": revise_epilog(), "formatter_class": _RAW} if verb == "revise" else {}
        )
        p = verbs.add_parser(verb, help=help_text, parents=[scoped], **extra)
        p.add_argument("candidate_id")
        p.add_argument("--expected-version", type=int, required=True)
        if verb == "reject":
            p.add_argument("--reason", required=True, dest="decision_reason")
        if verb == "revise":
            p.add_argument(
                "--proposal",
                required=True,
                help="the full new proposal as JSON, @FILE, or - for stdin",
            )
            p.add_argument(
                "--source-ref",
                action="append",
                dest="source_refs",
                metavar="SOURCE_ID",
                help="replace the source evidence",
            )
            p.add_argument(
                "--artifact-ref",
                action="append",
                dest="artifact_refs",
                metavar="FAMILY:ID:REVISION",
                help="replace the artifact evidence",
            )
            p.add_argument("--reason")
        p.set_defaults(handler=_decide, verb=verb)

    experience = sub.add_parser("experience", help="propose or read Experience")
    verbs = experience.add_subparsers(dest="verb", required=True, metavar="VERB")
    p = verbs.add_parser(
        "propose",
        help="propose an Experience (goes to review)",
        parents=[scoped, evidence],
        epilog=experience_epilog(),
        formatter_class=_RAW,
    )
    for field in ("situation", "action", "outcome", "lesson"):
        p.add_argument(f"--{field}", required=True)
    p.add_argument(
        "--target", metavar="experience:ID:REVISION", help="modify this exact Experience head"
    )
    p.set_defaults(handler=_propose, family="experience")
    p = verbs.add_parser("get", help="an approved Experience revision", parents=[scoped])
    p.add_argument("artifact_id")
    p.add_argument("--revision", type=int, required=True)
    p.set_defaults(handler=_get, family="experience")
    p = verbs.add_parser(
        "list", help="approved Experience (the current revision of each)", parents=[scoped]
    )
    p.add_argument("--limit", type=int, default=50)
    p.add_argument("--cursor")
    p.set_defaults(handler=_list_artifacts, family="experience")

    skill = sub.add_parser("skill", help="propose or read Skills")
    verbs = skill.add_subparsers(dest="verb", required=True, metavar="VERB")
    p = verbs.add_parser(
        "propose",
        help="propose a Skill (goes to review)",
        parents=[scoped, evidence],
        epilog=skill_epilog(),
        formatter_class=_RAW,
    )
    p.add_argument("--name", required=True)
    p.add_argument("--description", default="")
    p.add_argument("--instructions", required=True, help="text, or - for stdin")
    p.add_argument(
        "--validation",
        action="append",
        required=True,
        help="a validation step (repeatable: one per step)",
    )
    p.add_argument("--target", metavar="skill:ID:REVISION", help="modify this exact Skill head")
    p.set_defaults(handler=_propose, family="skill")
    p = verbs.add_parser("get", help="an approved Skill revision", parents=[scoped])
    p.add_argument("artifact_id")
    p.add_argument("--revision", type=int, required=True)
    p.set_defaults(handler=_get, family="skill")
    p = verbs.add_parser(
        "list", help="approved Skills (the current revision of each)", parents=[scoped]
    )
    p.add_argument("--limit", type=int, default=50)
    p.add_argument("--cursor")
    p.set_defaults(handler=_list_artifacts, family="skill")


def _artifact_ref(text: str) -> dict[str, Any]:
    family, _, rest = text.partition(":")
    artifact_id, _, revision = rest.rpartition(":")
    if not (family and artifact_id and revision.isdigit()):
        raise UsageError(f"expected FAMILY:ID:REVISION, got '{text}'", details={"value": text})
    return {"family": family, "artifact_id": artifact_id, "revision": int(revision)}


def _source_refs(ids: list[str]) -> list[dict[str, str]]:
    """``--source-ref`` ids as references: ``task-result/ID`` names the task result recorded
    as ID, any other id a captured prompt (``content``)."""
    return [
        {
            "name": "task-result" if source_id.startswith(TASK_RESULT_PREFIX) else "content",
            "source_id": source_id,
        }
        for source_id in ids
    ]


def content_lines(family: str, content: dict[str, Any], indent: str = "  ") -> list[str]:
    """A proposal's (or an artifact's) fields in reading order, lists one item per line."""
    order = FIELD_ORDER.get(family, ())
    keys = [k for k in order if k in content] + sorted(k for k in content if k not in order)
    return [line for key in keys for line in field_lines(key, content[key], indent)]


def evidence_lines(source_refs: list[Any], artifact_refs: list[Any]) -> list[str]:
    lines = ["  evidence:"]
    lines += [f"    source {visible(ref.source_id)} ({visible(ref.name)})" for ref in source_refs]
    lines += [f"    artifact {artifact_text(ref)}" for ref in artifact_refs]
    return lines if len(lines) > 1 else ["  evidence: (none)"]


def _describe(candidate: Candidate) -> str:
    c = candidate
    lines = [f"{visible(c.candidate_id)} v{c.version} {c.family} {c.status}"]
    lines.append(f"  created {visible(c.created_at)}, updated {visible(c.updated_at)}")
    if c.target:
        lines.append(f"  modifies {artifact_text(c.target)}")
    if c.result_artifact:
        lines.append(f"  approved as {artifact_text(c.result_artifact)}")
    if c.decision_reason:
        lines += field_lines("rejected", c.decision_reason)
    lines += content_lines(c.family, c.proposal)
    lines += evidence_lines(c.source_refs, c.artifact_refs)
    if c.reason:
        lines += field_lines("reason", c.reason)
    return "\n".join(lines)


def _list(args: argparse.Namespace) -> int:
    fields: dict[str, Any] = {"scope_id": args.scope, "status": args.status, "limit": args.limit}
    if args.family:
        fields["family"] = args.family
    if args.cursor:
        fields["cursor"] = args.cursor
    with scoped_client(args) as client:
        result = client.list_artifact_candidates(**fields)
    blocks = [_describe(c) for c in result.candidates] or [f"no {args.status} candidates"]
    if result.next_cursor:
        blocks.append(f"more: --cursor {visible(result.next_cursor)}")
    emit(result, as_json=args.json, human="\n\n".join(blocks))
    return 0


def _show(args: argparse.Namespace) -> int:
    fields: dict[str, Any] = {"scope_id": args.scope, "candidate_id": args.candidate_id}
    if args.version is not None:
        fields["version"] = args.version
    with scoped_client(args) as client:
        candidate = client.get_artifact_candidate(**fields)
    emit(candidate, as_json=args.json, human=_describe(candidate))
    return 0


def _decide(args: argparse.Namespace) -> int:
    fields: dict[str, Any] = {
        "scope_id": args.scope,
        "candidate_id": args.candidate_id,
        "expected_version": args.expected_version,
    }
    with scoped_client(args) as client:
        if args.verb == "approve":
            candidate = client.approve_artifact_candidate(**fields)
        elif args.verb == "reject":
            candidate = client.reject_artifact_candidate(
                **fields, decision_reason=args.decision_reason
            )
        else:
            fields["proposal"] = json_argument(args.proposal, "--proposal")
            if args.source_refs is not None:
                fields["source_refs"] = _source_refs(args.source_refs)
            if args.artifact_refs is not None:
                fields["artifact_refs"] = [_artifact_ref(r) for r in args.artifact_refs]
            if args.reason is not None:
                fields["reason"] = args.reason
            candidate = client.revise_artifact_candidate(**fields)
    emit(candidate, as_json=args.json, human=_describe(candidate))
    return 0


def _propose(args: argparse.Namespace) -> int:
    if args.family == "experience":
        proposal: dict[str, Any] = {
            f: getattr(args, f) for f in ("situation", "action", "outcome", "lesson")
        }
    else:
        instructions = (
            read_stdin("--instructions") if args.instructions == "-" else args.instructions
        )
        proposal = {
            "name": args.name,
            "description": args.description,
            "instructions": instructions,
            "validation": args.validation,
        }
    fields: dict[str, Any] = {
        "scope_id": args.scope,
        "proposal": proposal,
        "source_refs": _source_refs(args.source_refs),
        "artifact_refs": [_artifact_ref(r) for r in args.artifact_refs],
    }
    if args.target:
        fields["target"] = _artifact_ref(args.target)
    if args.reason:
        fields["reason"] = args.reason
    with scoped_client(args) as client:
        if args.family == "experience":
            candidate = client.propose_experience(**fields)
        else:
            candidate = client.propose_skill(**fields)
    emit(candidate, as_json=args.json, human=_describe(candidate))
    return 0


def _get(args: argparse.Namespace) -> int:
    artifact = {"family": args.family, "artifact_id": args.artifact_id, "revision": args.revision}
    with scoped_client(args) as client:
        if args.family == "experience":
            result: Any = client.get_experience(scope_id=args.scope, artifact=artifact)
        else:
            result = client.get_skill(scope_id=args.scope, artifact=artifact)
    emit(result, as_json=args.json, human=_describe_artifact(args.family, result))
    return 0


def _describe_artifact(family: str, artifact: Any) -> str:
    ref = artifact.reference
    lines = [f"{family} {visible(ref.artifact_id)} r{ref.revision}"]
    lines += content_lines(family, artifact.content.model_dump())
    lines += evidence_lines(artifact.source_refs, artifact.artifact_refs)
    return "\n".join(lines)


def _list_artifacts(args: argparse.Namespace) -> int:
    fields: dict[str, Any] = {"scope_id": args.scope, "limit": args.limit}
    if args.cursor:
        fields["cursor"] = args.cursor
    with scoped_client(args) as client:
        if args.family == "experience":
            result: Any = client.list_experiences(**fields)
            items = result.experiences
        else:
            result = client.list_skills(**fields)
            items = result.skills
    noun = "Experience" if args.family == "experience" else "Skills"
    blocks = [_describe_artifact(args.family, item) for item in items] or [f"no approved {noun}"]
    if result.next_cursor:
        blocks.append(f"more: --cursor {visible(result.next_cursor)}")
    emit(result, as_json=args.json, human="\n\n".join(blocks))
    return 0
