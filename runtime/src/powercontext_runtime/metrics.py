"""Prometheus metrics: what the daemon did, never what it was told.

RFC 0028's privacy rule is enforced by the label set: every metric's labels are drawn from
closed vocabularies (operation ids, HTTP status, error codes, pack status, search mode, the
reason a pack came back empty). No label can hold a scope id, a query, content, a citation
or a token, so no call site can leak one by mistake.

One :class:`Metrics` per runtime, each with its own registry (tests open many runtimes in one
process). With ``serve --workers N`` every worker records into prometheus_client's
multiprocess files (``PROMETHEUS_MULTIPROC_DIR``, set by the supervisor before the workers
start, under the private data dir) and ``/metrics`` sums them, so a scrape that lands on any
worker sees the whole daemon.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path
from typing import Any

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
    generate_latest,
)
from prometheus_client.multiprocess import MultiProcessCollector

from .contract.review import PROPOSERS
from .contract.system import EmbeddingStatus
from .files import private_dir

__all__ = ["MULTIPROCESS_DIR_VARIABLE", "Metrics", "prepare_multiprocess_dir"]

MULTIPROCESS_DIR_VARIABLE = "PROMETHEUS_MULTIPROC_DIR"
CONTENT_TYPE = CONTENT_TYPE_LATEST
# ``*_created`` series double the exposition and say only when a label set first appeared.
disable_created_metrics()

EMBEDDING_WORKER_STATES = ("off", "idle", "embedding", "failing")
DECISIONS = ("approved", "rejected")

# Latency buckets from 0.5 ms (a warm prepare on SQLite) to 10 s (a storage fault's bounded
# wait); pack sizes from the smallest budget to the largest (512..32768 bytes).
_SECONDS = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
_BYTES = (512, 1024, 2048, 4096, 8192, 16384, 32768)


class Metrics:
    def __init__(self, backend: str, version: str) -> None:
        self._multiprocess = bool(os.environ.get(MULTIPROCESS_DIR_VARIABLE))
        #: When this process began counting (epoch seconds).
        self.started_at = time.time()
        self.registry = CollectorRegistry()
        r = self.registry
        self._requests = Counter(
            "powercontext_http_requests",
            "HTTP requests answered, by operation, status and error code ('' on success).",
            ("operation", "status", "code"),
            registry=r,
        )
        self._latency = Histogram(
            "powercontext_http_request_duration_seconds",
            "Time from the request's arrival to its last response byte, by operation.",
            ("operation",),
            buckets=_SECONDS,
            registry=r,
        )
        self._packs = Counter(
            "powercontext_context_packs",
            "Context packs prepared, by operation, status, the search that ran and, for an "
            "empty pack, why (no_memory: the scope has none; no_match: nothing relevant).",
            ("operation", "status", "mode", "reason"),
            registry=r,
        )
        self._pack_bytes = Histogram(
            "powercontext_context_pack_bytes",
            "content_bytes of ready packs, by operation.",
            ("operation",),
            buckets=_BYTES,
            registry=r,
        )
        self._fallbacks = Counter(
            "powercontext_search_fallbacks",
            "Hybrid searches that ran lexically because the query embedding failed, by code.",
            ("operation", "code"),
            registry=r,
        )
        info = Gauge(
            "powercontext_build_info",
            "Always 1; the runtime's version and storage backend as labels.",
            ("version", "backend"),
            registry=r,
            multiprocess_mode="max",
        )
        info.labels(version, backend).set(1)
        # Set from the runtime's embedding status when /metrics is rendered (a count, not an
        # event). Under --workers the most recent worker's value stands ("livemostrecent").
        self._embeddings_pending = Gauge(
            "powercontext_embeddings_pending",
            "Entry versions waiting for a vector (counted up to 10,000; 0 with the semantic "
            "channel off).",
            registry=r,
            multiprocess_mode="livemostrecent",
        )
        self._embeddings_vectors = Gauge(
            "powercontext_embeddings_vectors",
            "Vectors stored for the configured embedding model.",
            registry=r,
            multiprocess_mode="livemostrecent",
        )
        self._embedding_worker = Gauge(
            "powercontext_embedding_worker_state",
            "1 for the embedding worker's state (off, idle, embedding, failing), 0 for the others.",
            ("state",),
            registry=r,
            multiprocess_mode="livemostrecent",
        )

        # The distill worker's counts since it started (it runs in one process: this one, or
        # the supervisor, whose published counts are set here when /metrics is rendered).
        # Never content: the distiller's name and a closed outcome.
        self._distilled = Gauge(
            "powercontext_distilled_lessons",
            "Lessons the distill worker handled since it started, by distiller (offline, "
            "openai-compatible) and outcome: proposed (a new pending candidate), merged (a "
            "pending one got the evidence as a new version), revision (a revision candidate "
            "of an approved Experience), unchanged (already cited, evidence full, or a "
            "rejected lesson), failed (the distiller raised, or the lesson was refused).",
            ("distiller", "outcome"),
            registry=r,
            multiprocess_mode="livemostrecent",
        )

        # Review decisions by who proposed the candidate: whether people keep what the
        # distillers propose. Both labels are closed (contract/review.py PROPOSERS; approved,
        # rejected); every series exists from the start.
        self._decisions = Counter(
            "powercontext_candidate_decisions",
            "Candidates approved or rejected since the daemon started, by who proposed them "
            "(agent, offline, openai-compatible) and decision (approved, rejected).",
            ("proposed_by", "decision"),
            registry=r,
        )
        for proposer in PROPOSERS:
            for decision in DECISIONS:
                self._decisions.labels(proposer, decision)

        # Label lookups are most of a sample's cost (≈ 4 µs each); every request of the prompt
        # path records three, so the children are kept once made.
        self._children: dict[tuple[object, ...], Any] = {}

    def _child(self, metric: Any, *labels: str) -> Any:
        key = (id(metric), *labels)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = metric.labels(*labels)
        return child

    def request(self, operation: str, status: int, code: str, seconds: float) -> None:
        self._child(self._requests, operation, str(status), code).inc()
        self._child(self._latency, operation).observe(seconds)

    def pack(self, operation: str, status: str, mode: str, reason: str, size: int) -> None:
        self._child(self._packs, operation, status, mode, reason).inc()
        if status == "ready":
            self._child(self._pack_bytes, operation).observe(size)

    def fallback(self, operation: str, code: str) -> None:
        self._fallbacks.labels(operation, code).inc()

    def embeddings(self, status: EmbeddingStatus) -> None:
        """Record the embedding progress (counts and a closed state only: the model name and
        the error kind stay in ``/health/ready``)."""
        self._embeddings_pending.set(status.pending or 0)
        self._embeddings_vectors.set(status.vectors or 0)
        for state in EMBEDDING_WORKER_STATES:
            self._child(self._embedding_worker, state).set(1 if state == status.state else 0)

    def distilled(self, counts: dict[tuple[str, str], int]) -> None:
        """Record the distill worker's counts, ``(distiller, outcome) -> n`` (zeros
        included, so every series of an enabled distiller exists from the start)."""
        for (distiller, outcome), value in counts.items():
            self._child(self._distilled, distiller, outcome).set(value)

    def decision(self, proposed_by: str, decision: str) -> None:
        """Count one review decision (an unknown value is dropped, never made a label)."""
        if proposed_by in PROPOSERS and decision in DECISIONS:
            self._child(self._decisions, proposed_by, decision).inc()

    def pack_counts(self) -> list[tuple[str, str, str, str, int]]:
        """``(operation, status, mode, reason, count)`` of every pack counted so far (the
        console's Activity page), from this registry or, under ``--workers``, every
        worker's files, like :meth:`render`."""
        registry = self.registry
        if self._multiprocess:
            registry = CollectorRegistry()
            MultiProcessCollector(registry)
        counts: dict[tuple[str, str, str, str], float] = {}
        for metric in registry.collect():
            if metric.name != "powercontext_context_packs":
                continue
            for sample in metric.samples:
                if sample.name.endswith("_total"):
                    labels = sample.labels
                    key = (labels["operation"], labels["status"], labels["mode"], labels["reason"])
                    counts[key] = counts.get(key, 0.0) + sample.value
        return [(*key, int(value)) for key, value in sorted(counts.items())]

    def render(self) -> bytes:
        """The exposition text: this registry, or every worker's files under ``--workers``."""
        if not self._multiprocess:
            return generate_latest(self.registry)
        merged = CollectorRegistry()
        MultiProcessCollector(merged)
        return generate_latest(merged)


def prepare_multiprocess_dir(data_dir: Path) -> Path:
    """An empty private directory for the workers' metric files (a restart starts the counters
    from zero, as Prometheus expects of a new process), exported for the workers."""
    target = data_dir / "metrics"
    shutil.rmtree(target, ignore_errors=True)
    private_dir(target)
    os.environ[MULTIPROCESS_DIR_VARIABLE] = str(target)
    return target
