"""The web pool's check against a real server: a connection dropped while idle is not handed out."""

from __future__ import annotations

import pytest

pytestmark = [pytest.mark.db, pytest.mark.postgres]


def test_a_pooled_connection_the_server_dropped_while_idle_is_replaced_before_a_request_gets_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import time

    import psycopg
    from psycopg_pool import ConnectionPool

    from dashboard import db_pool
    from tests.conftest import PG_URL

    pool = ConnectionPool(
        PG_URL, min_size=1, max_size=1, check=db_pool.check_unless_recent, open=True, kwargs={"autocommit": True}
    )
    try:
        with pool.connection() as conn:
            dropped = conn.info.backend_pid
        with psycopg.connect(PG_URL, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", [dropped])
        later = time.monotonic() + db_pool.RECENT_SECONDS * 2
        monkeypatch.setattr(db_pool.time, "monotonic", lambda: later)  # idle past the window since
        with pool.connection() as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)
            assert conn.info.backend_pid != dropped
    finally:
        pool.close()
