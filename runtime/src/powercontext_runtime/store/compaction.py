"""Bringing the storage to its compact state after a bulk load (``powercontext compact``).

Why it exists: a bulk load (``import``, ``migrate``, ``reindex``) leaves the full-text index
in the state that is slowest to search. On SQLite that is many FTS5 segments, which the
daemon merges a bounded step at a time while it serves; the command merges them all now. On
OceanBase it is the LSM tree's incremental data: measured on seekdb after importing 100,000
entries, the full-text statement took 4.7 ms p50 and 111 ms p95 (short prompts) until a major
compaction, 2.7 / 29 ms after it, the same as a database that had been compacted all along;
neither a minor freeze nor fresh optimizer statistics changed it (docs/oceanbase.md). The
server compacts by itself once a day, off-peak.

Why it is a command and not part of the load: a major compaction rewrites every table of the
tenant, not only ours, and loads the server while it runs; on a shared cluster that is the
tenant administrator's decision (it needs the ``ALTER SYSTEM`` privilege), so the loads only
say that it is pending.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, CursorResult
from sqlalchemy.exc import DBAPIError

from ..errors import ForbiddenError, UnavailableError

__all__ = [
    "Compaction",
    "CompactionFailedError",
    "CompactionNotPermittedError",
    "major_compaction",
]

_STATE = "SELECT last_scn, status, is_error FROM oceanbase.DBA_OB_MAJOR_COMPACTION"
_FREEZE = "ALTER SYSTEM MAJOR FREEZE"
#: MySQL error numbers of a missing privilege: 1142 (the view), 1227 (ALTER SYSTEM).
_DENIED = frozenset({1142, 1227})
POLL_SECONDS = 1.0  # the server's state is read this often while it compacts


@dataclass(frozen=True)
class Compaction:
    """What ``powercontext compact`` did."""

    backend: str
    seconds: float
    #: False when ``wait`` ran out first: the server goes on with it by itself.
    finished: bool
    #: SQLite: FTS5 merge steps that did work (0 when the index was already merged).
    merge_steps: int = 0


class CompactionNotPermittedError(ForbiddenError):
    default_code = "compaction_not_permitted"


class CompactionFailedError(UnavailableError):
    default_code = "compaction_failed"


def major_compaction(
    conn: Connection,
    wait: float,
    *,
    clock: Callable[[], float] = time.monotonic,
    pause: Callable[[float], None] = time.sleep,
) -> bool:
    """Start an OceanBase major compaction of the tenant and wait up to ``wait`` seconds for
    it; ``True`` once the server reports it finished. ``conn``: outside any transaction.

    A compaction already under way (the server's own, or another caller's) is waited for
    first: it may have frozen the data before the load committed, so its end says nothing
    about ours; then ours is started and waited for."""
    deadline = clock() + wait
    last, status = _state(conn)
    while status != "IDLE":
        if clock() >= deadline:
            return False
        pause(POLL_SECONDS)
        last, status = _state(conn)
    _run(conn, _FREEZE)
    while True:
        done, status = _state(conn)
        if done != last and status == "IDLE":
            return True
        if clock() >= deadline:
            return False
        pause(POLL_SECONDS)


def _state(conn: Connection) -> tuple[object, str]:
    """The last finished compaction's version and the current status; an error the server
    reports is raised (it stays in the view until an administrator clears it)."""
    last, status, is_error = _run(conn, _STATE).one()
    if str(is_error).upper() == "YES":
        raise CompactionFailedError(
            "the database server reports an error in its major compaction: see "
            "oceanbase.DBA_OB_MAJOR_COMPACTION and the server's log"
        )
    return last, str(status).upper()


def _run(conn: Connection, statement: str) -> CursorResult[Any]:
    """Our fixed statements; a missing privilege becomes its own typed error (the driver's
    message is not passed on: the store's rule for every storage error)."""
    try:
        return conn.exec_driver_sql(statement)
    except DBAPIError as exc:
        code = exc.orig.args[0] if exc.orig is not None and exc.orig.args else None
        if code in _DENIED:
            raise CompactionNotPermittedError(
                "this database user may not start a major compaction (it needs the ALTER "
                "SYSTEM privilege and read access to oceanbase.DBA_OB_MAJOR_COMPACTION): ask "
                "the tenant's administrator to run ALTER SYSTEM MAJOR FREEZE off-peak, or "
                "leave it to the server's daily compaction"
            ) from None
        raise
