"""Direct access to the SQLite driver connection for the few statements every prompt runs."""

from __future__ import annotations

import sqlite3

from sqlalchemy import Connection

__all__ = ["sqlite_driver"]


def sqlite_driver(conn: Connection) -> sqlite3.Connection:
    """The DBAPI connection under ``conn``, for the prompt-time SQLite reads.

    It is the connection of the open SQLAlchemy transaction, so its reads see the same
    snapshot; SQLAlchemy's own per-statement work (≈ 20 µs and a ``Row`` per result row) is
    a measurable share of a prepare that runs several such statements. Statements sent here
    are fixed qmark-style strings, never built from input.

    Their errors are the driver's own (``sqlite3.Error``, not SQLAlchemy's wrappers); they are
    raised inside ``Database.read``/``write``, whose guard classifies both kinds alike.
    """
    return conn.connection.driver_connection  # type: ignore[return-value]
