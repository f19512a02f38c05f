"""The OpenAI-compatible embeddings client in the forms docs/embeddings.md documents for local
servers (Ollama, llama.cpp, TEI, vLLM): a base URL ending in ``/v1`` or ``/v1/``, no API key,
and a dimension that must match the model's. Against the real stand-in HTTP server."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from powercontext_runtime.embeddings import EmbeddingDimensionError, EmbeddingUnavailableError
from powercontext_runtime.embeddings.openai_compatible import OpenAICompatibleEmbedder
from tests.support.embedding_server import EmbeddingServer, embedding_server


@pytest.fixture
def server() -> Iterator[EmbeddingServer]:
    with embedding_server() as running:
        running.dimension = 1024
        yield running


@pytest.mark.parametrize("suffix", ["", "/"])
def test_a_local_server_needs_no_key_and_takes_either_base_url_form(
    server: EmbeddingServer, suffix: str
) -> None:
    client = OpenAICompatibleEmbedder(server.url + suffix, "bge-m3", 1024, None, timeout=5)
    try:
        vectors = client.embed(["CI pipeline", "支付"])
    finally:
        client.close()
    assert vectors.shape == (2, 1024)
    assert int(vectors[0].argmax()) == 0 and int(vectors[1].argmax()) == 1
    assert server.last_model == "bge-m3"
    assert "authorization" not in server.last_headers


def test_a_wrong_dimension_names_both_sizes_and_the_setting(server: EmbeddingServer) -> None:
    client = OpenAICompatibleEmbedder(server.url, "bge-m3", 768, None, timeout=5)
    try:
        with pytest.raises(EmbeddingDimensionError) as raised:
            client.embed(["CI pipeline"])
    finally:
        client.close()
    assert isinstance(raised.value, EmbeddingUnavailableError)  # searches still fall back
    assert raised.value.code == "embedding_unavailable"
    assert "1024" in raised.value.message and "768" in raised.value.message
    assert "POWERCONTEXT_EMBEDDINGS_DIMENSION" in raised.value.message


def test_a_base_url_without_v1_is_a_typed_failure(server: EmbeddingServer) -> None:
    """``http://host:port`` alone posts to ``/embeddings``, which the servers above do not all
    serve (the stand-in answers 404 there): the docs say to end the URL in ``/v1``."""
    client = OpenAICompatibleEmbedder(server.url.removesuffix("/v1"), "bge-m3", 1024, None, 5)
    try:
        with pytest.raises(EmbeddingUnavailableError, match="HTTP 404"):
            client.embed(["CI pipeline"])
    finally:
        client.close()
