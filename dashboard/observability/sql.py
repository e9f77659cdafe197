"""The scrape's reads of the ledger's current state as one statement (PostgreSQL).

A scrape used to send a dozen small queries, one per gauge. Each is cheap (an index over
unfinished state), but on a busy host every round trip also waits for the database backend and
then this process to be scheduled again, which cost more than the queries themselves. Here they
are scalar subqueries of one SELECT, each as it was (same predicates, same indexes), returned as
JSON arrays: one round trip, one snapshot. `gauges.py` keeps the ORM version for SQLite and
turns either answer into the same `Ledger`; `tests/observability/test_gauges_sql.py` checks the
two agree.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import connection

from ingest.engine.models import PARKED_KINDS, UNFINISHED_STATUSES, Status

# What a claim takes (ingest/engine/sql/claim.py: not finished, not paused) once it is due and
# no live lease holds it: the runnable backlog.
CLAIMABLE_STATUSES = tuple(s for s in UNFINISHED_STATUSES if s != Status.PAUSED)


def _in(values: Sequence[str]) -> str:
    # Literals, not parameters: the partial indexes' conditions are proved from them at planning
    # time. They are the engine's own constants (statuses, history kinds), never user input.
    return "(" + ", ".join("'" + v.replace("'", "''") + "'" for v in values) + ")"


# The unfinished instances are read once, index-only (instance_unfinished: status and workflow,
# with ready_at, lease_owner, lease_expires_at and id), into a few hundred groups at most
# (workflow x status x live lease holder): the status counts, the backlog, its oldest item and
# the slots in use all come from them, not from three scans of scattered heap pages.
_GAUGES = f"""
WITH unfinished AS MATERIALIZED (
    SELECT workflow, status,
           CASE WHEN lease_owner <> '' AND lease_expires_at > %(now)s THEN lease_owner ELSE '' END AS holder,
           count(*) AS n,
           count(*) FILTER (WHERE {{runnable}}) AS due,
           min(ready_at) FILTER (WHERE {{runnable}}) AS oldest
    FROM engine_instance WHERE status IN {_in(UNFINISHED_STATUSES)}
    GROUP BY 1, 2, 3
), waiting AS (
    -- The sampling step, from the counts just made (not a second pass over the waiting rows).
    SELECT CASE WHEN w > %(parked_exact)s THEN ceil(w / %(parked_exact)s::numeric)::int ELSE 1 END AS k
    FROM (SELECT coalesce(sum(n), 0) AS w FROM unfinished WHERE status = 'waiting') t
)
SELECT
  (SELECT coalesce(json_agg(json_build_array(workflow, status, n)), '[]')
     FROM (SELECT workflow, status, sum(n)::bigint AS n FROM unfinished GROUP BY 1, 2) a),
  (SELECT coalesce(json_agg(json_build_array(workflow, n)), '[]')
     FROM (SELECT workflow, sum(due)::bigint AS n FROM unfinished WHERE due > 0 GROUP BY 1) b),
  (SELECT min(oldest) FROM unfinished),
  (SELECT k FROM waiting),
  (SELECT coalesce(json_agg(json_build_array(workflow, reason, n)), '[]')
     FROM (SELECT i.workflow,
                  (SELECT h.kind FROM engine_history h
                   WHERE h.instance_id = i.id AND h.kind IN {_in(PARKED_KINDS)} ORDER BY h.id DESC LIMIT 1) AS reason,
                  count(*) AS n
           FROM engine_instance i, waiting w
           WHERE i.status = 'waiting' AND (w.k = 1 OR abs(hashtext(i.id)::bigint) %% w.k = 0)
           GROUP BY 1, 2) p),
  (SELECT coalesce(json_agg(json_build_array(workflow, n)), '[]')
     FROM (SELECT workflow, count(*) AS n FROM engine_deadletter WHERE state = 'open' GROUP BY 1) d),
  (SELECT coalesce(json_agg(json_build_array(holder, n)), '[]')
     FROM (SELECT holder, sum(n)::bigint AS n FROM unfinished WHERE holder <> '' GROUP BY 1) s),
  (SELECT created_at FROM engine_history
     WHERE created_at >= %(claim_since)s AND created_at <= %(now)s AND kind = 'instance.status'
       AND status = 'running'
     ORDER BY created_at DESC LIMIT 1),
  (SELECT coalesce(json_agg(json_build_array(scope, key, period, "limit"::text, spent::text, period_start)), '[]')
     FROM engine_budget WHERE enabled AND scope <> 'instance'),
  (SELECT coalesce(json_agg(name), '[]') FROM triggers_route),
  (SELECT coalesce(json_agg(json_build_array(route, status, n)), '[]') FROM observability_ingresstally)
""".replace(
    "{runnable}",
    f"""status IN {_in(CLAIMABLE_STATUSES)} AND ready_at <= %(now)s
                                      AND (lease_expires_at IS NULL OR lease_expires_at <= %(now)s)""",
)


@dataclass(frozen=True)
class GaugeRows:
    """What the statement returned, as rows (JSON arrays decoded)."""

    active: list[tuple[str, str, int]]
    backlog: list[tuple[str, int]]
    oldest_ready_at: datetime | None
    parked_step: int  # every k-th waiting instance was probed for its reason (1: all of them)
    parked: list[tuple[str, str | None, int]]
    dead_letters: list[tuple[str, int]]
    slots: list[tuple[str, int]]
    last_claim_at: datetime | None
    budgets: list[tuple[str, str, str, str, str, str]]  # limit, spent as text; period_start ISO
    routes: list[str]
    ingress: list[tuple[str, int, int]]


def _rows(value: Any) -> list[Any]:
    data = json.loads(value) if isinstance(value, str | bytes) else value
    return [tuple(r) if isinstance(r, list) else r for r in data]


def gauges_read(*, now: datetime, claim_since: datetime, parked_exact: int) -> GaugeRows:
    """Every gauge's rows in one statement."""
    with connection.cursor() as cursor:
        cursor.execute(_GAUGES, {"now": now, "claim_since": claim_since, "parked_exact": parked_exact})
        row = cursor.fetchone()
    assert row is not None
    return GaugeRows(
        active=_rows(row[0]),
        backlog=_rows(row[1]),
        oldest_ready_at=row[2],
        parked_step=int(row[3]),
        parked=_rows(row[4]),
        dead_letters=_rows(row[5]),
        slots=_rows(row[6]),
        last_claim_at=row[7],
        budgets=_rows(row[8]),
        routes=_rows(row[9]),
        ingress=_rows(row[10]),
    )
