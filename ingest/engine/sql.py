"""Every raw SQL statement of the engine, one typed function each, so every lock is in one place.

The ORM says the rest. These are here because the ORM cannot say them well: claiming with
`FOR UPDATE SKIP LOCKED`, guarded updates that return the operator's control flag in the same
round trip, and LISTEN/NOTIFY.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.db import connection

READY_CHANNEL = "runledger_ready"
HISTORY_CHANNEL = "runledger_history"

_FINISHED_OR_PAUSED = "('paused', 'complete', 'errored', 'terminated')"


def is_postgres() -> bool:
    return connection.vendor == "postgresql"


@dataclass(frozen=True)
class Claimed:
    id: str
    previous_status: str


def claim(*, owner: str, token: str, limit: int, now: datetime, lease_until: datetime) -> list[Claimed]:
    """Lease up to `limit` runnable instances. Call inside a transaction.

    Runnable: due (`ready_at <= now`), not paused or finished, and holding no live lease — so an
    instance whose worker died becomes runnable again when its lease expires. On PostgreSQL,
    SKIP LOCKED lets any number of workers claim at once without waiting on each other; the
    per-workflow concurrency limits are checked by the caller (flow.py) on the returned rows.
    """
    if is_postgres():
        return _claim_postgres(owner=owner, token=token, limit=limit, now=now, lease_until=lease_until)
    return _claim_sqlite(owner=owner, token=token, limit=limit, now=now, lease_until=lease_until)


def _claim_postgres(*, owner: str, token: str, limit: int, now: datetime, lease_until: datetime) -> list[Claimed]:
    sql = f"""
        WITH picked AS (
            SELECT id, status AS previous_status FROM engine_instance
            WHERE ready_at <= %(now)s
              AND (lease_expires_at IS NULL OR lease_expires_at < %(now)s)
              AND status NOT IN {_FINISHED_OR_PAUSED}
            ORDER BY priority DESC, ready_at
            LIMIT %(limit)s
            FOR UPDATE SKIP LOCKED
        )
        UPDATE engine_instance AS i
        SET lease_owner = %(owner)s, lease_token = %(token)s, lease_expires_at = %(until)s,
            run_count = i.run_count + 1, updated_at = %(now)s,
            started_at = COALESCE(i.started_at, %(now)s),
            status = CASE WHEN i.status IN ('queued', 'waiting') THEN 'running' ELSE i.status END
        FROM picked WHERE i.id = picked.id
        RETURNING i.id, picked.previous_status
    """
    params = {"now": now, "limit": limit, "owner": owner, "token": token, "until": lease_until}
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return [Claimed(id=row[0], previous_status=row[1]) for row in cursor.fetchall()]


def _claim_sqlite(*, owner: str, token: str, limit: int, now: datetime, lease_until: datetime) -> list[Claimed]:
    # One worker process on SQLite, and the transaction holds the write lock from BEGIN
    # (transaction_mode IMMEDIATE), so select-then-update cannot race.
    select = f"""
        SELECT id, status FROM engine_instance
        WHERE ready_at <= %s AND (lease_expires_at IS NULL OR lease_expires_at < %s)
          AND status NOT IN {_FINISHED_OR_PAUSED}
        ORDER BY priority DESC, ready_at LIMIT %s
    """
    with connection.cursor() as cursor:
        cursor.execute(select, [now, now, limit])
        rows = cursor.fetchall()
        if not rows:
            return []
        ids = [row[0] for row in rows]
        marks = ", ".join(["%s"] * len(ids))
        cursor.execute(
            f"""
            UPDATE engine_instance
            SET lease_owner = %s, lease_token = %s, lease_expires_at = %s,
                run_count = run_count + 1, updated_at = %s,
                started_at = COALESCE(started_at, %s),
                status = CASE WHEN status IN ('queued', 'waiting') THEN 'running' ELSE status END
            WHERE id IN ({marks})
            """,
            [owner, token, lease_until, now, now, *ids],
        )
    return [Claimed(id=row[0], previous_status=row[1]) for row in rows]


def guard(*, instance_id: str, token: str, now: datetime, lease_until: datetime) -> str | None:
    """Extend the lease if this worker still holds it; return the control flag, or None if lost.

    Every write a worker makes for an instance runs this first, in the same transaction, so an
    operator's terminate or restart (which clears the lease) makes the worker's write a no-op.
    """
    with connection.cursor() as cursor:
        cursor.execute(
            """
            UPDATE engine_instance SET lease_expires_at = %s, updated_at = %s
            WHERE id = %s AND lease_token = %s
            RETURNING control
            """,
            [lease_until, now, instance_id, token],
        )
        row = cursor.fetchone()
    return None if row is None else str(row[0])


def heartbeat(*, owner: str, tokens: dict[str, str], lease_until: datetime) -> dict[str, str]:
    """Extend the leases this worker holds; return {instance id: control} for those still held."""
    if not tokens:
        return {}
    ids = list(tokens)
    marks = ", ".join(["%s"] * len(ids))
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            UPDATE engine_instance SET lease_expires_at = %s
            WHERE lease_owner = %s AND id IN ({marks})
            RETURNING id, lease_token, control
            """,
            [lease_until, owner, *ids],
        )
        rows = cursor.fetchall()
    return {row[0]: str(row[2]) for row in rows if tokens.get(row[0]) == row[1]}


def next_due(*, now: datetime) -> datetime | None:
    """The earliest future wake-up of any instance (sleep, retry delay, event deadline)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT MIN(ready_at) FROM engine_instance WHERE ready_at > %s", [now]
        )
        row = cursor.fetchone()
    value = row[0] if row else None
    if isinstance(value, str):  # SQLite returns text for aggregates over datetimes
        from django.utils.dateparse import parse_datetime

        parsed = parse_datetime(value)
        if parsed is not None and parsed.tzinfo is None:
            from datetime import UTC

            parsed = parsed.replace(tzinfo=UTC)
        return parsed
    return value  # type: ignore[no-any-return]


def notify_ready() -> None:
    """Wake idle workers (PostgreSQL); delivered at commit, dropped on rollback."""
    if is_postgres():
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_notify(%s, '')", [READY_CHANNEL])


def try_advisory_lock(key: int) -> bool:
    """Session-level advisory lock (PostgreSQL); True on SQLite, where one process runs."""
    if not is_postgres():
        return True
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_lock(%s)", [key])
        row = cursor.fetchone()
    return bool(row and row[0])


def async_commit() -> None:
    """Let this transaction commit without waiting for the WAL flush (PostgreSQL).

    Used only for advisory rows (a step's start marker): losing one in a database crash
    costs nothing, the step's durable completion is written separately.
    """
    if is_postgres():
        with connection.cursor() as cursor:
            cursor.execute("SET LOCAL synchronous_commit TO OFF")


# ---- the step hot path on PostgreSQL: one round trip per write --------------------------------
#
# Each statement below is the guard, the step row, its attempt and its history row in one
# statement (data-modifying CTEs), run in autocommit: one implicit transaction, one round trip.
# When the lease is lost the guard returns no row and nothing else is written.

_GUARD = """
    g AS (
        UPDATE engine_instance SET lease_expires_at = %(until)s, updated_at = %(now)s
        WHERE id = %(iid)s AND lease_token = %(token)s
        RETURNING control, workflow, tenant
    )"""

_HISTORY = """
    h AS (
        INSERT INTO engine_history (instance_id, workflow, tenant, kind, step_name, status, data,
                                    actor, reason, created_at)
        SELECT %(iid)s, g.workflow, g.tenant, %(hkind)s, %(label)s, '', %(hdata)s::jsonb, '', '', %(now)s
        FROM g
    )"""


def step_start_first(*, iid: str, token: str, now: datetime, until: datetime, name: str, seq: int,
                     position: int, kind: str, config: str, attempt: int, sensitive: bool,
                     has_rollback: bool, label: str, hdata: str, async_commit: bool) -> tuple[str, int] | None:
    """Insert a step's row at its first attempt.

    With `async_commit` (only when the statement is its own transaction) it commits without
    waiting for the WAL flush: a start marker lost in a database crash costs nothing.
    """
    setting = "'off'" if async_commit else "current_setting('synchronous_commit')"
    sql = f"""
        WITH {_GUARD},
        c AS (SELECT set_config('synchronous_commit', {setting}, true) AS v),
        s AS (
            INSERT INTO engine_step (instance_id, name, seq, position, kind, status, result, error_name,
                error_message, error_traceback, config, attempts, sensitive, has_rollback, started_at,
                ended_at, wake_at, event_type, child_id)
            SELECT %(iid)s, %(name)s, %(seq)s, %(position)s, %(kind)s, 'running', NULL, '', '', '',
                %(config)s::jsonb, %(attempt)s, %(sensitive)s, %(has_rollback)s, %(now)s, NULL, NULL, '', NULL
            FROM g
            RETURNING id
        ),
        {_HISTORY}
        SELECT g.control, s.id, (SELECT v FROM c) FROM g CROSS JOIN s
    """
    params = {"iid": iid, "token": token, "now": now, "until": until, "name": name, "seq": seq,
              "position": position, "kind": kind, "config": config, "attempt": attempt,
              "sensitive": sensitive, "has_rollback": has_rollback, "label": label,
              "hkind": "step.started", "hdata": hdata}
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        row = cursor.fetchone()
    return None if row is None else (str(row[0]), int(row[1]))


def step_complete(*, iid: str, token: str, now: datetime, until: datetime, step_id: int, attempt: int,
                  started: datetime, result: str | None, worker: str, label: str, hdata: str) -> str | None:
    """Store a step's result, its successful attempt and its history durably, in one statement."""
    sql = f"""
        WITH {_GUARD},
        s AS (
            UPDATE engine_step SET status = 'complete', result = %(result)s::jsonb, ended_at = %(now)s,
                attempts = %(attempt)s, error_name = '', error_message = '', error_traceback = ''
            WHERE id = %(sid)s AND EXISTS (SELECT 1 FROM g)
        ),
        a AS (
            INSERT INTO engine_attempt (step_id, number, started_at, ended_at, ok, error_name,
                error_message, error_traceback, retry_delay_seconds, worker)
            SELECT %(sid)s, %(attempt)s, %(started)s, %(now)s, true, '', '', '', NULL, %(worker)s FROM g
        ),
        {_HISTORY}
        SELECT g.control FROM g
    """
    params = {"iid": iid, "token": token, "now": now, "until": until, "sid": step_id, "attempt": attempt,
              "started": started, "result": result, "worker": worker, "label": label,
              "hkind": "step.completed", "hdata": hdata}
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        row = cursor.fetchone()
    return None if row is None else str(row[0])
