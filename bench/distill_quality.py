"""Offline distiller quality (issue #31 item 3): precision, recall, dedup, secrets.

Runs the offline distiller's pure core (``powercontext_runtime.distill``) over hand-written
task sessions (``bench/data/distill_sessions/*.json``: a task result per the wire contract
plus the lessons a reviewer would keep, labelled by hand; README there) and compares what it
proposes with the labels. In process, no daemon, no clock in the measured path: it takes a
second and its numbers change only when the rules or the fixtures do.

* **precision** = proposals that match a labelled keeper of their session / proposals
  (goal ≥ 70 %): what a reviewer would approve out of what lands in the inbox;
* **recall** = labelled keepers matched by a proposal / labelled keepers (goal ≥ 50 %);
* a proposal matches a keeper when the rule is the same and every one of the keeper's
  ``terms`` occurs (case-folded) in the proposal's signature or lesson sentence;
* **dedup**: keepers sharing a ``group`` (near-duplicate sessions) must be proposed with one
  signature, and different groups with different signatures (the later dedup step merges on
  signature equality); :func:`similar`'s spread is reported for calibration;
* **secrets**: no proposal may contain anything :func:`looks_secret` flags, nor a fixture's
  raw ``SENTINEL`` credential, nor a line of any output tail longer than 30 characters; the
  longest fragment shared with an output tail is reported.

Fixtures carry ``split``: ``dev`` (written first, the rules were tuned on them) or
``blind`` (written afterwards and measured before any further change); both are reported.

**Transcript mode** (:mod:`distill_transcripts`, run too unless ``--transcripts none``): authored
sessions (``bench/data/distill_transcripts/*.json``) rendered as Claude Code and Codex
transcripts, parsed by the plugins' Stop-hook code, recorded into an in-process SQLite runtime
(redaction applies), distilled by the worker's service, and the pending candidates compared
with the labels; per host format, with parser parity between formats and secret scans of
everything stored. About ten seconds.

    .venv/bin/python bench/distill_quality.py             # Markdown on stdout
    .venv/bin/python bench/distill_quality.py --verbose   # every proposal and miss (stderr)
    .venv/bin/python bench/distill_quality.py --json --write-results
"""

from __future__ import annotations

import argparse
import difflib
import json
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _common import command_line, log, machine_facts, markdown_table, publish

from powercontext_runtime.distill import RULES, Lesson, TaskInput, propose_lessons, similar
from powercontext_runtime.distill.failures import looks_secret

SECTION = "distill-quality"
DEFAULT_DATA = Path(__file__).resolve().parent / "data" / "distill_sessions"
DEFAULT_TRANSCRIPTS = Path(__file__).resolve().parent / "data" / "distill_transcripts"
PRECISION_GOAL = 0.70
RECALL_GOAL = 0.50
#: An output line at least this long must never appear verbatim in a proposal.
VERBATIM_LINE_CHARS = 30


@dataclass(frozen=True, slots=True)
class Keeper:
    rule: str
    terms: tuple[str, ...]
    group: str


@dataclass(frozen=True, slots=True)
class Session:
    id: str
    split: str
    about: str
    task: dict[str, Any]
    keep: tuple[Keeper, ...]


def load(directory: Path) -> list[Session]:
    sessions = []
    for path in sorted(directory.glob("*.json")):
        raw = json.loads(path.read_text(encoding="utf-8"))
        keep = tuple(Keeper(k["rule"], tuple(k["terms"]), k["group"]) for k in raw["keep"])
        sessions.append(Session(raw["id"], raw["split"], raw["about"], raw["task"], keep))
    if not sessions:
        raise SystemExit(f"no fixtures in {directory}")
    return sessions


def matches(lesson: Lesson, keeper: Keeper) -> bool:
    haystack = f"{lesson.signature}\n{lesson.lesson}".casefold()
    return lesson.rule == keeper.rule and all(t.casefold() in haystack for t in keeper.terms)


def _texts(lesson: Lesson) -> list[str]:
    return [*lesson.proposal().values(), lesson.signature]


def _longest_copied(lesson: Lesson, tails: list[str]) -> int:
    """Longest run of characters a proposal shares with any output tail of its session."""
    best = 0
    for text in _texts(lesson):
        for tail in tails:
            m = difflib.SequenceMatcher(None, text, tail, autojunk=False).find_longest_match()
            best = max(best, m.size)
    return best


def _sentinels(task: dict[str, Any]) -> list[str]:
    """The raw credentials a fixture plants (tokens containing ``SENTINEL``)."""
    blob = json.dumps(task)
    found = []
    for word in blob.replace('"', " ").replace("\\n", " ").split():
        if "SENTINEL" in word:
            found.append(word.strip(".,;'"))
    return found


def evaluate(sessions: list[Session]) -> dict[str, Any]:
    per_rule = {r: Counter() for r in RULES}
    rows: list[dict[str, Any]] = []
    leaks: list[str] = []
    verbatim: list[str] = []
    longest_copy = 0
    by_group: dict[str, set[str]] = {}
    all_lessons: list[tuple[str, Lesson]] = []
    splits: dict[str, Counter] = {}
    for session in sessions:
        task = TaskInput.from_mapping(session.task)
        lessons = propose_lessons(f"task-result/{session.id}", task)
        again = propose_lessons(f"task-result/{session.id}", task)
        if again != lessons:
            raise SystemExit(f"{session.id}: the distiller is not deterministic")
        tails = [c.output_tail for c in task.checks]
        sentinels = _sentinels(session.task)
        kept = [any(matches(lesson, k) for k in session.keep) for lesson in lessons]
        found = [any(matches(lesson, k) for lesson in lessons) for k in session.keep]
        counts = splits.setdefault(session.split, Counter())
        counts.update(
            proposed=len(lessons), kept=sum(kept), labelled=len(session.keep), found=sum(found)
        )
        for lesson, ok in zip(lessons, kept, strict=True):
            per_rule[lesson.rule]["proposed"] += 1
            per_rule[lesson.rule]["kept"] += ok
            all_lessons.append((session.id, lesson))
            for text in _texts(lesson):
                if looks_secret(text) or any(s and s in text for s in sentinels):
                    leaks.append(session.id)
                for tail in tails:
                    for line in tail.splitlines():
                        line = line.strip()
                        if len(line) >= VERBATIM_LINE_CHARS and line in text:
                            verbatim.append(session.id)
            longest_copy = max(longest_copy, _longest_copied(lesson, tails))
        for keeper, ok in zip(session.keep, found, strict=True):
            per_rule[keeper.rule]["labelled"] += 1
            per_rule[keeper.rule]["found"] += ok
            for lesson in lessons:
                if matches(lesson, keeper):
                    by_group.setdefault(keeper.group, set()).add(lesson.signature)
        rows.append(
            {
                "id": session.id,
                "split": session.split,
                "outcome": task.outcome,
                "proposed": [
                    {
                        "rule": lesson.rule,
                        "signature": lesson.signature,
                        "lesson": lesson.lesson,
                        "kept": ok,
                    }
                    for lesson, ok in zip(lessons, kept, strict=True)
                ],
                "missed": [
                    {"rule": k.rule, "terms": list(k.terms)}
                    for k, ok in zip(session.keep, found, strict=True)
                    if not ok
                ],
            }
        )
    return {
        "rows": rows,
        "splits": {name: dict(c) for name, c in sorted(splits.items())},
        "per_rule": {rule: dict(c) for rule, c in per_rule.items()},
        "dedup": _dedup(sessions, by_group, all_lessons),
        "secrets": {
            "leaking_proposals": len(leaks),
            "sessions": sorted(set(leaks)),
            "verbatim_output_lines": len(verbatim),
            "longest_fragment_shared_with_output": longest_copy,
            "sessions_with_planted_secrets": sum(
                1 for s in sessions if _sentinels(s.task) or "[REDACTED]" in json.dumps(s.task)
            ),
        },
    }


def _dedup(
    sessions: list[Session], by_group: dict[str, set[str]], lessons: list[tuple[str, Lesson]]
) -> dict[str, Any]:
    """Near-duplicates collapse (one signature per group), different groups stay apart."""
    sizes = Counter(k.group for s in sessions for k in s.keep)
    near = {g: sorted(sigs) for g, sigs in by_group.items() if sizes[g] > 1}
    collapsed = [g for g, sigs in near.items() if len(sigs) == 1]
    owner: dict[str, str] = {}
    clashes = []
    for group, sigs in sorted(by_group.items()):
        for sig in sigs:
            if sig in owner and owner[sig] != group:
                clashes.append([owner[sig], group])
            owner.setdefault(sig, group)
    group_of = {sig: g for g, sigs in by_group.items() for sig in sigs}
    same, different = [], []
    for i, (_, a) in enumerate(lessons):
        for _, b in lessons[i + 1 :]:
            ga, gb = group_of.get(a.signature), group_of.get(b.signature)
            if ga is None or gb is None:
                continue
            (same if ga == gb else different).append(similar(a, b))
    return {
        "near_duplicate_groups": len(near),
        "collapsed": len(collapsed),
        "not_collapsed": sorted(set(near) - set(collapsed)),
        "signature_clashes": clashes,
        "similar_min_same_group": min(same) if same else None,
        "similar_max_different_groups": max(different) if different else None,
    }


def _ratio(num: int, den: int) -> float:
    return num / den if den else 0.0


def run(args: argparse.Namespace) -> dict[str, Any]:
    sessions = load(args.data)
    result = evaluate(sessions)
    transcripts = None
    if args.transcripts is not None:
        from distill_transcripts import evaluate_transcripts  # imports the runtime's stores

        transcripts = evaluate_transcripts(args.transcripts)
    total = Counter()
    for counts in result["splits"].values():
        total.update(counts)
    precision = _ratio(total["kept"], total["proposed"])
    recall = _ratio(total["found"], total["labelled"])
    secrets = result["secrets"]
    return {
        "benchmark": "distill_quality",
        "machine": machine_facts(),
        "command": command_line(),
        "data": str(args.data),
        "sessions": len(sessions),
        "sessions_without_keepers": sum(1 for s in sessions if not s.keep),
        "precision": precision,
        "recall": recall,
        "proposed": total["proposed"],
        "kept": total["kept"],
        "labelled": total["labelled"],
        "found": total["found"],
        "goals": {
            "precision": {"target": PRECISION_GOAL, "ok": precision >= PRECISION_GOAL},
            "recall": {"target": RECALL_GOAL, "ok": recall >= RECALL_GOAL},
            "secrets": {
                "target": 0,
                "ok": secrets["leaking_proposals"] == 0 and secrets["verbatim_output_lines"] == 0,
            },
            "dedup": {
                "ok": not result["dedup"]["not_collapsed"]
                and not result["dedup"]["signature_clashes"]
            },
        },
        **result,
        "transcripts": transcripts,
    }


def _pct(num: int, den: int) -> str:
    return f"{100 * _ratio(num, den):.1f} % ({num}/{den})" if den else "— (0/0)"


def render_markdown(report: dict[str, Any]) -> str:
    m, goals = report["machine"], report["goals"]

    def verdict(ok: bool) -> str:
        return "met" if ok else "**missed**"

    dedup, secrets = report["dedup"], report["secrets"]
    lines = [
        "## Offline distiller quality (issue #31 item 3)",
        "",
        "Generated by `bench/distill_quality.py --write-results`; edit outside the markers only.",
        "",
        f"- Date: {m['date']}",
        f"- Machine: {m['cpu_count']} CPUs ({m['cpu_model']}), {m['platform']}, "
        f"Python {m['python']}",
        f"- Command: `{report['command']}`",
        f"- Dataset: `bench/data/distill_sessions/`: {report['sessions']} hand-written task "
        f"sessions ({report['sessions_without_keepers']} with nothing a reviewer would keep), "
        f"{report['labelled']} labelled lessons; in process, pure rules (no daemon, no model)",
        "",
        markdown_table(
            ["goal", "target", "measured", "verdict"],
            [
                [
                    "precision: proposals a reviewer keeps",
                    f"≥ {100 * PRECISION_GOAL:.1f} %",
                    _pct(report["kept"], report["proposed"]),
                    verdict(goals["precision"]["ok"]),
                ],
                [
                    "recall: labelled lessons proposed",
                    f"≥ {100 * RECALL_GOAL:.1f} %",
                    _pct(report["found"], report["labelled"]),
                    verdict(goals["recall"]["ok"]),
                ],
                [
                    "secrets in proposals (looks-secret, planted raw sentinels, "
                    f"output lines ≥ {VERBATIM_LINE_CHARS} chars)",
                    "0",
                    f"{secrets['leaking_proposals']} / {secrets['verbatim_output_lines']}",
                    verdict(goals["secrets"]["ok"]),
                ],
                [
                    "near-duplicate sessions collapse to one signature",
                    "all",
                    f"{dedup['collapsed']}/{dedup['near_duplicate_groups']} groups, "
                    f"{len(dedup['signature_clashes'])} clashes",
                    verdict(goals["dedup"]["ok"]),
                ],
            ],
        ),
        "",
        markdown_table(
            ["split", "sessions", "proposed", "kept", "precision", "labelled", "recall"],
            [
                [
                    name,
                    sum(1 for r in report["rows"] if r["split"] == name),
                    c.get("proposed", 0),
                    c.get("kept", 0),
                    _pct(c.get("kept", 0), c.get("proposed", 0)),
                    c.get("labelled", 0),
                    _pct(c.get("found", 0), c.get("labelled", 0)),
                ]
                for name, c in report["splits"].items()
            ],
        ),
        "",
        markdown_table(
            ["rule", "proposed", "kept", "labelled", "found"],
            [
                [
                    f"`{rule}`",
                    c.get("proposed", 0),
                    c.get("kept", 0),
                    c.get("labelled", 0),
                    c.get("found", 0),
                ]
                for rule, c in report["per_rule"].items()
            ],
        ),
        "",
        f"- Wrong proposals: {_list(r['id'] for r in report['rows'] for p in r['proposed'] if not p['kept'])}",  # noqa: E501
        f"- Missed lessons: {_list(r['id'] for r in report['rows'] if r['missed'])}",
        f"- `similar()`: lowest within a near-duplicate group "
        f"{_num(dedup['similar_min_same_group'])}, highest between different lessons "
        f"{_num(dedup['similar_max_different_groups'])} (match = 1.0, signature equality)",
        f"- Longest fragment of any output tail repeated in a proposal: "
        f"{secrets['longest_fragment_shared_with_output']} characters (failure signatures: "
        f"test ids, error classes); {secrets['sessions_with_planted_secrets']} sessions carry "
        "redacted or raw planted credentials",
    ]
    if report.get("transcripts"):
        lines += ["", *_transcript_markdown(report["transcripts"])]
    return "\n".join(lines)


def _transcript_markdown(t: dict[str, Any]) -> list[str]:
    """The transcript mode's part of the section (see :mod:`distill_transcripts`)."""
    hosts, goals = t["hosts"], t["goals"]
    totals: Counter = Counter()
    for report in hosts.values():
        totals.update(report["secrets"])
    stored = sum(
        totals[k]
        for k in ("sentinels_in_task_results", "sentinels_in_candidates", "sentinels_in_database")
    )
    flagged = totals["looks_secret_in_candidates"] + totals["verbatim_output_lines"]
    flags = {
        host: sorted({f"{f['id']} ({f['shape']} in {f['field']})" for f in r["stored_flags"]})
        for host, r in hosts.items()
    }
    same_flags = len({tuple(v) for v in flags.values()}) == 1
    shown_flags = (
        f"{len(next(iter(flags.values())))} per host format" + _listed(next(iter(flags.values())))
        if same_flags
        else "; ".join(f"{host} {len(v)}{_listed(v)}" for host, v in flags.items())
    )
    rows = []
    for host, r in hosts.items():
        ok = goals[f"{host}.precision"]["ok"] and goals[f"{host}.recall"]["ok"]
        rows.append(
            [
                host,
                f"{r['parsed']}/{r['sessions']}",
                _pct(r["kept"], r["proposed"]),
                _pct(r["found"], r["labelled"]),
                r["redactions"],
                ", ".join(f"{k} {v}" for k, v in r["outcomes"].items()),
                "met" if ok else "**missed**",
            ]
        )
    mismatches = t["parity"]["mismatches"]
    same = t["parity"]["compared"] - len(mismatches)
    differing = ", ".join(f"{m['id']} ({'/'.join(m['fields'])})" for m in mismatches)
    header = ["host format", "parsed", "precision (≥ 70 %)", "recall (≥ 50 %)"]
    return [
        "### End to end: authored transcripts → Stop-hook parser → runtime → distill worker",
        "",
        f"- Dataset: `bench/data/distill_transcripts/`: {t['sessions']} authored sessions "
        f"({t['sessions_without_keepers']} with nothing to keep, "
        f"{t['sessions_with_planted_secrets']} with planted raw credentials), {t['labelled']} "
        "labelled lessons, each rendered as a Claude Code and a Codex transcript, parsed by "
        "the Stop hook's `build_task_result`, recorded into an in-process SQLite runtime "
        f"(redaction), distilled by the worker's `run_round`; {t['seconds']} s",
        "",
        markdown_table([*header, "redactions", "task outcomes", "verdict"], rows),
        "",
        f"- Secrets: planted `SENTINEL` credentials stored (task results, candidates, any "
        f"table) {stored}; candidates `looks_secret` flags or repeating an output line "
        f"≥ {VERBATIM_LINE_CHARS} chars {flagged} — "
        f"{'met' if goals['secrets']['ok'] else '**missed**'}. Other tokens `looks_secret` "
        f"flags in stored task results (shape only; ids, file names): {shown_flags}",
        f"- Parser parity: {same}/{t['parity']['compared']} sessions gave the same task in "
        "both formats" + (f"; differing: {differing}" if mismatches else ""),
        *(
            f"- {host}: wrong proposals: "
            f"{_list(row['id'] for row in r['rows'] for p in row['proposed'] if not p['kept'])}; "
            f"missed lessons: {_list(row['id'] for row in r['rows'] if row['missed'])}"
            for host, r in hosts.items()
        ),
    ]


def _listed(items: list[str]) -> str:
    return f": {', '.join(items)}" if items else ""


def _list(ids: Any) -> str:
    items = sorted(set(ids))
    return ", ".join(items) if items else "none"


def _num(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}"


def render_verbose(report: dict[str, Any]) -> str:
    out = []
    for row in report["rows"]:
        for p in row["proposed"]:
            mark = "KEEP" if p["kept"] else "WRONG"
            out.append(f"{mark:5} {row['id']} [{p['rule']}] {p['signature']}\n      {p['lesson']}")
        for miss in row["missed"]:
            out.append(f"MISS  {row['id']} [{miss['rule']}] {miss['terms']}")
    for host, r in (report.get("transcripts") or {}).get("hosts", {}).items():
        for row in r["rows"]:
            where = f"{host}:{row['id']} ({row['outcome']})"
            for p in row["proposed"]:
                mark = "KEEP" if p["kept"] else "WRONG"
                sig = p.get("signature", "?")
                out.append(f"{mark:5} {where} [{p['rule']}] {sig}\n      {p['lesson']}")
            for miss in row["missed"]:
                out.append(f"MISS  {where} [{miss['rule']}] {miss['terms']}")
    return "\n".join(out)


def _optional_dir(value: str) -> Path | None:
    return None if value == "none" else Path(value)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", type=Path, default=DEFAULT_DATA, help="fixture directory")
    p.add_argument(
        "--transcripts",
        type=_optional_dir,
        default=DEFAULT_TRANSCRIPTS,
        help="authored session scripts for the transcript mode, or 'none' to skip it",
    )
    p.add_argument("--json", action="store_true", help="print the report as JSON on stdout")
    p.add_argument(
        "--write-results", action="store_true", help="rewrite this section of bench/RESULTS.md"
    )
    p.add_argument("--verbose", action="store_true", help="every proposal and miss (stderr)")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    report = run(args)
    if args.verbose:
        log(render_verbose(report))
    publish(
        report, render_markdown(report), SECTION if args.write_results else None, as_json=args.json
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
