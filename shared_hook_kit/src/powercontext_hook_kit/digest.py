"""SHA-256 for the hook's hot path, without loading OpenSSL.

``hashlib`` loads ``_hashlib`` (OpenSSL's libcrypto) at import: ~2–3 ms of every prompt's hook
process for a handful of short digests. CPython's own built-in SHA-256 gives the same digests;
``hashlib`` remains the fallback on interpreters that do not ship it.
"""

from __future__ import annotations

try:
    from _sha2 import sha256  # CPython 3.12+
except ImportError:
    try:
        from _sha256 import sha256  # type: ignore[import-not-found,no-redef]  # CPython 3.11
    except ImportError:  # pragma: no cover - other interpreters
        from hashlib import sha256  # type: ignore[assignment]

__all__ = ["sha256", "text_sha256"]


def text_sha256(text: str) -> str:
    """Hex SHA-256 of ``text``'s UTF-8 bytes; lone surrogates (from a host's JSON or a file
    name) are kept as their code points rather than failing."""
    return sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
