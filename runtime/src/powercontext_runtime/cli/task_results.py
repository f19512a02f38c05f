"""``powercontext task-result record|list|show``: task results as exact evidence.

Everything shown here was written by an agent's host: every piece of it goes through
:func:`.output.visible` (and ``--json`` through ``json_text``), like any other stored text.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from ..contract.limits import TASK_RESULT_PREFIX
from ..contract.task_results import RecordedTaskResult, TaskResultSummary
from .output import UsageError, emit, field_lines, json_argument, scoped_client, visible
from .schemas import task_result_epilog

__all__ = ["add_parsers"]


def add_parsers(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:  # type: ignore[type-arg]
    scoped = argparse.ArgumentParser(add_help=False, parents=[common])
    scoped.add_argument(
        "--scope",
        default=os.environ.get("POWERCONTEXT_SCOPE_ID"),
        help="scope id (default: POWERCONTEXT_SCOPE_ID)",
    )
    task_result = sub.add_parser(
        "task-result", help="record and read task results (evidence for Experience)"
    )
    verbs = task_result.add_subparsers(dest="verb", required=True, metavar="VERB")
    p = verbs.add_parser(
        "record",
        help="record what a task did (stored as the source task-result/ID; secrets redacted)",
        parents=[scoped],
        epilog=task_result_epilog(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("result", metavar="@FILE|-", help="the task result as JSON (see below)")
    p.set_defaults(handler=_record)
    p = verbs.add_parser("list", help="the scope's task results, newest first", parents=[scoped])
    p.add_argument("--limit", type=int, default=50)
    p.add_argument("--cursor")
    p.set_defaults(handler=_list)
    p = verbs.add_parser("show", help="one task result exactly as stored", parents=[scoped])
    p.add_argument("task_id", metavar="ID", help="the task id (or task-result/ID)")
    p.set_defaults(handler=_show)


def _record(args: argparse.Namespace) -> int:
    if not (args.result == "-" or args.result.startswith("@")):
        raise UsageError(
            "the task result is read from @FILE or - (standard input)",
            details={"argument": "@FILE|-"},
        )
    body = json_argument(args.result, "@FILE|-")
    if not isinstance(body, dict):
        raise UsageError("the task result must be a JSON object", details={"argument": "@FILE|-"})
    if "scope_id" in body:
        raise UsageError(
            "the task result file has no scope_id: the scope comes from --scope",
            details={"argument": "@FILE|-"},
        )
    with scoped_client(args) as client:
        result = client.record_task_result(scope_id=args.scope, **body)
    human = f"recorded {visible(result.source.source_id)} at position {result.position}"
    if result.redactions:
        noun = "secret" if result.redactions == 1 else "secrets"
        human += f" ({result.redactions} {noun} redacted)"
    emit(result, as_json=args.json, human=human)
    return 0


def _headline(source_id: str, outcome: str, position: int, created_at: str) -> str:
    return f"{visible(source_id)} {outcome} (position {position}, recorded {visible(created_at)})"


def _summary(item: TaskResultSummary) -> str:
    lines = [_headline(item.source.source_id, item.outcome, item.position, item.created_at)]
    lines += field_lines("goal", item.goal)
    if item.host is not None:
        lines += field_lines("host", item.host)
    if item.session_ref is not None:
        lines += field_lines("session", item.session_ref)
    lines.append(
        f"  {item.changes} changed files, {item.checks} checks ({item.failed_checks} failed)"
    )
    return "\n".join(lines)


def _list(args: argparse.Namespace) -> int:
    fields: dict[str, Any] = {"scope_id": args.scope, "limit": args.limit}
    if args.cursor:
        fields["cursor"] = args.cursor
    with scoped_client(args) as client:
        result = client.list_task_results(**fields)
    blocks = [_summary(item) for item in result.task_results] or ["no task results"]
    if result.next_cursor:
        blocks.append(f"more: --cursor {visible(result.next_cursor)}")
    emit(result, as_json=args.json, human="\n\n".join(blocks))
    return 0


def describe(found: RecordedTaskResult) -> str:
    """A task result for people: every field, the output tails as indented blocks."""
    task = found.task
    lines = [_headline(found.source.source_id, task.outcome, found.position, found.created_at)]
    lines += field_lines("goal", task.goal)
    if task.host is not None:
        lines += field_lines("host", task.host)
    if task.session_ref is not None:
        lines += field_lines("session", task.session_ref)
    lines += field_lines("changes", [f"{c.path} +{c.added} -{c.removed}" for c in task.changes])
    if not task.checks:
        lines.append("  checks: (none)")
    else:
        lines.append("  checks:")
        for check in task.checks:
            lines += field_lines(f"- exit {check.exit_status}", check.command, "    ")
            if check.output_tail:
                lines += field_lines("output", check.output_tail, "      ")
    return "\n".join(lines)


def _show(args: argparse.Namespace) -> int:
    task_id = args.task_id.removeprefix(TASK_RESULT_PREFIX)
    with scoped_client(args) as client:
        found = client.get_task_result(scope_id=args.scope, task_id=task_id)
    emit(found, as_json=args.json, human=describe(found))
    return 0
