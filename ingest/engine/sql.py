"""Every raw SQL statement of the engine, one typed function each, so every lock is in one place.

The ORM says the rest. These are here because the ORM cannot say them well: claiming with
`FOR UPDATE SKIP LOCKED`, guarded updates that return the operator's control flag in the same
round trip, and LISTEN/NOTIFY.
"""

from __future__ import annotations

import contextlib
import functools
import json
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import connection

READY_CHANNEL = "runledger_ready"
HISTORY_CHANNEL = "runledger_history"

_FINISHED_OR_PAUSED = "('paused', 'complete', 'errored', 'terminated')"


_vendor = ""


def is_postgres() -> bool:
    # Asked several times per step; the default database's vendor cannot change in a process.
    global _vendor
    if not _vendor:
        _vendor = connection.vendor
    return _vendor == "postgresql"


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


@dataclass(frozen=True)
class FlowLimit:
    """One workflow's limits as the claim sees them (built by flow.claim_limits)."""

    workflow: str
    concurrency: int | None  # max instances holding a live lease, per key value
    rate: int | None  # max starts per window, per key value
    since: datetime | None  # the start of the rate window: now - period


@dataclass(frozen=True)
class FlowGroup:
    """A (workflow, concurrency key) partition whose claim lock this transaction holds."""

    workflow: str
    key: str


def claim(*, owner: str, token: str, limit: int, now: datetime, lease_until: datetime) -> list[Claimed]:
    """Lease up to `limit` runnable instances, within every workflow's flow limits. Call inside a transaction.

    Runnable: due (`ready_at <= now`), not paused or finished, and holding no live lease — so an
    instance whose worker died becomes runnable again when its lease expires. flow.claim runs
    the statements below in order: the per-key groups of limited workflows (locked), their
    ranked candidates, then the unlimited fast path.
    """
    from ingest.engine import flow  # flow imports this module; it orchestrates the statements below

    return flow.claim(owner=owner, token=token, limit=limit, now=now, lease_until=lease_until)


def claim_unlimited(*, owner: str, token: str, limit: int, now: datetime, lease_until: datetime,
                    exclude: Sequence[str] = ()) -> list[Claimed]:
    """The fast path: lease the first `limit` runnable instances of workflows not in `exclude`."""
    if is_postgres():
        return _claim_postgres(owner=owner, token=token, limit=limit, now=now, lease_until=lease_until,
                               exclude=exclude)
    return _claim_sqlite(owner=owner, token=token, limit=limit, now=now, lease_until=lease_until,
                         exclude=exclude)


def _claim_postgres(*, owner: str, token: str, limit: int, now: datetime, lease_until: datetime,
                    exclude: Sequence[str] = ()) -> list[Claimed]:
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
              AND status NOT IN {_FINISHED_OR_PAUSED} {skip}
            ORDER BY priority DESC, ready_at
            LIMIT %(limit)s
            FOR UPDATE SKIP LOCKED
        )
        UPDATE engine_instance AS i
        SET {_LEASE_SET}
        FROM picked WHERE i.id = picked.id
        RETURNING i.id, picked.previous_status, i.workflow, i.tenant
    """
    params: dict[str, Any] = {"now": now, "limit": limit, "owner": owner, "token": token,
                              "until": lease_until, "exclude": list(exclude)}
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return [Claimed(*row) for row in cursor.fetchall()]


_CLAIM_AND_RECORD = f"""
    WITH picked AS (
        SELECT id, status AS previous_status FROM engine_instance
        WHERE ready_at <= %(now)s
          AND (lease_expires_at IS NULL OR lease_expires_at < %(now)s)
          AND status NOT IN {_FINISHED_OR_PAUSED}
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


def claim_and_record(*, owner: str, token: str, limit: int, now: datetime, lease_until: datetime,
                     columns: Sequence[str] = (), raw: Any = None) -> list[Claimed]:
    """The claim when no workflow has flow limits (PostgreSQL): lease up to `limit` runnable
    instances and write the history of those it moves to running, in one prepared statement
    and its own transaction (nothing else needs to commit with it). With `columns`, each claimed
    instance comes with its row (those columns, as leased) and whether it has steps. `raw`: an
    engine_connection() to run it on, instead of this thread's Django connection."""
    import psycopg

    params = {"now": now, "limit": limit, "owner": owner, "token": token, "until": lease_until}
    errors: Any = contextlib.nullcontext()
    if raw is None:
        connection.ensure_connection()
        raw, errors = connection.connection, connection.wrap_database_errors
        _prepare_session(raw)
    with errors, psycopg.Cursor(raw) as cursor:
        cursor.execute(_claim_and_record_sql(tuple(columns)), params, prepare=True)
        rows = cursor.fetchall()
    if not columns:
        return [Claimed(*row[:4], has_steps=row[4]) for row in rows]
    return [Claimed(*row[:4], has_steps=row[4], row=row[5:]) for row in rows]


@functools.cache
def _claim_and_record_sql(columns: tuple[str, ...]) -> str:
    return _CLAIM_AND_RECORD.format(lease=_LEASE_SET,
                                    columns="".join(f", u.{column}" for column in columns))


def _claim_sqlite(*, owner: str, token: str, limit: int, now: datetime, lease_until: datetime,
                  exclude: Sequence[str] = ()) -> list[Claimed]:
    # One worker process on SQLite, and the transaction holds the write lock from BEGIN
    # (transaction_mode IMMEDIATE), so select-then-update cannot race.
    skip = f"AND workflow NOT IN ({', '.join(['%s'] * len(exclude))})" if exclude else ""
    select = f"""
        SELECT id, status FROM engine_instance
        WHERE ready_at <= %s AND (lease_expires_at IS NULL OR lease_expires_at < %s)
          AND status NOT IN {_FINISHED_OR_PAUSED} {skip}
        ORDER BY priority DESC, ready_at LIMIT %s
    """
    with connection.cursor() as cursor:
        cursor.execute(select, [now, now, *exclude, limit])
        rows = cursor.fetchall()
    return _lease_sqlite(rows, owner=owner, token=token, now=now, lease_until=lease_until)


def _lease_sqlite(rows: Sequence[Sequence[Any]], *, owner: str, token: str, now: datetime,
                  lease_until: datetime) -> list[Claimed]:
    if not rows:
        return []
    ids = [row[0] for row in rows]
    marks = ", ".join(["%s"] * len(ids))
    lease = _LEASE_SET.replace("i.", "").replace("%(owner)s", "%s").replace("%(token)s", "%s")
    lease = lease.replace("%(until)s", "%s").replace("%(now)s", "%s")
    with connection.cursor() as cursor:
        cursor.execute(f"UPDATE engine_instance SET {lease} WHERE id IN ({marks})",
                       [owner, token, lease_until, now, now, *ids])
    return [Claimed(id=row[0], previous_status=row[1]) for row in rows]


# What a claim writes: the lease, the turn count, the first start, and running for the ledger.
_LEASE_SET = """lease_owner = %(owner)s, lease_token = %(token)s, lease_expires_at = %(until)s,
        run_count = i.run_count + 1, updated_at = %(now)s,
        started_at = COALESCE(i.started_at, %(now)s),
        status = CASE WHEN i.status IN ('queued', 'waiting') THEN 'running' ELSE i.status END"""


_CLAIMABLE = f"""i.ready_at <= %s AND (i.lease_expires_at IS NULL OR i.lease_expires_at < %s)
    AND i.status NOT IN {_FINISHED_OR_PAUSED}"""

# A lease counts as a running slot while it is live; an expired lease (a dead worker) frees
# the slot at the moment its instance becomes claimable again. `lease_owner <> ''` lets the
# planner use the partial index instance_lease.
_LIVE_LEASE = "i.lease_owner <> '' AND i.lease_expires_at >= %s"

# A group's latest first start: one backward step of instance_flow_starts per group.
_LAST_START = """(SELECT MAX(x.started_at) FROM engine_instance x
                   WHERE x.workflow = {w} AND x.concurrency_key = {k} AND x.started_at IS NOT NULL)"""


def _ts() -> str:
    return "CAST(%s AS timestamptz)" if is_postgres() else "%s"


def claim_groups(*, limits: Sequence[FlowLimit], now: datetime, max_groups: int) -> list[FlowGroup]:
    """The (workflow, key) groups of limited workflows with runnable instances and a free slot.

    On PostgreSQL each returned group's claim lock is held until the transaction ends
    (pg_try_advisory_xact_lock on hashtext of workflow|key). Every claim of a limited workflow
    takes its group's lock before counting its live leases, so two workers can never both see
    the same free slot: the second one's try fails and it skips the group, as SKIP LOCKED skips
    rows. The count itself is read by the next statement (claim_limited), whose snapshot is
    taken after the lock was granted and therefore after the previous holder committed.
    Groups are tried fewest running first, then by their best instance's priority, then the
    least recently started first (round robin across keys), then by age.
    """
    names = [lim.workflow for lim in limits]
    marks = ", ".join(["%s"] * len(names))
    lim_rows = ", ".join(["(%s, CAST(%s AS integer))"] * len(limits))
    groups = f"""
        WITH lim(workflow, conc) AS (VALUES {lim_rows}),
        ready AS (
            SELECT i.workflow, i.concurrency_key AS ckey, MAX(i.priority) AS top, MIN(i.ready_at) AS oldest
            FROM engine_instance i WHERE i.workflow IN ({marks}) AND {_CLAIMABLE}
            GROUP BY i.workflow, i.concurrency_key
        ),
        busy AS (
            SELECT i.workflow, i.concurrency_key AS ckey, COUNT(*) AS n
            FROM engine_instance i WHERE i.workflow IN ({marks}) AND {_LIVE_LEASE}
            GROUP BY i.workflow, i.concurrency_key
        )
        SELECT r.workflow, r.ckey FROM ready r
        JOIN lim l ON l.workflow = r.workflow
        LEFT JOIN busy b ON b.workflow = r.workflow AND b.ckey = r.ckey
        WHERE l.conc IS NULL OR COALESCE(b.n, 0) < l.conc
        ORDER BY COALESCE(b.n, 0), r.top DESC, {_LAST_START.format(w="r.workflow", k="r.ckey")} NULLS FIRST,
                 r.oldest, r.workflow, r.ckey
        LIMIT %s
    """
    params: list[Any] = [v for lim in limits for v in (lim.workflow, lim.concurrency)]
    params += [*names, now, now, *names, now]
    if is_postgres():
        # The inner LIMIT keeps the subquery from being flattened, so the lock function runs
        # only on the groups the outer LIMIT pulls, in order, and stops once it holds enough.
        sql = f"""
            SELECT g.workflow, g.ckey FROM ({groups}) AS g
            WHERE pg_try_advisory_xact_lock(hashtext('runledger.flow'), hashtext(g.workflow || '|' || g.ckey))
            LIMIT %s
        """
        params += [max(4 * max_groups, 32), max_groups]
    else:
        sql = groups
        params.append(max_groups)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return [FlowGroup(workflow=row[0], key=row[1]) for row in cursor.fetchall()]


def claim_limited(*, groups: Sequence[FlowGroup], limits: Sequence[FlowLimit], owner: str, token: str,
                  limit: int, now: datetime, lease_until: datetime) -> list[Claimed]:
    """Lease up to `limit` runnable instances of locked groups, within their free slots.

    Call after claim_groups in the same transaction. Each group's candidates are ranked
    (priority, then ready_at, then age); a candidate is eligible while its rank fits the
    group's free slots (limit minus live leases) and, if it has never started, its rank among
    fresh candidates fits the start rate left in the window. Eligible candidates are taken by
    rank plus the group's running count first — every group's next slot before any group's
    slot after that — then priority, then the least recently started group: the round robin
    that keeps one key's backlog from starving the others, even one claim at a time.
    """
    lim_rows = ", ".join([f"(%s, CAST(%s AS integer), CAST(%s AS integer), {_ts()})"] * len(limits))
    grp_rows = ", ".join(["(%s, %s)"] * len(groups))
    in_group = "g.workflow = i.workflow AND g.ckey = i.concurrency_key"
    # The literal workflow list (the VALUES rows are opaque to the planner) lets it read the
    # candidates from instance_flow_ready instead of the whole runnable backlog.
    workflows = sorted({g.workflow for g in groups})
    names = ", ".join(["%s"] * len(workflows))
    chosen = f"""
        WITH lim(workflow, conc, rate, since) AS (VALUES {lim_rows}),
        grp(workflow, ckey) AS (VALUES {grp_rows}),
        busy AS (
            SELECT i.workflow, i.concurrency_key AS ckey, COUNT(*) AS n
            FROM engine_instance i JOIN grp g ON {in_group} WHERE {_LIVE_LEASE}
            GROUP BY i.workflow, i.concurrency_key
        ),
        starts AS (
            SELECT g.workflow, g.ckey,
                   (SELECT COUNT(*) FROM engine_instance x WHERE x.workflow = g.workflow
                    AND x.concurrency_key = g.ckey AND x.started_at > l.since) AS n
            FROM grp g JOIN lim l ON l.workflow = g.workflow WHERE l.rate IS NOT NULL
        ),
        recent AS (
            SELECT g.workflow, g.ckey, {_LAST_START.format(w="g.workflow", k="g.ckey")} AS last FROM grp g
        ),
        cand AS (
            SELECT i.id, i.status, i.workflow, i.concurrency_key AS ckey, i.priority, i.ready_at,
                   i.created_at, CASE WHEN i.started_at IS NULL THEN 1 ELSE 0 END AS fresh,
                   ROW_NUMBER() OVER w AS rn,
                   SUM(CASE WHEN i.started_at IS NULL THEN 1 ELSE 0 END) OVER (w ROWS UNBOUNDED PRECEDING) AS fresh_rn
            FROM engine_instance i JOIN grp g ON {in_group}
            WHERE i.workflow IN ({names}) AND {_CLAIMABLE}
            WINDOW w AS (PARTITION BY i.workflow, i.concurrency_key
                         ORDER BY i.priority DESC, i.ready_at, i.created_at, i.id)
        ),
        chosen AS (
            SELECT c.id, c.status FROM cand c
            JOIN lim l ON l.workflow = c.workflow
            LEFT JOIN busy b ON b.workflow = c.workflow AND b.ckey = c.ckey
            LEFT JOIN starts s ON s.workflow = c.workflow AND s.ckey = c.ckey
            JOIN recent r ON r.workflow = c.workflow AND r.ckey = c.ckey
            WHERE (l.conc IS NULL OR c.rn <= l.conc - COALESCE(b.n, 0))
              AND (l.rate IS NULL OR c.fresh = 0 OR c.fresh_rn <= l.rate - COALESCE(s.n, 0))
            ORDER BY c.rn + COALESCE(b.n, 0), c.priority DESC, r.last NULLS FIRST, c.ready_at, c.created_at, c.id
            LIMIT %s
        )"""
    params: list[Any] = [v for lim in limits for v in (lim.workflow, lim.concurrency, lim.rate, lim.since)]
    params += [v for g in groups for v in (g.workflow, g.key)]
    params += [now, *workflows, now, now, limit]
    if not is_postgres():
        with connection.cursor() as cursor:
            cursor.execute(f"{chosen} SELECT id, status FROM chosen", params)
            rows = cursor.fetchall()
        return _lease_sqlite(rows, owner=owner, token=token, now=now, lease_until=lease_until)
    # The group locks keep other claimers away from these rows; SKIP LOCKED only steps over a
    # row an operator holds, and the re-checked WHERE drops one whose state moved meanwhile.
    lease = _LEASE_SET.replace("i.", "u.").replace("%(owner)s", "%s").replace("%(token)s", "%s")
    lease = lease.replace("%(until)s", "%s").replace("%(now)s", "%s")
    sql = f"""{chosen},
        locked AS (
            SELECT i.id, i.status FROM engine_instance i
            WHERE i.id IN (SELECT id FROM chosen) AND {_CLAIMABLE}
            FOR UPDATE SKIP LOCKED
        )
        UPDATE engine_instance AS u SET {lease}
        FROM locked WHERE u.id = locked.id
        RETURNING u.id, locked.status, u.workflow, u.tenant
    """
    params += [now, now, owner, token, lease_until, now, now]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return [Claimed(*row) for row in cursor.fetchall()]


def rate_window_starts(*, workflow: str, key: str, since: datetime) -> list[datetime]:
    """Start times of a group's instances after `since` (the ledger is the rate counter)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT started_at FROM engine_instance WHERE workflow = %s AND concurrency_key = %s "
            "AND started_at > %s ORDER BY started_at",
            [workflow, key, since],
        )
        return [_aware(row[0]) for row in cursor.fetchall()]


def rate_defer(*, workflow: str, key: str, until: datetime, now: datetime) -> int:
    """Move a group's never-started, unleased instances due before `until` to `until`."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            UPDATE engine_instance SET ready_at = %s, updated_at = %s
            WHERE workflow = %s AND concurrency_key = %s AND started_at IS NULL
              AND ready_at < %s AND status NOT IN {_FINISHED_OR_PAUSED}
              AND (lease_expires_at IS NULL OR lease_expires_at < %s)
            """,
            [until, now, workflow, key, until, now],
        )
        return int(cursor.rowcount)


def _aware(value: Any) -> datetime:
    if isinstance(value, str):  # SQLite without a declared type on the column: text
        from django.utils.dateparse import parse_datetime

        value = parse_datetime(value)
    if value.tzinfo is None:
        from datetime import UTC

        value = value.replace(tzinfo=UTC)
    return value  # type: ignore[no-any-return]


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
    with connection.cursor() as cursor:
        if is_postgres():
            cursor.execute(
                """
                SELECT control FROM engine_instance
                WHERE id = %s AND lease_token = %s AND lease_expires_at > %s
                FOR SHARE
                """,
                [instance_id, token, now],
            )
        else:
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


def heartbeat(*, owner: str, tokens: dict[str, str], lease_until: datetime) -> dict[str, str]:
    """Extend the leases this worker holds; return {instance id: control} for those still held."""
    if not tokens:
        return {}
    ids = sorted(tokens)
    marks = ", ".join(["%s"] * len(ids))
    # On PostgreSQL the rows are locked in id order first, as a group commit locks them
    # (_GROUP_TEMPLATE), so the two never wait on each other in a cycle.
    locked = (f"SELECT id FROM engine_instance WHERE id IN ({marks}) ORDER BY id FOR UPDATE"
              if is_postgres() else marks)
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
    return value if isinstance(value, datetime) else None


def async_commit() -> None:
    """Let this transaction commit without waiting for the WAL flush (PostgreSQL).

    Used only for advisory rows (a step's start marker): losing one in a database crash
    costs nothing, the step's durable completion is written separately.
    """
    if is_postgres():
        with connection.cursor() as cursor:
            cursor.execute("SET LOCAL synchronous_commit TO OFF")


# ---- the step hot path on PostgreSQL: one round trip per step ----------------------------------
#
# A step that finishes quickly costs one statement: the guard, the step row (inserted complete),
# its attempt and its history rows, as data-modifying CTEs in one implicit transaction. A step
# that runs longer gets a start marker first (markers.py), written by another thread; the
# completion then updates that row (ON CONFLICT). The statements are prepared on the server
# (their text never changes; only the parameters do), which spares PostgreSQL parsing and
# planning five CTEs per step. When the lease is lost the guard returns no row and nothing is
# written.

_GUARD = """
    g AS (
        SELECT control, workflow, tenant FROM engine_instance
        WHERE id = %(iid)s AND lease_token = %(token)s AND lease_expires_at > %(now)s
        FOR SHARE
    )"""

_STEP_COLUMNS = """engine_step (instance_id, name, seq, position, kind, status, result, error_name,
                error_message, error_traceback, config, attempts, sensitive, has_rollback, started_at,
                ended_at, wake_at, event_type, child_id)"""

_RELEASE = "lease_owner = '', lease_token = '', lease_expires_at = NULL"
_HISTORY_COLUMNS = """engine_history (instance_id, workflow, tenant, kind, step_name, status, data,
                                    actor, reason, created_at)"""

# A completion's step row meets its start marker's (or an earlier attempt's): it becomes complete.
_COMPLETE_ON_CONFLICT = """ON CONFLICT (instance_id, name, seq) DO UPDATE SET
            status = 'complete', result = EXCLUDED.result, ended_at = EXCLUDED.ended_at,
            attempts = EXCLUDED.attempts, error_name = '', error_message = '', error_traceback = '',
            wake_at = NULL"""

_MARK_STARTED = f"""
    WITH {_GUARD},
    c AS (SELECT set_config('synchronous_commit', 'off', true) AS v),
    s AS (
        INSERT INTO {_STEP_COLUMNS}
        SELECT %(iid)s, %(name)s, %(seq)s, %(position)s, %(kind)s, 'running', NULL, '', '', '',
            %(config)s::jsonb, %(attempt)s, %(sensitive)s, %(has_rollback)s, %(started)s, NULL, NULL, '', NULL
        FROM g
        ON CONFLICT (instance_id, name, seq) DO NOTHING
        RETURNING id
    ),
    h AS (
        INSERT INTO engine_history (instance_id, workflow, tenant, kind, step_name, status, data,
                                    actor, reason, created_at)
        SELECT %(iid)s, g.workflow, g.tenant, 'step.started', %(label)s, '', %(hdata)s::jsonb, '', '', %(started)s
        FROM g CROSS JOIN s
    )
    SELECT s.id, (SELECT v FROM c) FROM g CROSS JOIN s
"""

_FINISH_TEMPLATE = f"""
    WITH {_GUARD},
    s AS (
        INSERT INTO {_STEP_COLUMNS}
        SELECT %(iid)s, %(name)s, %(seq)s, %(position)s, %(kind)s, 'complete', %(result)s::jsonb, '', '', '',
            %(config)s::jsonb, %(attempt)s, %(sensitive)s, %(has_rollback)s, %(started)s, %(now)s, NULL, '', NULL
        FROM g
        {_COMPLETE_ON_CONFLICT}
        RETURNING id
    ),
    a AS (
        INSERT INTO engine_attempt (step_id, number, started_at, ended_at, ok, error_name,
            error_message, error_traceback, retry_delay_seconds, worker)
        SELECT s.id, %(attempt)s, %(started)s, %(now)s, true, '', '', '', NULL, %(worker)s FROM s
    ),
    h AS (
        INSERT INTO engine_history (instance_id, workflow, tenant, kind, step_name, status, data,
                                    actor, reason, created_at)
        {{history}}
    )
    SELECT g.control, s.id FROM g CROSS JOIN s
"""


_COMPLETED_ROW = """SELECT %(iid)s, g.workflow, g.tenant, 'step.completed', %(label)s, '', %(hdata)s::jsonb,
            '', '', %(now)s FROM g"""
# The completion of a step whose start marker was never written carries its step.started row too.
_FINISH = _FINISH_TEMPLATE.replace("{history}", _COMPLETED_ROW)
_FINISH_WITH_START = _FINISH_TEMPLATE.replace("{history}", f"""
        SELECT %(iid)s, g.workflow, g.tenant, 'step.started', %(label)s, '', %(hstart)s::jsonb, '', '', %(started)s
        FROM g
        UNION ALL {_COMPLETED_ROW}""")


def _prepare_session(raw: Any) -> None:
    if raw.prepare_threshold is None:
        # Django turns preparation off for its connections (None). Its own cursors bind on the
        # client and never prepare whatever this says; only the engine's cursors here do.
        raw.prepare_threshold = 5


def engine_connection() -> Any:
    """A psycopg connection of the engine's own (autocommit, statements prepared), for a thread
    that runs nothing but the engine's hot statements: the group commit and a worker's claims.

    Sequential scans are priced out on it. Every table access of those statements has an index
    (primary keys, the step's unique occurrence, the claim's partial index), but the planner
    picks an index only when it knows the table is large: on a ledger that has grown from empty
    since it was last analyzed (a fresh install; autovacuum analyses it within a minute or so)
    it plans scans of the whole instance table, and a prepared statement keeps that plan for
    the life of the connection. On the benchmark, that was 40% of PostgreSQL's time per step.
    """
    import psycopg
    from psycopg.types.string import TextLoader

    from ingest.engine.pg import connection_string

    raw = psycopg.connect(connection_string(), autocommit=True, prepare_threshold=5)
    for json_type in ("json", "jsonb"):
        raw.adapters.register_loader(json_type, TextLoader)  # JSON arrives as text, as on Django's
    raw.execute("SET enable_seqscan = off")
    return raw


def _prepared(raw: Any, statement: str, params: dict[str, Any]) -> tuple[Any, ...] | None:
    """Run `statement` on a psycopg connection as a server-side prepared statement: parsed and
    analysed once per connection instead of at every step (a quarter of PostgreSQL's time on
    the step path when each statement was sent as text). PostgreSQL's own plan cache decides
    between custom and generic plans (plan_cache_mode auto); forcing generic plans measured no
    faster and would pin plans made while the tables were still empty."""
    import psycopg

    _prepare_session(raw)
    with psycopg.Cursor(raw) as cursor:
        cursor.execute(statement, params, prepare=True)
        return cursor.fetchone()


_cursors = threading.local()


def prepared_row(statement: str, params: dict[str, Any] | Sequence[Any]) -> tuple[Any, ...] | None:
    """`statement` as a prepared statement on this thread's Django connection (in its
    transaction if one is open), its first row back.

    Django's cursors bind on the client and never prepare; here PostgreSQL parses and plans the
    statement once per connection. The cursor is kept per thread and statement: psycopg keeps
    the dumpers it picked for the parameters in the cursor, and a fresh cursor per call looks
    them up again. Errors go through Django's translation, so a broken connection is noticed and
    replaced. The engine's hot statements and the pipelines' (costs, facts) all run here.
    """
    import psycopg

    connection.ensure_connection()
    with connection.wrap_database_errors:
        raw = connection.connection
        _prepare_session(raw)
        held: tuple[Any, dict[str, psycopg.Cursor[Any]]] | None = getattr(_cursors, "held", None)
        if held is None or held[0] is not raw:
            held = _cursors.held = (raw, {})  # a new connection: the old one's cursors go with it
        cursor = held[1].get(statement)
        if cursor is None:
            cursor = held[1][statement] = psycopg.Cursor(raw)
        cursor.execute(statement, params, prepare=True)
        row: tuple[Any, ...] | None = cursor.fetchone()
        return row



@dataclass(frozen=True)
class StepRow:
    """What the hot-path statements need of a step, beside its outcome."""

    iid: str
    name: str
    seq: int
    position: int
    kind: str
    config: str  # JSON
    sensitive: bool
    has_rollback: bool
    label: str

    def params(self) -> dict[str, Any]:
        return {"iid": self.iid, "name": self.name, "seq": self.seq, "position": self.position,
                "kind": self.kind, "config": self.config, "sensitive": self.sensitive,
                "has_rollback": self.has_rollback, "label": self.label}


def step_mark_started(raw: Any, *, row: StepRow, token: str, now: datetime, started: datetime,
                      attempt: int) -> int | None:
    """Write a running step's start marker (its row and its step.started history) on `raw`, a
    psycopg connection in autocommit, without waiting for the WAL flush: a marker lost in a
    database crash costs nothing. Returns the step id, or None when nothing was written (the
    lease is gone, or the step's row exists already)."""
    got = _prepared(raw, _MARK_STARTED, {**row.params(), "token": token, "now": now, "started": started,
                                         "attempt": attempt, "hdata": json.dumps({"attempt": attempt})})
    return None if got is None else int(got[0])


def step_finish(*, row: StepRow, token: str, now: datetime, started: datetime, attempt: int,
                result: str | None, worker: str, with_start: bool) -> tuple[str, int] | None:
    """Store a step's successful attempt durably in one statement: its row (inserted, or updated
    when a start marker exists), the attempt and the history (`with_start`: the step.started
    row too, for a step whose marker was never written). Returns (control, step id), or None
    when the lease is lost."""
    completion = Completion(row=row, token=token, now=now, started=started, attempt=attempt, result=result,
                            worker=worker, with_start=with_start)
    if grouped():
        from ingest.engine.commits import express

        return express.finish(completion)
    connection.ensure_connection()
    with connection.wrap_database_errors:
        return completion.write_alone(connection.connection)


def step_finish_deferred(*, row: StepRow, token: str, now: datetime, started: datetime, attempt: int,
                         result: str | None, worker: str, with_start: bool) -> Any:
    """Queue the same write on the group commit and return its `commits.Pending` at once; None
    when completions are not grouped here (the caller then writes it with `step_finish`)."""
    if not grouped():
        return None
    from ingest.engine.commits import group

    return group.submit(Completion(row=row, token=token, now=now, started=started, attempt=attempt,
                                   result=result, worker=worker, with_start=with_start))


# A group commit's writes in one statement (commits.py): the completions of several instances'
# steps (the same writes as _FINISH / _FINISH_WITH_START) and the completions of instances (as
# _COMPLETE_INSTANCE), each list sent as one JSON array of arrays (one json.dumps in C, where
# sixteen typed arrays cost a Python dumper per element: a third of the worker's time per step).
# Every instance row involved is locked first, in id order, as the heartbeat locks them, so two
# batches and a heartbeat never wait on each other in a cycle. A write whose lease is lost
# matches no instance row and writes nothing; it is missing from the rows returned.
_GROUP_TEMPLATE = f"""
    WITH i AS (
        SELECT e->>0 AS iid, e->>1 AS token, e->>2 AS name, (e->>3)::int AS seq, (e->>4)::int AS position,
            e->>5 AS kind, (e->>6)::int AS attempt, (e->>7)::bool AS sensitive, (e->>8)::bool AS has_rollback,
            (e->>9)::timestamptz AS started, (e->>10)::timestamptz AS now, e->>11 AS label,
            (e->>12)::float8 AS ms, (e->>13)::bool AS with_start, e->>14 AS worker, e->15 AS config,
            CASE WHEN jsonb_typeof(e->16) = 'null' THEN NULL ELSE e->16 END AS result
        FROM jsonb_array_elements(%(steps)s::jsonb) AS e
    ),{{done}}
    g AS (
        SELECT id, control, workflow, tenant, lease_token, lease_expires_at FROM engine_instance
        WHERE id = ANY(ARRAY(SELECT iid FROM i{{done_ids}})) ORDER BY id FOR NO KEY UPDATE
    ),
    v AS (
        SELECT i.*, g.control, g.workflow, g.tenant FROM i
        JOIN g ON g.id = i.iid AND g.lease_token = i.token AND g.lease_expires_at > i.now
    ),
    s AS (
        INSERT INTO {_STEP_COLUMNS}
        SELECT v.iid, v.name, v.seq, v.position, v.kind, 'complete', v.result, '', '', '',
            v.config, v.attempt, v.sensitive, v.has_rollback, v.started, v.now, NULL, '', NULL
        FROM v
        {_COMPLETE_ON_CONFLICT}
        RETURNING id, instance_id, name, seq
    ),
    a AS (
        INSERT INTO engine_attempt (step_id, number, started_at, ended_at, ok, error_name,
            error_message, error_traceback, retry_delay_seconds, worker)
        SELECT s.id, v.attempt, v.started, v.now, true, '', '', '', NULL, v.worker
        FROM s JOIN v ON v.iid = s.instance_id AND v.name = s.name AND v.seq = s.seq
    ),{{update}}
    h AS (
        INSERT INTO {_HISTORY_COLUMNS}
        SELECT v.iid, v.workflow, v.tenant, 'step.started', v.label, '', jsonb_build_object('attempt', v.attempt),
            '', '', v.started
        FROM v WHERE v.with_start
        UNION ALL
        SELECT v.iid, v.workflow, v.tenant, 'step.completed', v.label, '',
            jsonb_build_object('attempt', v.attempt, 'ms', v.ms), '', '', v.now
        FROM v{{done_history}}
    )
    SELECT s.instance_id, s.name, s.seq, v.control, s.id
    FROM s JOIN v ON v.iid = s.instance_id AND v.name = s.name AND v.seq = s.seq{{done_rows}}
"""
_DONE_PARTS = {
    "done": """
    d AS (
        SELECT e->>0 AS iid, e->>1 AS token, (e->>2)::timestamptz AS now,
            CASE WHEN jsonb_typeof(e->3) = 'null' THEN NULL ELSE e->3 END AS output
        FROM jsonb_array_elements(%(done)s::jsonb) AS e
    ),""",
    "done_ids": " UNION ALL SELECT iid FROM d",
    "update": f"""
    u AS (
        UPDATE engine_instance AS e SET status = 'complete', output = d.output, ended_at = d.now,
            updated_at = d.now, ready_at = NULL, {_RELEASE}, control = '', error_name = '', error_message = ''
        FROM d JOIN g ON g.id = d.iid AND g.lease_token = d.token AND g.lease_expires_at > d.now
        WHERE e.id = d.iid
        RETURNING e.id, e.workflow, e.tenant, d.now
    ),""",
    "done_history": """
        UNION ALL
        SELECT u.id, u.workflow, u.tenant, 'instance.status', '', 'complete', '{}'::jsonb, '', '', u.now
        FROM u""",
    "done_rows": """
    UNION ALL
    SELECT u.id, NULL, NULL, NULL, NULL FROM u""",
}
# Steps only (the common batch), and steps with instances' completions.
_GROUP_STEPS = _GROUP_TEMPLATE.format(**{key: "" for key in _DONE_PARTS})
_GROUP_WRITE = _GROUP_TEMPLATE.format(**_DONE_PARTS)


@dataclass(frozen=True)
class Completion:
    """A step's successful attempt, as a group commit stores it (commits.py)."""

    row: StepRow
    token: str
    now: datetime
    started: datetime
    attempt: int
    result: str | None  # JSON
    worker: str
    with_start: bool

    @property
    def iid(self) -> str:
        return self.row.iid

    def element(self) -> str:
        """This completion as one element of _GROUP_WRITE's JSON array of steps."""
        row = self.row
        ms = round((self.now - self.started).total_seconds() * 1000, 3)
        head = json.dumps([row.iid, self.token, row.name, row.seq, row.position, row.kind, self.attempt,
                           row.sensitive, row.has_rollback, self.started.isoformat(), self.now.isoformat(),
                           row.label, ms, self.with_start, self.worker])
        return f"{head[:-1]},{row.config},{'null' if self.result is None else self.result}]"

    def write_alone(self, raw: Any) -> tuple[str, int] | None:
        """This completion by itself, with the one-step statement (a lock on one row cannot
        take part in a deadlock, and the statement is cheaper than a group's for one row)."""
        ms = round((self.now - self.started).total_seconds() * 1000, 3)
        params = {**self.row.params(), "token": self.token, "now": self.now, "started": self.started,
                  "attempt": self.attempt, "result": self.result, "worker": self.worker,
                  "hdata": json.dumps({"attempt": self.attempt, "ms": ms})}
        if self.with_start:
            params["hstart"] = json.dumps({"attempt": self.attempt})
        got = _prepared(raw, _FINISH_WITH_START if self.with_start else _FINISH, params)
        return None if got is None else (str(got[0]), int(got[1]))


@dataclass(frozen=True)
class InstanceDone:
    """An instance's completion with its output, as a group commit stores it (commits.py)."""

    iid: str
    token: str
    now: datetime
    output: str | None  # JSON

    def element(self) -> str:
        head = json.dumps([self.iid, self.token, self.now.isoformat()])
        return f"{head[:-1]},{'null' if self.output is None else self.output}]"

    def write_alone(self, raw: Any) -> bool:
        return _prepared(raw, _COMPLETE_INSTANCE, {"iid": self.iid, "token": self.token, "now": self.now,
                                                   "output": self.output}) is not None


def group_write(raw: Any, steps: Sequence[Completion], done: Sequence[InstanceDone]
                ) -> tuple[dict[tuple[str, str, int], tuple[str, int]], set[str]]:
    """Store steps' successful attempts and instances' completions in one statement on `raw`, a
    psycopg connection. Returns ({(instance id, name, seq): (control, step id)} of the steps
    written, {ids of the instances completed}); a write whose lease is lost is absent."""
    import psycopg

    params = {"steps": "[" + ",".join(c.element() for c in steps) + "]"}
    if done:
        params["done"] = "[" + ",".join(d.element() for d in done) + "]"
    _prepare_session(raw)
    with psycopg.Cursor(raw) as cursor:
        cursor.execute(_GROUP_WRITE if done else _GROUP_STEPS, params, prepare=True)
        rows = cursor.fetchall()
    written = {(r[0], r[1], r[2]): (str(r[3]), int(r[4])) for r in rows if r[1] is not None}
    return written, {r[0] for r in rows if r[1] is None}


def grouped() -> bool:
    """Whether a completion may go through the process's group commit: on, and this thread has
    no transaction open (a step called inside the workflow's own atomic block commits with it)."""
    global _group_commit
    if _group_commit is None:
        from django.conf import settings

        _group_commit = bool(settings.RUNLEDGER_GROUP_COMMIT)
    return _group_commit and not connection.in_atomic_block


_group_commit: bool | None = None  # RUNLEDGER_GROUP_COMMIT, read once (asked at every step)


def _setting_changed(*, setting: str, **_: Any) -> None:
    global _group_commit
    if setting == "RUNLEDGER_GROUP_COMMIT":
        _group_commit = None


def _listen_for_setting_changes() -> None:
    from django.core.signals import setting_changed

    setting_changed.connect(_setting_changed, dispatch_uid="runledger-sql-settings")


_listen_for_setting_changes()


_HELD = "id = %(iid)s AND lease_token = %(token)s AND lease_expires_at > %(now)s"

_COMPLETED = f"""
    u AS (
        UPDATE engine_instance SET status = 'complete', output = %(output)s::jsonb, ended_at = %(now)s,
            updated_at = %(now)s, ready_at = NULL, {_RELEASE}, control = '', error_name = '', error_message = ''
        WHERE {_HELD}
        RETURNING workflow, tenant
    )"""
_COMPLETED_HISTORY = """SELECT %(iid)s, u.workflow, u.tenant, 'instance.status', '', 'complete', '{}'::jsonb, '', '',
            %(now)s FROM u"""

_COMPLETE_INSTANCE = f"""
    WITH {_COMPLETED},
    h AS (INSERT INTO {_HISTORY_COLUMNS} {_COMPLETED_HISTORY})
    SELECT 1 FROM u
"""

# The same, for a run whose last step was a sleep found due in this turn: the sleep's row
# completes in the same statement.
_WAKE_AND_COMPLETE_INSTANCE = f"""
    WITH {_COMPLETED},
    s AS (
        UPDATE engine_step SET status = 'complete', result = NULL, ended_at = %(woke_at)s
        WHERE id = %(sid)s AND EXISTS (SELECT 1 FROM u)
    ),
    h AS (
        INSERT INTO {_HISTORY_COLUMNS}
        SELECT %(iid)s, u.workflow, u.tenant, 'step.completed', %(label)s, '', '{{}}'::jsonb, '', '', %(woke_at)s
        FROM u
        UNION ALL {_COMPLETED_HISTORY}
    )
    SELECT 1 FROM u
"""


def instance_complete(*, iid: str, token: str, now: datetime, output: str | None,
                      woke: tuple[int, str, datetime] | None = None) -> bool:
    """End an instance as complete with its output, releasing the lease, and write its history:
    one statement, whose UPDATE is the lease guard. `woke`: (step id, label, when) of a sleep
    found due in this turn, completed in the same statement. False when the lease is lost."""
    params: dict[str, Any] = {"iid": iid, "token": token, "now": now, "output": output}
    if woke is None and grouped():
        from ingest.engine.commits import group

        return group.complete(InstanceDone(iid=iid, token=token, now=now, output=output))
    if woke is None:
        return prepared_row(_COMPLETE_INSTANCE, params) is not None
    params.update(sid=woke[0], label=woke[1], woke_at=woke[2])
    return prepared_row(_WAKE_AND_COMPLETE_INSTANCE, params) is not None


_SLEEP_SUSPEND = f"""
    WITH u AS (
        UPDATE engine_instance SET status = 'waiting', ready_at = %(ready)s, updated_at = %(now)s, {_RELEASE}
        WHERE {_HELD} AND control = ''
        RETURNING workflow, tenant
    ),
    s AS (
        INSERT INTO {_STEP_COLUMNS}
        SELECT %(iid)s, %(name)s, %(seq)s, %(position)s, 'sleep', 'sleeping', NULL, '', '', '', '{{}}'::jsonb,
            0, false, false, %(started)s, NULL, %(wake)s, '', NULL
        FROM u
    ),
    h AS (
        INSERT INTO {_HISTORY_COLUMNS}
        SELECT %(iid)s, u.workflow, u.tenant, 'step.sleep', %(label)s, '', %(sdata)s::jsonb, '', '', %(started)s
        FROM u
        UNION ALL
        SELECT %(iid)s, u.workflow, u.tenant, 'instance.status', '', 'waiting', %(idata)s::jsonb, '', '', %(now)s
        FROM u
    )
    SELECT 1 FROM u
"""


def sleep_suspend(*, iid: str, token: str, now: datetime, ready_at: datetime | None, name: str, seq: int,
                  position: int, started: datetime, wake_at: datetime | None, label: str) -> bool:
    """A plain sleep's step row, the instance's suspension until `ready_at` and their history, in
    one statement. False when it wrote nothing: the lease is gone or a control flag is set."""
    return prepared_row(_SLEEP_SUSPEND, {
        "iid": iid, "token": token, "now": now, "ready": ready_at, "name": name, "seq": seq,
        "position": position, "started": started, "wake": wake_at, "label": label,
        "sdata": json.dumps({"until": wake_at.isoformat() if wake_at else None, "event_type": ""}),
        "idata": json.dumps({"until": ready_at.isoformat() if ready_at else None}),
    }) is not None


def instance_row(iid: str, columns: Sequence[str]) -> tuple[Any, ...] | None:
    """An instance's row (the given columns, in order), as a prepared statement."""
    return prepared_row(_instance_select(tuple(columns)), {"iid": iid})


@functools.cache
def _instance_select(columns: tuple[str, ...]) -> str:
    return f"SELECT {', '.join(columns)} FROM engine_instance WHERE id = %(iid)s"


_STEP_ROWS = """
    SELECT id, name, seq, position, kind, status, result, error_name, error_message, attempts, wake_at,
        event_type, child_id, started_at
    FROM engine_step WHERE instance_id = %(iid)s ORDER BY position
"""


def step_rows(iid: str) -> list[tuple[Any, ...]]:
    """An instance's steps in the order the run asked for them (prepared; results as JSON text)."""
    import psycopg

    connection.ensure_connection()
    with connection.wrap_database_errors:
        raw = connection.connection
        _prepare_session(raw)
        with psycopg.Cursor(raw) as cursor:
            cursor.execute(_STEP_ROWS, {"iid": iid}, prepare=True)
            return cursor.fetchall()
