"""The store's transaction helpers turn overload into typed errors, never a raw exception."""

from __future__ import annotations

from contextlib import ExitStack
from pathlib import Path

import pytest

from powercontext_runtime.errors import UnavailableError
from powercontext_runtime.store.database import Database


def test_an_exhausted_connection_pool_is_a_typed_503(tmp_path: Path) -> None:
    db = Database(f"sqlite:///{tmp_path / 'pool.db'}")
    try:
        db.create_schema()
        pool = db.engine.pool
        pool._timeout = 0.05  # type: ignore[attr-defined]  # the default 30 s, shortened
        with ExitStack() as held:
            for _ in range(pool.size() + pool._max_overflow):  # type: ignore[attr-defined]
                held.enter_context(db.engine.connect())
            with pytest.raises(UnavailableError) as caught, db.read():
                pass
        assert (caught.value.status, caught.value.code) == (503, "database_unavailable")
        with db.read() as conn:  # connections returned: usable again
            assert conn.exec_driver_sql("SELECT 1").scalar() == 1
    finally:
        db.dispose()
