"""``python -m bench.task_eval``: run the task-benefit evaluation (docs/evaluation.md).

Run from the repository root (it reuses ``tests/support``). The model comes from
``--model`` or ``POWERCONTEXT_EVAL_MODEL``: ``scripted`` (default, offline, what CI runs),
``anthropic`` (Claude Code with ``ANTHROPIC_API_KEY``) or ``openai`` (Codex with
``OPENAI_API_KEY``). Progress goes to stderr; the report (markdown, or ``--json``) to stdout.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import sys
from pathlib import Path
from typing import Any

from tests.support.hosts import CLAUDE_CODE_VERSION, CODEX_VERSION, ensure_host_clis

from .harness import HOSTS, MODES, REAL_MODE_HOST, EvalConfig, evaluate
from .report import render_markdown, summarize
from .tasks import ARMS, TASKS

SECTION = "task-eval"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.task_eval", description=__doc__)
    p.add_argument(
        "--model",
        choices=MODES,
        default=os.environ.get("POWERCONTEXT_EVAL_MODEL", "scripted"),
        help="scripted (default; POWERCONTEXT_EVAL_MODEL), anthropic or openai",
    )
    p.add_argument("--hosts", default=",".join(HOSTS), help="comma-separated: claude-code,codex")
    p.add_argument("--tasks", default=",".join(TASKS), help="comma-separated task ids")
    p.add_argument("--arms", default=",".join(ARMS), help="comma-separated arms")
    p.add_argument("--turn-timeout", type=float, default=240.0, help="seconds per host turn")
    p.add_argument("--work-dir", type=Path, help="keep every user, repository and log here")
    p.add_argument("--json", action="store_true", help="print the JSON report")
    p.add_argument("--write-results", action="store_true", help="rewrite bench/RESULTS.md's block")
    return p.parse_args(argv)


def _split(value: str, known: Any, what: str) -> list[str]:
    names = [name.strip() for name in value.split(",") if name.strip()]
    unknown = [name for name in names if name not in known]
    if unknown:
        raise SystemExit(f"unknown {what}: {', '.join(unknown)} (known: {', '.join(known)})")
    return names


def _load() -> float | None:
    try:
        return round(os.getloadavg()[0], 2)
    except OSError:
        return None


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    hosts = _split(args.hosts, HOSTS, "hosts")
    tasks = [TASKS[name] for name in _split(args.tasks, TASKS, "tasks")]
    arms = _split(args.arms, ARMS, "arms")
    if args.model != "scripted":
        key = "ANTHROPIC_API_KEY" if args.model == "anthropic" else "OPENAI_API_KEY"
        if not os.environ.get(key):
            raise SystemExit(f"--model {args.model} needs {key} in the environment")
        if args.model == "openai" and not os.environ.get("POWERCONTEXT_EVAL_CODEX_MODEL"):
            raise SystemExit("--model openai needs POWERCONTEXT_EVAL_CODEX_MODEL (e.g. gpt-5)")
        hosts = [REAL_MODE_HOST[args.model]]
    load_start = _load()
    started = dt.datetime.now(dt.UTC)
    config = EvalConfig(
        hosts=hosts,
        tasks=tasks,
        arms=arms,
        mode=args.model,
        turn_timeout=args.turn_timeout,
        work_dir=args.work_dir,
        progress=lambda message: print(f"[task-eval] {message}", file=sys.stderr, flush=True),
    )
    results = evaluate(config, ensure_host_clis())
    notes = {
        "scripted": "the deterministic scripted model, bench/task_eval/scripted.py",
        "anthropic": "Claude Code with the user's Anthropic-API model "
        + (os.environ.get("POWERCONTEXT_EVAL_CLAUDE_MODEL") or "(the host's default)"),
        "openai": "Codex with the user's OpenAI-API model "
        + os.environ.get("POWERCONTEXT_EVAL_CODEX_MODEL", ""),
    }
    report = summarize(
        results,
        {
            "date": started.strftime("%Y-%m-%d %H:%M UTC"),
            "mode": args.model,
            "model_note": notes[args.model],
            "host_versions": f"Claude Code {CLAUDE_CODE_VERSION}, Codex CLI {CODEX_VERSION}",
            "command": "python -m bench.task_eval "
            + " ".join(argv if argv is not None else sys.argv[1:]),
            "load_start": load_start,
            "load_end": _load(),
        },
    )
    if args.write_results:
        from bench._common import replace_section

        replace_section(SECTION, render_markdown(report))
    print(json.dumps(report, indent=2) if args.json else render_markdown(report))
    return 0 if all(r.turn_completed for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
