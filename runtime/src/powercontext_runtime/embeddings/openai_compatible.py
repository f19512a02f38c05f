"""An OpenAI-compatible ``POST {base_url}/embeddings`` client (OpenAI, vLLM, llama.cpp, Ollama…).

Request ``{"model": …, "input": [texts]}``; answer ``{"data": [{"index": i, "embedding": […]}]}``.
The dimension is configured (``POWERCONTEXT_EMBEDDINGS_DIMENSION``) because storage needs it
before the first call (OceanBase's ``VECTOR(n)``); an answer of another size is an error, never
truncated. The API key comes from the environment and is never logged; neither is any text.
Every failure raises a typed :class:`~.EmbeddingUnavailableError`.
"""

from __future__ import annotations

import json
import math
import time
from typing import TYPE_CHECKING

import httpx

from . import (
    EmbeddingDimensionError,
    EmbeddingTimeoutError,
    EmbeddingUnavailableError,
    normalise_rows,
)

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = ["OpenAICompatibleEmbedder"]

MAX_RESPONSE_BYTES = 64 * 1024 * 1024
MAX_BATCH = 64
MAX_CHARS = 8000


class OpenAICompatibleEmbedder:
    def __init__(
        self,
        base_url: str,
        model: str,
        dimension: int,
        api_key: str | None = None,
        timeout: float = 10.0,
    ) -> None:
        self._url = base_url.rstrip("/") + "/embeddings"
        self._model = model
        self._api_key = api_key
        self.timeout = timeout
        self.dimension = dimension
        self.model_id = f"openai-compatible:{model}:{dimension}"
        self._client = httpx.Client(follow_redirects=False, trust_env=False)

    def embed(self, texts: list[str], *, timeout: float | None = None) -> npt.NDArray[np.float32]:
        import numpy as np

        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        rows: list[list[float]] = []
        budget = self.timeout if timeout is None else timeout
        deadline = time.monotonic() + budget
        for start in range(0, len(texts), MAX_BATCH):
            batch = [t[:MAX_CHARS] for t in texts[start : start + MAX_BATCH]]
            rows.extend(self._call(batch, deadline))
        return normalise_rows(rows, self.dimension)

    def _call(self, batch: list[str], deadline: float) -> list[list[float]]:
        headers = {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}
        body = {"model": self._model, "input": batch}
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise EmbeddingTimeoutError("the embedding endpoint did not answer in time")
        try:
            with self._client.stream(
                "POST", self._url, json=body, headers=headers, timeout=remaining
            ) as response:
                if response.status_code != 200:
                    raise EmbeddingUnavailableError(
                        f"the embedding endpoint answered HTTP {response.status_code}"
                    )
                raw = bytearray()
                for chunk in response.iter_bytes():
                    raw += chunk
                    if len(raw) > MAX_RESPONSE_BYTES:
                        raise EmbeddingUnavailableError("the embedding answer is too large")
                    # httpx times each read; a trickling server must not outlast the deadline.
                    if time.monotonic() > deadline:
                        raise EmbeddingTimeoutError("the embedding endpoint did not answer in time")
        except httpx.TimeoutException:
            raise EmbeddingTimeoutError("the embedding endpoint did not answer in time") from None
        except httpx.HTTPError as exc:
            raise EmbeddingUnavailableError(
                f"the embedding endpoint is unreachable ({type(exc).__name__})"
            ) from None
        return _parse(bytes(raw), len(batch), self.dimension)

    def close(self) -> None:
        self._client.close()


def _parse(raw: bytes, expected: int, dimension: int) -> list[list[float]]:
    bad = EmbeddingUnavailableError("the embedding endpoint gave an invalid answer")
    try:
        data = json.loads(raw)["data"]
        if not isinstance(data, list) or len(data) != expected:
            raise bad
        ordered: list[list[float] | None] = [None] * expected
        for position, item in enumerate(data):
            index = item.get("index", position)
            vector = item["embedding"]
            if isinstance(vector, list) and len(vector) != dimension:
                raise EmbeddingDimensionError(
                    f"the embedding endpoint gave an invalid answer: vectors of {len(vector)} "
                    f"dimensions where POWERCONTEXT_EMBEDDINGS_DIMENSION is {dimension}"
                )
            if (
                not isinstance(index, int)
                or not 0 <= index < expected
                or ordered[index] is not None
                or not isinstance(vector, list)
                or len(vector) != dimension
                or not all(isinstance(x, (int, float)) and math.isfinite(x) for x in vector)
            ):
                raise bad
            ordered[index] = vector
    except (ValueError, KeyError, TypeError, AttributeError):
        raise bad from None
    return [v for v in ordered if v is not None]
