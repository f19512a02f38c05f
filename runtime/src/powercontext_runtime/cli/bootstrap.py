"""``powercontext handoff|scope refs``: the inputs of SessionStart bootstrap."""

from __future__ import annotations

import argparse
import os
from typing import Any

from ..errors import ConflictError
from .output import emit, json_argument, json_text, scoped_client, visible
from .schemas import handoff_epilog


def add_parsers(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:  # type: ignore[type-arg]
    scoped = argparse.ArgumentParser(add_help=False, parents=[common])
    scoped.add_argument(
        "--scope",
        default=os.environ.get("POWERCONTEXT_SCOPE_ID"),
        help="scope id (default: POWERCONTEXT_SCOPE_ID)",
    )

    handoff = sub.add_parser("handoff", help="commit or read the scope's Handoff")
    verbs = handoff.add_subparsers(dest="verb", required=True, metavar="VERB")
    p = verbs.add_parser(
        "commit",
        help="commit the next revision",
        parents=[scoped],
        epilog=handoff_epilog(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("content", help="powercontext.handoff.v1 JSON, @FILE, or - for stdin")
    p.add_argument("--base", type=int, help="the revision this continues (omit for the first)")
    p.add_argument(
        "--no-deliver",
        dest="deliver",
        action="store_false",
        help="only store the revision; by default the scope's next session (with bootstrap "
        "on) receives it once",
    )
    p.set_defaults(handler=_commit)
    p = verbs.add_parser("get", help="an exact revision", parents=[scoped])
    p.add_argument("--revision", type=int, required=True)
    p.set_defaults(handler=_get)
    p = verbs.add_parser(
        "next", help="the revision waiting for the next session, if any", parents=[scoped]
    )
    p.set_defaults(handler=_next)
    p = verbs.add_parser(
        "withdraw", help="stop the waiting revision from reaching a session", parents=[scoped]
    )
    p.set_defaults(handler=_withdraw)

    scope = sub.add_parser("scope", help="scope settings")
    scope_verbs = scope.add_subparsers(dest="area", required=True, metavar="AREA")
    refs = scope_verbs.add_parser("refs", help="Context References (bootstrap sources)")
    verbs = refs.add_subparsers(dest="verb", required=True, metavar="VERB")
    p = verbs.add_parser("set", help="replace the ordered list", parents=[scoped])
    p.add_argument("references", nargs="*", metavar="SCOPE_ID")
    p.add_argument("--expected-version", type=int)
    p.set_defaults(handler=_refs_set)
    p = verbs.add_parser("get", help="show the list", parents=[scoped])
    p.set_defaults(handler=_refs_get)


def handoff_ref(revision: int) -> dict[str, Any]:
    return {"family": "handoff", "artifact_id": "handoff", "revision": revision}


def _commit(args: argparse.Namespace) -> int:
    base = None if args.base is None else handoff_ref(args.base)
    with scoped_client(args) as client:
        try:
            result = client.commit_handoff(
                scope_id=args.scope,
                base=base,
                content=json_argument(args.content, "CONTENT"),
                deliver_next_session=args.deliver,
            )
        except ConflictError as exc:
            raise _stale_base(exc) from None
    human = f"handoff revision {result.reference.revision}"
    if result.queued:
        human += _QUEUED_NOTE
    emit(result.model_dump(mode="json", by_alias=True), as_json=args.json, human=human)
    return 0


def _stale_base(exc: ConflictError) -> ConflictError:
    """A stale ``--base`` refused by the runtime, with the command-line fix spelled out: the
    code and details stay the runtime's (``current`` names the head, or is null)."""
    if exc.code != "artifact_conflict":
        return exc
    current = (exc.details or {}).get("current")
    if isinstance(current, dict) and isinstance(current.get("revision"), int):
        revision = current["revision"]
        hint = (
            f"the scope's Handoff is at revision {revision}: pass --base {revision} to "
            f"continue it (`powercontext handoff get --revision {revision}` shows it)"
        )
    elif current is None:
        hint = "the scope has no Handoff yet: omit --base to commit the first revision"
    else:
        return exc
    return ConflictError(hint, code=exc.code, details=exc.details)


#: What a queued revision means for the user (docs/bootstrap.md, "Handing off to the next
#: session"): delivery rides on SessionStart bootstrap, which is off by default.
_QUEUED_NOTE = " (queued: the next session of this scope receives it once, if bootstrap is on)"


def _next(args: argparse.Namespace) -> int:
    with scoped_client(args) as client:
        result = client.next_handoff(scope_id=args.scope)
    ref = result.handoff_ref
    human = "no handoff is waiting" if ref is None else f"handoff revision {ref.revision} waits"
    emit(result.model_dump(mode="json"), as_json=args.json, human=human)
    return 0


def _withdraw(args: argparse.Namespace) -> int:
    with scoped_client(args) as client:
        result = client.withdraw_handoff(scope_id=args.scope)
    ref = result.handoff_ref
    human = (
        "no handoff was waiting"
        if ref is None
        else f"withdrew handoff revision {ref.revision} (it stays readable)"
    )
    emit(result.model_dump(mode="json"), as_json=args.json, human=human)
    return 0


def _get(args: argparse.Namespace) -> int:
    with scoped_client(args) as client:
        result = client.get_handoff(scope_id=args.scope, artifact=handoff_ref(args.revision))
    data = result.model_dump(mode="json", by_alias=True)
    emit(data, as_json=args.json, human=json_text(data["content"], indent=2))
    return 0


def _refs_set(args: argparse.Namespace) -> int:
    fields: dict[str, Any] = {"scope_id": args.scope, "references": args.references}
    if args.expected_version is not None:
        fields["expected_version"] = args.expected_version
    with scoped_client(args) as client:
        result = client.set_context_references(**fields)
    emit(
        result,
        as_json=args.json,
        human=_references(result.version, result.references),
    )
    return 0


def _references(version: int, references: list[str]) -> str:
    return f"version {version}: " + (", ".join(visible(r) for r in references) or "(none)")


def _refs_get(args: argparse.Namespace) -> int:
    with scoped_client(args) as client:
        result = client.get_context_references(scope_id=args.scope)
    emit(
        result,
        as_json=args.json,
        human=_references(result.version, result.references),
    )
    return 0
