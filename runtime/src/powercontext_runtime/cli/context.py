"""``powercontext context prepare|bootstrap``: show the packs hooks would inject (debugging)."""

from __future__ import annotations

import argparse
import os
from typing import Any

from .bootstrap import handoff_ref
from .output import emit, scoped_client, visible


def add_parser(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:  # type: ignore[type-arg]
    context = sub.add_parser("context", help="inspect context packs (debug)")
    verbs = context.add_subparsers(dest="verb", required=True, metavar="VERB")
    p = verbs.add_parser("prepare", help="prepare the pack for a prompt", parents=[common])
    p.add_argument(
        "--scope",
        default=os.environ.get("POWERCONTEXT_SCOPE_ID"),
        help="scope id (default: POWERCONTEXT_SCOPE_ID)",
    )
    p.add_argument("--max-bytes", type=int, default=8000)
    p.add_argument("query", help="the prompt")
    p.set_defaults(handler=_prepare)

    p = verbs.add_parser("bootstrap", help="the SessionStart pack (debug)", parents=[common])
    p.add_argument(
        "--scope",
        default=os.environ.get("POWERCONTEXT_SCOPE_ID"),
        help="scope id (default: POWERCONTEXT_SCOPE_ID)",
    )
    p.add_argument(
        "--lifecycle",
        default="startup",
        choices=["startup", "resume", "clear", "compact", "restore", "fork"],
    )
    p.add_argument("--integration", default="cli")
    p.add_argument("--max-bytes", type=int, default=4096)
    p.add_argument("--handoff-revision", type=int)
    p.set_defaults(handler=_bootstrap)


def _prepare(args: argparse.Namespace) -> int:
    with scoped_client(args) as client:
        pack = client.prepare_context(
            scope_id=args.scope, query=args.query, max_bytes=args.max_bytes
        )
    human = (
        visible(pack.content, multiline=True)
        if pack.content is not None
        else "(empty: nothing relevant)"
    )
    emit(pack.model_dump(mode="json", by_alias=True), as_json=args.json, human=human)
    return 0


def _bootstrap(args: argparse.Namespace) -> int:
    fields: dict[str, Any] = {
        "scope_id": args.scope,
        "enabled": True,
        "profile": "powercontext.scope-bootstrap.v1",
        "lifecycle": args.lifecycle,
        "integration": args.integration,
        "max_bytes": args.max_bytes,
    }
    if args.handoff_revision is not None:
        fields["handoff_ref"] = handoff_ref(args.handoff_revision)
    with scoped_client(args) as client:
        pack = client.bootstrap_context(**fields)
    human = (
        visible(pack.content, multiline=True)
        if pack.content is not None
        else f"({visible(pack.status)}: nothing curated)"
    )
    emit(pack.model_dump(mode="json", by_alias=True), as_json=args.json, human=human)
    return 0
