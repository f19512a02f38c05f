"""Benchmark P5: ``bootstrap_context`` over HTTP, p50 ≤ 15 ms (spec 08).

Seeds one scope with curated entries (tag ``bootstrap-context``), a second scope it references
and a Handoff, then times sequential bootstrap requests on a keep-alive connection. Each timed
request uses a fresh stable ``event_id`` (a new host session), so every one does the full
work: eligibility across both scopes, rendering and a new pending receipt row. A replay of a
pending event (same bytes rebuilt from the receipt) is timed separately.

    python bench/bootstrap_latency.py [--url URL --token TOKEN] [--samples 200] [--smoke]
                                      [--json] [--write-results]
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (
    BenchError,
    command_line,
    machine_facts,
    markdown_table,
    open_target,
    run_and_publish,
    summarize_ms,
)

SECTION = "bootstrap-latency"
BUDGET_P50_MS = 15.0
PROFILE = "powercontext.scope-bootstrap.v1"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", help="runtime base URL (default: start a local daemon)")
    parser.add_argument("--token", help="bearer token (default: the started daemon's)")
    parser.add_argument("--database-url", help="database for the self-started daemon")
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--smoke", action="store_true", help="20 samples, seconds")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--write-results", action="store_true")
    return parser.parse_args(argv)


def _post(client: Any, path: str, body: dict[str, Any]) -> dict[str, Any]:
    response = client.post(path, json=body)
    if response.status_code >= 300:
        raise BenchError(f"{path} answered {response.status_code}")
    return response.json()


def run(args: argparse.Namespace) -> dict[str, Any]:
    samples = 20 if args.smoke else args.samples
    rng = random.Random(args.seed)
    suffix = f"{rng.getrandbits(48):012x}"
    scope, shared = f"bench-bootstrap-{suffix}", f"bench-bootstrap-shared-{suffix}"
    with open_target(args.url, args.token, args.database_url) as target, target.client() as c:
        for i in range(8):
            for where in (scope, shared):
                _post(c, "/v1/memory/remember", {
                    "scope_id": where, "kind": "convention", "tags": ["bootstrap-context"],
                    "text": f"Convention {i} for {where[:24]}: " + "keep the build green. " * 8,
                })  # fmt: skip
        for i in range(200):  # untagged entries the eligibility query must skip past
            _post(
                c,
                "/v1/memory/remember",
                {"scope_id": scope, "kind": "fact", "text": f"untagged fact number {i}"},
            )
        _post(c, "/v1/scopes/references/set", {"scope_id": scope, "references": [shared]})
        handoff = _post(c, "/v1/handoff/commit", {
            "scope_id": scope, "base": None,
            "content": {"schema": "powercontext.handoff.v1", "objective": "Ship the release",
                        "state": ["tests green", "notes drafted"], "disposition": "continuable",
                        "next_action": "tag the release"}})["reference"]  # fmt: skip

        def request(event_id: str) -> dict[str, Any]:
            return {"scope_id": scope, "enabled": True, "profile": PROFILE,
                    "lifecycle": "startup", "integration": "bench", "event_id": event_id,
                    "handoff_ref": handoff}  # fmt: skip

        fresh, replay, sizes = [], [], []
        for i in range(samples + 10):
            started = time.perf_counter()
            pack = _post(c, "/v1/context/bootstrap", request(f"session-{suffix}-{i}"))
            elapsed = time.perf_counter() - started
            if pack["status"] != "ready":
                raise BenchError("bootstrap did not return a ready pack")
            started = time.perf_counter()
            again = _post(c, "/v1/context/bootstrap", request(f"session-{suffix}-{i}"))
            replay_elapsed = time.perf_counter() - started
            if again["content"] != pack["content"]:
                raise BenchError("a pending replay did not rebuild the same pack")
            if i >= 10:  # warm-up
                fresh.append(elapsed)
                replay.append(replay_elapsed)
                sizes.append(pack["content_bytes"])
    fresh_ms, replay_ms = summarize_ms(fresh), summarize_ms(replay)
    return {
        "machine": machine_facts(),
        "command": command_line(),
        "target": target.description,
        "samples": samples,
        "items_per_pack": len(pack["items"]),
        "content_bytes": sizes[-1],
        "fresh_ms": fresh_ms,
        "replay_ms": replay_ms,
        "budget_p50_ms": BUDGET_P50_MS,
        "met": fresh_ms["p50"] <= BUDGET_P50_MS,
    }


def render_markdown(report: dict[str, Any]) -> str:
    m = report["machine"]
    rows = [
        [name, report["samples"], f"{s['p50']:.2f}", f"{s['p95']:.2f}", f"{s['p99']:.2f}"]
        for name, s in (("new event (full build + receipt row)", report["fresh_ms"]),
                        ("pending replay (rebuilt from the receipt)", report["replay_ms"]))
    ]  # fmt: skip
    verdict = "met" if report["met"] else "**missed**"
    return "\n".join(
        [
            "## bootstrap_context latency (P5)",
            "",
            "Generated by `bench/bootstrap_latency.py --write-results`; edit outside the markers.",
            "",
            f"- Date: {m['date']}",
            f"- Machine: {m['cpu_count']} CPUs ({m['cpu_model']}), {m['platform']}, "
            f"Python {m['python']}, SQLite {m['sqlite']}",
            f"- Target: {report['target']}",
            f"- Command: `{report['command']}`",
            f"- Workload: a scope with 8 curated + 200 untagged entries, one referenced scope "
            f"with 8 curated entries, a Handoff; packs of {report['items_per_pack']} items, "
            f"{report['content_bytes']} bytes (default 4096 budget)",
            "",
            markdown_table(
                ["budget (spec 08)", "target", "measured", "verdict"],
                [
                    [
                        "P5: bootstrap p50",
                        f"≤ {BUDGET_P50_MS:g} ms",
                        f"{report['fresh_ms']['p50']:.2f} ms",
                        verdict,
                    ]
                ],
            ),
            "",
            markdown_table(["request", "samples", "p50 ms", "p95 ms", "p99 ms"], rows),
        ]
    )


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    return run_and_publish("bootstrap_latency", args, run, render_markdown, SECTION)


if __name__ == "__main__":
    sys.exit(main())
