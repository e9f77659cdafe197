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
    assert pooled["OPTIONS"]["pool"] == {"min_size": 2, "max_size": 20, "timeout": 10.0}


def test_without_a_pool_size_each_thread_keeps_its_connection() -> None:
    plain = config.database_config({"DATABASE_URL": PG}, base_dir=Path("/tmp"))
    assert plain["CONN_MAX_AGE"] == 600 and "pool" not in plain["OPTIONS"]
    off = config.database_config({"DATABASE_URL": PG, "RUNLEDGER_DB_POOL": "0"}, base_dir=Path("/tmp"))
    assert "pool" not in off["OPTIONS"]


def test_sqlite_ignores_the_pool_and_a_bad_size_is_refused_by_name(tmp_path: Path) -> None:
    lite = config.database_config({"DATABASE_URL": f"sqlite:///{tmp_path}/x.sqlite3", "RUNLEDGER_DB_POOL": "20"},
                                  base_dir=tmp_path)
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
