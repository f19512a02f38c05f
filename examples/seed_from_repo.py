"""Seed a repository's scope with the rules its CONTRIBUTING.md and README.md already state.

The list items under headings about rules, conventions, guidelines or checklists become
``convention`` entries, tagged with the file they came from (and ``bootstrap-context`` with
``--bootstrap``, so every new agent session starts with them). Run it again after the file
changed: rules that are still there are left alone (an identical entry is not written twice),
new ones are added, and rules that left the file are retired — the scope follows the file.

    powercontext serve &
    python examples/seed_from_repo.py ~/src/shop [--bootstrap]

The scope is the one the Codex and Claude Code hooks use for that repository (its binding, or
its ``origin`` URL: ``git:github.com/acme/shop``; ``POWERCONTEXT_SCOPE_ID`` overrides it).
Client settings as in the quickstart (``POWERCONTEXT_URL`` / ``POWERCONTEXT_TOKEN``).
"""

from __future__ import annotations

import argparse
import os
import re
from pathlib import Path

from powercontext_hook_kit.scope import resolve_scope  # the plugins' scope rule
from powercontext_runtime.client import PowerContextClient
from powercontext_runtime.contract.memory import MemoryEntry

FILES = ("CONTRIBUTING.md", "README.md")
RULE_HEADING = re.compile(r"rule|convention|guideline|checklist|before you|规范|约定", re.I)
HEADING = re.compile(r"^(#{1,6})\s+(.*)$")
ITEM = re.compile(r"^\s{0,3}(?:[-*+]|\d+[.)])\s+(.+)$")


def rules(markdown: str) -> list[tuple[str, str]]:
    """(heading, rule) for every list item under a rules-like heading (and its subheadings);
    a wrapped item's indented continuation lines are joined to it."""
    found: list[tuple[str, str]] = []
    section, level = None, 0
    for line in markdown.splitlines():
        if heading := HEADING.match(line):
            depth = len(heading[1])
            if section is None or depth <= level:
                section = heading[2].strip() if RULE_HEADING.search(heading[2]) else None
                level = depth
        elif section and (item := ITEM.match(line)):
            found.append((section, item[1].strip()))
        elif (
            section and found and found[-1][0] == section and line.startswith("  ") and line.strip()
        ):
            found[-1] = (section, f"{found[-1][1]} {line.strip()}")
    return found


def seed(pc: PowerContextClient, scope: str, path: Path, bootstrap: bool) -> None:
    """Make the scope's entries tagged ``from-<file>`` exactly the file's rules."""
    tag = f"from-{path.name.lower()}"
    known: dict[str, MemoryEntry] = {}  # entry id -> entry, seeded from this file before
    cursor = None
    while True:
        page = pc.list_memory_entries(scope_id=scope, tag=tag, limit=100, cursor=cursor)
        known.update({entry.citation.entry_id: entry for entry in page.entries})
        if (cursor := page.next_cursor) is None:
            break
    kept: set[str] = set()
    for section, rule in rules(path.read_text("utf-8")):
        written = pc.remember_memory(  # an identical active entry is returned, not duplicated
            scope_id=scope,
            kind="convention",
            text=rule,
            tags=[tag, "bootstrap-context"] if bootstrap else [tag],
            reason=f"{path.name} § {section}",
        )
        kept.add(written.entry.citation.entry_id)
        print(f"  {'=' if written.entry.citation.entry_id in known else '+'} {rule}")
    for entry_id, entry in known.items():
        if entry_id not in kept:  # retired, not deleted: its history stays readable
            pc.retire_memory_entry(
                scope_id=scope, citation=entry.citation, reason=f"no longer in {path.name}"
            )
            print(f"  - {entry.text}")
    new, retired = len(kept - known.keys()), len(known.keys() - kept)
    print(f"{path.name}: {len(kept)} rule(s) seeded ({new} new), {retired} retired")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("repository", type=Path)
    parser.add_argument("--bootstrap", action="store_true", help="tag them bootstrap-context")
    args = parser.parse_args()
    directory = str(args.repository.resolve())
    scope = resolve_scope(directory, os.environ.get("POWERCONTEXT_SCOPE_ID"))
    print(f"scope {scope}")
    with PowerContextClient() as pc:
        for name in FILES:
            if (args.repository / name).is_file():
                seed(pc, str(scope), args.repository / name, args.bootstrap)


if __name__ == "__main__":
    main()
