"""The web processes' PostgreSQL pool (RUNLEDGER_DB_POOL): on for daphne, off elsewhere."""

from __future__ import annotations

import importlib
import os
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from dashboard import config

pytestmark = [pytest.mark.pure]
PG = "postgres://postgres@127.0.0.1:5432/app"


def test_a_pool_size_turns_persistent_connections_into_a_pool() -> None:
    pooled = config.database_config({"DATABASE_URL": PG, "RUNLEDGER_DB_POOL": "20"}, base_dir=Path("/tmp"))
    assert pooled["CONN_MAX_AGE"] == 0  # Django refuses a pool with persistent connections
    assert pooled["ENGINE"] == "dashboard.postgres"  # the pool's check: dashboard/db_pool.py
    assert pooled["OPTIONS"]["pool"] == {"min_size": 2, "max_size": 20, "timeout": 10.0}


def test_without_a_pool_size_each_thread_keeps_its_connection() -> None:
    plain = config.database_config({"DATABASE_URL": PG}, base_dir=Path("/tmp"))
    assert plain["CONN_MAX_AGE"] == 600 and "pool" not in plain["OPTIONS"]
    off = config.database_config({"DATABASE_URL": PG, "RUNLEDGER_DB_POOL": "0"}, base_dir=Path("/tmp"))
    assert "pool" not in off["OPTIONS"]


def test_sqlite_ignores_the_pool_and_a_bad_size_is_refused_by_name(tmp_path: Path) -> None:
    lite = config.database_config(
        {"DATABASE_URL": f"sqlite:///{tmp_path}/x.sqlite3", "RUNLEDGER_DB_POOL": "20"}, base_dir=tmp_path
    )
    assert "pool" not in lite["OPTIONS"]
    with pytest.raises(ImproperlyConfigured, match="RUNLEDGER_DB_POOL"):
        config.database_config({"DATABASE_URL": PG, "RUNLEDGER_DB_POOL": "many"}, base_dir=tmp_path)


def test_the_asgi_module_leaves_no_pool_setting_for_the_processes_it_starts() -> None:
    before = os.environ.pop("RUNLEDGER_DB_POOL", None)
    try:
        import dashboard.asgi

        importlib.reload(dashboard.asgi)
        assert "RUNLEDGER_DB_POOL" not in os.environ
    finally:
        if before is not None:
            os.environ["RUNLEDGER_DB_POOL"] = before


def test_the_pooled_backend_checks_connections_with_the_recent_use_window() -> None:
    from django.db.utils import ConnectionHandler

    from dashboard.db_pool import check_unless_recent

    pooled = config.database_config({"DATABASE_URL": PG, "RUNLEDGER_DB_POOL": "4"}, base_dir=Path("/tmp"))
    wrapper = ConnectionHandler({"default": pooled})["default"]
    assert wrapper.pool is not None and wrapper.pool._check is check_unless_recent  # built, not opened
    plain = config.database_config({"DATABASE_URL": PG}, base_dir=Path("/tmp"))
    assert ConnectionHandler({"default": plain})["default"].pool is None


class _Conn:
    autocommit = True

    def __init__(self) -> None:
        self.sent: list[str] = []

    def execute(self, query: str) -> None:
        self.sent.append(query)


def test_a_connection_is_checked_unless_it_was_handed_out_within_the_window(monkeypatch: pytest.MonkeyPatch) -> None:
    from dashboard import db_pool

    clock = [100.0]
    monkeypatch.setattr(db_pool.time, "monotonic", lambda: clock[0])
    conn = _Conn()
    db_pool.check_unless_recent(conn)  # never handed out: checked
    clock[0] += db_pool.RECENT_SECONDS / 2
    db_pool.check_unless_recent(conn)  # served a request moments ago: not
    clock[0] += db_pool.RECENT_SECONDS * 1.5
    db_pool.check_unless_recent(conn)  # idle past the window: checked
    assert conn.sent == ["", ""]
