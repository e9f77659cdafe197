"""Budgets and costs on PostgreSQL: a reservation and a cost's record, one prepared statement each.

Recording a cost took five round trips through the ORM (BEGIN, the api_costs row, its
history row, the budgets' lock, COMMIT) and reserving one (no budget) to seven (BEGIN, the
grants, the lock, the update, the reservations, COMMIT), each statement built anew by the
ORM, a large share of the workers' CPU (bench/pipelines.py; docs/pipelines.md).
On PostgreSQL each is one prepared statement; SQLite runs the ORM code of costs/budgets.py and costs/record.py, which
does the same writes.
"""

from __future__ import annotations

from typing import Any

from ingest.engine.models import HistoryKind
from ingest.engine.sql import journal
from ingest.engine.sql.base import prepared_row

_COVERING_SQL = """(scope = 'tenant' AND key = %(tenant)s OR scope = 'workflow' AND key = %(workflow)s
        OR scope = 'service' AND key = %(service)s OR scope = 'instance' AND key = %(iid)s)"""

# `budget_reserve` in one statement, committed on its own outside a transaction. As the ORM
# code: the instance's unused grants (the first per budget) read before the lock; the covering
# budgets locked in id order, each rolled into its current period; if the amount fits every one
# (with its grant), each holds it, a grant the hold needs raises its budget's limit once
# (claimed with a guarded update) and a reservation row per budget is returned; if not, only
# the rolls are written and one breached budget is returned: the first (by id) that the spend is
# over even without other steps' holds (`over`: spent, this attempt's own holds `own` and the
# amount pass its limit; the policy applies), else the first one refused only for holds (the
# step waits; costs.budgets.refusal). No covering budget: nothing is locked or written, and no
# reservation comes back.
_RESERVE = f"""
    WITH g AS (
        SELECT DISTINCT ON (budget_id) id, budget_id, amount FROM engine_budgetgrant
        WHERE instance_id = %(iid)s AND NOT used ORDER BY budget_id, id
    ),
    b AS MATERIALIZED (
        SELECT id, scope, key, period, policy, "limit", reserved, spent, period_start,
            CASE period WHEN 'hour' THEN %(hour)s::timestamptz WHEN 'day' THEN %(day)s::timestamptz
                        WHEN 'month' THEN %(month)s::timestamptz END AS current_start
        FROM engine_budget WHERE enabled AND {_COVERING_SQL}
        ORDER BY id FOR UPDATE
    ),
    v AS MATERIALIZED (
        SELECT b.id, b.scope, b.key, b.period, b.policy, b."limit", b.reserved,
            b.period_start < b.current_start AS rolled,
            CASE WHEN b.period_start < b.current_start THEN b.current_start ELSE b.period_start END AS period_start,
            CASE WHEN b.period_start < b.current_start THEN 0 ELSE b.spent END AS spent,
            g.id AS grant_id, coalesce(g.amount, 0) AS grant_amount
        FROM b LEFT JOIN g ON g.budget_id = b.id
    ),
    fits AS (SELECT NOT coalesce(bool_or(spent + reserved + %(amount)s > "limit" + grant_amount), false) AS ok FROM v),
    used AS (
        UPDATE engine_budgetgrant x SET used = true
        FROM v, fits
        WHERE fits.ok AND x.id = v.grant_id AND NOT x.used AND v.spent + v.reserved > v."limit" - v.grant_amount
        RETURNING x.budget_id, x.amount
    ),
    changed AS (
        UPDATE engine_budget x SET
            period_start = v.period_start, spent = v.spent,
            "limit" = x."limit" + coalesce((SELECT u.amount FROM used u WHERE u.budget_id = x.id), 0),
            reserved = x.reserved + CASE WHEN fits.ok THEN %(amount)s ELSE 0 END,
            updated_at = CASE WHEN fits.ok THEN %(now)s ELSE x.updated_at END
        FROM v, fits
        WHERE x.id = v.id AND (fits.ok OR v.rolled)
    ),
    held AS (
        INSERT INTO engine_budgetreservation (budget_id, instance_id, step_name, attempt, service, amount, actual,
            state, created_at, settled_at)
        SELECT v.id, %(iid)s, %(label)s, %(attempt)s, %(service)s, %(amount)s, NULL, 'held', %(now)s, NULL
        FROM v, fits WHERE fits.ok
        RETURNING id
    )
    SELECT ARRAY(SELECT id FROM held ORDER BY id), o.id, o.scope, o.key, o.period, o."limit", o.spent, o.reserved,
        o.policy, o.over
    FROM fits LEFT JOIN LATERAL (
        SELECT w.* FROM (
            SELECT v.*, v.spent + %(amount)s + coalesce((
                SELECT sum(r.amount) FROM engine_budgetreservation r
                WHERE r.id = ANY(%(own)s::bigint[]) AND r.budget_id = v.id AND r.state = 'held'
            ), 0) > v."limit" + v.grant_amount AS over
            FROM v WHERE NOT fits.ok AND v.spent + v.reserved + %(amount)s > v."limit" + v.grant_amount
        ) w ORDER BY w.over DESC, w.id LIMIT 1
    ) o ON true
"""


# The writes of `cost_record` + `_settle` in one statement, committed on its own outside a
# transaction. As `_settle`: this attempt's held reservations for the service (locked in id
# order; the last per budget is settled, as the ORM code keeps it), then every budget that
# covers the spend or held one of them, locked in id order (the order every writer of budgets
# uses, so no two writers deadlock) before any is updated; a covering one is charged, rolled
# into its current period first, a held one gives its hold back. Under READ COMMITTED the
# UPDATE re-reads a row that changed since the statement's snapshot (it is locked by then), so
# `spent + cost` adds to the latest value, as the ORM's F() expressions do. After a paid call the
# booking's call-journal entry (`j_*`, NULL otherwise) is written by the same statement.
_RECORD = f"""
    WITH c AS (
        INSERT INTO api_costs (service, cost, instance_id, workflow_type, step_name, attempt, success, model,
            tokens_in, tokens_cached, tokens_out, items, metadata, tenant, created_at)
        VALUES (%(service)s, %(cost)s, %(iid)s, %(workflow)s, %(label)s, %(attempt)s, %(success)s, %(model)s,
            %(tokens_in)s, %(tokens_cached)s, %(tokens_out)s, %(items)s, %(metadata)s::jsonb, %(tenant)s, %(now)s)
        RETURNING id
    ),
    h AS (
        INSERT INTO engine_history (instance_id, workflow, tenant, kind, step_name, status, data, actor, reason,
            created_at)
        SELECT %(iid)s, %(workflow)s, %(tenant)s, '{HistoryKind.COST_RECORDED.value}', %(label)s, '',
            %(hdata)s::jsonb || jsonb_build_object('cost_id', c.id), '', '', %(now)s FROM c
    ),
    r AS MATERIALIZED (
        SELECT id, budget_id, amount FROM engine_budgetreservation
        WHERE id = ANY(%(held)s::bigint[]) AND service = %(service)s AND state = 'held'
        ORDER BY id FOR UPDATE
    ),
    held AS (SELECT DISTINCT ON (budget_id) id, budget_id, amount FROM r ORDER BY budget_id, id DESC),
    settled AS (
        UPDATE engine_budgetreservation x SET state = 'settled', actual = %(cost)s, settled_at = %(now)s
        FROM held WHERE x.id = held.id
        RETURNING x.id
    ),
    b AS MATERIALIZED (
        SELECT id, enabled AND {_COVERING_SQL} AS charged,
            CASE period WHEN 'hour' THEN %(hour)s::timestamptz WHEN 'day' THEN %(day)s::timestamptz
                        WHEN 'month' THEN %(month)s::timestamptz END AS current_start
        FROM engine_budget
        WHERE enabled AND {_COVERING_SQL} OR id IN (SELECT budget_id FROM held)
        ORDER BY id FOR UPDATE
    ),
    charged AS (
        UPDATE engine_budget x SET
            spent = CASE WHEN NOT b.charged THEN x.spent
                         WHEN x.period_start < b.current_start THEN %(cost)s
                         ELSE x.spent + %(cost)s END,
            period_start = CASE WHEN b.charged AND x.period_start < b.current_start THEN b.current_start
                                ELSE x.period_start END,
            reserved = x.reserved - coalesce(held.amount, 0),
            updated_at = %(now)s
        FROM b LEFT JOIN held ON held.budget_id = b.id
        WHERE x.id = b.id
    ),
    j AS (
        INSERT INTO {journal.TABLE} ({journal.COLUMNS})
        SELECT {journal.VALUES} WHERE %(j_key)s::varchar IS NOT NULL
        {journal.UPSERT}
    )
    SELECT ARRAY(SELECT id FROM settled)
"""


def budget_reserve_row(params: dict[str, Any]) -> tuple[Any, ...] | None:
    """Run the reservation (`costs.budgets.budget_reserve`'s writes) and return its one row."""
    return prepared_row(_RESERVE, params)


def cost_record_row(params: dict[str, Any]) -> tuple[Any, ...] | None:
    """Run a cost's record and settlement (`costs.record.cost_record`'s writes), with its journal
    entry when `params` holds one (sql/journal.py's `j_*`; `journal.NO_ENTRY` else); its one row."""
    return prepared_row(_RECORD, params)
