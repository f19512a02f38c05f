"""End-to-end transcript mode of ``distill_quality.py`` (issue #31, "Measure").

The task-JSON mode feeds the distiller hand-written task results. This mode starts one step
earlier, where the product does: each authored session (``bench/data/distill_transcripts``,
README there) is rendered as *both* hosts' transcripts (:mod:`transcript_render`), and for
each host format

1. the transcript is written to a temp file and read by the plugins' own Stop-hook code path:
   the host adapter's ``stop_event`` and ``build_task_result`` (the real parser, the contract's
   caps and validation);
2. the body is recorded into a real in-process SQLite :class:`Runtime` through
   ``task_results.record`` (secrets are redacted there, as over HTTP);
3. the distill worker's service runs rounds synchronously (``run_round`` until a round reads
   nothing: no thread, no sleep) and the *pending* candidates are read back from the Review
   Inbox, one scope per session;
4. each candidate is traced back to its lesson (the offline rules re-run on the task result it
   cites, matched on the proposal) and compared with the session's labels by the task-JSON
   mode's rule (same rule id, every term in the signature or the lesson sentence).

Reported per host format: precision, recall, wrong and missed; for both: whether the two
formats gave the same task for each session (parser parity), and secrets — planted
``SENTINEL`` credentials anywhere in the database (task results as stored, candidates, every
table), what :func:`looks_secret` flags in candidates, and the high-entropy tokens it flags in
stored task results (described by shape only, never printed).
"""

from __future__ import annotations

import json
import re
import sqlite3
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec
from distill_quality import PRECISION_GOAL, RECALL_GOAL, VERBATIM_LINE_CHARS, Keeper, matches
from transcript_render import HOSTS, render

from powercontext_hook_kit.host import StandardHostAdapter
from powercontext_hook_kit.task_result import TurnRef, build_task_result
from powercontext_runtime.composition import Runtime
from powercontext_runtime.contract.review import Candidate, ListCandidatesRequest
from powercontext_runtime.contract.task_results import (
    GetTaskResultRequest,
    RecordTaskResultRequest,
)
from powercontext_runtime.distill import Lesson, TaskInput, propose_lessons
from powercontext_runtime.distill.failures import looks_secret
from powercontext_runtime.redaction import MARK
from powercontext_runtime.settings import Settings

#: Rounds of the distill worker before giving up (each reads up to 32 task results).
MAX_ROUNDS = 100
_TASK_PREFIX = "task-result/"
_REDACTED_PEM = re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY(?: BLOCK)?-----" + re.escape(MARK))


@dataclass(frozen=True, slots=True)
class Script:
    id: str
    split: str
    about: str
    body: dict[str, Any]
    keep: tuple[Keeper, ...]


def load_scripts(directory: Path) -> list[Script]:
    scripts = []
    for path in sorted(directory.glob("*.json")):
        raw = json.loads(path.read_text(encoding="utf-8"))
        keep = tuple(Keeper(k["rule"], tuple(k["terms"]), k["group"]) for k in raw["keep"])
        scripts.append(Script(raw["id"], raw["split"], raw["about"], raw, keep))
    if not scripts:
        raise SystemExit(f"no session scripts in {directory}")
    return scripts


def scope_of(script_id: str) -> str:
    return f"git:example.com/bench/{script_id}"


def hook_body(script: dict[str, Any], host: str, folder: Path) -> bytes | None:
    """What the plugins' Stop hook would send for ``script`` as ``host`` wrote it: the
    transcript on disk, the event read by the host adapter, the body built by the kit."""
    rendered = render(script, host)
    path = folder / f"{script['id']}.{host}.jsonl"
    path.write_bytes(rendered.transcript)
    payload = {**rendered.stop_event, "transcript_path": str(path)}
    event = StandardHostAdapter(host).stop_event(payload)
    assert event.transcript_path is not None
    return build_task_result(
        event.transcript_path,
        host,
        TurnRef(session_id=event.session_id, turn_id=event.turn_id),
        scope_of(script["id"]),
        cwd=event.cwd,
        last_message=event.last_assistant_message,
        wait_until=0.0,  # the file is complete: read it once, never wait
    )


def _comparable(body: bytes) -> dict[str, Any]:
    """The task of a hook body without what legitimately differs by host."""
    task = msgspec.json.decode(body)["task"]
    return {k: v for k, v in task.items() if k not in ("host", "session_ref")}


def _sentinels(text: str) -> list[str]:
    return re.findall(r"[^\s\"'<>]*SENTINEL[^\s\"'<>]*", text)


def _shape(token: str) -> str:
    """A flagged token described without its value: length and alphabet."""
    alphabet = (
        "hex"
        if re.fullmatch(r"[0-9a-f-]+", token)
        else "base64-like"
        if re.fullmatch(r"[A-Za-z0-9+/=_-]+", token)
        else "mixed"
    )
    return f"{len(token)}-char {alphabet}"


def _stored_flags(task: dict[str, Any]) -> list[tuple[str, str]]:
    """``(field, shape)`` of each token of a stored task result that :func:`looks_secret`
    flags. Judged line by line (its patterns span whitespace, so ``SECRET=`` would reach into
    the next line) without the tokens holding a redaction marker: what the redactor kept to
    say a secret was there (``NAME=[REDACTED]``, ``user:[REDACTED]@host``, a key block's BEGIN
    line) is named like a secret but holds none."""
    fields = [("goal", task["goal"])]
    fields += [("path", c["path"]) for c in task.get("changes", [])]
    for check in task.get("checks", []):
        fields += [("command", check["command"]), ("output_tail", check["output_tail"])]
    found = []
    for name, text in fields:
        for line in _REDACTED_PEM.sub(" ", text).splitlines():
            kept = [t for t in line.split() if MARK not in t]
            if not looks_secret(" ".join(kept)):
                continue
            tokens = [t for t in kept if looks_secret(t)]
            found += [(name, _shape(t)) for t in tokens] or [(name, "several words")]
    return found


def _trace(candidate: Candidate, task: dict[str, Any], source_id: str) -> Lesson | None:
    """The offline rules' lesson a candidate holds (re-run on the task result it cites)."""
    for lesson in propose_lessons(source_id, TaskInput.from_mapping(task)):
        if lesson.proposal() == candidate.proposal:
            return lesson
    return None


def _database_sentinels(path: Path) -> int:
    """Planted credentials anywhere in the SQLite file: every value of every table (full-text
    indexes are read through their shadow tables; a virtual table cannot be scanned)."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        tables = [
            name
            for name, sql in conn.execute("SELECT name, sql FROM sqlite_master WHERE type='table'")
            if not (sql or "").upper().startswith("CREATE VIRTUAL TABLE")
        ]
        found = 0
        for table in tables:
            quoted = '"' + table.replace('"', '""') + '"'
            for row in conn.execute(f"SELECT * FROM {quoted}"):  # table names from the schema
                for value in row:
                    if isinstance(value, bytes):
                        value = value.decode("utf-8", "replace")
                    if isinstance(value, str):
                        found += len(_sentinels(value))
        return found
    finally:
        conn.close()


def _run_host(scripts: list[Script], host: str, root: Path) -> dict[str, Any]:
    folder = root / host
    folder.mkdir()
    settings = Settings.load(env={}, home=folder / "home")
    runtime = Runtime.open(settings)
    bodies: dict[str, bytes | None] = {}
    rows: list[dict[str, Any]] = []
    counts: Counter[str] = Counter()
    secrets: Counter[str] = Counter()
    stored_flags: list[dict[str, str]] = []
    try:
        assert runtime.distill is not None, "the offline distiller is on by default"
        for script in scripts:
            body = hook_body(script.body, host, folder)
            bodies[script.id] = body
            if body is None:
                continue
            counts["parsed"] += 1
            request = RecordTaskResultRequest.model_validate_json(body)
            outcome = runtime.task_results.record(request)
            counts["redactions"] += outcome.response.redactions
        for _ in range(MAX_ROUNDS):
            if runtime.distill.run_round() == 0:
                break
        else:
            raise SystemExit(f"{host}: the distill worker did not catch up in {MAX_ROUNDS} rounds")
        for script in scripts:
            rows.append(_judge(runtime, script, host, bodies[script.id], secrets, stored_flags))
    finally:
        runtime.close()
    secrets["sentinels_in_database"] = _database_sentinels(settings.sqlite_file)
    for row in rows:
        counts.update(
            proposed=len(row["proposed"]),
            kept=sum(p["kept"] for p in row["proposed"]),
            labelled=row["labelled"],
            found=row["labelled"] - len(row["missed"]),
            unreproduced=row["unreproduced"],
        )
    return {
        "sessions": len(scripts),
        **{k: counts[k] for k in ("parsed", "redactions", "proposed", "kept", "labelled")},
        "found": counts["found"],
        "unreproduced_candidates": counts["unreproduced"],
        "precision": counts["kept"] / counts["proposed"] if counts["proposed"] else 0.0,
        "recall": counts["found"] / counts["labelled"] if counts["labelled"] else 0.0,
        "outcomes": dict(sorted(Counter(r["outcome"] for r in rows).items())),
        "secrets": dict(secrets),
        "stored_flags": stored_flags,
        "rows": rows,
        "bodies": bodies,
    }


def _judge(
    runtime: Runtime,
    script: Script,
    host: str,
    body: bytes | None,
    secrets: Counter[str],
    stored_flags: list[dict[str, str]],
) -> dict[str, Any]:
    """One session's pending candidates against its labels; secret scans on what is stored."""
    scope = scope_of(script.id)
    row: dict[str, Any] = {"id": script.id, "host": host, "labelled": len(script.keep)}
    tasks: dict[str, dict[str, Any]] = {}
    if body is not None:
        task_id = msgspec.json.decode(body)["task_id"]
        stored = runtime.task_results.get(GetTaskResultRequest(scope_id=scope, task_id=task_id))
        task = stored.task.model_dump(mode="json", exclude_none=True)
        tasks[_TASK_PREFIX + task_id] = task
        text = json.dumps(task, ensure_ascii=False)
        secrets["sentinels_in_task_results"] += len(_sentinels(text))
        for field, shape in _stored_flags(task):
            stored_flags.append({"id": script.id, "field": field, "shape": shape})
        row["outcome"] = task["outcome"]
        tails = [c["output_tail"] for c in task.get("checks", [])]
    else:
        row["outcome"] = "not parsed"
        tails = []
    listing = runtime.review.list(ListCandidatesRequest(scope_id=scope, status="pending"))
    proposed, unreproduced = [], 0
    lessons: list[Lesson] = []
    for candidate in listing.candidates:
        texts = [*map(str, candidate.proposal.values()), candidate.reason or ""]
        secrets["sentinels_in_candidates"] += sum(len(_sentinels(t)) for t in texts)
        secrets["looks_secret_in_candidates"] += sum(looks_secret(t) for t in texts)
        secrets["verbatim_output_lines"] += sum(
            1
            for t in texts
            for tail in tails
            for line in tail.splitlines()
            if len(line.strip()) >= VERBATIM_LINE_CHARS and line.strip() in t
        )
        source = candidate.source_refs[0].source_id if candidate.source_refs else ""
        lesson = _trace(candidate, tasks[source], source) if source in tasks else None
        if lesson is None:
            unreproduced += 1
            proposed.append(
                {"rule": "?", "lesson": candidate.proposal.get("lesson"), "kept": False}
            )
            continue
        lessons.append(lesson)
        kept = any(matches(lesson, k) for k in script.keep)
        proposed.append(
            {
                "rule": lesson.rule,
                "signature": lesson.signature,
                "lesson": lesson.lesson,
                "kept": kept,
            }
        )
    row["proposed"] = proposed
    row["unreproduced"] = unreproduced
    row["missed"] = [
        {"rule": k.rule, "terms": list(k.terms)}
        for k in script.keep
        if not any(matches(lesson, k) for lesson in lessons)
    ]
    return row


def evaluate_transcripts(directory: Path) -> dict[str, Any]:
    """The transcript mode's report (see the module docstring)."""
    scripts = load_scripts(directory)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="pc-distill-transcripts-") as tmp:
        hosts = {host: _run_host(scripts, host, Path(tmp)) for host in HOSTS}
    mismatches = []
    for script in scripts:
        seen = {host: hosts[host]["bodies"][script.id] for host in HOSTS}
        if any(body is None for body in seen.values()):
            mismatches.append({"id": script.id, "fields": ["not parsed"]})
            continue
        tasks = {host: _comparable(body) for host, body in seen.items() if body is not None}
        first, second = (tasks[h] for h in HOSTS)
        fields = sorted(k for k in first.keys() | second.keys() if first.get(k) != second.get(k))
        if fields:
            mismatches.append({"id": script.id, "fields": fields})
    for report in hosts.values():
        del report["bodies"]
    planted = sum(1 for s in scripts if "SENTINEL" in json.dumps(s.body))
    secret_totals: Counter[str] = Counter()
    for report in hosts.values():
        secret_totals.update(report["secrets"])
    stored = (
        secret_totals["sentinels_in_task_results"]
        + secret_totals["sentinels_in_candidates"]
        + secret_totals["sentinels_in_database"]
    )
    candidates_flagged = (
        secret_totals["looks_secret_in_candidates"] + secret_totals["verbatim_output_lines"]
    )
    goals = {
        **{
            f"{host}.{name}": {
                "target": target,
                "measured": report[name],
                "ok": report[name] >= target,
            }
            for host, report in hosts.items()
            for name, target in (("precision", PRECISION_GOAL), ("recall", RECALL_GOAL))
        },
        "secrets": {
            "target": 0,
            "measured": stored + candidates_flagged,
            "ok": stored == 0 and candidates_flagged == 0,
        },
        "parity": {"target": 0, "measured": len(mismatches), "ok": not mismatches},
    }
    return {
        "data": str(directory),
        "sessions": len(scripts),
        "sessions_without_keepers": sum(1 for s in scripts if not s.keep),
        "sessions_with_planted_secrets": planted,
        "labelled": sum(len(s.keep) for s in scripts),
        "hosts": hosts,
        "parity": {"compared": len(scripts), "mismatches": mismatches},
        "goals": goals,
        "seconds": round(time.monotonic() - started, 1),
    }
