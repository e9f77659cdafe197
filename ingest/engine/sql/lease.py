"""A held lease: the guard every write runs first, the heartbeat that extends it, the next wake-up
an idle worker sleeps until, and the asynchronous commit of advisory rows."""

from __future__ import annotations

from datetime import datetime

from django.db import connection

from ingest.engine.sql.base import ByVendor


def guard(*, instance_id: str, token: str, now: datetime, lease_until: datetime) -> str | None:
    """Check that this worker still holds the lease; return the control flag, or None if lost.

    Every write a worker makes for an instance runs this first, in the same transaction, so an
    operator's terminate or restart (which clears the lease) makes the worker's write a no-op.
    An expired lease is not revived: its concurrency slot may already have gone to another
    instance, so a worker that stalled past its lease gives the instance up.

    On PostgreSQL the row is locked FOR SHARE, not updated: a claim or an operator's UPDATE
    waits for this transaction, while the write costs no new row version (the heartbeat keeps
    the lease alive). SQLite's write transactions are exclusive already; there the guard also
    extends the lease to `lease_until`.
    """
    return _lease().guard(instance_id=instance_id, token=token, now=now, lease_until=lease_until)


def heartbeat(*, owner: str, tokens: dict[str, str], lease_until: datetime) -> dict[str, str]:
    """Extend the leases this worker holds; return {instance id: control} for those still held."""
    if not tokens:
        return {}
    ids = sorted(tokens)
    marks = ", ".join(["%s"] * len(ids))
    locked = _lease().heartbeat_ids(marks)
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            UPDATE engine_instance SET lease_expires_at = %s
            WHERE lease_owner = %s AND id IN ({locked})
            RETURNING id, lease_token, control
            """,
            [lease_until, owner, *ids],
        )
        rows = cursor.fetchall()
    return {row[0]: str(row[2]) for row in rows if tokens.get(row[0]) == row[1]}


def next_due(*, now: datetime) -> datetime | None:
    """The earliest future wake-up of any instance (sleep, retry delay, event deadline)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT MIN(ready_at) FROM engine_instance WHERE ready_at > %s", [now])
        row = cursor.fetchone()
    value = row[0] if row else None
    if isinstance(value, str):  # SQLite returns text for aggregates over datetimes
        from django.utils.dateparse import parse_datetime

        parsed = parse_datetime(value)
        if parsed is not None and parsed.tzinfo is None:
            from datetime import UTC

            parsed = parsed.replace(tzinfo=UTC)
        return parsed
    return value if isinstance(value, datetime) else None


def async_commit() -> None:
    """Let this transaction commit without waiting for the WAL flush (PostgreSQL).

    Used only for advisory rows (a step's start marker): losing one in a database crash
    costs nothing, the step's durable completion is written separately.
    """
    _lease().async_commit()


class _SqliteLease:
    """SQLite: write transactions are exclusive already (BEGIN IMMEDIATE); the guard extends the
    lease as it checks it, and every commit is durable."""

    def guard(self, *, instance_id: str, token: str, now: datetime, lease_until: datetime) -> str | None:
        with connection.cursor() as cursor:
            cursor.execute(
                """
                UPDATE engine_instance SET lease_expires_at = %s, updated_at = %s
                WHERE id = %s AND lease_token = %s AND lease_expires_at > %s
                RETURNING control
                """,
                [lease_until, now, instance_id, token, now],
            )
            row = cursor.fetchone()
        return None if row is None else str(row[0])

    def heartbeat_ids(self, marks: str) -> str:
        return marks

    def async_commit(self) -> None:
        pass


class _PostgresLease(_SqliteLease):
    def guard(self, *, instance_id: str, token: str, now: datetime, lease_until: datetime) -> str | None:
        with connection.cursor() as cursor:
            cursor.execute(
                """
                SELECT control FROM engine_instance
                WHERE id = %s AND lease_token = %s AND lease_expires_at > %s
                FOR SHARE
                """,
                [instance_id, token, now],
            )
            row = cursor.fetchone()
        return None if row is None else str(row[0])

    def heartbeat_ids(self, marks: str) -> str:
        # The rows are locked in id order first, as a group commit locks them (_GROUP_TEMPLATE),
        # so the two never wait on each other in a cycle.
        return f"SELECT id FROM engine_instance WHERE id IN ({marks}) ORDER BY id FOR UPDATE"

    def async_commit(self) -> None:
        with connection.cursor() as cursor:
            cursor.execute("SET LOCAL synchronous_commit TO OFF")


_lease = ByVendor[_SqliteLease](postgresql=_PostgresLease(), sqlite=_SqliteLease())
