"""Small helpers shared by the repositories: ids, hashing, JSON columns and counter upserts."""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, TypeAdapter
from sqlalchemy import Table
from sqlalchemy.dialects import mysql as mysql_dialect
from sqlalchemy.dialects import sqlite as sqlite_dialect

from ..contract.common import ArtifactRef, SourceRef
from ..errors import InvalidRequestError

SOURCE_REFS = TypeAdapter(list[SourceRef])
ARTIFACT_REFS = TypeAdapter(list[ArtifactRef])
MAX_STORED_INT = 2**63 - 1  # the largest integer every backend can bind


def json_listed(name: str, sql_type: str) -> str:
    """A ``FROM`` item for OceanBase: the JSON array bound to ``:name`` as rows of one column,
    ``listed.value``. One statement, so one cached plan, whatever the list's length: an
    expanding ``IN`` renders a statement per length, and OceanBase parses and plans each new
    length again (measured at 1k entries: a 2,000-character prompt's 186 terms read in 5.4 ms
    that way, ≈ 1 ms once planned). SQLite's ``json_each`` plays the same part there."""
    return f"JSON_TABLE(:{name}, '$[*]' COLUMNS (value {sql_type} PATH '$')) AS listed"


def new_id(prefix: str) -> str:
    """An opaque, unguessable id; 80 random bits are plenty for per-scope uniqueness."""
    return prefix + secrets.token_hex(10)


def canonical_json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True)


def sha256_hex(*parts: Any) -> str:
    """Digest of an unambiguous encoding (a JSON array) of the parts."""
    return hashlib.sha256(canonical_json(list(parts)).encode("utf-8")).hexdigest()


def dump_refs(refs: Sequence[BaseModel]) -> str:
    return json.dumps([r.model_dump(mode="json") for r in refs], separators=(",", ":"))


def iso_time(ms: int) -> str:
    return (
        datetime.fromtimestamp(ms / 1000, tz=UTC)
        .isoformat(timespec="milliseconds")
        .replace("+00:00", "Z")
    )


def encode_cursor(position: int, key: str) -> str:
    """An opaque page cursor: the (ordering number, id) of the last row returned."""
    raw = json.dumps([position, key], separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[int, str]:
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        position, key = json.loads(base64.urlsafe_b64decode(padded.encode("ascii")))
        if type(position) is not int or not 0 <= position <= MAX_STORED_INT:
            raise ValueError
        if not isinstance(key, str):
            raise ValueError
        key.encode("utf-8")  # a forged lone surrogate cannot be bound as a parameter
        return position, key
    except (ValueError, TypeError, UnicodeError):
        raise InvalidRequestError("cursor is not one this server issued") from None


def adding_upserts(table: Table, key: Sequence[str], counter: str) -> dict[str, Any]:
    """Per dialect name, an insert that adds ``counter`` to the row already at ``key`` (the
    table's primary key) instead of failing: several writers' counts sum in one row."""
    on_sqlite = sqlite_dialect.insert(table)
    on_mysql = mysql_dialect.insert(table)
    column = table.c[counter]
    return {
        "sqlite": on_sqlite.on_conflict_do_update(
            index_elements=list(key), set_={counter: column + on_sqlite.excluded[counter]}
        ),
        "mysql": on_mysql.on_duplicate_key_update({counter: column + on_mysql.inserted[counter]}),
    }
