"""Authoritative tables. Every key starts with ``scope_id``; identifiers compare byte-for-byte.

On MySQL-protocol backends every table defaults to ``utf8mb4_bin`` so that ``Foo``, ``foo``
and ``föo`` are different scopes, ids and terms (SQLite's default BINARY collation already is).
Derived full-text indexes live in :mod:`.fulltext`, not here: they can be dropped and rebuilt.
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Column,
    Connection,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
    text,
)
from sqlalchemy.dialects import mysql

metadata = MetaData()

_TABLE_OPTIONS = {"mysql_charset": "utf8mb4", "mysql_collate": "utf8mb4_bin"}

# Long texts: up to 200,000 characters of captured source (4 bytes each on MySQL).
LongText = Text().with_variant(mysql.MEDIUMTEXT(), "mysql")
BigId = BigInteger().with_variant(Integer(), "sqlite")


def _scope() -> Column:
    return Column("scope_id", String(256), nullable=False)


memory_heads = Table(
    "memory_heads",
    metadata,
    Column("scope_id", String(256), primary_key=True),
    Column("revision", Integer, nullable=False),
    Column("updated_at", BigInteger, nullable=False),
    **_TABLE_OPTIONS,
)

memory_revisions = Table(
    "memory_revisions",
    metadata,
    Column("scope_id", String(256), primary_key=True),
    Column("revision", Integer, primary_key=True, autoincrement=False),
    Column("operation", String(16), nullable=False),
    Column("entry_id", String(128), nullable=False),
    Column("entry_version_id", String(128), nullable=False),
    Column("created_at", BigInteger, nullable=False),
    # The console's Activity page: writes by day and operation (a covering index range).
    Index("ix_memory_revisions_created", "scope_id", "created_at", "operation"),
    **_TABLE_OPTIONS,
)

# One row per entry: the pointer to its current version, used for CAS and content de-dup.
memory_entries = Table(
    "memory_entries",
    metadata,
    Column("scope_id", String(256), primary_key=True),
    Column("entry_id", String(128), primary_key=True),
    Column("created_revision", Integer, nullable=False),
    Column("current_version_id", String(128), nullable=False),
    Column("current_version", Integer, nullable=False),
    Column("state", String(16), nullable=False),
    Column("content_hash", String(64), nullable=False),
    Index("ix_memory_entries_hash", "scope_id", "content_hash"),
    Index("ix_memory_entries_order", "scope_id", "created_revision", "entry_id"),
    **_TABLE_OPTIONS,
)

# Derived: each entry as rows keyed in its creation order — ``facet`` ``all`` (value ``""``),
# ``kind`` (its current kind) and ``tag`` (one per current tag) — with its state, so that
# listing a scope's entries of one state, kind or tag (the console's Memory filters, bootstrap's
# tagged entries) reads an index range instead of the whole scope. Kept in step by every write
# (at most 18 rows of one entry) and rebuilt from the version rows when it is not (start-up,
# ``powercontext reindex``). No index on ``memory_entries`` serves these lists: one led SQLite's
# planner to answer remember's duplicate check from it, a scan of the scope per write.
memory_facets = Table(
    "memory_facets",
    metadata,
    Column("scope_id", String(256), primary_key=True),
    Column("facet", String(8), primary_key=True),
    Column("value", String(128), primary_key=True),
    Column("created_revision", Integer, primary_key=True, autoincrement=False),
    Column("entry_id", String(128), primary_key=True),
    Column("state", String(16), nullable=False),
    Index(
        "ix_memory_facets_state",
        "scope_id",
        "facet",
        "value",
        "state",
        "created_revision",
        "entry_id",
    ),
    **_TABLE_OPTIONS,
)

# Immutable versions. A version belongs to revision R iff valid_from <= R < coalesce(valid_to, ∞).
memory_versions = Table(
    "memory_versions",
    metadata,
    Column("id", BigId, primary_key=True, autoincrement=True),
    _scope(),
    Column("entry_id", String(128), nullable=False),
    Column("entry_version_id", String(128), nullable=False),
    Column("version", Integer, nullable=False),
    Column("kind", String(128), nullable=False),
    Column("text", Text, nullable=False),
    Column("tags", Text, nullable=False),
    Column("reason", Text, nullable=True),
    Column("source_refs", Text, nullable=False),
    Column("artifact_refs", Text, nullable=False),
    Column("content_hash", String(64), nullable=False),
    Column("state", String(16), nullable=False),
    Column("valid_from", Integer, nullable=False),
    Column("valid_to", Integer, nullable=True),
    Column("created_at", BigInteger, nullable=False),
    UniqueConstraint("scope_id", "entry_version_id", name="uq_memory_versions_id"),
    UniqueConstraint("scope_id", "entry_id", "version", name="uq_memory_versions_entry"),
    **_TABLE_OPTIONS,
)

# Document frequencies per (scope, family, term) for application-side scoring, plus the
# reserved term ``#docs`` holding the number of indexed documents (terms are [a-z0-9]+, so
# it cannot collide). Derived: rebuilt together with the full-text index.
search_terms = Table(
    "search_terms",
    metadata,
    Column("scope_id", String(256), primary_key=True),
    Column("family", String(16), primary_key=True),
    Column("term", String(64), primary_key=True),
    Column("df", Integer, nullable=False),
    **_TABLE_OPTIONS,
)

source_heads = Table(
    "source_heads",
    metadata,
    Column("scope_id", String(256), primary_key=True),
    Column("last_position", Integer, nullable=False),
    Column("flush_cursor", Integer, nullable=False, default=0),
    # The distill worker's high-water mark (services/distill.py): every position up to it has
    # been read by the distillers. NULL (a scope from before, or never distilled) reads as 0.
    Column("distill_cursor", Integer, nullable=True),
    **_TABLE_OPTIONS,
)

sources = Table(
    "sources",
    metadata,
    Column("scope_id", String(256), primary_key=True),
    Column("position", Integer, primary_key=True, autoincrement=False),
    Column("source_id", String(256), nullable=False),
    Column("name", String(32), nullable=False),
    Column("payload_hash", String(64), nullable=False),
    Column("content", LongText, nullable=False),
    Column("metadata", Text, nullable=True),
    Column("created_at", BigInteger, nullable=False),
    UniqueConstraint("scope_id", "source_id", name="uq_sources_source_id"),
    # One kind of source by time: prompts captured by day (the console's Activity page) and
    # task results newest first (list_task_results), each a covering index range. It replaced
    # ix_sources_created (scope, time), which could not tell prompts from task results.
    Index("ix_sources_named", "scope_id", "name", "created_at", "position"),
    **_TABLE_OPTIONS,
)

# One row per flush that processed sources (an idle flush writes nothing): counts only, never
# content. Written in the flush's own transaction, with its cursor. For the Activity page.
flush_runs = Table(
    "flush_runs",
    metadata,
    Column("scope_id", String(256), primary_key=True),
    Column("to_cursor", Integer, primary_key=True, autoincrement=False),  # where it moved it
    Column("from_cursor", Integer, nullable=False),
    Column("sources", Integer, nullable=False),  # sources processed
    Column("entries", Integer, nullable=False),  # Memory entries it added (duplicates: none)
    Column("created_at", BigInteger, nullable=False),
    Index("ix_flush_runs_created", "scope_id", "created_at"),
    **_TABLE_OPTIONS,
)

# How prepared packs came out per scope, in quarter hours (the console's Activity page; counts
# only). Written in batches by RecallLedger, never on the prompt path.
recall_counts = Table(
    "recall_counts",
    metadata,
    Column("scope_id", String(256), primary_key=True),
    Column("bucket", BigInteger, primary_key=True, autoincrement=False),  # epoch ms // 900,000
    Column("outcome", String(16), primary_key=True),  # ready, no_match, no_memory, budget
    Column("count", Integer, nullable=False),
    **_TABLE_OPTIONS,
)

tokens = Table(
    "tokens",
    metadata,
    Column("token_id", String(64), primary_key=True),
    Column("name", String(128), nullable=False),
    Column("secret_hash", String(64), nullable=False),
    Column("scopes", Text, nullable=False),
    # JSON list of capabilities (services/auth.py); NULL on tokens made before capabilities
    # existed, which hold an agent's (read, write, propose) — never review.
    Column("capabilities", Text, nullable=True),
    Column("created_at", BigInteger, nullable=False),
    Column("revoked_at", BigInteger, nullable=True),
    UniqueConstraint("name", name="uq_tokens_name"),
    **_TABLE_OPTIONS,
)

# The web console's sessions (http/console_auth.py): the SHA-256 of each session's secret (never
# the secret), the token it acts as, and its expiry. Logout deletes the row, so a session ends
# at once for every worker and every daemon sharing the database; expired rows are deleted by
# the next login. Access, not data: never exported (docs/decisions/portability.md).
console_sessions = Table(
    "console_sessions",
    metadata,
    Column("secret_hash", String(64), primary_key=True),
    Column("token_id", String(64), nullable=False),
    Column("created_at", BigInteger, nullable=False),
    Column("expires_at", BigInteger, nullable=False),
    Index("ix_console_sessions_expiry", "expires_at"),
    **_TABLE_OPTIONS,
)

# -- Review Inbox and reviewed artifact families (spec 06) ----------------------------------

# Current head of each Experience/Skill artifact; row lock target for approval's target CAS.
artifact_heads = Table(
    "artifact_heads",
    metadata,
    Column("scope_id", String(256), primary_key=True),
    Column("family", String(16), primary_key=True),
    Column("artifact_id", String(128), primary_key=True),
    Column("revision", Integer, nullable=False),
    Column("updated_at", BigInteger, nullable=False),
    **_TABLE_OPTIONS,
)

# Immutable revisions; ``id`` doubles as the document id in the Experience search index.
artifact_revisions = Table(
    "artifact_revisions",
    metadata,
    Column("id", BigId, primary_key=True, autoincrement=True),
    _scope(),
    Column("family", String(16), nullable=False),
    Column("artifact_id", String(128), nullable=False),
    Column("revision", Integer, nullable=False),
    Column("content", LongText, nullable=False),
    Column("source_refs", Text, nullable=False),
    Column("artifact_refs", Text, nullable=False),
    Column("candidate_id", String(128), nullable=True),  # NULL for Handoff (no review)
    Column("candidate_version", Integer, nullable=True),
    Column("created_at", BigInteger, nullable=False),
    UniqueConstraint("scope_id", "family", "artifact_id", "revision", name="uq_artifact_rev"),
    **_TABLE_OPTIONS,
)

candidates = Table(
    "candidates",
    metadata,
    Column("scope_id", String(256), primary_key=True),
    Column("candidate_id", String(128), primary_key=True),
    Column("family", String(16), nullable=False),
    Column("status", String(16), nullable=False),
    Column("version", Integer, nullable=False),
    Column("target", Text, nullable=True),
    Column("result_artifact", Text, nullable=True),
    Column("decision_reason", Text, nullable=True),
    Column("created_at", BigInteger, nullable=False),
    Column("updated_at", BigInteger, nullable=False),
    # Provenance: ``agent`` (propose_experience/propose_skill over the API, MCP or CLI) or the
    # distiller that proposed it (``offline``, ``openai-compatible``). NULL: from before the
    # distillers, when only the API could propose, so it reads as ``agent``.
    Column("proposed_by", String(32), nullable=True),
    # A distilled candidate's lesson signature, as its SHA-256 (hex): what the distill worker
    # matches a new lesson against (docs/decisions/offline-distiller.md). Never shown, never
    # logged; NULL for an agent's proposal.
    Column("signature", String(64), nullable=True),
    Index("ix_candidates_inbox", "scope_id", "status", "created_at", "candidate_id"),
    Index("ix_candidates_signature", "scope_id", "signature", "created_at"),
    **_TABLE_OPTIONS,
)

candidate_versions = Table(
    "candidate_versions",
    metadata,
    Column("scope_id", String(256), primary_key=True),
    Column("candidate_id", String(128), primary_key=True),
    Column("version", Integer, primary_key=True, autoincrement=False),
    Column("proposal", LongText, nullable=False),
    Column("source_refs", Text, nullable=False),
    Column("artifact_refs", Text, nullable=False),
    Column("reason", Text, nullable=True),
    Column("created_at", BigInteger, nullable=False),
    **_TABLE_OPTIONS,
)


# -- Scope bootstrap (spec 05) ------------------------------------------------------------

scope_references = Table(
    "scope_references",
    metadata,
    Column("scope_id", String(256), primary_key=True),
    Column("referenced", Text, nullable=False),  # JSON list; canonical order = the order set
    Column("version", Integer, nullable=False),
    Column("updated_at", BigInteger, nullable=False),
    **_TABLE_OPTIONS,
)

# The Handoff revision queued for a scope's next session (at most one per scope). The hooks
# read it before their bootstrap request and name it there; claiming an injected receipt that
# delivered this exact revision deletes the row, so the next session receives it once.
handoff_deliveries = Table(
    "handoff_deliveries",
    metadata,
    Column("scope_id", String(256), primary_key=True),
    Column("revision", Integer, nullable=False),
    Column("queued_at", BigInteger, nullable=False),
    **_TABLE_OPTIONS,
)

# Delivery receipts. Never the prompt, content, transcript path, raw event id or host error:
# only identity metadata, hashed event key, fingerprint, exact item references and digests.
bootstrap_receipts = Table(
    "bootstrap_receipts",
    metadata,
    Column("receipt_id", String(64), primary_key=True),
    _scope(),
    Column("integration", String(64), nullable=False),
    Column("lifecycle", String(16), nullable=False),
    Column("event_key", String(64), nullable=True),
    Column("fingerprint", String(64), nullable=False),
    Column("state", String(16), nullable=False),
    Column("items", Text, nullable=False),
    # The token that created the receipt: only it may replay, claim or de-duplicate with it.
    # NULL on receipts from before the binding, which no caller matches (they expire).
    Column("principal_id", String(64), nullable=True),
    Column("pack_digest", String(80), nullable=True),
    Column("content_bytes", Integer, nullable=False),
    Column("created_at", BigInteger, nullable=False),
    Column("updated_at", BigInteger, nullable=False),
    Column("expires_at", BigInteger, nullable=False),
    UniqueConstraint("event_key", name="uq_bootstrap_receipts_event"),
    Index("ix_bootstrap_receipts_expiry", "expires_at"),
    # A scope's recent receipts and their states by day (the console's Bootstrap and
    # Activity pages).
    Index("ix_bootstrap_receipts_scope", "scope_id", "created_at", "state"),
    **_TABLE_OPTIONS,
)


def add_missing_columns(conn: Connection) -> list[str]:
    """Add the nullable columns a newer release introduced to tables an older one created.

    ``create_all`` creates missing tables but never alters existing ones. Every column added
    after a table first shipped is nullable, and NULL means "from before": so adding it is the
    whole upgrade, on both backends, and running it again does nothing. Returns the
    ``table.column`` names added.
    """
    added = []
    for table in metadata.sorted_tables:
        present = _column_names(conn, table.name)
        for column in table.columns:
            if column.name in present:
                continue
            if not column.nullable:
                raise RuntimeError(f"{table.name}.{column.name} cannot be added: not nullable")
            kind = column.type.compile(dialect=conn.dialect)
            preparer = conn.dialect.identifier_preparer
            conn.exec_driver_sql(
                f"ALTER TABLE {preparer.quote(table.name)} "
                f"ADD COLUMN {preparer.quote(column.name)} {kind} NULL"
            )
            added.append(f"{table.name}.{column.name}")
    return added


#: Indexes an older release created that a newer one replaced: dropped at start-up, after
#: their replacement exists, so no write keeps maintaining them. ``{table: (index, ...)}``.
RETIRED_INDEXES: dict[str, tuple[str, ...]] = {"sources": ("ix_sources_created",)}


def add_missing_indexes(conn: Connection) -> list[str]:
    """Create the indexes a newer release added to tables an older one created (``create_all``
    only indexes the tables it creates), then drop the :data:`RETIRED_INDEXES` still there.
    Idempotent; returns the index names created. On a large table this is a one-time cost at
    the first start after the upgrade."""
    added = []
    for table in metadata.sorted_tables:
        present = _index_names(conn, table.name)
        for index in sorted(table.indexes, key=lambda i: str(i.name)):
            if index.name not in present:
                index.create(conn)
                added.append(str(index.name))
        for retired in RETIRED_INDEXES.get(table.name, ()):
            if retired in present:
                on = "" if conn.dialect.name == "sqlite" else f" ON {table.name}"
                conn.exec_driver_sql(f"DROP INDEX {retired}{on}")
    return added


def _index_names(conn: Connection, table: str) -> set[str]:
    if conn.dialect.name == "sqlite":
        return {row[1] for row in conn.exec_driver_sql(f"PRAGMA index_list({table})")}
    rows = conn.execute(
        text(
            "SELECT DISTINCT index_name FROM information_schema.statistics "
            "WHERE table_schema = DATABASE() AND table_name = :table"
        ),
        {"table": table},
    )
    return {row[0] for row in rows}


def _column_names(conn: Connection, table: str) -> set[str]:
    """The columns a table has in the database (SQLAlchemy's reflection would parse
    OceanBase's ``SHOW CREATE TABLE``, whose index options it does not know, with warnings)."""
    if conn.dialect.name == "sqlite":
        rows = conn.exec_driver_sql(f"PRAGMA table_info({table})")
        return {row[1] for row in rows}
    rows = conn.execute(
        text(
            "SELECT column_name FROM information_schema.columns "
            "WHERE table_schema = DATABASE() AND table_name = :table"
        ),
        {"table": table},
    )
    return {row[0] for row in rows}
