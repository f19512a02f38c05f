"""``powercontext context prepare``: show the pack a hook would inject (debugging aid)."""

from __future__ import annotations

import argparse
import os

from .output import emit, scoped_client


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


def _prepare(args: argparse.Namespace) -> int:
    with scoped_client(args) as client:
        pack = client.prepare_context(
            scope_id=args.scope, query=args.query, max_bytes=args.max_bytes
        )
    human = pack.content if pack.content is not None else "(empty: nothing relevant)"
    emit(pack.model_dump(mode="json", by_alias=True), as_json=args.json, human=human)
    return 0
