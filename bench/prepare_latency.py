"""Does ``prepare_context`` stay fast as a scope's memory grows, alone and under load?

This is what every prompt waits for (the UserPromptSubmit hook calls it synchronously), so
spec 08 budgets it end to end over HTTP, SQLite unless stated, N = active entries in the scope:

* P2: concurrency 1, N = 100k, short and 2,000-character prompts: p50 ≤ 5 ms, p99 ≤ 20 ms;
* P3: 8 concurrent keep-alive clients, N = 100k: ≥ 300 req/s on 2 cores;
* P7: runtime RSS at N = 100k ≤ 200 MiB;
* P6: on OceanBase (seekdb, ``--database-url``), N = 100k: prepare p50 ≤ 30 ms.

With ``--embeddings local`` the self-started daemon runs the semantic channel (issue 17: the
same P2 budgets with hybrid search, the query embedding included, and RSS ≤ 300 MiB with the
model loaded; with ``--database-url`` on seekdb, P6 with hybrid search). After each load
the bench waits until the daemon's worker has embedded every entry (≈ 11 min per 100k on one
core), so build a data dir once with ``--data-dir`` and ``--bulk-load`` and measure it again
later with the same options: vectors are derived rows in that database and are reused. The
report counts the search each prepare ran (the ``X-PowerContext-Search-Mode`` header), so a
fallback to fts cannot pass for a fast hybrid.

Method: one scope grown through the sizes in ascending order (loaded over HTTP by the shared
seeded loader; with ``--bulk-load``, each size's own scope holding the first N entries,
imported with ``powercontext import`` from a generated export, which is what makes N = 100k
on seekdb take minutes instead of an hour). At each N, after a few untimed warm-ups,
``--samples`` short prompts (3-8 words) and then ``--samples`` 2,000-character prompts are sent
sequentially on one keep-alive connection; p50/p95/p99 and the share of ``ready``/``empty``
answers are reported per kind. At the largest N, ``--concurrency`` keep-alive clients send a
50/50 mix of both kinds for ``--duration`` seconds (req/s, p50/p99, CPU seconds per request
of the daemon and of the clients). The daemon's VmRSS is read from /proc when it runs on this
machine.

Prompts are generated from the seed and the first loaded entries, so every size answers the
same prompts, and ``--url``/``--token`` replay identical data and prompts against any runtime.
Requests use the standard library's ``http.client`` (much less client CPU per request than
httpx, which matters when the clients share 2 cores with the daemon); each timer covers
sending the request and reading the whole response, not JSON decoding, which happens after.
Budgets are reported, never enforced through the exit code: the exit code says whether the
measurement itself worked.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import re
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
from _common import (
    BenchError,
    MemoryItem,
    MemoryTextGenerator,
    Target,
    bulk_load,
    command_line,
    load_memories,
    log,
    machine_facts,
    markdown_table,
    open_target,
    run_and_publish,
    settle,
    summarize_ms,
    tree_cpu_seconds,
    tree_memory_kib,
    wait_embedded,
)

PREPARE_PATH = "/v1/context/prepare"
CONTEXT_SCHEMA = "powercontext.prepared-context.v1"
SECTIONS = {"sqlite": "prepare-latency", "oceanbase": "prepare-latency-oceanbase"}
DEFAULT_SIZES = "1000,10000,100000"
DEFAULT_SAMPLES = 300
DEFAULT_CONCURRENCY = 8
DEFAULT_DURATION = 10.0
DEFAULT_WARMUP = 20
SMOKE_SIZES = "30,100"
SMOKE_SAMPLES = 10
SMOKE_DURATION = 1.0
SMOKE_WARMUP = 2
BULK_SETTLE_SECONDS = 180.0  # longest wait for quiet after a bulk load (--bulk-load)
SMOKE_BULK_SETTLE_SECONDS = 3.0
THROUGHPUT_WARMUP = 3  # untimed requests per client before the clock starts
LONG_PROMPT_CHARS = 2000
VOCAB_ENTRIES = 1000  # entries whose words form the "corpus vocabulary" of the prompts
KINDS = ("short", "long")

BUDGET_N = 100_000
P2_P50_MS, P2_P99_MS = 5.0, 20.0
P3_MIN_RPS, P3_CLIENTS = 300.0, 8
P6_P50_MS = 30.0
P7_MAX_MIB = 200.0
SEMANTIC_MAX_MIB = 300.0  # issue 17: the daemon with the local model loaded
EMBED_TIMEOUT_SECONDS = 3600.0  # longest wait for the worker's backfill after a load


# -- seeded prompts ----------------------------------------------------------------------------

# Ordinary and technical words the memory generator never uses (checked against the corpus
# vocabulary at run time), so prompts made of them should come back ``empty``.
_UNRELATED = (
    "weather", "garden", "bicycle", "piano", "orchard", "galaxy", "recipe", "holiday", "museum",
    "volcano", "harbor", "violin", "tomato", "umbrella", "lantern", "meadow", "penguin",
    "saxophone", "telescope", "waterfall", "kubernetes", "terraform", "graphql", "webpack",
    "kafka", "nginx", "protobuf", "grpc", "helm", "prometheus", "grafana", "elasticsearch",
    "tailwind", "svelte", "kotlin", "swift", "flutter", "android", "ios", "bluetooth",
    "firmware", "shader", "texture", "sprite", "physics", "animation", "spreadsheet", "invoice",
    "payroll", "calendar", "translation", "subtitle", "podcast", "playlist", "thumbnail",
    "watermark", "geolocation", "timezone", "currency", "accessibility", "screenshot",
    "carousel", "dropdown", "tooltip", "modal", "sidebar", "breadcrumb", "pagination",
    "wizard", "onboarding", "newsletter", "coupon", "checkout", "wishlist", "inventory",
    "warehouse", "shipment", "barcode", "printer", "scanner", "keyboard", "trackpad",
    "monitor", "headphones", "microphone", "webcam", "router", "firewall", "certificate",
    "dns", "vpn", "latency", "bandwidth", "throughput", "compression", "encryption",
    "signature", "checksum", "snapshot", "backup", "restore", "archive", "quota",
    "天气", "花园", "音乐", "地图", "翻译", "日历", "相机", "打印机",
)  # fmt: skip

# What an agent prompt says around the specifics: instructions with no project vocabulary.
_AGENT_PROSE = (
    "Before you change anything, read the surrounding code and explain the plan in a few "
    "bullet points.",
    "The nightly pipeline started failing after yesterday's merge and nobody has looked at it yet.",
    "Keep the public interface stable; downstream teams depend on the current behaviour.",
    "If something is unclear, write the assumption down in the pull request description "
    "instead of guessing.",
    "Please also update the changelog and make sure the formatter and the type checker pass.",
    "We are preparing a release candidate for the spring milestone, so avoid large refactors.",
    "I tried reverting the last two commits locally but the problem did not go away.",
    "Performance matters on this path: measure before and after, and paste the numbers.",
    "Do not touch the generated files; they are rebuilt by the code generator in CI.",
    "When you are done, summarise what you changed and what you deliberately left alone.",
    "The customer reported it twice this week, so a small, safe fix today beats a perfect "
    "one next month.",
    "Add a regression test that fails without the fix and passes with it.",
    "It only happens on the second run, which makes me suspect some state survives between runs.",
    "I would rather keep the dependency list short, so prefer the standard library if it is "
    "reasonable.",
    "Ignore the flaky integration job for now; it has been red for unrelated reasons.",
    "Think about what happens when the input is empty, huge, or contains non-ASCII text.",
)
# Sentences that mention the project's own words ({c}), unrelated ones ({u}) and, sometimes,
# a fragment of a stored entry ({entry}), as pasted context and logs do.
_MIXED = (
    "I'm looking at {c} and {c}; the {u} step seems to break when {c} is empty.",
    "Can you check why {c} behaves differently from {c} on the {u} branch?",
    "Here is the relevant log line: ERROR {c} failed after {n} ms ({u} {u}).",
    "The {u} team asked whether {c} still goes through {c}.",
    "Context from earlier today: {entry}",
    "Also {u}, {u} and {u} came up in the review, unrelated but worth keeping in mind.",
    'Traceback (most recent call last): File "{c}", line {n}, in {c} -> {u}Error: {c}',
    "My guess is that {c} and {u} interact badly, but {c} might also be involved.",
    "From the notes: {entry} Does that still hold after the {u} change?",
    "Rename {c} only if it does not affect {c}; the {u} dashboard reads it.",
)


def _vocabulary_tokens(text: str) -> list[str]:
    tokens = (t.strip(".,;:!?()[]`'\"#") for t in re.findall(r"[^\s，。：、；（）]+", text))
    return [t for t in tokens if len(t) >= 2]


@dataclass(frozen=True, slots=True)
class Prompt:
    kind: str  # "short" | "long"
    flavour: str  # how it was made: entry words, random vocabulary, unrelated, long prose
    text: str


class PromptGenerator:
    """Seeded prompts over the vocabulary of entries that are in the scope at every size.

    Short prompts (3-8 words) come in three flavours: ``entry`` (words of one stored entry:
    should mostly be ``ready``), ``vocab`` (random corpus words: may or may not match) and
    ``unrelated`` (words the corpus never uses: should be ``empty``), weighted 2:1:1.
    Long prompts are exactly 2,000 characters of agent-prompt prose mixing corpus words,
    unrelated words and, in some sentences, a fragment of a stored entry.
    """

    def __init__(self, seed: int, entries: Sequence[MemoryItem]) -> None:
        if not entries:
            raise BenchError("prompts need at least one loaded entry")
        self._rng = random.Random(f"prepare-prompts-{seed}")
        self._entries = [e.text for e in entries]
        vocabulary: dict[str, None] = {}
        for text in self._entries:
            vocabulary.update(dict.fromkeys(_vocabulary_tokens(text)))
        self._vocabulary = list(vocabulary)  # first-occurrence order: deterministic
        known = {w.lower() for w in self._vocabulary}
        self._unrelated = [w for w in _UNRELATED if w.lower() not in known]

    def short(self) -> Prompt:
        rng = self._rng
        count = rng.randint(3, 8)
        flavour = rng.choices(("entry", "vocab", "unrelated"), (2, 1, 1))[0]
        if flavour == "entry":
            words = _vocabulary_tokens(rng.choice(self._entries))
            if len(words) > count:
                start = rng.randrange(len(words) - count + 1)
                words = words[start : start + count]
            while len(words) < 3:
                words.append(rng.choice(self._vocabulary))
        elif flavour == "vocab":
            words = [rng.choice(self._vocabulary) for _ in range(count)]
        else:
            words = [rng.choice(self._unrelated) for _ in range(count)]
        return Prompt("short", flavour, " ".join(words))

    def long(self) -> Prompt:
        rng = self._rng
        parts: list[str] = []
        size = 0
        while size <= LONG_PROMPT_CHARS:  # joined length = size - 1
            if rng.random() < 0.4:
                sentence = rng.choice(_AGENT_PROSE)
            else:
                sentence = self._fill(rng.choice(_MIXED))
            parts.append(sentence)
            size += len(sentence) + 1
        return Prompt("long", "prose", " ".join(parts)[:LONG_PROMPT_CHARS])

    def _fill(self, template: str) -> str:
        rng = self._rng
        out = template
        while "{c}" in out:
            out = out.replace("{c}", rng.choice(self._vocabulary), 1)
        while "{u}" in out:
            out = out.replace("{u}", rng.choice(self._unrelated), 1)
        out = out.replace("{n}", str(rng.randint(2, 9999)))
        if "{entry}" in out:
            entry = rng.choice(self._entries)
            out = out.replace("{entry}", entry[: rng.randint(40, 160)])
        return out


# -- HTTP client -------------------------------------------------------------------------------


class PrepareClient:
    """One keep-alive HTTP/1.1 connection sending prepare requests (stdlib ``http.client``)."""

    def __init__(self, target: Target, timeout: float = 60) -> None:
        parts = urlsplit(target.url)
        connection = (
            http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
        )
        self._conn = connection(parts.hostname or "127.0.0.1", parts.port, timeout=timeout)
        self._base = parts.path.rstrip("/")
        self._path = self._base + PREPARE_PATH
        self._headers = {
            "Authorization": f"Bearer {target.token}",
            "Content-Type": "application/json",
        }

    def post(self, body: bytes) -> tuple[float, int, bytes]:
        """Send one request: (seconds from send to the last byte read, HTTP status, body)."""
        started = time.perf_counter()
        self._conn.request("POST", self._path, body, self._headers)
        response = self._conn.getresponse()
        data = response.read()
        #: The Memory search that ran (semantic channel on), else None.
        self.mode = response.getheader("X-PowerContext-Search-Mode")
        return time.perf_counter() - started, response.status, data

    def get(self, path: str) -> tuple[float, int, bytes]:
        """A timed GET of ``path`` on the same connection (for the HTTP floor)."""
        started = time.perf_counter()
        self._conn.request("GET", self._base + path)
        response = self._conn.getresponse()
        data = response.read()
        return time.perf_counter() - started, response.status, data

    def close(self) -> None:
        self._conn.close()


def encode_request(scope_id: str, prompt: Prompt) -> bytes:
    return json.dumps({"scope_id": scope_id, "query": prompt.text}, ensure_ascii=False).encode()


def check_response(status: int, data: bytes) -> str:
    """The pack's status (``ready``/``empty``) after checking the response is a valid pack."""
    if status != 200:
        raise BenchError(f"prepare -> HTTP {status}: {data[:300]!r}")
    try:
        pack = json.loads(data)
        content = pack["content"]
        valid = (
            pack["schema"] == CONTEXT_SCHEMA
            and pack["status"] in ("ready", "empty")
            and (pack["status"] == "ready") == (content is not None)
            and pack["content_bytes"] == (len(content.encode()) if content is not None else 0)
        )
    except (ValueError, KeyError, TypeError, AttributeError):
        valid = False
    if not valid:
        raise BenchError(f"prepare returned an invalid pack: {data[:300]!r}")
    return str(pack["status"])


# -- measurements ------------------------------------------------------------------------------


@dataclass(slots=True)
class KindResult:
    kind: str
    samples: int
    latency_ms: dict[str, float]
    ready: int
    empty: int
    ready_by_flavour: dict[str, list[int]]  # flavour -> [ready, total]
    modes: dict[str, int] = field(default_factory=dict)  # search mode header -> count

    def as_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "samples": self.samples,
            "latency_ms": self.latency_ms,
            "ready": self.ready,
            "empty": self.empty,
            "ready_fraction": round(self.ready / self.samples, 4),
            "ready_by_flavour": self.ready_by_flavour,
            "search_modes": self.modes,
        }


def time_sequential(
    target: Target, scope_id: str, prompts: Sequence[Prompt], warmup: Sequence[Prompt]
) -> KindResult:
    """Concurrency 1 on one keep-alive connection; warm-ups are sent first and not timed."""
    durations: list[float] = []
    ready = 0
    flavours: dict[str, list[int]] = {}
    modes: dict[str, int] = {}
    client = PrepareClient(target)
    try:
        for prompt in warmup:
            check_response(*client.post(encode_request(scope_id, prompt))[1:])
        for prompt in prompts:
            seconds, status, data = client.post(encode_request(scope_id, prompt))
            durations.append(seconds)
            if client.mode is not None:
                modes[client.mode] = modes.get(client.mode, 0) + 1
            is_ready = check_response(status, data) == "ready"
            ready += is_ready
            counts = flavours.setdefault(prompt.flavour, [0, 0])
            counts[0] += is_ready
            counts[1] += 1
    finally:
        client.close()
    return KindResult(
        prompts[0].kind, len(prompts), summarize_ms(durations), ready, len(prompts) - ready,
        flavours, modes,
    )  # fmt: skip


@dataclass(slots=True)
class ThroughputResult:
    clients: int
    seconds: float
    requests: int
    latency_ms: dict[str, float]
    ready: int
    daemon_cpu_seconds: float | None
    client_cpu_seconds: float

    @property
    def per_second(self) -> float:
        return self.requests / self.seconds

    def as_json(self) -> dict[str, Any]:
        daemon_cpu = self.daemon_cpu_seconds
        return {
            "clients": self.clients,
            "seconds": round(self.seconds, 3),
            "requests": self.requests,
            "requests_per_second": round(self.per_second, 1),
            "latency_ms": self.latency_ms,
            "ready_fraction": round(self.ready / self.requests, 4),
            "mix": "alternating short / 2,000-character prompts",
            "daemon_cpu_seconds": None if daemon_cpu is None else round(daemon_cpu, 3),
            "daemon_cpu_ms_per_request": None
            if daemon_cpu is None
            else round(daemon_cpu * 1000 / self.requests, 3),
            "daemon_cpu_cores_busy": None if daemon_cpu is None else round(
                daemon_cpu / self.seconds, 2
            ),
            "client_cpu_ms_per_request": round(self.client_cpu_seconds * 1000 / self.requests, 3),
        }  # fmt: skip


def run_throughput(
    target: Target, bodies: Sequence[bytes], clients: int, duration: float
) -> ThroughputResult:
    """``clients`` threads, one keep-alive connection each, for ``duration`` seconds.

    All clients start together after their warm-ups (a barrier); each cycles through the
    prompts from its own offset. Only requests completed before the deadline count (the one in
    flight at the deadline is discarded), and the rate is taken over the window.
    """
    durations: list[list[float]] = [[] for _ in range(clients)]
    ready = [0] * clients
    stopped = [0.0] * clients
    errors: list[BaseException] = []
    failed = threading.Event()
    marks: dict[str, float] = {}

    def start_clock() -> None:  # runs once, in the last thread to reach the barrier
        if target.pid is not None:
            marks["daemon_cpu"] = tree_cpu_seconds(target.pid)
        marks["client_cpu"] = time.process_time()
        marks["start"] = time.perf_counter()

    barrier = threading.Barrier(clients, action=start_clock)

    def worker(index: int) -> None:
        client = PrepareClient(target)
        position = index * len(bodies) // clients
        try:
            for i in range(THROUGHPUT_WARMUP):
                check_response(*client.post(bodies[(position + i) % len(bodies)])[1:])
            barrier.wait()
            deadline = marks["start"] + duration
            mine = durations[index]
            while not failed.is_set():
                seconds, status, data = client.post(bodies[position % len(bodies)])
                if time.perf_counter() > deadline:
                    break
                mine.append(seconds)
                ready[index] += check_response(status, data) == "ready"
                position += 1
            stopped[index] = time.perf_counter()
        except BaseException as exc:
            errors.append(exc)
            failed.set()
            barrier.abort()
        finally:
            client.close()

    threads = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        first = errors[0]
        if isinstance(first, threading.BrokenBarrierError) and len(errors) > 1:
            first = errors[1]
        raise BenchError(f"throughput client failed: {first!r}")
    client_cpu = time.process_time() - marks["client_cpu"]
    daemon_cpu = (
        tree_cpu_seconds(target.pid) - marks["daemon_cpu"] if target.pid is not None else None
    )
    flat = [d for per_client in durations for d in per_client]
    if not flat:
        raise BenchError("the throughput phase completed no request")
    # Clients stop at the deadline; requests in flight then are discarded, not counted.
    seconds = min(max(stopped), marks["start"] + duration) - marks["start"]
    return ThroughputResult(
        clients, seconds, len(flat), summarize_ms(flat), sum(ready), daemon_cpu, client_cpu
    )


def measure_floor(
    target: Target, scope_id: str, prompts: Sequence[Prompt], warmup: int
) -> dict[str, dict[str, float] | None]:
    """What every request costs before any search: the baseline the budgets sit on.

    ``health_live``: GET /health/live (HTTP + framework, no auth, no database).
    ``prepare_empty_scope``: prepare on a scope that has no memory (auth, body validation, the
    searches' first lookups, serialisation of an ``empty`` pack), with the timed short prompts.
    Best effort: another implementation may lack the endpoint or refuse the scope, which only
    leaves that floor out (``None``).
    """
    bodies = [encode_request(scope_id, p) for p in prompts]
    floors: dict[str, dict[str, float] | None] = {}
    for name in ("health_live", "prepare_empty_scope"):
        durations: list[float] = []
        client = PrepareClient(target)
        try:
            for i in range(warmup + len(prompts)):
                if name == "health_live":
                    seconds, status, data = client.get("/health/live")
                    ok = status == 200
                else:
                    seconds, status, data = client.post(bodies[(i - warmup) % len(bodies)])
                    ok = check_response(status, data) == "empty"
                if not ok:
                    raise BenchError(f"HTTP {status}, {data[:120]!r}")
                if i >= warmup:
                    durations.append(seconds)
        except (BenchError, OSError, http.client.HTTPException) as exc:
            log(f"  floor {name} left out: {exc}")
        finally:
            client.close()
        floors[name] = summarize_ms(durations) if len(durations) == len(prompts) else None
    return floors


@dataclass(slots=True)
class SizeResult:
    n: int
    kinds: list[KindResult]
    load: dict[str, Any]
    memory_kib: dict[str, int] | None = None

    def as_json(self) -> dict[str, Any]:
        return {
            "n": self.n,
            "load": self.load,
            "kinds": {k.kind: k.as_json() for k in self.kinds},
            "daemon_memory_kib": self.memory_kib,
        }


@dataclass(slots=True)
class Prompts:
    short: list[Prompt] = field(default_factory=list)
    long: list[Prompt] = field(default_factory=list)
    warm_short: list[Prompt] = field(default_factory=list)
    warm_long: list[Prompt] = field(default_factory=list)


def make_prompts(seed: int, entries: Sequence[MemoryItem], samples: int, warmup: int) -> Prompts:
    generator = PromptGenerator(seed, entries)
    prompts = Prompts()
    # Drawn in a fixed order so the timed prompts do not depend on the warm-up count.
    prompts.short = [generator.short() for _ in range(samples)]
    prompts.long = [generator.long() for _ in range(samples)]
    prompts.warm_short = [generator.short() for _ in range(warmup)]
    prompts.warm_long = [generator.long() for _ in range(warmup)]
    return prompts


# -- orchestration -----------------------------------------------------------------------------


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--url", help="runtime base URL (default: start a local daemon and stop it)")
    p.add_argument(
        "--token", help="bearer token (default: the started daemon's, or $POWERCONTEXT_TOKEN)"
    )
    p.add_argument("--database-url", help="database for the self-started daemon (sqlite/OceanBase)")
    p.add_argument(
        "--data-dir",
        help="home of the self-started daemon, kept afterwards (default: a temp dir, removed); "
        "with --scope-id a scope loaded by an earlier run can be measured again",
    )
    p.add_argument(
        "--daemon-pid",
        type=int,
        help="with --url: pid of that runtime on this machine, to report its RSS and CPU",
    )
    p.add_argument(
        "--scope-id",
        help="scope to use (default: a new unique one); entries an earlier run with the same "
        "seed wrote there are reused, and only the rest up to the first size is loaded",
    )
    p.add_argument("--sizes", help=f"comma-separated N values (default {DEFAULT_SIZES})")
    p.add_argument(
        "--samples", type=int, help=f"timed prompts per size and kind (default {DEFAULT_SAMPLES})"
    )
    p.add_argument(
        "--warmup", type=int, help=f"untimed prompts per size and kind (default {DEFAULT_WARMUP})"
    )
    p.add_argument(
        "--concurrency",
        type=int,
        default=DEFAULT_CONCURRENCY,
        help=f"clients in the throughput phase (default {DEFAULT_CONCURRENCY})",
    )
    p.add_argument(
        "--duration",
        type=float,
        help=f"seconds of the throughput phase (default {DEFAULT_DURATION:g})",
    )
    p.add_argument(
        "--workers",
        type=int,
        default=1,
        help="worker processes of the self-started daemon (serve --workers; default 1); "
        "CPU and RSS are then summed over its processes",
    )
    p.add_argument(
        "--embeddings",
        choices=("off", "local"),
        default="off",
        help="semantic channel of the self-started daemon (default off); with local, each "
        "load is followed by the worker's backfill before timing (reused with --data-dir)",
    )
    p.add_argument("--seed", type=int, default=42, help="workload seed (default 42)")
    p.add_argument("--loader-concurrency", type=int, default=4, help="loader threads (default 4)")
    p.add_argument(
        "--bulk-load",
        action="store_true",
        help="load with `powercontext import` of a generated export (thousands of entries/s) "
        "instead of one HTTP remember per entry (≈ 30-70/s on seekdb); each size then gets "
        "its own scope <scope>-n<N> holding the first N entries; self-started daemon only",
    )
    p.add_argument(
        "--smoke",
        action="store_true",
        help=f"tiny run: sizes {SMOKE_SIZES}, {SMOKE_SAMPLES} samples, "
        f"{SMOKE_DURATION:g} s of throughput",
    )
    p.add_argument("--json", action="store_true", help="print the results as JSON on stdout")
    p.add_argument(
        "--write-results", action="store_true", help="rewrite this section of bench/RESULTS.md"
    )
    args = p.parse_args(argv)

    sizes_text = args.sizes or (SMOKE_SIZES if args.smoke else DEFAULT_SIZES)
    try:
        args.sizes = sorted({int(s) for s in sizes_text.split(",") if s.strip()})
    except ValueError:
        p.error("--sizes must be comma-separated integers")
    if not args.sizes or args.sizes[0] < 1:
        p.error("--sizes needs at least one positive size")
    if args.samples is None:
        args.samples = SMOKE_SAMPLES if args.smoke else DEFAULT_SAMPLES
    if args.warmup is None:
        args.warmup = SMOKE_WARMUP if args.smoke else DEFAULT_WARMUP
    if args.duration is None:
        args.duration = SMOKE_DURATION if args.smoke else DEFAULT_DURATION
    if args.samples < 1 or args.warmup < 0 or args.concurrency < 1 or args.duration <= 0:
        p.error("--samples, --concurrency and --duration must be positive (--warmup ≥ 0)")
    if args.loader_concurrency < 1:
        p.error("--loader-concurrency must be positive")
    if args.workers < 1 or (args.workers != 1 and args.url):
        p.error("--workers must be positive and only applies to a self-started daemon")
    if args.daemon_pid is not None and not args.url:
        p.error("--daemon-pid only applies with --url (a self-started daemon is known)")
    if args.smoke and args.write_results:
        p.error("--write-results with --smoke would overwrite real numbers with smoke numbers")
    if args.bulk_load and args.url:
        p.error("--bulk-load writes into a self-started daemon's database (no --url)")
    if args.embeddings != "off" and args.url:
        p.error("--embeddings applies to a self-started daemon (no --url)")
    return args


def head_revision(target: Target, scope_id: str) -> int:
    """The scope's memory head revision (= number of writes; 0 for an unknown scope)."""
    with target.client() as client:
        response = client.post("/v1/memory/entries/list", json={"scope_id": scope_id, "limit": 1})
    if response.status_code != 200:
        raise BenchError(f"list -> HTTP {response.status_code}: {response.text[:300]}")
    memory = response.json()["memory"]
    return int(memory["revision"]) if memory else 0


def backend_of(target: Target) -> str:
    """``sqlite`` or ``oceanbase`` from the readiness probe (``unknown`` for other runtimes)."""
    try:
        response = httpx.get(target.url + "/health/ready", timeout=10)
        return str(response.json().get("database", "unknown"))
    except (httpx.HTTPError, ValueError, AttributeError):
        return "unknown"


def _http_load(
    args: argparse.Namespace,
    target: Target,
    scope_id: str,
    items: list[MemoryItem],
    loaded: int,
    n: int,
) -> dict[str, Any]:
    """Grow the one scope from ``loaded`` to ``n`` entries over HTTP."""
    head = head_revision(target, scope_id)
    # A named scope written by an earlier run with this seed holds a prefix of the same
    # sequence (revision = writes), so it is reused or topped up, never reloaded.
    resume = args.scope_id is not None and loaded == 0 and 0 < head <= n
    if head != loaded and not resume:
        raise BenchError(
            f"scope {scope_id!r} is at revision {head}, expected {loaded}"
            + (f" (or up to {n} to reuse it)" if args.scope_id and loaded == 0 else "")
            + ": use a fresh --scope-id"
        )
    bulk_scope = f"{scope_id}-n{n}"  # where a --bulk-load run with this --scope-id put N
    if loaded == head == 0 and args.scope_id and head_revision(target, bulk_scope) == n:
        raise BenchError(
            f"scope {scope_id!r} is empty, but {bulk_scope!r} holds the {n:,} entries of a "
            f"--bulk-load run: pass --bulk-load again (self-started daemon) or --scope-id "
            f"{bulk_scope} instead of loading {n:,} entries over HTTP"
        )
    skipped = head - loaded
    stats = load_memories(target, scope_id, items[skipped:], concurrency=args.loader_concurrency)
    log(f"  loaded {stats.entries:,} entries in {stats.seconds:.1f} s "
        f"({stats.per_second:.0f}/s){f', {skipped:,} reused' if skipped else ''}; "
        f"N = {n:,}")  # fmt: skip
    head = head_revision(target, scope_id)
    if head != n:
        raise BenchError(f"scope {scope_id!r} is at revision {head}, expected {n}")
    return {
        "entries": stats.entries,
        "seconds": round(stats.seconds, 3),
        "per_second": round(stats.per_second, 1),
        "retries": stats.retries,
        "reused": skipped,
    }


def _bulk_load(args: argparse.Namespace, target: Target, scope_id: str, n: int) -> dict[str, Any]:
    """The first ``n`` entries of the seed's sequence into their own scope, by import (or the
    scope an earlier run with ``--data-dir`` left, when it already holds them)."""
    head = head_revision(target, scope_id)
    if head == n:
        log(f"  N = {n:,}: scope {scope_id} reused from an earlier run")
        return {"entries": 0, "seconds": 0.0, "per_second": 0.0, "retries": 0, "reused": n}
    if head != 0 or target.home is None:
        raise BenchError(f"scope {scope_id!r} is at revision {head}, expected 0 or {n}")
    items = MemoryTextGenerator(args.seed).take(n)
    done = bulk_load(target.home, args.database_url, scope_id, items, seed=args.seed)
    log(f"  imported {n:,} entries in {done.seconds:.1f} s ({done.per_second:,.0f}/s; the "
        f"file took {done.write_seconds:.1f} s to write); N = {n:,}")  # fmt: skip
    if head_revision(target, scope_id) != n:
        raise BenchError(f"scope {scope_id!r} does not hold {n} revisions after the import")
    # A database server keeps merging for a while after a bulk load (seekdb: minutes after
    # 100k rows); timing meanwhile would measure the merge. Wait for quiet, as write_scaling.
    limit = SMOKE_BULK_SETTLE_SECONDS if args.smoke else BULK_SETTLE_SECONDS
    settled = settle(target.pid, limit)
    if settled is None:
        log(f"  other processes stayed busy for {limit:g} s after the import; timing anyway")
    elif settled > 1.5:
        log(f"  waited {settled:g} s for other processes to go quiet after the import")
    return {
        "entries": n,
        "seconds": round(done.seconds, 3),
        "per_second": round(done.per_second, 1),
        "retries": 0,
        "reused": 0,
        "settled_after_s": settled,
        "settle_limit_s": limit,
    }


def _embedded(target: Target, database_url: str | None) -> dict[str, Any]:
    """Wait for the daemon's worker to embed every entry (vectors an earlier run with the same
    data dir or database stored are kept), then for quiet: the backfill is setup, not
    measurement (on seekdb it includes the HNSW inserts)."""
    started = time.perf_counter()
    vectors = wait_embedded(target, EMBED_TIMEOUT_SECONDS, database_url)
    seconds = time.perf_counter() - started
    log(f"  embedded: {vectors:,} vectors, waited {seconds:.1f} s for the worker")
    settle(target.pid, BULK_SETTLE_SECONDS)
    return {"vectors": vectors, "embed_wait_s": round(seconds, 1)}


def run(args: argparse.Namespace) -> dict[str, Any]:
    facts = machine_facts()
    load_before = os.getloadavg()
    command = command_line()
    scope_id = args.scope_id or f"bench-prepare-s{args.seed}-{time.strftime('%Y%m%dT%H%M%S')}"
    generator = MemoryTextGenerator(args.seed)
    results: list[SizeResult] = []
    # Prompts come from the entries loaded first (the same seed gives the same entries), which
    # are in the scope at every size.
    first = MemoryTextGenerator(args.seed).take(min(args.sizes[0], VOCAB_ENTRIES))
    prompts = make_prompts(args.seed, first, args.samples, args.warmup)
    data_dir = Path(args.data_dir).resolve() if args.data_dir else None
    with open_target(
        args.url,
        args.token,
        args.database_url,
        data_dir,
        workers=args.workers,
        embeddings=args.embeddings,
    ) as opened:
        target = opened
        if args.daemon_pid is not None:
            target = Target(opened.url, opened.token, opened.description, args.daemon_pid)
        backend = backend_of(target)
        log(f"prepare_latency: {target.description} ({backend}), scope {scope_id}, "
            f"sizes {args.sizes}, {args.samples} samples per kind")  # fmt: skip
        floor = measure_floor(target, f"{scope_id}-empty", prompts.short, args.warmup)
        log("  floor: " + _floor_text(floor))
        loaded = 0
        sized_scope = scope_id
        for n in args.sizes:
            if args.bulk_load:
                sized_scope = f"{scope_id}-n{n}"
                load = _bulk_load(args, target, sized_scope, n)
            else:
                load = _http_load(args, target, scope_id, generator.take(n - loaded), loaded, n)
            if args.embeddings != "off":
                load.update(_embedded(target, args.database_url))
            loaded = n
            kinds = [
                time_sequential(target, sized_scope, prompts.short, prompts.warm_short),
                time_sequential(target, sized_scope, prompts.long, prompts.warm_long),
            ]
            memory = tree_memory_kib(target.pid) if target.pid is not None else None
            results.append(SizeResult(n, kinds, load, memory))
            for k in kinds:
                lat = k.latency_ms
                log(f"  N={n:,} {k.kind:5}: p50 {lat['p50']:.2f} ms, p95 {lat['p95']:.2f} ms, "
                    f"p99 {lat['p99']:.2f} ms; ready {k.ready}/{k.samples}")  # fmt: skip
                if args.embeddings != "off" and k.modes.get("hybrid", 0) != k.samples:
                    log(f"  N={n:,} {k.kind}: not every timed prepare ran hybrid: {k.modes}")

        mixed = [p for pair in zip(prompts.short, prompts.long, strict=True) for p in pair]
        bodies = [encode_request(sized_scope, p) for p in mixed]
        log(f"  throughput: {args.concurrency} clients for {args.duration:g} s at N={loaded:,}")
        throughput = run_throughput(target, bodies, args.concurrency, args.duration)
        log(f"  throughput: {throughput.per_second:.0f} req/s, "
            f"p50 {throughput.latency_ms['p50']:.2f} ms, "
            f"p99 {throughput.latency_ms['p99']:.2f} ms")  # fmt: skip
        final_memory = tree_memory_kib(target.pid) if target.pid is not None else None
        if final_memory:
            log(f"  daemon RSS {final_memory['rss_kib'] / 1024:.1f} MiB "
                f"(peak {final_memory['hwm_kib'] / 1024:.1f} MiB)")  # fmt: skip
        description = target.description

    short_chars = [len(p.text) for p in prompts.short]
    report: dict[str, Any] = {
        "benchmark": "prepare_latency",
        "machine": facts,
        "command": command,
        "target": description,
        "backend": backend,
        "config": {
            "scope_id": scope_id,
            "seed": args.seed,
            "sizes": args.sizes,
            "samples": args.samples,
            "warmup": args.warmup,
            "concurrency": args.concurrency,
            "duration": args.duration,
            "loader_concurrency": args.loader_concurrency,
            "load": "import" if args.bulk_load else "http",
            "workers": args.workers,
            "embeddings": args.embeddings,
            "smoke": args.smoke,
            "client": "http.client keep-alive, one connection per client",
            "max_bytes": "server default (8000)",
            "short_prompt_chars": {"min": min(short_chars), "max": max(short_chars)},
            "long_prompt_chars": LONG_PROMPT_CHARS,
        },
        "floor_ms": floor,
        "sizes": [r.as_json() for r in results],
        "throughput": {"n": loaded, **throughput.as_json()},
        "daemon_memory_kib": final_memory,
        # Other work on the machine skews latency; spec 08 machines are shared and noisy.
        "load_average_1m": {"start": load_before[0], "end": os.getloadavg()[0]},
    }
    report["budgets"] = evaluate_budgets(report)
    return report


def evaluate_budgets(report: dict[str, Any]) -> list[dict[str, Any]]:
    """Spec 08 verdicts for what was measured; ``applicable`` is false below N = 100k."""
    largest = report["sizes"][-1]
    n = largest["n"]
    at = n == BUDGET_N
    rows: list[dict[str, Any]] = []

    def add(
        budget: str, key: str, what: str, limit: str, measured: float, unit: str, ok: bool
    ) -> None:
        rows.append({"id": budget, "key": key, "what": what, "target": limit,
                     "measured": measured, "unit": unit, "ok": ok, "applicable": at})  # fmt: skip

    if report["backend"] == "oceanbase":
        for kind in KINDS:
            p50 = largest["kinds"][kind]["latency_ms"]["p50"]
            add("P6", f"p50.{kind}", f"prepare p50, {kind} prompts, N={n:,}",
                f"≤ {P6_P50_MS:g} ms", p50, "ms", p50 <= P6_P50_MS)  # fmt: skip
        return rows
    for kind in KINDS:
        lat = largest["kinds"][kind]["latency_ms"]
        add("P2", f"p50.{kind}", f"p50, {kind} prompts, N={n:,}", f"≤ {P2_P50_MS:g} ms",
            lat["p50"], "ms", lat["p50"] <= P2_P50_MS)  # fmt: skip
        add("P2", f"p99.{kind}", f"p99, {kind} prompts, N={n:,}", f"≤ {P2_P99_MS:g} ms",
            lat["p99"], "ms", lat["p99"] <= P2_P99_MS)  # fmt: skip
    tp = report["throughput"]
    rps = tp["requests_per_second"]
    add("P3", "rps", f"req/s, {tp['clients']} clients, N={n:,}", f"≥ {P3_MIN_RPS:g} req/s",
        rps, "req/s", rps >= P3_MIN_RPS)  # fmt: skip
    if tp["clients"] != P3_CLIENTS:
        rows[-1]["applicable"] = False
    memory = report["daemon_memory_kib"]
    if memory is not None:
        mib = round(memory["rss_kib"] / 1024, 1)
        add("P7", "rss", f"daemon VmRSS after the run, N={n:,}", f"≤ {P7_MAX_MIB:g} MiB", mib,
            "MiB", mib <= P7_MAX_MIB)  # fmt: skip
        if report["config"].get("embeddings", "off") != "off":
            add("#17", "rss.model", f"daemon VmRSS with the model loaded, N={n:,}",
                f"≤ {SEMANTIC_MAX_MIB:g} MiB", mib, "MiB", mib <= SEMANTIC_MAX_MIB)  # fmt: skip
    return rows


# -- reporting ---------------------------------------------------------------------------------


def _verdict(row: dict[str, Any]) -> str:
    verdict = "met" if row["ok"] else "**missed**"
    return verdict if row["applicable"] else f"({verdict}; not the budget's N)"


def _measured(row: dict[str, Any]) -> str:
    digits = 2 if row["unit"] == "ms" else 1
    return f"**{row['measured']:,.{digits}f} {row['unit']}**"


def _floor_text(floor: dict[str, dict[str, float] | None]) -> str:
    parts = []
    for name, what in (
        ("health_live", "`GET /health/live`"),
        ("prepare_empty_scope", "prepare on a scope with no memory (auth, validation, the "
         "searches' first lookups, an `empty` pack)"),
    ):  # fmt: skip
        stats = floor.get(name)
        parts.append(
            f"{what} p50 {stats['p50']:.2f} ms / p99 {stats['p99']:.2f} ms"
            if stats
            else f"{what} not measured"
        )
    return "; ".join(parts)


def _load_cell(load: dict[str, Any]) -> str:
    cell = _loaded_cell(load)
    if "vectors" in load:
        cell += f"; {load['vectors']:,} vectors (waited {load['embed_wait_s']:g} s for the worker)"
    return cell


def _loaded_cell(load: dict[str, Any]) -> str:
    reused = f"{load['reused']:,} reused from an earlier run" if load.get("reused") else ""
    if not load["entries"]:
        return reused
    loaded = f"{load['entries']:,} in {load['seconds']:.1f} s = {load['per_second']:,.0f}/s"
    if "settled_after_s" in load:
        waited = load["settled_after_s"]
        loaded += (
            f", then {waited:g} s until quiet"
            if waited is not None
            else f", not quiet within {load['settle_limit_s']:g} s"
        )
    return f"{loaded} ({reused})" if reused else loaded


def _loading_text(cfg: dict[str, Any]) -> str:
    if cfg.get("load") == "import":
        return (
            "each size its own scope holding the first N entries of the sequence, bulk-loaded "
            "with `powercontext import` of a generated export (`--bulk-load`: the same rows "
            "HTTP remembers would store, at thousands per second)"
        )
    return (
        f"one scope grown through the sizes, loaded over HTTP by {cfg['loader_concurrency']} "
        "keep-alive clients"
    )


def _fmt_mib(kib: int) -> str:
    return f"{kib / 1024:.1f}"


def render_markdown(report: dict[str, Any]) -> str:
    """The RESULTS.md section (also the human-readable stdout summary)."""
    m, cfg, tp = report["machine"], report["config"], report["throughput"]
    oceanbase = report["backend"] == "oceanbase"
    title = (
        "## prepare_context latency on OceanBase/seekdb (P6)"
        if oceanbase
        else "## prepare_context latency and throughput (P2, P3, P7)"
    )
    if cfg["workers"] != 1:
        title += f", {cfg['workers']} worker processes"
    if cfg.get("embeddings", "off") != "off":
        title += f", hybrid search (semantic channel `{cfg['embeddings']}`)"
    budget_rows = [
        [f"{r['id']}: {r['what']}", r["target"], _measured(r), _verdict(r)]
        for r in report["budgets"]
    ]
    size_rows: list[list[object]] = []
    for size in report["sizes"]:
        for kind in KINDS:
            k = size["kinds"][kind]
            lat = k["latency_ms"]
            flavours = ", ".join(
                f"{name} {ready}/{total}"
                for name, (ready, total) in sorted(k["ready_by_flavour"].items())
            )
            modes = ", ".join(f"{m} {c}" for m, c in sorted(k.get("search_modes", {}).items()))
            size_rows.append([
                f"{size['n']:,}", kind, k["samples"],
                *(f"{lat[q]:.2f}" for q in ("p50", "p95", "p99", "max")),
                f"{k['ready_fraction']:.0%} ready / {1 - k['ready_fraction']:.0%} empty"
                + (f" ({flavours})" if kind == "short" else "")
                + (f"; search ran: {modes}" if modes else ""),
            ])  # fmt: skip
    load_rows = [
        [
            f"{s['n']:,}",
            _load_cell(s["load"]),
            _fmt_mib(s["daemon_memory_kib"]["rss_kib"]) if s["daemon_memory_kib"] else "n/a",
        ]
        for s in report["sizes"]
    ]  # fmt: skip
    tl = tp["latency_ms"]
    cpu = (
        f"; daemon CPU {tp['daemon_cpu_ms_per_request']:.2f} ms/request "
        f"({tp['daemon_cpu_cores_busy']:.2f} cores busy), bench clients "
        f"{tp['client_cpu_ms_per_request']:.2f} ms/request"
        if tp["daemon_cpu_ms_per_request"] is not None
        else ""
    )
    memory = report["daemon_memory_kib"]
    lines = [
        title,
        "",
        "Generated by `bench/prepare_latency.py --write-results`; edit outside the markers only.",
        "",
        f"- Date: {m['date']}",
        f"- Machine: {m['cpu_count']} CPUs ({m['cpu_model']}), {m['platform']}, "
        f"Python {m['python']}, SQLite {m['sqlite']}",
        f"- Target: {report['target']}, backend `{report['backend']}`",
        f"- Command: `{report['command']}`",
        f"- 1-minute load average at start / end: {report['load_average_1m']['start']:.2f} / "
        f"{report['load_average_1m']['end']:.2f} (other processes share the 2 cores)",
        f"- Workload: seed {cfg['seed']}, {_loading_text(cfg)}. Per size and kind {cfg['warmup']} "
        f"warm-up + {cfg['samples']} timed sequential prepares (concurrency 1, keep-alive "
        f"http.client, max_bytes default). Short prompts: 3-8 words "
        f"({cfg['short_prompt_chars']['min']}-{cfg['short_prompt_chars']['max']} chars) from "
        "one stored entry (`entry`), random corpus words (`vocab`) or unrelated words "
        "(`unrelated`), 2:1:1; long prompts: 2,000 characters of agent prose mixing corpus "
        "words, unrelated words and fragments of stored entries.",
        f"- Throughput: {tp['clients']} keep-alive clients for {cfg['duration']:g} s at "
        f"N={tp['n']:,}, alternating short and long prompts; clients run in the bench "
        "process on the same machine.",
        "",
        markdown_table(["budget (spec 08)", "target", "measured", "verdict"], budget_rows),
        "",
        f"Floor, same client at concurrency 1: {_floor_text(report['floor_ms'])}. The rest of "
        "each prepare is search and building.",
        "",
        markdown_table(
            ["N", "prompts", "samples", "p50 ms", "p95 ms", "p99 ms", "max ms", "answers"],
            size_rows,
        ),
        "",
        f"Throughput at N={tp['n']:,}: **{tp['requests_per_second']:,.0f} req/s** with "
        f"{tp['clients']} clients ({tp['requests']:,} requests in {tp['seconds']:.1f} s), "
        f"p50 {tl['p50']:.2f} ms, p95 {tl['p95']:.2f} ms, p99 {tl['p99']:.2f} ms, "
        f"{tp['ready_fraction']:.0%} ready{cpu}.",
        "",
    ]
    if memory is not None:
        lines += [
            f"Daemon memory after the run: VmRSS **{_fmt_mib(memory['rss_kib'])} MiB**, "
            f"peak (VmHWM, includes loading) {_fmt_mib(memory['hwm_kib'])} MiB.",
            "",
        ]
    how = "import" if cfg.get("load") == "import" else "HTTP"
    header = ["N", f"load up to N ({how})", "VmRSS after timing, MiB"]
    lines.append(markdown_table(header, load_rows))
    return "\n".join(lines)


def section_name(report: dict[str, Any]) -> str:
    """The RESULTS.md block of this run: one per backend, and a separate one per worker count
    so a multi-worker run (P3 with ``serve --workers``) never overwrites the 1-worker figures."""
    section = SECTIONS.get(report["backend"], f"prepare-latency-{report['backend']}")
    workers = report["config"]["workers"]
    if report["config"].get("embeddings", "off") != "off":
        section += f"-hybrid-{report['config']['embeddings']}"
    return section if workers == 1 else f"{section}-{workers}-workers"


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    return run_and_publish("prepare_latency", args, run, render_markdown, section_name)


if __name__ == "__main__":
    sys.exit(main())
