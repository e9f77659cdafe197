"""Advisory locks: which of several processes runs a round that must not overlap with itself (a
rollup pass, the alert checks: a transaction-level lock; a retention round, the scheduler's
leadership: a session-level one).

PostgreSQL only. SQLite has one process, which holds every such lock: taking one succeeds
without a statement, giving one back does nothing."""

from __future__ import annotations

from collections.abc import Callable

from django.db import connection

from ingest.engine.sql.base import ByVendor


def xact_lock_try(key: int) -> bool:
    """Take the transaction-level advisory lock `key` unless another transaction holds it; the
    lock ends with the surrounding transaction. Call inside `transaction.atomic()`."""
    return _xact_lock_try()(key)


def session_lock_try(key: int) -> bool:
    """Take the session-level advisory lock `key` unless another session holds it; held until
    `session_unlock(key)` or the connection ends."""
    return _session_lock_try()(key)


def session_unlock(key: int) -> None:
    _session_unlock()(key)


def session_lock_held(key: int) -> bool:
    """Whether this session holds the session-level lock `key` (a reconnect silently drops it)."""
    return _session_lock_held()(key)


def _xact_lock_try_statement(key: int) -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_xact_lock(%s)", [key])
        row = cursor.fetchone()
    return bool(row and row[0])


def _session_lock_try_statement(key: int) -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_lock(%s)", [key])
        return bool(cursor.fetchone()[0])


def _session_unlock_statement(key: int) -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_unlock(%s)", [key])


def _session_lock_held_statement(key: int) -> bool:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND granted"
            " AND pid = pg_backend_pid() AND ((classid::bigint << 32) | objid::bigint) = %s)",
            [key],
        )
        return bool(cursor.fetchone()[0])


def _held_by_the_only_process(key: int) -> bool:
    return True


def _nothing_to_give_back(key: int) -> None:
    pass


_xact_lock_try = ByVendor[Callable[[int], bool]](postgresql=_xact_lock_try_statement, sqlite=_held_by_the_only_process)
_session_lock_try = ByVendor[Callable[[int], bool]](
    postgresql=_session_lock_try_statement, sqlite=_held_by_the_only_process
)
_session_lock_held = ByVendor[Callable[[int], bool]](
    postgresql=_session_lock_held_statement, sqlite=_held_by_the_only_process
)
_session_unlock = ByVendor[Callable[[int], None]](postgresql=_session_unlock_statement, sqlite=_nothing_to_give_back)
