"""Django's PostgreSQL backend, its connection pool checking connections with
`db_pool.check_unless_recent` instead of a round trip before every hand-out.

Django builds the pool itself and passes psycopg_pool's check (or none) by name, so the check
cannot come through OPTIONS["pool"]; it is set on the pool Django built (psycopg-pool is pinned,
tests/dashboard/test_database_pool.py checks the pool uses it). ENGINE is this module only when
dashboard/config.py turns the pool on.
"""

from __future__ import annotations

from typing import Any

from django.db.backends.postgresql import base

from dashboard.db_pool import check_unless_recent


class DatabaseWrapper(base.DatabaseWrapper):
    @property
    def pool(self) -> Any:
        pool = super().pool
        if pool is not None and pool._check is not check_unless_recent:
            pool._check = check_unless_recent
        return pool
