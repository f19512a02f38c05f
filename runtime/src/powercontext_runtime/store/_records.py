"""Small helpers shared by the repositories: ids, hashing and JSON columns."""

from __future__ import annotations

import hashlib
import json
import secrets
from typing import Any

from pydantic import BaseModel


def new_id(prefix: str) -> str:
    """An opaque, unguessable id; 80 random bits are plenty for per-scope uniqueness."""
    return prefix + secrets.token_hex(10)


def canonical_json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True)


def sha256_hex(*parts: Any) -> str:
    """Digest of an unambiguous encoding (a JSON array) of the parts."""
    return hashlib.sha256(canonical_json(list(parts)).encode("utf-8")).hexdigest()


def dump_models(models: list[BaseModel]) -> str:
    return canonical_json([m.model_dump(mode="json") for m in models])
