"""The composition root: the one place that turns Settings into a wired Runtime.

FastAPI, the CLI and the tests all build their objects here, so there is no module-level
state anywhere else and every dependency is visible in one screen.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import dataclass, field

from .context.builder import PreparedContextBuilder
from .contract.system import EmbeddingStatus
from .embeddings import Embedder
from .extraction import Extractor, ExtractorLoadError, load_extractor
from .extraction.directives import DirectivesExtractor
from .files import secure_data_dir
from .search.analyzer import document_terms
from .search.fusion import Admission
from .services.activity import ActivityService
from .services.auth import Authenticator, ensure_local_tokens
from .services.bootstrap import BootstrapService
from .services.context import ContextService
from .services.distill import (
    OUTCOMES as DISTILL_OUTCOMES,
)
from .services.distill import (
    Distiller,
    DistillService,
    DistillState,
    DistillWorker,
    OfflineDistiller,
    read_distill_state,
)
from .services.flush import FlushService
from .services.memory import MemoryService
from .services.review import ReviewService
from .services.semantic import EmbeddingWorker, SemanticChannel, read_worker_state
from .services.task_results import TaskResultService
from .settings import ConfigError, Settings
from .store.activity import ActivityStore
from .store.bootstrap import BootstrapStore
from .store.compaction import Compaction
from .store.database import Database
from .store.flush import FlushStore
from .store.memory import MemoryStore
from .store.recall_counts import RecallLedger
from .store.review import ReviewStore
from .store.sources import SourceStore
from .store.task_results import TaskResultStore
from .store.tokens import TokenStore

__all__ = ["Runtime"]

_log = logging.getLogger("powercontext.runtime")

#: In the data dir: the embedding worker's last round, for the processes that do not run it.
EMBEDDING_STATE_FILE = "embedding-worker.json"
#: The same for the distill worker (its state and counts, for /metrics under --workers).
DISTILL_STATE_FILE = "distill-worker.json"


@dataclass
class Runtime:
    settings: Settings
    db: Database
    memory: MemoryService
    review: ReviewService
    bootstrap: BootstrapService
    context: ContextService
    flush: FlushService
    sources: SourceStore
    task_results: TaskResultService
    tokens: TokenStore
    authenticator: Authenticator
    activity: ActivityService
    #: Per-scope pack outcomes over time (the console's Activity page), written in batches.
    recall: RecallLedger
    #: The semantic recall channel; None unless ``POWERCONTEXT_EMBEDDINGS`` configures it.
    semantic: SemanticChannel | None = None
    #: This process's embedding worker, once :meth:`embedding_worker` made it.
    worker: EmbeddingWorker | None = field(default=None, repr=False)
    #: The distillers over recorded task results; None with ``POWERCONTEXT_DISTILL=off``.
    distill: DistillService | None = None
    #: This process's distill worker, once :meth:`distill_worker` made it.
    distiller_worker: DistillWorker | None = field(default=None, repr=False)

    @classmethod
    def open(cls, settings: Settings, *, prepare: bool = True) -> Runtime:
        """Connect, create the schema idempotently and rebuild stale derived indexes."""
        secure_data_dir(settings.home, settings.sqlite_file, settings.unix_socket)
        extractor = _extractor(settings)  # before any connection: a bad path leaks nothing
        db = Database(settings.database_url, prompt_cache_kib=settings.prompt_cache_mib * 1024)
        tokens = TokenStore(db)
        memory_store = MemoryStore(db, document_terms)
        try:
            semantic = _semantic(settings, db)
        except BaseException:
            db.dispose()
            raise
        memory = MemoryService(memory_store, semantic)
        review_store = ReviewStore(db, document_terms)
        review = ReviewService(review_store)
        bootstrap = BootstrapService(BootstrapStore(db))
        sources = SourceStore(db)
        try:
            distillers = _distillers(settings)
        except BaseException:
            db.dispose()
            raise
        runtime = cls(
            settings=settings,
            db=db,
            memory=memory,
            review=review,
            bootstrap=bootstrap,
            context=ContextService(
                memory, review, bootstrap, PreparedContextBuilder(), snapshot=db.prompt_read
            ),
            flush=FlushService(FlushStore(db, memory_store), extractor),
            sources=sources,
            task_results=TaskResultService(TaskResultStore(db, sources)),
            tokens=tokens,
            authenticator=Authenticator(tokens),
            activity=ActivityService(ActivityStore(db)),
            recall=RecallLedger(db),
            semantic=semantic,
            distill=DistillService(db, review_store, distillers) if distillers else None,
        )
        if prepare:
            try:
                runtime.prepare()
            except BaseException:
                runtime.close()  # no pools left behind by a runtime that could not start
                raise
        return runtime

    def prepare(self) -> None:
        if self.settings.in_memory:
            _log.warning("in_memory_database")
        self.db.check_server()
        # Refuse to start on a database that reads but cannot be written (a read-only file or
        # folder, a full disk): every request that writes would fail.
        self.db.check_writes()
        self.db.create_schema()
        if self.semantic is not None:
            self.semantic.create_schema()
        damaged = self.db.repair_search_indexes()
        for name in damaged:
            _log.warning("search_index_damaged", extra={"operation": name})
        for name, service in self._indexed():
            if name in damaged or not service.index_is_consistent():
                count = service.reindex()
                _log.info("search_index_rebuilt", extra={"operation": name, "count": count})
        if not self.memory.facets_are_consistent():  # e.g. the first start after an upgrade
            count = self.memory.rebuild_facets()
            _log.info("search_index_rebuilt", extra={"operation": "memory_facets", "count": count})

    def _indexed(self) -> tuple[tuple[str, MemoryService | ReviewService], ...]:
        """Every derived search index, by family."""
        return (("memory", self.memory), ("experience", self.review))

    def reindex(self) -> dict[str, int]:
        """Rebuild every derived search index from the authoritative tables."""
        counts = {name: service.reindex() for name, service in self._indexed()}
        counts["memory_facets"] = self.memory.rebuild_facets()
        return counts

    @property
    def search_modes(self) -> list[str]:
        return self.memory.search_modes

    def embedding_worker(self) -> EmbeddingWorker | None:
        """The background embedder for the serving process (None with the channel off);
        local writes wake it."""
        if self.semantic is None:
            return None
        worker = EmbeddingWorker(
            self.semantic,
            self.settings.embeddings_interval,
            state_file=self.settings.home / EMBEDDING_STATE_FILE,
        )
        self.memory.on_write = worker.wake
        self.worker = worker
        return worker

    def distill_worker(self) -> DistillWorker | None:
        """The background distiller for the serving process (None with
        ``POWERCONTEXT_DISTILL=off``); a local ``record_task_result`` wakes it."""
        if self.distill is None:
            return None
        worker = DistillWorker(self.distill, state_file=self.settings.home / DISTILL_STATE_FILE)
        self.task_results.on_record = worker.wake
        self.distiller_worker = worker
        return worker

    def distill_state(self) -> DistillState | None:
        """The distill worker's last round and counts: this process's, or under ``serve
        --workers N`` (it runs in the supervisor) the one it published; None when off or
        before its first round."""
        if self.distill is None:
            return None
        if self.distiller_worker is not None:
            return self.distiller_worker.state
        return read_distill_state(self.settings.home / DISTILL_STATE_FILE)

    def distill_counts(self) -> dict[tuple[str, str], int]:
        """``(distiller, outcome) -> count`` since the worker started, every enabled
        distiller's outcomes present (zeros included); empty when off (``/metrics``)."""
        if self.distill is None:
            return {}
        state = self.distill_state()
        counts = {} if state is None else state.counts
        return {
            (name, outcome): counts.get(f"{name}/{outcome}", 0)
            for name in self.distill.names
            for outcome in DISTILL_OUTCOMES
        }

    def embedding_status(self) -> EmbeddingStatus:
        """The semantic channel's progress (``doctor``, ``/health/ready``, ``/metrics``, the
        console's Activity): ``off`` with the channel off. The worker's state is this
        process's, or, under ``serve --workers N`` (it runs in the supervisor), the one it
        published in the data dir."""
        if self.semantic is None:
            return EmbeddingStatus(
                state="off",
                model=None,
                pending=None,
                pending_capped=False,
                vectors=None,
                error=None,
                last_round=None,
            )
        if self.worker is not None:
            state = self.worker.state
        else:
            state = read_worker_state(self.settings.home / EMBEDDING_STATE_FILE)
        return self.semantic.status(state)

    def backfill_embeddings(self, progress: Callable[[int, int], None] | None = None) -> int:
        """Embed every current active entry version that has no vector for the configured
        model (``powercontext reindex --embeddings``)."""
        if self.semantic is None:
            raise ConfigError(
                "the semantic channel is off: set POWERCONTEXT_EMBEDDINGS=local or openai"
            )
        return self.semantic.backfill(progress)

    def stale_indexes(self) -> list[str]:
        stale = [name for name, service in self._indexed() if not service.index_is_consistent()]
        if not self.memory.facets_are_consistent():
            stale.append("memory_facets")
        return stale

    def ensure_local_token(self) -> bool:
        """Make sure the operator's and the agent's local token files are valid (auth on);
        True if either was (re)issued."""
        if self.settings.auth == "none":
            return False
        return bool(ensure_local_tokens(self.tokens, self.settings.token_file.parent))

    @property
    def backend(self) -> str:
        return self.db.backend

    def ping(self) -> None:
        self.db.ping()

    def compact_search_index(self) -> int:
        return self.db.compact_search_index()

    def compact_storage(self, wait: float) -> Compaction:
        return self.db.compact_storage(wait)

    def close(self) -> None:
        self.recall.close()  # the last counts, while the database is still open
        if self.semantic is not None:
            self.semantic.close()
        self.db.dispose()


#: Which candidates found only by the vector channel join (per model: cosine scales differ).
#: ``search_memory`` (the agent asked; recall matters) and a prepared pack (injected into every
#: prompt; precision matters: at most one vector-only item, and a floor that keeps ≥ 95 % of
#: the dev set's unrelated prompts empty). USE-multilingual's floors are calibrated on the
#: Debian DDTP set and the dev set (docs/decisions/semantic-channel.md); other models take
#: POWERCONTEXT_EMBEDDINGS_MIN_SIMILARITY / POWERCONTEXT_EMBEDDINGS_PREPARE_MIN_SIMILARITY.
LOCAL_FLOORS = (0.25, 0.46)
#: Unknown remote models: a conservative guess; calibrate and set the variables.
OPENAI_FLOORS = (0.5, 0.6)
PREPARE_VECTOR_ONLY = 1


def _semantic(settings: Settings, db: Database) -> SemanticChannel | None:
    """The semantic channel the settings ask for (nothing is loaded when they do not)."""
    if settings.embeddings == "off":
        return None
    # One BLAS thread, set before numpy loads: a query embedding is a chain of small matrix
    # products, and OpenBLAS's second thread fights whatever runs on the other core (measured:
    # a short query 2.8 ms p50 / 4 ms p99 on one thread, 10 ms / 296 ms on two under load).
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    from .store.vectors import for_backend

    embedder: Embedder
    if settings.embeddings == "local":
        from .embeddings.local import LocalUSEEmbedder

        # The embedding table as a file mapping under the home: 62.5 MiB less resident.
        embedder = LocalUSEEmbedder(table_dir=settings.home / "models")
        search_floor, prepare_floor = LOCAL_FLOORS
    else:
        from .embeddings.openai_compatible import OpenAICompatibleEmbedder

        assert settings.embeddings_base_url and settings.embeddings_model  # Settings.validate
        assert settings.embeddings_dimension
        embedder = OpenAICompatibleEmbedder(
            settings.embeddings_base_url,
            settings.embeddings_model,
            settings.embeddings_dimension,
            settings.embeddings_api_key,
            settings.embeddings_timeout,
        )
        search_floor, prepare_floor = OPENAI_FLOORS
    if settings.embeddings_min_similarity is not None:
        search_floor = settings.embeddings_min_similarity
    if settings.embeddings_prepare_min_similarity is not None:
        prepare_floor = settings.embeddings_prepare_min_similarity
    return SemanticChannel(
        db,
        embedder,
        for_backend(db.backend, embedder.dimension),
        query_timeout=settings.embeddings_query_timeout,
        # A cosine adds to a candidate's score from the search floor up, in both (fusion.py).
        search=Admission(search_floor, None, search_floor),
        prepare=Admission(prepare_floor, PREPARE_VECTOR_ONLY, search_floor),
        waits_on_network=settings.embeddings == "openai",
        # The local model and SQLite's loaded index are CPU work in this process: done on the
        # request's thread (OceanBase's vector search is a server round trip, which the query
        # thread overlaps with the lexical one).
        inline_queries=settings.embeddings == "local" and db.backend == "sqlite",
    )


def _distillers(settings: Settings) -> list[Distiller]:
    """The distillers ``POWERCONTEXT_DISTILL`` names, in its order."""
    made: list[Distiller] = []
    for name in settings.distill:
        if name == "offline":
            made.append(OfflineDistiller())
        else:
            made.append(_model_distiller(settings))
    return made


def _model_distiller(settings: Settings) -> Distiller:
    """The OpenAI-compatible model distiller (``distill/openai_compatible.py``), imported only
    when asked for, like the extractor's client. The hook: that module's
    ``from_settings(settings)`` builds it, or raises ``ConfigError`` naming what is missing."""
    try:
        from .distill import openai_compatible
    except ImportError:
        raise ConfigError(
            "POWERCONTEXT_DISTILL=openai-compatible is not available in this build"
        ) from None
    factory = getattr(openai_compatible, "from_settings", None)
    if factory is None:
        raise ConfigError("POWERCONTEXT_DISTILL=openai-compatible is not available in this build")
    distiller: Distiller | None = factory(settings)
    if distiller is None:  # the module answers None when the settings do not name it
        raise ConfigError("POWERCONTEXT_DISTILL does not name openai-compatible")
    return distiller


def _extractor(settings: Settings) -> Extractor:
    if settings.extractor == "openai-compatible":
        # Imported here, like the embeddings endpoint's client: httpx (and what it pulls in)
        # is resident memory that a daemon without a configured endpoint never uses.
        from .extraction.openai_compatible import OpenAICompatibleExtractor

        assert settings.extractor_base_url and settings.extractor_model  # Settings.validate
        return OpenAICompatibleExtractor(
            settings.extractor_base_url,
            settings.extractor_model,
            settings.extractor_api_key,
            settings.extractor_timeout,
        )
    if settings.extractor == "directives":
        return DirectivesExtractor()
    try:
        return load_extractor(settings.extractor)
    except ExtractorLoadError as exc:
        raise ConfigError(str(exc)) from exc
