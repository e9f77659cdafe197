"""Costs and budgets, as seen from inside a step: reserve before spending, record after.

A reservation holds money against every budget that covers a spend (tenant, workflow, service,
instance) under a row lock, so concurrent steps cannot overspend a budget together: the check
and the hold happen in one transaction. Recording the real cost settles the reservation.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from datetime import datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import F, Q
from django.utils.module_loading import import_string

from ingest.engine import clock, notify, sql
from ingest.engine.errors import BudgetExceeded
from ingest.engine.models import (
    ApiCost,
    ApprovalKind,
    ApprovalRequest,
    ApprovalState,
    BreachPolicy,
    Budget,
    BudgetGrant,
    BudgetReservation,
    History,
    HistoryKind,
    ReservationState,
)
from ingest.engine.periods import period_start

if TYPE_CHECKING:
    from ingest.engine.context import StepContext

log = logging.getLogger("runledger.engine")
ZERO = Decimal("0")


class AwaitApproval(BaseException):
    """Raised inside a step when a budget breach waits for an operator's decision."""


def _covering(ctx: StepContext, service: str) -> Q:
    return (
        Q(scope="tenant", key=ctx.tenant)
        | Q(scope="workflow", key=ctx.workflow)
        | Q(scope="service", key=service)
        | Q(scope="instance", key=ctx.instance_id)
    )


def _roll(budget: Budget, now: datetime) -> None:
    """Start a new period when the current one is over (spent resets, held money stays held)."""
    start = period_start(budget.period, now)
    if budget.period_start < start:
        budget.period_start = start
        budget.spent = ZERO
        budget.save(update_fields=["period_start", "spent"])


def _lock(budgets: Q) -> list[Budget]:
    """Lock the budgets in id order, the one order every writer of budgets uses, so two
    steps charging the same budgets cannot deadlock."""
    return list(Budget.objects.select_for_update().filter(budgets).order_by("id"))


def _add(changes: dict[int, tuple[Decimal, Decimal]], now: datetime) -> None:
    """Add (to spent, to reserved) per locked budget: one UPDATE per distinct pair, which is
    one for all the budgets of a spend (they hold the same amount)."""
    groups: dict[tuple[Decimal, Decimal], list[int]] = {}
    for budget_id, change in changes.items():
        groups.setdefault(change, []).append(budget_id)
    for (spent, reserved), ids in groups.items():
        Budget.objects.filter(id__in=ids).update(
            spent=F("spent") + spent, reserved=F("reserved") + reserved, updated_at=now)


def budget_reserve(*, ctx: StepContext, service: str, amount: Decimal) -> list[int]:
    """Hold `amount` on every covering budget; on a breach apply the budget's policy."""
    if connection.vendor == "postgresql":
        return _reserve_postgres(ctx=ctx, service=service, amount=amount)
    covering = _covering(ctx, service) & Q(enabled=True)
    # Most spends have no budget, and one plain read says so, where the locking transaction
    # costs three round trips. A budget created after this read is charged when the cost is
    # recorded (`_settle`), exactly as if it had been created a moment after the reservation.
    if not Budget.objects.filter(covering).exists():
        return []
    now = clock.now()
    breached: Budget | None = None
    ids: list[int] = []
    with transaction.atomic():
        grants = _open_grants(ctx)  # before the lock: only an operator adds them, between attempts
        budgets = _lock(covering)
        for budget in budgets:
            _roll(budget, now)
        over = [b for b in budgets if b.spent + b.reserved + amount > b.limit + _amount(grants.get(b.id))]
        if over:
            breached = over[0]
        elif budgets:
            for budget in budgets:
                _use_grant(budget, grants.get(budget.id))
            _add({b.id: (ZERO, amount) for b in budgets}, now)
            held = BudgetReservation.objects.bulk_create([
                BudgetReservation(budget=budget, instance_id=ctx.instance_id, step_name=ctx.step_label,
                                  attempt=ctx.attempt, service=service, amount=amount, created_at=now)
                for budget in budgets
            ])
            ids = [r.id for r in held]
    if breached is not None:
        # Outside the locking transaction: the breach's history and request must commit even
        # though the step is about to unwind.
        _breach(ctx=ctx, service=service, amount=amount, budget=breached, now=now)
    return ids


def _open_grants(ctx: StepContext) -> dict[int, BudgetGrant]:
    """The instance's unused grant per budget (the first one granted), in one query."""
    grants: dict[int, BudgetGrant] = {}
    for grant in BudgetGrant.objects.filter(instance_id=ctx.instance_id, used=False).order_by("id"):
        grants.setdefault(grant.budget_id, grant)
    return grants


def _amount(grant: BudgetGrant | None) -> Decimal:
    return grant.amount if grant else ZERO


def _use_grant(budget: Budget, grant: BudgetGrant | None) -> None:
    """A grant raises the limit once: the spend it allowed becomes part of the limit. It was
    read before the lock, so it is claimed here with a guarded update: used once at most."""
    if grant is None or budget.spent + budget.reserved <= budget.limit - grant.amount:
        return
    if BudgetGrant.objects.filter(id=grant.id, used=False).update(used=True):
        budget.limit += grant.amount
        Budget.objects.filter(id=budget.id).update(limit=budget.limit)


def _breach(*, ctx: StepContext, service: str, amount: Decimal, budget: Budget, now: datetime) -> None:
    facts = (
        f"budget {budget.scope}:{budget.key} ({budget.period}) has {budget.limit} with "
        f"{budget.spent} spent and {budget.reserved} held; step {ctx.step_label!r} of instance "
        f"{ctx.instance_id} asked for {amount} on {service}"
    )
    denied = ApprovalRequest.objects.filter(
        instance_id=ctx.instance_id, kind=ApprovalKind.BUDGET, budget=budget, step_name=ctx.step_label,
        state__in=[ApprovalState.REJECTED, ApprovalState.EXPIRED],
    ).exists()
    notify.history()
    History.objects.create(
        instance_id=ctx.instance_id, workflow=ctx.workflow, tenant=ctx.tenant, kind=HistoryKind.BUDGET,
        step_name=ctx.step_label, data={"budget": budget.id, "service": service, "amount": str(amount),
                                        "limit": str(budget.limit), "spent": str(budget.spent),
                                        "reserved": str(budget.reserved), "policy": budget.policy,
                                        "denied": denied}, created_at=now,
    )
    if budget.policy == BreachPolicy.FAIL or denied:
        raise BudgetExceeded(facts + ("; an operator denied raising it" if denied else "; raise the limit or wait for the next period"))
    pending = ApprovalRequest.objects.filter(
        instance_id=ctx.instance_id, kind=ApprovalKind.BUDGET, budget=budget, state=ApprovalState.PENDING
    ).exists()
    if not pending:
        ApprovalRequest.objects.create(
            instance_id=ctx.instance_id, tenant=ctx.tenant, workflow=ctx.workflow, kind=ApprovalKind.BUDGET,
            step_name=ctx.step_label, title=f"Budget {budget.scope}:{budget.key} would be exceeded",
            description=facts, budget=budget, requested_amount=amount,
            fields=[{"name": "amount", "label": "Raise the limit once by", "type": "number",
                     "required": True, "default": str(amount)}],
            context={"service": service, "limit": str(budget.limit), "spent": str(budget.spent)},
            created_at=now,
        )
    raise AwaitApproval(facts)


def reservations_release(*, ids: Iterable[int]) -> None:
    """Give back what an attempt held but did not record (it failed before spending)."""
    ids = list(ids)
    now = clock.now()
    with transaction.atomic():
        held = list(BudgetReservation.objects.select_for_update().filter(id__in=ids, state=ReservationState.HELD))
        if not held:
            return
        by_budget: dict[int, Decimal] = {}
        for r in held:
            by_budget[r.budget_id] = by_budget.get(r.budget_id, ZERO) + r.amount
        _lock(Q(id__in=by_budget))
        _add({budget_id: (ZERO, -amount) for budget_id, amount in by_budget.items()}, now)
        BudgetReservation.objects.filter(id__in=[r.id for r in held]).update(
            state=ReservationState.RELEASED, settled_at=now)


def cost_record(*, ctx: StepContext, service: str, cost: Decimal | None, model: str, tokens_in: int,
                tokens_cached: int, tokens_out: int, items: int, metadata: dict[str, Any],
                success: bool) -> Decimal:
    now = clock.now()
    usage = {"tokens_in": tokens_in, "tokens_cached": tokens_cached, "tokens_out": tokens_out, "items": items}
    if cost is None:
        cost = price(service=service, model=model, usage=usage, at=now)
    if connection.vendor == "postgresql":
        _record_postgres(ctx=ctx, service=service, cost=cost, model=model, usage=usage, metadata=metadata,
                         success=success, now=now)
        return cost
    with transaction.atomic():
        row = ApiCost.objects.create(
            service=service, cost=cost, instance_id=ctx.instance_id, workflow_type=ctx.workflow,
            step_name=ctx.step_label, attempt=ctx.attempt, success=success, model=model,
            tokens_in=tokens_in, tokens_cached=tokens_cached, tokens_out=tokens_out, items=items,
            metadata=metadata, tenant=ctx.tenant, created_at=now,
        )
        notify.history()
        History.objects.create(
            instance_id=ctx.instance_id, workflow=ctx.workflow, tenant=ctx.tenant,
            kind=HistoryKind.COST_RECORDED, step_name=ctx.step_label,
            data=_history_data(ctx=ctx, service=service, cost=cost, model=model, success=success) | {"cost_id": row.id},
            created_at=now,
        )
        # Last, so the budget rows (shared by every step of a tenant) stay locked only for
        # their update and the commit.
        _settle(ctx=ctx, service=service, cost=cost, now=now)
    return cost


def _history_data(*, ctx: StepContext, service: str, cost: Decimal, model: str, success: bool) -> dict[str, Any]:
    return {"service": service, "cost": str(cost), "model": model, "attempt": ctx.attempt, "success": success}


def _settle(*, ctx: StepContext, service: str, cost: Decimal, now: datetime) -> None:
    """Charge `cost` to every covering budget and settle this attempt's reservations for the
    service: each gives back its hold, also on a budget disabled since (its hold must not leak)."""
    held: dict[int, BudgetReservation] = {}
    if ctx._reservations:
        for r in BudgetReservation.objects.select_for_update().filter(
                id__in=ctx._reservations, service=service, state=ReservationState.HELD).order_by("id"):
            held[r.budget_id] = r  # one per budget, as reserved
        BudgetReservation.objects.filter(id__in=[r.id for r in held.values()]).update(
            state=ReservationState.SETTLED, actual=cost, settled_at=now)
    changes: dict[int, tuple[Decimal, Decimal]] = {}
    for budget in _lock((_covering(ctx, service) & Q(enabled=True)) | Q(id__in=list(held))):
        charged = _covers(budget, ctx, service)
        if charged:
            _roll(budget, now)
        release = held[budget.id].amount if budget.id in held else ZERO
        changes[budget.id] = (cost if charged else ZERO, -release)
    _add(changes, now)
    for r in held.values():
        ctx._reservations.remove(r.id)


def _covers(budget: Budget, ctx: StepContext, service: str) -> bool:
    """`_covering` for one budget row in memory (enabled ones only)."""
    key = {"tenant": ctx.tenant, "workflow": ctx.workflow, "service": service, "instance": ctx.instance_id}
    return budget.enabled and key.get(budget.scope) == budget.key


def price(*, service: str, model: str, usage: dict[str, int], at: datetime) -> Decimal:
    """Price usage with the project's pricer (settings.RUNLEDGER_PRICER), or 0 without one."""
    path = getattr(settings, "RUNLEDGER_PRICER", "")
    if not path:
        return ZERO
    pricer = import_string(path)
    return Decimal(pricer(service, model, usage, at)).quantize(Decimal("0.000001"))


# ---- PostgreSQL: one prepared statement each -----------------------------------------------
#
# Recording a cost took five round trips through the ORM (BEGIN, the api_costs row, its
# history row, the budgets' lock, COMMIT) and reserving one (no budget) to seven (BEGIN, the
# grants, the lock, the update, the reservations, COMMIT), each statement built anew by the
# ORM: a fifth of the workers' CPU in bench/pipelines.py without budgets, a third with them.
# On PostgreSQL each is one prepared statement; SQLite keeps the ORM code above, which does
# the same writes.

_COVERING_SQL = """(scope = 'tenant' AND key = %(tenant)s OR scope = 'workflow' AND key = %(workflow)s
        OR scope = 'service' AND key = %(service)s OR scope = 'instance' AND key = %(iid)s)"""

# `budget_reserve` in one statement, committed on its own outside a transaction. As the ORM
# code: the instance's unused grants (the first per budget) read before the lock; the covering
# budgets locked in id order, each rolled into its current period; if the amount fits every one
# (with its grant), each holds it, a grant the hold needs raises its budget's limit once
# (claimed with a guarded update) and a reservation row per budget is returned; if not, only
# the rolls are written and the first budget breached (by id) is returned for `_breach`. No
# covering budget: nothing is locked or written, and no reservation comes back.
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
        o.policy
    FROM fits LEFT JOIN LATERAL (
        SELECT * FROM v WHERE NOT fits.ok AND v.spent + v.reserved + %(amount)s > v."limit" + v.grant_amount
        ORDER BY v.id LIMIT 1
    ) o ON true
"""


# The writes of `cost_record` + `_settle` in one statement, committed on its own outside a
# transaction. As `_settle`: this attempt's held reservations for the service (locked in id
# order; the last per budget is settled, as the ORM code keeps it), then every budget that
# covers the spend or held one of them, locked in id order (the order every writer of budgets
# uses, so no two writers deadlock) before any is updated; a covering one is charged, rolled
# into its current period first, a held one gives its hold back. Under READ COMMITTED the
# UPDATE re-reads a row that changed since the statement's snapshot (it is locked by then), so
# `spent + cost` adds to the latest value, as the ORM's F() expressions do.
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
    )
    SELECT ARRAY(SELECT id FROM settled)
"""


def _reserve_postgres(*, ctx: StepContext, service: str, amount: Decimal) -> list[int]:
    from psycopg.types.numeric import Int4

    now = clock.now()
    row = sql.prepared_row(_RESERVE, {
        "tenant": ctx.tenant, "workflow": ctx.workflow, "service": service, "iid": ctx.instance_id,
        "label": ctx.step_label, "attempt": Int4(ctx.attempt), "amount": amount, "now": now,
        "hour": period_start("hour", now), "day": period_start("day", now), "month": period_start("month", now),
    })
    assert row is not None  # one row: FROM a one-row CTE
    held, breached = list(row[0]), row[1]
    if breached is not None:
        # Outside the reserving statement: the breach's history and request must commit even
        # though the step is about to unwind.
        budget = Budget(id=breached, scope=row[2], key=row[3], period=row[4], limit=row[5], spent=row[6],
                        reserved=row[7], policy=row[8])
        _breach(ctx=ctx, service=service, amount=amount, budget=budget, now=now)
    return held


def _record_postgres(*, ctx: StepContext, service: str, cost: Decimal, model: str, usage: dict[str, int],
                     metadata: dict[str, Any], success: bool, now: datetime) -> None:
    from psycopg.types.numeric import Int4

    row = sql.prepared_row(_RECORD, {
        "service": service, "cost": cost, "iid": ctx.instance_id, "workflow": ctx.workflow,
        "label": ctx.step_label, "success": success, "model": model, "metadata": json.dumps(metadata),
        "tenant": ctx.tenant, "now": now,
        # Typed: psycopg sends a plain int as int2, int4 or int8 by its size, and each mix of
        # types would be prepared as a statement of its own.
        "attempt": Int4(ctx.attempt), **{key: Int4(value) for key, value in usage.items()},
        "hdata": json.dumps(_history_data(ctx=ctx, service=service, cost=cost, model=model, success=success)),
        # An array literal: adapting a Python list costs psycopg more than the other parameters.
        "held": "{" + ",".join(str(r) for r in ctx._reservations) + "}",
        "hour": period_start("hour", now), "day": period_start("day", now), "month": period_start("month", now),
    })
    notify.history()  # committed already, or at the commit of the transaction it joined
    assert row is not None  # a SELECT without FROM returns one row
    for settled in row[0]:
        ctx._reservations.remove(settled)


# ---- approval requests ---------------------------------------------------------------


def approval_request_create(*, instance_id: str, tenant: str, workflow: str, step_name: str, title: str,
                            description: str, fields: list[dict[str, Any]], context: dict[str, Any],
                            due_at: datetime, escalation: str, idempotency_key: str) -> dict[str, Any]:
    now = clock.now()
    with transaction.atomic():
        existing = ApprovalRequest.objects.filter(instance_id=instance_id, step_name=step_name,
                                                  kind=ApprovalKind.HUMAN,
                                                  context__idempotency_key=idempotency_key).first()
        if existing is None:
            existing = ApprovalRequest.objects.create(
                instance_id=instance_id, tenant=tenant, workflow=workflow, kind=ApprovalKind.HUMAN,
                step_name=step_name, title=title, description=description, fields=fields,
                context={**context, "idempotency_key": idempotency_key}, due_at=due_at,
                escalation=escalation, created_at=now,
            )
            existing.event_type = f"approval:{existing.id}"
            existing.save(update_fields=["event_type"])
            notify.history()
            History.objects.create(instance_id=instance_id, workflow=workflow, tenant=tenant,
                                   kind=HistoryKind.APPROVAL, step_name=step_name,
                                   data={"approval": existing.id, "state": "pending", "title": title},
                                   created_at=now)
    return {"id": existing.id, "event_type": existing.event_type}


def approval_expire(*, approval_id: int) -> dict[str, Any]:
    ApprovalRequest.objects.filter(id=approval_id, state=ApprovalState.PENDING).update(
        state=ApprovalState.EXPIRED, answered_at=clock.now())
    return {"id": approval_id, "state": "expired"}
