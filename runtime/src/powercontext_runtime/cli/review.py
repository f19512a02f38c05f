"""``powercontext candidate|experience|skill …``: the Review Inbox from the command line."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from ..contract.review import Candidate
from .output import emit, json_argument, scoped_client


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
        help="captured source id (repeatable)",
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
    p = verbs.add_parser("show", help="one candidate (current or --version)", parents=[scoped])
    p.add_argument("candidate_id")
    p.add_argument("--version", type=int)
    p.set_defaults(handler=_show)
    for verb, help_text in (
        ("approve", "approve exactly --expected-version"),
        ("reject", "reject with a reason"),
        ("revise", "replace the proposal (a new pending version)"),
    ):
        p = verbs.add_parser(verb, help=help_text, parents=[scoped])
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
        "propose", help="propose an Experience (goes to review)", parents=[scoped, evidence]
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

    skill = sub.add_parser("skill", help="propose or read Skills")
    verbs = skill.add_subparsers(dest="verb", required=True, metavar="VERB")
    p = verbs.add_parser(
        "propose", help="propose a Skill (goes to review)", parents=[scoped, evidence]
    )
    p.add_argument("--name", required=True)
    p.add_argument("--description", default="")
    p.add_argument("--instructions", required=True, help="text, or - for stdin")
    p.add_argument(
        "--validation", action="append", required=True, help="a validation step (repeatable)"
    )
    p.add_argument("--target", metavar="skill:ID:REVISION", help="modify this exact Skill head")
    p.set_defaults(handler=_propose, family="skill")
    p = verbs.add_parser("get", help="an approved Skill revision", parents=[scoped])
    p.add_argument("artifact_id")
    p.add_argument("--revision", type=int, required=True)
    p.set_defaults(handler=_get, family="skill")


def _artifact_ref(text: str) -> dict[str, Any]:
    family, _, rest = text.partition(":")
    artifact_id, _, revision = rest.rpartition(":")
    if not (family and artifact_id and revision.isdigit()):
        raise SystemExit(f"powercontext: expected FAMILY:ID:REVISION, got {text!r}")
    return {"family": family, "artifact_id": artifact_id, "revision": int(revision)}


def _source_refs(ids: list[str]) -> list[dict[str, str]]:
    return [{"name": "content", "source_id": source_id} for source_id in ids]


def _describe(candidate: Candidate) -> str:
    lines = [f"{candidate.candidate_id} v{candidate.version} {candidate.family} {candidate.status}"]
    if candidate.target:
        lines.append(f"  modifies {candidate.target.artifact_id} r{candidate.target.revision}")
    if candidate.result_artifact:
        ref = candidate.result_artifact
        lines.append(f"  approved as {ref.family} {ref.artifact_id} r{ref.revision}")
    if candidate.decision_reason:
        lines.append(f"  rejected: {candidate.decision_reason}")
    lines += [f"  {key}: {value}" for key, value in candidate.proposal.items()]
    return "\n".join(lines)


def _list(args: argparse.Namespace) -> int:
    fields: dict[str, Any] = {"scope_id": args.scope, "status": args.status, "limit": args.limit}
    if args.family:
        fields["family"] = args.family
    if args.cursor:
        fields["cursor"] = args.cursor
    with scoped_client(args) as client:
        result = client.list_artifact_candidates(**fields)
    lines = [_describe(c) for c in result.candidates] or [f"no {args.status} candidates"]
    if result.next_cursor:
        lines.append(f"more: --cursor {result.next_cursor}")
    emit(result, as_json=args.json, human="\n".join(lines))
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
        instructions = sys.stdin.read() if args.instructions == "-" else args.instructions
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
    human = "\n".join(f"{key}: {value}" for key, value in result.content.model_dump().items())
    emit(result, as_json=args.json, human=human)
    return 0
