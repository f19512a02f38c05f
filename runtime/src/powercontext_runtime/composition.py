"""The composition root: the one place that turns Settings into a wired Runtime.

FastAPI, the CLI and the tests all build their objects here, so there is no module-level
state anywhere else and every dependency is visible in one screen.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from .context.builder import PreparedContextBuilder
from .extraction import Extractor
from .extraction.directives import DirectivesExtractor
from .extraction.openai_compatible import OpenAICompatibleExtractor
from .files import secure_data_dir
from .search.analyzer import document_terms
from .services.auth import Authenticator, ensure_local_tokens
from .services.bootstrap import BootstrapService
from .services.context import ContextService
from .services.flush import FlushService
from .services.memory import MemoryService
from .services.review import ReviewService
from .settings import Settings
from .store.bootstrap import BootstrapStore
from .store.database import Database
from .store.flush import FlushStore
from .store.memory import MemoryStore
from .store.review import ReviewStore
from .store.sources import SourceStore
from .store.tokens import TokenStore

__all__ = ["Runtime"]

_log = logging.getLogger("powercontext.runtime")


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
    tokens: TokenStore
    authenticator: Authenticator

    @classmethod
    def open(cls, settings: Settings, *, prepare: bool = True) -> Runtime:
        """Connect, create the schema idempotently and rebuild stale derived indexes."""
        secure_data_dir(settings.home, settings.sqlite_file)
        db = Database(settings.database_url, prompt_cache_kib=settings.prompt_cache_mib * 1024)
        tokens = TokenStore(db)
        memory_store = MemoryStore(db, document_terms)
        memory = MemoryService(memory_store)
        review = ReviewService(ReviewStore(db, document_terms))
        bootstrap = BootstrapService(BootstrapStore(db))
        runtime = cls(
            settings=settings,
            db=db,
            memory=memory,
            review=review,
            bootstrap=bootstrap,
            context=ContextService(
                memory, review, bootstrap, PreparedContextBuilder(), snapshot=db.prompt_read
            ),
            flush=FlushService(FlushStore(db, memory_store), _extractor(settings)),
            sources=SourceStore(db),
            tokens=tokens,
            authenticator=Authenticator(tokens),
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
        for name, service in self._indexed():
            if not service.index_is_consistent():
                count = service.reindex()
                _log.info("search_index_rebuilt", extra={"operation": name, "count": count})

    def _indexed(self) -> tuple[tuple[str, MemoryService | ReviewService], ...]:
        """Every derived search index, by family."""
        return (("memory", self.memory), ("experience", self.review))

    def reindex(self) -> dict[str, int]:
        """Rebuild every derived search index from the authoritative tables."""
        return {name: service.reindex() for name, service in self._indexed()}

    def stale_indexes(self) -> list[str]:
        return [name for name, service in self._indexed() if not service.index_is_consistent()]

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

    def close(self) -> None:
        self.db.dispose()


def _extractor(settings: Settings) -> Extractor:
    if settings.extractor == "openai-compatible":
        assert settings.extractor_base_url and settings.extractor_model  # Settings.validate
        return OpenAICompatibleExtractor(
            settings.extractor_base_url,
            settings.extractor_model,
            settings.extractor_api_key,
            settings.extractor_timeout,
        )
    return DirectivesExtractor()
