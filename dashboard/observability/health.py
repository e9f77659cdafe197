"""Readiness: the database answers, every migration is applied, and work is not stalled.

Workers record no heartbeat of their own in the ledger; they show themselves by the leases they
hold (renewed every third of the lease) and by the claims they make (an `instance.status`
running history row). So "a worker is alive within T" is judged as: some worker holds a live
lease, or claimed within T — or nothing has been due for longer than T, in which case an idle
worker and no worker look the same and readiness does not fail on it (a readiness probe that
failed every quiet night would take the web processes out of service for nothing).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from ingest.engine.models import History, HistoryKind, Instance, Status

_migrated = False  # once every migration is applied, a process need not ask again


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str


def database_check(conn: Any = None, *, seconds: float | None = None) -> Check:
    """The database answers `SELECT 1`, or a connection cannot be had within `seconds`
    (READY_DATABASE_SECONDS). A load balancer gives up on a probe after 1–5 s, so the probe must
    not wait as long as a request may: the web pool waits up to 10 s for a connection and a
    fresh connection to an unreachable host as long as TCP lets it."""
    conn = conn if conn is not None else connection
    try:
        # The vendor of the connection handed in, which need not be the default database's (the
        # one ByVendor chooses for): this stays a comparison.
        if conn.vendor == "postgresql" and conn.connection is None:
            _postgres_reachable(conn, seconds if seconds is not None else settings.RUNLEDGER_READY_DATABASE_SECONDS)
        with conn.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except Exception as exc:  # noqa: BLE001 - any failure here means "not ready"
        return Check("database", False, f"{type(exc).__name__}: {str(exc).strip()[:200]}")
    return Check("database", True, conn.vendor)


def _postgres_reachable(conn: Any, seconds: float) -> None:
    """A connection within `seconds`, handed back at once; raises when there is none. With the
    web pool: from the pool, waiting no longer than that. Without: a connection of its own whose
    connect is bounded (libpq's connect_timeout counts whole seconds, at least 2)."""
    pool = conn.pool
    if pool is not None:
        pool.open()
        pool.putconn(pool.getconn(timeout=seconds))
        return
    params = {**conn.get_connection_params(), "connect_timeout": max(2, math.ceil(seconds))}
    conn.Database.connect(**params).close()


def migrations_check() -> Check:
    global _migrated
    if _migrated:
        return Check("migrations", True, "all applied")
    executor = MigrationExecutor(connection)
    plan = executor.migration_plan(executor.loader.graph.leaf_nodes())
    if plan:
        names = ", ".join(f"{m.app_label}.{m.name}" for m, _ in plan[:5])
        return Check("migrations", False, f"{len(plan)} not applied: {names}; run manage.py migrate")
    _migrated = True
    return Check("migrations", True, "all applied")


def worker_check(*, now: datetime, within: timedelta) -> Check:
    if Instance.objects.exclude(lease_owner="").filter(lease_expires_at__gt=now).exists():
        return Check("worker", True, "a worker holds a live lease")
    claimed = History.objects.filter(
        created_at__gte=now - within,
        created_at__lte=now + within,
        kind=HistoryKind.INSTANCE_STATUS,
        status=Status.RUNNING,
    ).exists()
    if claimed:
        return Check("worker", True, f"a worker claimed an instance in the last {within.total_seconds():g} s")
    overdue = (
        Instance.objects.filter(ready_at__lte=now - within).filter(lease_expires_at__isnull=True).exists()
        or Instance.objects.filter(ready_at__lte=now - within, lease_expires_at__lte=now).exists()
    )
    if overdue:
        return Check(
            "worker",
            False,
            f"instances have been due for over {within.total_seconds():g} s "
            "and no worker holds a lease or claimed one: start `manage.py worker`",
        )
    return Check("worker", True, "idle: nothing has been due that long")


def readiness(*, now: datetime, worker_within: timedelta | None) -> list[Check]:
    """The checks in order; a failing database stops the rest (they would only fail with it)."""
    db = database_check()
    if not db.ok:
        return [db]
    checks = [db, migrations_check()]
    if worker_within is not None:
        checks.append(worker_check(now=now, within=worker_within))
    return checks
