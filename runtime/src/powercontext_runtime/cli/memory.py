"""``powercontext memory …``: every Memory operation through the HTTP client."""

from __future__ import annotations

import argparse
import os
from typing import Any

from ..contract.common import MemoryCitation, MemoryRef
from ..contract.memory import MemoryEntry, SearchMemoryResponse
from .output import emit, read_stdin, scoped_client, visible, visible_block

#: Kinds are an open set (spec 02): any 1..128 characters; these are the conventional ones.
KNOWN_KINDS = ("fact", "preference", "decision", "constraint", "convention", "working_note")
_KIND_HELP = (
    "the entry's kind: free-form, any 1..128 characters (not checked against a list); "
    "conventional kinds: " + ", ".join(KNOWN_KINDS)
)


def add_parser(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:  # type: ignore[type-arg]
    memory = sub.add_parser("memory", help="remember, search and curate Memory entries")
    verbs = memory.add_subparsers(dest="verb", required=True, metavar="VERB")

    def verb(name: str, help_text: str) -> argparse.ArgumentParser:
        p = verbs.add_parser(name, help=help_text, parents=[common])
        p.add_argument(
            "--scope",
            default=os.environ.get("POWERCONTEXT_SCOPE_ID"),
            help="scope id (default: POWERCONTEXT_SCOPE_ID)",
        )
        return p

    def cited(p: argparse.ArgumentParser) -> None:
        p.add_argument("--revision", type=int, required=True, help="cited memory revision")
        p.add_argument("--entry-id", required=True)
        p.add_argument("--version-id", required=True, help="cited entry_version_id")

    p = verb("remember", "add an entry")
    p.add_argument("text", help="the entry's text ('-' reads standard input)")
    p.add_argument("--kind", default="fact", help=_KIND_HELP + " (default: fact)")
    p.add_argument("--tag", action="append", default=[], dest="tags")
    p.add_argument("--reason")
    p.add_argument("--expected-revision", type=int)
    p.set_defaults(handler=_remember)

    p = verb("search", "search the active entries")
    p.add_argument("query")
    p.add_argument("--limit", type=int, default=10)
    p.set_defaults(handler=_search)

    p = verb("list", "list the head revision's entries")
    p.add_argument("--include-inactive", action="store_true")
    p.add_argument("--limit", type=int, default=50)
    p.add_argument("--cursor")
    p.set_defaults(handler=_list)

    p = verb("get", "re-read one cited version exactly")
    cited(p)
    p.set_defaults(handler=_get)

    p = verb("revise", "write a new version of an entry")
    cited(p)
    p.add_argument("--text", help="new text ('-' reads standard input)")
    p.add_argument("--kind", help=_KIND_HELP)
    p.add_argument("--tag", action="append", dest="tags", help="replace the tags (repeatable)")
    p.add_argument("--reason")
    p.set_defaults(handler=_revise)

    p = verb("retire", "make an entry inactive")
    cited(p)
    p.add_argument("--reason")
    p.set_defaults(handler=_retire)

    p = verb("tag", "add or remove tags of an entry (a revise)")
    cited(p)
    p.add_argument("--add", action="append", default=[])
    p.add_argument("--remove", action="append", default=[])
    p.set_defaults(handler=_tag)

    p = verb("flush", "turn captured prompts into Memory (the configured extractor)")
    p.add_argument("--max-sources", type=int, default=100)
    p.set_defaults(handler=_flush)

    p = verb("changes", "revision summaries since a revision")
    p.add_argument("--since", type=int, default=0)
    p.add_argument("--limit", type=int, default=100)
    p.set_defaults(handler=_changes)


def _text(value: str) -> str:
    return read_stdin("the text") if value == "-" else value


def _citation(args: argparse.Namespace) -> MemoryCitation:
    return MemoryCitation(
        memory_ref=MemoryRef.at(args.revision),
        entry_id=args.entry_id,
        entry_version_id=args.version_id,
    )


def _describe(entry: MemoryEntry) -> str:
    """The entry's header and citation, then its text indented under them (every line of it,
    so no line of a stored text can pass for another entry's header)."""
    c = entry.citation
    tags = f" [{', '.join(visible(tag) for tag in entry.tags)}]" if entry.tags else ""
    return "\n".join(
        [
            f"{visible(c.entry_id)} v{entry.version} ({visible(entry.kind)}, {entry.state}){tags}",
            f"  cite: --revision {c.memory_ref.revision} --entry-id {visible(c.entry_id)} "
            f"--version-id {visible(c.entry_version_id)}",
            *visible_block(entry.text, "  "),
        ]
    )


def _write_result(args: argparse.Namespace, result: Any) -> int:
    human = f"memory revision {result.memory.revision}\n{_describe(result.entry)}"
    emit(result, as_json=args.json, human=human)
    return 0


def _remember(args: argparse.Namespace) -> int:
    with scoped_client(args) as client:
        fields: dict[str, Any] = {
            "scope_id": args.scope,
            "kind": args.kind,
            "text": _text(args.text),
            "tags": args.tags,
        }
        if args.reason is not None:
            fields["reason"] = args.reason
        if args.expected_revision is not None:
            fields["expected_revision"] = args.expected_revision
        return _write_result(args, client.remember_memory(**fields))


def _search(args: argparse.Namespace) -> int:
    with scoped_client(args) as client:
        result: SearchMemoryResponse = client.search_memory(
            scope_id=args.scope, query=args.query, limit=args.limit
        )
    # One line per hit: a newline in the text is shown as \n, like every other hidden character.
    lines = [
        f"{hit.score:.3f}  {visible(hit.citation.entry_id)}  {visible(hit.text)}"
        for hit in result.hits
    ] or ["no matching entries"]
    emit(result, as_json=args.json, human="\n".join(lines))
    return 0


def _list(args: argparse.Namespace) -> int:
    fields: dict[str, Any] = {
        "scope_id": args.scope,
        "limit": args.limit,
        "include_inactive": args.include_inactive,
    }
    if args.cursor:
        fields["cursor"] = args.cursor
    with scoped_client(args) as client:
        result = client.list_memory_entries(**fields)
    lines = [_describe(entry) for entry in result.entries] or ["no entries"]
    if result.next_cursor:
        lines.append(f"more: --cursor {visible(result.next_cursor)}")
    emit(result, as_json=args.json, human="\n".join(lines))
    return 0


def _get(args: argparse.Namespace) -> int:
    with scoped_client(args) as client:
        entry = client.get_memory_entry(scope_id=args.scope, citation=_citation(args))
    emit(entry, as_json=args.json, human=_describe(entry))
    return 0


def _revise(args: argparse.Namespace) -> int:
    fields: dict[str, Any] = {"scope_id": args.scope, "citation": _citation(args)}
    if args.text is not None:
        fields["text"] = _text(args.text)
    for name in ("kind", "tags", "reason"):
        if getattr(args, name) is not None:
            fields[name] = getattr(args, name)
    with scoped_client(args) as client:
        return _write_result(args, client.revise_memory_entry(**fields))


def _retire(args: argparse.Namespace) -> int:
    fields: dict[str, Any] = {"scope_id": args.scope, "citation": _citation(args)}
    if args.reason is not None:
        fields["reason"] = args.reason
    with scoped_client(args) as client:
        return _write_result(args, client.retire_memory_entry(**fields))


def _tag(args: argparse.Namespace) -> int:
    citation = _citation(args)
    with scoped_client(args) as client:
        entry = client.get_memory_entry(scope_id=args.scope, citation=citation)
        tags = sorted((set(entry.tags) | set(args.add)) - set(args.remove))
        result = client.revise_memory_entry(scope_id=args.scope, citation=citation, tags=tags)
    return _write_result(args, result)


def _changes(args: argparse.Namespace) -> int:
    with scoped_client(args) as client:
        result = client.list_memory_changes(
            scope_id=args.scope, since_revision=args.since, limit=args.limit
        )
    lines = [
        f"r{c.revision} {c.operation} {visible(c.entry_id)} {visible(c.entry_version_id)} "
        f"{c.created_at}"
        for c in result.changes
    ] or ["no changes"]
    emit(result, as_json=args.json, human="\n".join(lines))
    return 0


def _flush(args: argparse.Namespace) -> int:
    with scoped_client(args) as client:
        result = client.flush_memory(scope_id=args.scope, max_sources=args.max_sources)
    human = (
        f"{result.status}: {result.processed_source_count} sources "
        f"(cursor {result.previous_cursor} → {result.current_cursor} of "
        f"{result.high_watermark})"
    )
    emit(result, as_json=args.json, human=human)
    return 0
