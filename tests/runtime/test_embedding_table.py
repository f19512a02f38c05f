"""The local model's embedding table as a file mapping under the runtime's home.

The table is 62.5 MiB of the model's memory; mapped from a file, only the rows in use stay
resident. What must hold: the same vectors as the in-memory table, the file written once and
reused, a wrong file replaced, and a home where it cannot be written still embedding.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from powercontext_runtime.embeddings.local import LocalUSEEmbedder

TEXTS = [
    "Run the backend unit tests with make test before you open a pull request.",
    "修改数据库持久化逻辑前先跑契约测试",
    "Refunds never edit the original payment; a partial refund creates a credit note.",
]
TABLE_BYTES = 17 * 7530 * 512  # the wheel's table: 17 chunks of 7,530 pieces × 512 dims


def _table(directory: Path) -> Path:
    (path,) = directory.glob("use-m3-table-*.u8")
    return path


def test_a_mapped_table_gives_the_vectors_of_the_table_in_memory(tmp_path: Path) -> None:
    in_memory = LocalUSEEmbedder()
    mapped = LocalUSEEmbedder(table_dir=tmp_path / "models")
    expected = in_memory.embed(TEXTS)
    got = mapped.embed(TEXTS)  # loads the model, writes the file, then drops touched pages
    assert mapped.table_mapped and not in_memory.table_mapped
    table = _table(tmp_path / "models").stat()
    assert table.st_size == TABLE_BYTES and table.st_mode & 0o777 == 0o600
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-6)
    again = mapped.embed(TEXTS)  # pages dropped after the first batch are read back
    np.testing.assert_allclose(again, expected, rtol=0, atol=1e-6)
    for text in TEXTS:
        np.testing.assert_allclose(
            mapped.embed_query(text), in_memory.embed_query(text), rtol=0, atol=1e-6
        )
    assert not list((tmp_path / "models").glob("*.tmp"))


def test_the_table_file_is_written_once_and_a_wrong_one_is_replaced(tmp_path: Path) -> None:
    directory = tmp_path / "models"
    LocalUSEEmbedder(table_dir=directory).embed(TEXTS[:1])
    path = _table(directory)
    first = path.stat()
    reused = LocalUSEEmbedder(table_dir=directory)
    expected = reused.embed(TEXTS)
    assert reused.table_mapped
    assert (path.stat().st_ino, path.stat().st_mtime_ns) == (first.st_ino, first.st_mtime_ns)

    path.write_bytes(b"\0" * 4096)  # truncated, say by a full disk in another tool
    repaired = LocalUSEEmbedder(table_dir=directory)
    np.testing.assert_allclose(repaired.embed(TEXTS), expected, rtol=0, atol=1e-6)
    assert repaired.table_mapped and path.stat().st_size == TABLE_BYTES


def test_a_home_where_the_table_cannot_be_written_keeps_it_in_memory(tmp_path: Path) -> None:
    blocked = tmp_path / "models"
    blocked.write_text("not a directory")
    embedder = LocalUSEEmbedder(table_dir=blocked)
    vectors = embedder.embed(TEXTS)
    assert not embedder.table_mapped
    np.testing.assert_allclose(vectors, LocalUSEEmbedder().embed(TEXTS), rtol=0, atol=1e-6)
    assert blocked.read_text() == "not a directory"


def test_the_heap_is_trimmed_where_the_c_library_can() -> None:
    import platform

    from powercontext_runtime.store._heap import release_free_heap

    glibc = platform.system() == "Linux" and platform.libc_ver()[0] == "glibc"
    assert release_free_heap() is glibc
