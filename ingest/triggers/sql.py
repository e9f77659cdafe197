"""Every raw SQL query of the triggers app, one typed function each: the advisory locks.

PostgreSQL only; callers check `connection.vendor` first (SQLite runs a single scheduler).
"""

from __future__ import annotations

from django.db import connection

# Arbitrary but fixed: every scheduler process must ask for the same number.
SCHEDULER_LOCK_KEY = 0x52554E4C_53434844  # "RUNLSCHD"


def advisory_try_lock(key: int) -> bool:
    """Take the session-level lock `key` if nobody holds it; held until unlock or disconnect."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_lock(%s)", [key])
        return bool(cursor.fetchone()[0])


def advisory_unlock(key: int) -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_unlock(%s)", [key])
        return bool(cursor.fetchone()[0])


def advisory_held(key: int) -> bool:
    """Whether this session holds lock `key` (a reconnect silently drops it)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND granted"
            " AND pid = pg_backend_pid() AND ((classid::bigint << 32) | objid::bigint) = %s)",
            [key],
        )
        return bool(cursor.fetchone()[0])
