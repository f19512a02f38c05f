"""A skewed multi-scope corpus, shared by the benches that load many scopes into one database.

Why a module of its own: ``fulltext_scopes.py`` (the full-text candidate query, in process) and
``team_scale.py`` (three daemons over HTTP) must load the same kind of team database — a few
large scopes, many small ones, one shared vocabulary — or their numbers cannot be read side by
side. The layout, the texts of each scope and the choice of scopes to measure live here once.

Layout (``--scopes``, ``--large``, ``--small``, ``--skew``): the large scopes at their given
sizes, the rest ``min · (max/min)^(x^skew)`` for x evenly spread over 0…1 (with 50…5,000 and
skew 5: half of them under 60 entries, a tenth over 1,000). Texts come from the benches' seeded
generator (``_common.MemoryTextGenerator``, one seed per scope: English, Chinese, identifiers
and paths over one shared vocabulary, so every common term is in every scope, the hard case for
a scope filter applied after an index).

Imported as ``_scopes`` from the script's own directory, like ``_common``.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import _common
from _common import MemoryItem, MemoryTextGenerator

#: The options every multi-scope bench takes, and their help texts.
LAYOUT_OPTIONS = ("scopes", "large", "small", "skew", "measure")


@dataclass(frozen=True, slots=True)
class Scope:
    index: int
    scope_id: str
    size: int


def add_layout_arguments(p: argparse.ArgumentParser, defaults: Mapping[str, Any]) -> None:
    """``--scopes``, ``--large``, ``--small``, ``--skew`` and ``--measure`` (left ``None``:
    :func:`resolve_layout` fills them from the bench's defaults or smoke preset)."""
    p.add_argument("--scopes", type=int, help=f"scopes in all ({defaults['scopes']})")
    p.add_argument("--large", help=f"comma-separated large scope sizes ({defaults['large']})")
    p.add_argument("--small", help=f"min,max size of the small scopes ({defaults['small']})")
    p.add_argument("--skew", type=float, help=f"small-size skew exponent ({defaults['skew']})")
    p.add_argument(
        "--measure", help=f"small scope sizes to measure, nearest found ({defaults['measure']})"
    )


def resolve_layout(
    p: argparse.ArgumentParser, args: argparse.Namespace, preset: Mapping[str, Any]
) -> None:
    """Fill the layout options left unset from ``preset`` and parse them into lists (an
    argparse error for a layout that cannot be built)."""
    for name in LAYOUT_OPTIONS:
        if getattr(args, name) is None:
            setattr(args, name, preset[name])
    try:
        args.large = [int(s) for s in str(args.large).split(",") if s]
        args.small = [int(s) for s in str(args.small).split(",") if s]
        args.measure = sorted({int(s) for s in str(args.measure).split(",") if s})
    except ValueError:
        p.error("--large, --small and --measure take comma-separated integers")
    if len(args.small) != 2 or not 1 <= args.small[0] <= args.small[1]:
        p.error("--small is min,max with 1 ≤ min ≤ max")
    if args.scopes <= len(args.large):
        p.error("--scopes must exceed the number of large scopes")
    if args.skew <= 0:
        p.error("--skew must be positive")


def layout(
    scopes: int, large: Sequence[int], small: Sequence[int], skew: float, prefix: str
) -> list[Scope]:
    """The scopes, large ones first, ids ``<prefix>s0000``…"""
    small_count = scopes - len(large)
    low, high = small
    sizes = list(large) + [
        round(low * (high / low) ** (((i + 0.5) / small_count) ** skew)) for i in range(small_count)
    ]
    return [Scope(j, f"{prefix}s{j:04d}", n) for j, n in enumerate(sizes)]


def scope_items(seed: int, scope: Scope, count: int | None = None) -> list[MemoryItem]:
    """The scope's entries in write order (its first ``count`` only: the same texts, since
    the generator's sequence depends only on its seed)."""
    wanted = scope.size if count is None else min(count, scope.size)
    return MemoryTextGenerator(seed * 100_003 + scope.index).take(wanted)


def measured_scopes(scopes: Sequence[Scope], targets: Sequence[int], large: int) -> list[Scope]:
    """For each target size the small scope closest to it, and every large scope; by size."""
    small = scopes[large:]
    chosen = {min(small, key=lambda s, t=t: (abs(s.size - t), s.index)) for t in targets}
    return sorted(chosen | set(scopes[:large]), key=lambda s: s.size)


def interleaved(scopes: Sequence[Scope]) -> list[Scope]:
    """Largest, smallest, next largest, …: the load order that makes large and small scopes
    share the table's history (row ids, merges) instead of one filling it after the other."""
    by_size = sorted(scopes, key=lambda s: -s.size)
    return [by_size[i // 2] if i % 2 == 0 else by_size[-1 - i // 2] for i in range(len(by_size))]


def run_and_publish(
    name: str,
    section: str,
    defaults: Mapping[str, Any],
    args: argparse.Namespace,
    run: Callable[[argparse.Namespace], dict[str, Any]],
    render: Callable[[dict[str, Any]], str],
) -> int:
    """A multi-scope bench's ``main``: the default layout owns ``section`` of
    bench/RESULTS.md; another scope count writes ``<section>-<scopes>``, so a 1,000-scope run
    never overwrites the 200-scope figures."""
    if args.scopes != defaults["scopes"]:
        section = f"{section}-{args.scopes}"
    return _common.run_and_publish(name, args, run, render, section)
