"""The claim of flow-limited workflows: per (workflow, key) group locks, ranked candidates within
their free slots and start rate, and the rate window's starts and deferrals."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import connection

from ingest.engine.sql.base import FINISHED_OR_PAUSED, LEASE_SET, ByVendor, aware
from ingest.engine.sql.claim import INSTANCE_COLUMNS, Claimed, lease_sqlite


@dataclass(frozen=True)
class FlowLimit:
    """One workflow's limits as the claim sees them (built by flow.claim_limits)."""

    workflow: str
    concurrency: int | None  # max instances holding a live lease, per key value
    rate: int | None  # max starts per window, per key value
    since: datetime | None  # the start of the rate window: now - period
    # Caps of single key values in place of `concurrency` (the workflow's concurrency_overrides);
    # a row of engine_concurrencylimit wins over both.
    overrides: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True)
class FlowGroup:
    """A (workflow, concurrency key) partition whose claim lock this transaction holds."""

    workflow: str
    key: str


@dataclass(frozen=True)
class _Candidates:
    """What a claim reads its candidates by: the join to the locked groups, their workflows (as
    placeholders and as values), the rated ones among them (`rated_in` tests membership) and the
    per-group cap on candidates of workflows without a rate."""

    in_group: str
    names: str
    workflows: Sequence[str]
    rated: Sequence[str]
    rated_in: str
    limit: int
    now: datetime


_CLAIMABLE = f"""i.ready_at <= %s AND (i.lease_expires_at IS NULL OR i.lease_expires_at < %s)
    AND i.status NOT IN {FINISHED_OR_PAUSED}"""

# A lease counts as a running slot while it is live; an expired lease (a dead worker) frees
# the slot at the moment its instance becomes claimable again. `lease_owner <> ''` lets the
# planner use the partial index instance_lease.
_LIVE_LEASE = "i.lease_owner <> '' AND i.lease_expires_at >= %s"
# A leased instance's row as the claim hands it to its turn (worker/database.py reads it).
_LEASED_ROW = ", ".join(f"u.{column}" for column in INSTANCE_COLUMNS)

# A group's latest first start: one backward step of instance_flow_starts per group.
_LAST_START = """(SELECT MAX(x.started_at) FROM engine_instance x
                   WHERE x.workflow = {w} AND x.concurrency_key = {k} AND x.started_at IS NOT NULL)"""


def _key_caps(limits: Sequence[FlowLimit]) -> tuple[str, list[Any]]:
    """The CTE `keycap(workflow, ckey, conc)`: each capped key value's own cap — the operators'
    rows (engine_concurrencylimit), then the workflows' declared overrides those rows leave out —
    with its parameters. A group's cap is COALESCE(keycap.conc, lim.conc): its own, else the
    workflow's, else none."""
    names = [lim.workflow for lim in limits]
    marks = ", ".join(["%s"] * len(names))
    table = f"SELECT c.workflow, c.key, c.max_concurrent FROM engine_concurrencylimit c WHERE c.workflow IN ({marks})"
    declared = [(lim.workflow, key, cap) for lim in limits for key, cap in lim.overrides]
    if not declared:
        return f"keycap(workflow, ckey, conc) AS ({table})", names
    rows = ", ".join(["(%s, %s, CAST(%s AS integer))"] * len(declared))
    sql = f"""ovr(workflow, ckey, conc) AS (VALUES {rows}),
        keycap(workflow, ckey, conc) AS (
            {table}
            UNION ALL
            SELECT o.workflow, o.ckey, o.conc FROM ovr o WHERE NOT EXISTS (
                SELECT 1 FROM engine_concurrencylimit c WHERE c.workflow = o.workflow AND c.key = o.ckey)
        )"""
    return sql, [v for row in declared for v in row] + names


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
    keycap, keycap_params = _key_caps(limits)
    groups = f"""
        WITH lim(workflow, conc) AS (VALUES {lim_rows}),
        {keycap},
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
        LEFT JOIN keycap k ON k.workflow = r.workflow AND k.ckey = r.ckey
        LEFT JOIN busy b ON b.workflow = r.workflow AND b.ckey = r.ckey
        WHERE COALESCE(k.conc, l.conc) IS NULL OR COALESCE(b.n, 0) < COALESCE(k.conc, l.conc)
        ORDER BY COALESCE(b.n, 0), r.top DESC, {_LAST_START.format(w="r.workflow", k="r.ckey")} NULLS FIRST,
                 r.oldest, r.workflow, r.ckey
        LIMIT %s
    """
    params: list[Any] = [v for lim in limits for v in (lim.workflow, lim.concurrency)]
    params += [*keycap_params, *names, now, now, *names, now]
    sql = _flow().groups_locked(groups, params, max_groups=max_groups)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return [FlowGroup(workflow=row[0], key=row[1]) for row in cursor.fetchall()]


def claim_limited(
    *,
    groups: Sequence[FlowGroup],
    limits: Sequence[FlowLimit],
    owner: str,
    token: str,
    limit: int,
    now: datetime,
    lease_until: datetime,
) -> list[Claimed]:
    """Lease up to `limit` runnable instances of locked groups, within their free slots. On
    PostgreSQL each comes with its row as leased and whether it has steps, as claim_and_record's
    do, so its turn reads neither again.

    Call after claim_groups in the same transaction. Each group's candidates are ranked
    (priority, then ready_at, then age); a candidate is eligible while its rank fits the
    group's free slots (limit minus live leases) and, if it has never started, its rank among
    fresh candidates fits the start rate left in the window. Eligible candidates are taken by
    rank plus the group's running count first — every group's next slot before any group's
    slot after that — then priority, then the least recently started group: the round robin
    that keeps one key's backlog from starving the others, even one claim at a time.
    """
    dialect = _flow()
    lim_rows = ", ".join([f"(%s, CAST(%s AS integer), CAST(%s AS integer), {dialect.ts})"] * len(limits))
    grp_rows = ", ".join(["(%s, %s)"] * len(groups))
    in_group = "g.workflow = i.workflow AND g.ckey = i.concurrency_key"
    # The literal workflow list (the VALUES rows are opaque to the planner) lets it read the
    # candidates from instance_flow_ready instead of the whole runnable backlog.
    workflows = sorted({g.workflow for g in groups})
    names = ", ".join(["%s"] * len(workflows))
    # A candidate ranked past `limit` in its group is never taken unless a start rate is in play:
    # the group's `limit` better-ranked candidates are eligible whenever it is (the concurrency
    # test is monotone in the rank) and come first in the order. Dropping them right after the
    # ranking spares the joins below a row per queued instance: a fair workflow's backlog of
    # thousands cost each claim ~100 ms. A rate makes eligibility depend on `fresh`, so rated
    # workflows keep every candidate.
    rated = sorted({lim.workflow for lim in limits if lim.rate is not None})
    rated_in = f"IN ({', '.join(['%s'] * len(rated))})" if rated else ""
    prune = "c.rn <= %s" + (f" OR c.workflow {rated_in}" if rated else "")
    cand_from, cand_params = dialect.candidates(
        _Candidates(
            in_group=in_group, names=names, workflows=workflows, rated=rated, rated_in=rated_in, limit=limit, now=now
        )
    )
    keycap, keycap_params = _key_caps(limits)
    chosen = f"""
        WITH lim(workflow, conc, rate, since) AS (VALUES {lim_rows}),
        {keycap},
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
            {cand_from}
            WINDOW w AS (PARTITION BY i.workflow, i.concurrency_key
                         ORDER BY i.priority DESC, i.ready_at, i.created_at, i.id)
        ),
        chosen AS (
            SELECT c.id, c.status FROM cand c
            JOIN lim l ON l.workflow = c.workflow
            LEFT JOIN keycap k ON k.workflow = c.workflow AND k.ckey = c.ckey
            LEFT JOIN busy b ON b.workflow = c.workflow AND b.ckey = c.ckey
            LEFT JOIN starts s ON s.workflow = c.workflow AND s.ckey = c.ckey
            JOIN recent r ON r.workflow = c.workflow AND r.ckey = c.ckey
            WHERE ({prune})
              AND (COALESCE(k.conc, l.conc) IS NULL OR c.rn <= COALESCE(k.conc, l.conc) - COALESCE(b.n, 0))
              AND (l.rate IS NULL OR c.fresh = 0 OR c.fresh_rn <= l.rate - COALESCE(s.n, 0))
            ORDER BY c.rn + COALESCE(b.n, 0), c.priority DESC, r.last NULLS FIRST, c.ready_at, c.created_at, c.id
            LIMIT %s
        )"""
    params: list[Any] = [v for lim in limits for v in (lim.workflow, lim.concurrency, lim.rate, lim.since)]
    params += keycap_params
    params += [v for g in groups for v in (g.workflow, g.key)]
    params += [now, *cand_params, limit, *rated, limit]
    return dialect.lease_chosen(chosen, params, owner=owner, token=token, now=now, lease_until=lease_until)


class _SqliteFlow:
    """SQLite: one worker process, whose write transaction holds the database from BEGIN, so no
    group needs a lock of its own and the chosen rows are leased by a second statement."""

    ts = "%s"

    def groups_locked(self, groups: str, params: list[Any], *, max_groups: int) -> str:
        params.append(max_groups)
        return groups

    def candidates(self, c: _Candidates) -> tuple[str, list[Any]]:
        return (
            f"FROM engine_instance i JOIN grp g ON {c.in_group} WHERE i.workflow IN ({c.names}) AND {_CLAIMABLE}",
            [*c.workflows, c.now, c.now],
        )

    def lease_chosen(
        self, chosen: str, params: list[Any], *, owner: str, token: str, now: datetime, lease_until: datetime
    ) -> list[Claimed]:
        with connection.cursor() as cursor:
            cursor.execute(f"{chosen} SELECT id, status FROM chosen", params)
            rows = cursor.fetchall()
        return lease_sqlite(rows, owner=owner, token=token, now=now, lease_until=lease_until)


class _PostgresFlow(_SqliteFlow):
    ts = "CAST(%s AS timestamptz)"

    def groups_locked(self, groups: str, params: list[Any], *, max_groups: int) -> str:
        # The inner LIMIT keeps the subquery from being flattened, so the lock function runs
        # only on the groups the outer LIMIT pulls, in order, and stops once it holds enough.
        params += [max(4 * max_groups, 32), max_groups]
        return f"""
            SELECT g.workflow, g.ckey FROM ({groups}) AS g
            WHERE pg_try_advisory_xact_lock(hashtext('runledger.flow'), hashtext(g.workflow || '|' || g.ckey))
            LIMIT %s
        """

    def candidates(self, c: _Candidates) -> tuple[str, list[Any]]:
        # The same pruning as claim_limited's, before the ranking: each group's first `limit`
        # candidates in index order (instance_flow_ready), so no claim sorts a backlog of thousands.
        top = f"CASE WHEN g.workflow {c.rated_in} THEN NULL ELSE CAST(%s AS bigint) END" if c.rated else "%s"
        return (
            f"""FROM grp g CROSS JOIN LATERAL (
                SELECT i.id, i.status, i.workflow, i.concurrency_key, i.priority, i.ready_at, i.created_at,
                       i.started_at
                FROM engine_instance i
                WHERE i.workflow = g.workflow AND i.concurrency_key = g.ckey AND {_CLAIMABLE}
                ORDER BY i.priority DESC, i.ready_at, i.created_at, i.id
                LIMIT {top}
            ) i""",
            [c.now, c.now, *c.rated, c.limit],
        )

    def lease_chosen(
        self, chosen: str, params: list[Any], *, owner: str, token: str, now: datetime, lease_until: datetime
    ) -> list[Claimed]:
        # The group locks keep other claimers away from these rows; SKIP LOCKED only steps over a
        # row an operator holds, and the re-checked WHERE drops one whose state moved meanwhile.
        lease = LEASE_SET.replace("i.", "u.").replace("%(owner)s", "%s").replace("%(token)s", "%s")
        lease = lease.replace("%(until)s", "%s").replace("%(now)s", "%s")
        sql = f"""{chosen},
            locked AS (
                SELECT i.id, i.status FROM engine_instance i
                WHERE i.id IN (SELECT id FROM chosen) AND {_CLAIMABLE}
                FOR UPDATE SKIP LOCKED
            )
            UPDATE engine_instance AS u SET {lease}
            FROM locked WHERE u.id = locked.id
            RETURNING u.id, locked.status, u.workflow, u.tenant,
                EXISTS (SELECT 1 FROM engine_step s WHERE s.instance_id = u.id), {_LEASED_ROW}
        """
        params += [now, now, owner, token, lease_until, now, now]
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
            rows = cursor.fetchall()
        return [Claimed(row[0], row[1], row[2], row[3], has_steps=row[4], row=row[5:]) for row in rows]


_flow = ByVendor[_SqliteFlow](postgresql=_PostgresFlow(), sqlite=_SqliteFlow())


def rate_window_starts(*, workflow: str, key: str, since: datetime) -> list[datetime]:
    """Start times of a group's instances after `since` (the ledger is the rate counter)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT started_at FROM engine_instance WHERE workflow = %s AND concurrency_key = %s "
            "AND started_at > %s ORDER BY started_at",
            [workflow, key, since],
        )
        return [aware(row[0]) for row in cursor.fetchall()]


def rate_defer(*, workflow: str, key: str, until: datetime, now: datetime) -> int:
    """Move a group's never-started, unleased instances due before `until` to `until`."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            UPDATE engine_instance SET ready_at = %s, updated_at = %s
            WHERE workflow = %s AND concurrency_key = %s AND started_at IS NULL
              AND ready_at < %s AND status NOT IN {FINISHED_OR_PAUSED}
              AND (lease_expires_at IS NULL OR lease_expires_at < %s)
            """,
            [until, now, workflow, key, until, now],
        )
        return int(cursor.rowcount)
