"""The claim of runnable instances that no flow limit holds back: the fast path, its variant
that records the move to running in the same statement, and SQLite's select-then-lease."""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from django.db import connection

from ingest.engine.models import Instance
from ingest.engine.sql.base import FINISHED_OR_PAUSED, LEASE_SET, ByVendor, kept_cursor

# An instance's columns in the order a claim returns its row (worker/database.py builds the model).
INSTANCE_COLUMNS = [f.attname for f in Instance._meta.concrete_fields]


@dataclass(frozen=True)
class Claimed:
    id: str
    previous_status: str
    workflow: str = ""  # filled on PostgreSQL, where the claim returns them at no cost
    tenant: str = ""
    # claim_and_record's: the instance's row as leased (the columns asked for, in order; JSON
    # columns as text), and whether it has any step rows, so its turn need not read either again.
    row: tuple[Any, ...] | None = None
    has_steps: bool = True


def claim_unlimited(
    *, owner: str, token: str, limit: int, now: datetime, lease_until: datetime, exclude: Sequence[str] = ()
) -> list[Claimed]:
    """The fast path: lease the first `limit` runnable instances of workflows not in `exclude`."""
    return _claim()(owner=owner, token=token, limit=limit, now=now, lease_until=lease_until, exclude=exclude)


def _claim_postgres(
    *, owner: str, token: str, limit: int, now: datetime, lease_until: datetime, exclude: Sequence[str] = ()
) -> list[Claimed]:
    # SKIP LOCKED lets any number of workers claim at once without waiting on each other. The
    # ORDER BY matches the partial index instance_claim_order (0003), so the scan stops after
    # `limit` rows instead of sorting the whole backlog. Limited workflows are left out: they
    # are claimed only under their group lock (claim_limited).
    skip = "AND workflow <> ALL(%(exclude)s)" if exclude else ""
    sql = f"""
        WITH picked AS (
            SELECT id, status AS previous_status FROM engine_instance
            WHERE ready_at <= %(now)s
              AND (lease_expires_at IS NULL OR lease_expires_at < %(now)s)
              AND status NOT IN {FINISHED_OR_PAUSED} {skip}
            ORDER BY priority DESC, ready_at
            LIMIT %(limit)s
            FOR UPDATE SKIP LOCKED
        )
        UPDATE engine_instance AS i
        SET {LEASE_SET}
        FROM picked WHERE i.id = picked.id
        RETURNING i.id, picked.previous_status, i.workflow, i.tenant
    """
    params: dict[str, Any] = {
        "now": now,
        "limit": limit,
        "owner": owner,
        "token": token,
        "until": lease_until,
        "exclude": list(exclude),
    }
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return [Claimed(*row) for row in cursor.fetchall()]


_CLAIM_AND_RECORD = f"""
    WITH picked AS (
        SELECT id, status AS previous_status FROM engine_instance
        WHERE ready_at <= %(now)s
          AND (lease_expires_at IS NULL OR lease_expires_at < %(now)s)
          AND status NOT IN {FINISHED_OR_PAUSED}{{skip}}
        ORDER BY priority DESC, ready_at
        LIMIT %(limit)s
        FOR UPDATE SKIP LOCKED
    ),
    u AS (
        UPDATE engine_instance AS i
        SET {{lease}}
        FROM picked WHERE i.id = picked.id
        RETURNING i.*, picked.previous_status
    ),
    h AS (
        INSERT INTO engine_history (instance_id, workflow, tenant, kind, step_name, status, data,
                                    actor, reason, created_at)
        SELECT u.id, u.workflow, u.tenant, 'instance.status', '', 'running', '{{{{}}}}'::jsonb, '', '', %(now)s
        FROM u WHERE u.previous_status IN ('queued', 'waiting')
    )
    SELECT id, previous_status, workflow, tenant,
        EXISTS (SELECT 1 FROM engine_step WHERE engine_step.instance_id = u.id){{columns}} FROM u
"""


def claim_and_record(
    *,
    owner: str,
    token: str,
    limit: int,
    now: datetime,
    lease_until: datetime,
    columns: Sequence[str] = (),
    raw: Any = None,
    exclude: Sequence[str] = (),
) -> list[Claimed]:
    """The claim when no workflow has a cap (PostgreSQL): lease up to `limit` runnable instances
    of workflows not in `exclude` (those fair across keys, claimed after it by group) and write
    the history of those it moves to running, in one prepared statement and its own transaction
    (nothing else needs to commit with it). With `columns`, each claimed instance comes with its
    row (those columns, as leased) and whether it has steps. `raw`: an engine_connection() to
    run it on, instead of this thread's Django connection."""
    params: dict[str, Any] = {"now": now, "limit": limit, "owner": owner, "token": token, "until": lease_until}
    if exclude:
        params["exclude"] = list(exclude)
    errors: Any = contextlib.nullcontext()
    if raw is None:
        connection.ensure_connection()
        raw, errors = connection.connection, connection.wrap_database_errors
    statement = _claim_and_record_sql(tuple(columns), bool(exclude))
    with errors:
        cursor = kept_cursor(raw, statement)
        cursor.execute(statement, params, prepare=True)
        rows = cursor.fetchall()
    if not columns:
        return [Claimed(row[0], row[1], row[2], row[3], has_steps=row[4]) for row in rows]
    return [Claimed(row[0], row[1], row[2], row[3], has_steps=row[4], row=row[5:]) for row in rows]


@functools.cache
def _claim_and_record_sql(columns: tuple[str, ...], exclude: bool = False) -> str:
    return _CLAIM_AND_RECORD.format(
        lease=LEASE_SET,
        skip=" AND workflow <> ALL(%(exclude)s::text[])" if exclude else "",
        columns="".join(f", u.{column}" for column in columns),
    )


def _claim_sqlite(
    *, owner: str, token: str, limit: int, now: datetime, lease_until: datetime, exclude: Sequence[str] = ()
) -> list[Claimed]:
    # One worker process on SQLite, and the transaction holds the write lock from BEGIN
    # (transaction_mode IMMEDIATE), so select-then-update cannot race.
    skip = f"AND workflow NOT IN ({', '.join(['%s'] * len(exclude))})" if exclude else ""
    select = f"""
        SELECT id, status FROM engine_instance
        WHERE ready_at <= %s AND (lease_expires_at IS NULL OR lease_expires_at < %s)
          AND status NOT IN {FINISHED_OR_PAUSED} {skip}
        ORDER BY priority DESC, ready_at LIMIT %s
    """
    with connection.cursor() as cursor:
        cursor.execute(select, [now, now, *exclude, limit])
        rows = cursor.fetchall()
    return lease_sqlite(rows, owner=owner, token=token, now=now, lease_until=lease_until)


class _Claim(Protocol):
    def __call__(
        self, *, owner: str, token: str, limit: int, now: datetime, lease_until: datetime, exclude: Sequence[str] = ()
    ) -> list[Claimed]: ...


_claim = ByVendor[_Claim](postgresql=_claim_postgres, sqlite=_claim_sqlite)


def lease_sqlite(
    rows: Sequence[Sequence[Any]], *, owner: str, token: str, now: datetime, lease_until: datetime
) -> list[Claimed]:
    if not rows:
        return []
    ids = [row[0] for row in rows]
    marks = ", ".join(["%s"] * len(ids))
    lease = LEASE_SET.replace("i.", "").replace("%(owner)s", "%s").replace("%(token)s", "%s")
    lease = lease.replace("%(until)s", "%s").replace("%(now)s", "%s")
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE engine_instance SET {lease} WHERE id IN ({marks})", [owner, token, lease_until, now, now, *ids]
        )
    return [Claimed(id=row[0], previous_status=row[1]) for row in rows]


def history_running(*, claimed: Sequence[Claimed], now: datetime) -> None:
    """The history rows of instances a claim moved to running, in one statement (PostgreSQL)."""
    with connection.cursor() as cursor:
        cursor.execute(
            """
            INSERT INTO engine_history (instance_id, workflow, tenant, kind, step_name, status, data,
                                        actor, reason, created_at)
            SELECT r.id, r.workflow, r.tenant, 'instance.status', '', 'running', '{}'::jsonb, '', '', %s
            FROM unnest(%s::text[], %s::text[], %s::text[]) AS r(id, workflow, tenant)
            """,
            [now, [c.id for c in claimed], [c.workflow for c in claimed], [c.tenant for c in claimed]],
        )
