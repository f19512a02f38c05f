"""Embedders: text → L2-normalised float32 vectors for the optional semantic recall channel.

An :class:`Embedder` carries the identity of its model (``model_id``) and its ``dimension``;
the id is stored with every vector, so a vector made by another model is never compared with
this one's (a model change means re-embedding, see ``docs/decisions/semantic-channel.md``).

Every failure is an :class:`EmbeddingUnavailableError` (HTTP 503 when it reaches a caller,
code ``embedding_unavailable``, or ``embedding_timeout`` for a missed deadline). Searches
that can fall back to the lexical channel catch it and say so; nothing here logs content.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from ..errors import UnavailableError

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = [
    "Embedder",
    "EmbeddingDimensionError",
    "EmbeddingTimeoutError",
    "EmbeddingUnavailableError",
    "normalise_rows",
]


class EmbeddingUnavailableError(UnavailableError):
    """The embedder could not answer (not installed, transport error, bad answer)."""

    default_code = "embedding_unavailable"


class EmbeddingTimeoutError(EmbeddingUnavailableError):
    """The embedder did not answer within its deadline."""

    default_code = "embedding_timeout"


class EmbeddingDimensionError(EmbeddingUnavailableError):
    """The endpoint answered vectors of another size than the configured dimension: a setting
    to fix, not an outage, so the progress surfaces (which show a failure by its type) name it."""


class Embedder(Protocol):
    #: Stable identity of the model *and* its preprocessing: vectors with another id are
    #: never compared with this embedder's.
    model_id: str
    dimension: int

    def embed(self, texts: list[str], *, timeout: float | None = None) -> npt.NDArray[np.float32]:
        """One L2-normalised float32 row per text, shape ``(len(texts), dimension)``.

        ``timeout``: seconds the call may take, when the embedder can bound it (a network
        call); the caller enforces its own deadline either way."""
        ...


def normalise_rows(matrix: object, dimension: int) -> npt.NDArray[np.float32]:
    """``matrix`` as float32 ``(n, dimension)`` with unit rows; a zero or non-finite row is
    an error (it would compare equal to everything or to nothing)."""
    import numpy as np

    array = np.asarray(matrix, dtype=np.float32)
    if array.ndim == 1:
        array = array[None, :]
    if array.ndim != 2 or array.shape[1] != dimension:
        raise EmbeddingUnavailableError(
            f"the embedder returned vectors of the wrong shape (expected {dimension} dimensions)"
        )
    norms = np.linalg.norm(array, axis=1, keepdims=True)
    if not np.all(np.isfinite(norms)) or np.any(norms <= 1e-12):
        raise EmbeddingUnavailableError("the embedder returned a zero or non-finite vector")
    return np.ascontiguousarray(array / norms, dtype=np.float32)
