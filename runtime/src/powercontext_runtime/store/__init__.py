"""Persistence: SQLAlchemy Core tables, repositories and per-backend full-text adapters.

Nothing above this package sees SQL or a database exception: repositories return plain
records and raise the typed errors of :mod:`powercontext_runtime.errors`.
"""

from .database import Database

__all__ = ["Database"]
