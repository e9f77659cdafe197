"""Every raw SQL statement of the engine, one typed function each, so every lock is in one place.

The ORM says the rest. These are here because the ORM cannot say them well: claiming with
`FOR UPDATE SKIP LOCKED`, guarded updates that return the operator's control flag in the same
round trip, and LISTEN/NOTIFY.
"""

from __future__ import annotations

import functools
import json
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
        RETURNING i.id, picked.previous_status, i.workflow, i.tenant
    ),
    h AS (
        INSERT INTO engine_history (instance_id, workflow, tenant, kind, step_name, status, data,
                                    actor, reason, created_at)
        SELECT u.id, u.workflow, u.tenant, 'instance.status', '', 'running', '{{{{}}}}'::jsonb, '', '', %(now)s
        FROM u WHERE u.previous_status IN ('queued', 'waiting')
    )
    SELECT id, previous_status, workflow, tenant FROM u
"""


def claim_and_record(*, owner: str, token: str, limit: int, now: datetime, lease_until: datetime) -> list[Claimed]:
    """The claim when no workflow has flow limits (PostgreSQL): lease up to `limit` runnable
    instances and write the history of those it moves to running, in one prepared statement
    and its own transaction (nothing else needs to commit with it)."""
    params = {"now": now, "limit": limit, "owner": owner, "token": token, "until": lease_until}
    connection.ensure_connection()
    with connection.wrap_database_errors:
        import psycopg

        raw = connection.connection
        _prepare_session(raw)
        with psycopg.Cursor(raw) as cursor:
            cursor.execute(_CLAIM_AND_RECORD_SQL, params, prepare=True)
            return [Claimed(*row) for row in cursor.fetchall()]


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

_CLAIM_AND_RECORD_SQL = _CLAIM_AND_RECORD.format(lease=_LEASE_SET)

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
        ON CONFLICT (instance_id, name, seq) DO UPDATE SET
            status = 'complete', result = EXCLUDED.result, ended_at = EXCLUDED.ended_at,
            attempts = EXCLUDED.attempts, error_name = '', error_message = '', error_traceback = '',
            wake_at = NULL
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


def _on_django_connection(statement: str, params: dict[str, Any]) -> tuple[Any, ...] | None:
    """A prepared statement on this thread's Django connection, in its transaction if one is
    open, with Django's error translation (so a broken connection is noticed and replaced)."""
    connection.ensure_connection()
    with connection.wrap_database_errors:
        return _prepared(connection.connection, statement, params)


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
    ms = round((now - started).total_seconds() * 1000, 3)
    params = {**row.params(), "token": token, "now": now, "started": started, "attempt": attempt,
              "result": result, "worker": worker, "hdata": json.dumps({"attempt": attempt, "ms": ms})}
    if with_start:
        params["hstart"] = json.dumps({"attempt": attempt})
    got = _on_django_connection(_FINISH_WITH_START if with_start else _FINISH, params)
    return None if got is None else (str(got[0]), int(got[1]))


_RELEASE = "lease_owner = '', lease_token = '', lease_expires_at = NULL"
_HELD = "id = %(iid)s AND lease_token = %(token)s AND lease_expires_at > %(now)s"
_HISTORY_COLUMNS = """engine_history (instance_id, workflow, tenant, kind, step_name, status, data,
                                    actor, reason, created_at)"""

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
    if woke is None:
        return _on_django_connection(_COMPLETE_INSTANCE, params) is not None
    params.update(sid=woke[0], label=woke[1], woke_at=woke[2])
    return _on_django_connection(_WAKE_AND_COMPLETE_INSTANCE, params) is not None


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
    return _on_django_connection(_SLEEP_SUSPEND, {
        "iid": iid, "token": token, "now": now, "ready": ready_at, "name": name, "seq": seq,
        "position": position, "started": started, "wake": wake_at, "label": label,
        "sdata": json.dumps({"until": wake_at.isoformat() if wake_at else None, "event_type": ""}),
        "idata": json.dumps({"until": ready_at.isoformat() if ready_at else None}),
    }) is not None


def instance_row(iid: str, columns: Sequence[str]) -> tuple[Any, ...] | None:
    """An instance's row (the given columns, in order), as a prepared statement."""
    return _on_django_connection(_instance_select(tuple(columns)), {"iid": iid})


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
