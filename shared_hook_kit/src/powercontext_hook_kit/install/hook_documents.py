"""Hook config documents: ``{"hooks": {"<Event>": [{"matcher"?, "hooks": [handler, …]}, …]}}``.

One shape for Claude Code's ``settings.json``, Codex's ``hooks.json`` and both hosts' plugin
``hooks/hooks.json``, so merging our handlers in and taking them out again is written once.
Pure functions on parsed documents: reading and writing the files is :mod:`.user_files`' job.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from .report import InstallError

__all__ = [
    "HandlerMatcher",
    "iter_hook_handlers",
    "merge_hook_handlers",
    "remove_hook_handlers",
]

HandlerMatcher = Callable[[Mapping[str, Any]], str | None]


def _hooks_table(document: dict[str, Any], path: Path | str, *, create: bool) -> dict[str, Any]:
    table = document.get("hooks")
    if table is None:
        if not create:
            return {}
        table = document["hooks"] = {}
    if not isinstance(table, dict):
        raise InstallError(f'"hooks" in {path} is not an object; fix it by hand, then retry')
    return table


def iter_hook_handlers(
    document: Mapping[str, Any],
) -> Iterator[tuple[str, int, int, Mapping[str, Any]]]:
    """``(event, group index, handler index, handler)`` for every well-formed handler."""
    table = document.get("hooks")
    if not isinstance(table, dict):
        return
    for event, groups in table.items():
        if not isinstance(groups, list):
            continue
        for group_index, group in enumerate(groups):
            handlers = group.get("hooks") if isinstance(group, dict) else None
            if not isinstance(handlers, list):
                continue
            for handler_index, handler in enumerate(handlers):
                if isinstance(handler, dict):
                    yield event, group_index, handler_index, handler


def _remove_where(
    table: dict[str, Any], remove: Callable[[str, Mapping[str, Any]], bool]
) -> dict[str, Any]:
    """Drop matching handlers; groups and events that *we* emptied are dropped too."""
    for event in list(table):
        groups = table[event]
        if not isinstance(groups, list):
            continue
        kept_groups = []
        for group in groups:
            handlers = group.get("hooks") if isinstance(group, dict) else None
            if not isinstance(handlers, list):
                kept_groups.append(group)
                continue
            kept = [h for h in handlers if not (isinstance(h, dict) and remove(event, h))]
            if len(kept) == len(handlers):
                kept_groups.append(group)
            elif kept:
                kept_groups.append({**group, "hooks": kept})
        if len(kept_groups) != len(groups):
            if kept_groups:
                table[event] = kept_groups
            else:
                del table[event]
        elif any(a is not b for a, b in zip(kept_groups, groups, strict=True)):
            table[event] = kept_groups
    return table


def merge_hook_handlers(
    document: Mapping[str, Any] | None,
    wanted: Mapping[str, Sequence[Mapping[str, Any]]],
    is_ours: HandlerMatcher,
    *,
    path: Path | str = "the hooks file",
) -> dict[str, Any]:
    """A copy of ``document`` holding exactly our ``wanted`` handlers and everything else as is.

    An existing handler of ours for the same event and hook name is updated *in place* (Codex
    keys its trust by position, so moving it would silently untrust it); a missing one is
    appended as a new group at the end; duplicates and stale ones of ours are removed.
    """
    result = copy.deepcopy(dict(document or {}))
    table = _hooks_table(result, path, create=bool(wanted))
    wanted_keys = {
        (event, is_ours(handler)): handler
        for event, handlers in wanted.items()
        for handler in handlers
    }
    if None in {verb for _, verb in wanted_keys}:
        raise InstallError("a handler to install is not recognisable as ours (bug)")
    seen: set[tuple[str, str | None]] = set()

    def stale(event: str, handler: Mapping[str, Any]) -> bool:
        verb = is_ours(handler)
        if verb is None:
            return False
        key = (event, verb)
        if key not in wanted_keys or key in seen:
            return True
        seen.add(key)
        return False

    _remove_where(table, stale)
    for event, group_index, handler_index, handler in list(iter_hook_handlers(result)):
        key = (event, is_ours(handler))
        if key in wanted_keys and handler != wanted_keys[key]:
            table[event][group_index]["hooks"][handler_index] = dict(wanted_keys[key])
    for (event, verb), handler in wanted_keys.items():
        if (event, verb) not in seen:
            groups = table.setdefault(event, [])
            if not isinstance(groups, list):
                raise InstallError(f'"hooks.{event}" in {path} is not a list; fix it by hand')
            groups.append({"hooks": [dict(handler)]})
    return result


def remove_hook_handlers(
    document: Mapping[str, Any] | None, is_ours: HandlerMatcher
) -> dict[str, Any] | None:
    """A copy of ``document`` without our handlers (``None`` if there was no document).

    A ``"hooks"`` object we emptied is removed as well, so a file that only ever held our hook
    ends up as ``{}``.
    """
    if document is None:
        return None
    result = copy.deepcopy(dict(document))
    table = result.get("hooks")
    if not isinstance(table, dict):
        return result
    had_events = bool(table)
    _remove_where(table, lambda _event, handler: is_ours(handler) is not None)
    if had_events and not table:
        del result["hooks"]
    return result
