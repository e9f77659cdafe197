"""Transaction-level advisory locks (PostgreSQL only): which of several processes runs a round
that must not overlap with itself (a rollup pass, the alert checks)."""

from __future__ import annotations

from django.db import connection


def xact_lock_try(key: int) -> bool:
    """Take the transaction-level advisory lock `key` unless another transaction holds it; the
    lock ends with the surrounding transaction. Call inside `transaction.atomic()`."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_xact_lock(%s)", [key])
        row = cursor.fetchone()
    return bool(row and row[0])
