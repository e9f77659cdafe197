"""Costs and budgets, as seen from inside a step: reserve before spending, record after.

A reservation holds money against every budget that covers a spend (tenant, workflow, service,
instance) under a row lock, so concurrent steps cannot overspend a budget together: the check
and the hold happen in one transaction. Recording the real cost settles the reservation.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from datetime import datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils.module_loading import import_string

from ingest.engine import clock, notify
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


def budget_reserve(*, ctx: StepContext, service: str, amount: Decimal) -> list[int]:
    """Hold `amount` on every covering budget; on a breach apply the budget's policy."""
    now = clock.now()
    breached: Budget | None = None
    ids: list[int] = []
    with transaction.atomic():
        budgets = list(
            Budget.objects.select_for_update().filter(_covering(ctx, service), enabled=True).order_by("id")
        )
        for budget in budgets:
            _roll(budget, now)
        over = [b for b in budgets if b.spent + b.reserved + amount > b.limit + _allowance(b, ctx)]
        if over:
            breached = over[0]
        else:
            for budget in budgets:
                _use_grant(budget, ctx)
                Budget.objects.filter(id=budget.id).update(reserved=budget.reserved + amount, updated_at=now)
                ids.append(BudgetReservation.objects.create(
                    budget=budget, instance_id=ctx.instance_id, step_name=ctx.step_label,
                    attempt=ctx.attempt, service=service, amount=amount, created_at=now,
                ).id)
    if breached is not None:
        # Outside the locking transaction: the breach's history and request must commit even
        # though the step is about to unwind.
        _breach(ctx=ctx, service=service, amount=amount, budget=breached, now=now)
    return ids


def _allowance(budget: Budget, ctx: StepContext) -> Decimal:
    grant = BudgetGrant.objects.filter(budget=budget, instance_id=ctx.instance_id, used=False).first()
    return grant.amount if grant else ZERO


def _use_grant(budget: Budget, ctx: StepContext) -> None:
    """A grant raises the limit once: the spend it allowed becomes part of the limit."""
    grant = BudgetGrant.objects.filter(budget=budget, instance_id=ctx.instance_id, used=False).first()
    if grant is not None and budget.spent + budget.reserved > budget.limit - grant.amount:
        BudgetGrant.objects.filter(id=grant.id).update(used=True)
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
        for r in BudgetReservation.objects.select_for_update().filter(id__in=ids, state=ReservationState.HELD):
            budget = Budget.objects.select_for_update().get(id=r.budget_id)
            Budget.objects.filter(id=budget.id).update(reserved=budget.reserved - r.amount, updated_at=now)
            BudgetReservation.objects.filter(id=r.id).update(state=ReservationState.RELEASED, settled_at=now)


def cost_record(*, ctx: StepContext, service: str, cost: Decimal | None, model: str, tokens_in: int,
                tokens_cached: int, tokens_out: int, items: int, metadata: dict[str, Any],
                success: bool) -> Decimal:
    now = clock.now()
    usage = {"tokens_in": tokens_in, "tokens_cached": tokens_cached, "tokens_out": tokens_out, "items": items}
    if cost is None:
        cost = price(service=service, model=model, usage=usage, at=now)
    with transaction.atomic():
        row = ApiCost.objects.create(
            service=service, cost=cost, instance_id=ctx.instance_id, workflow_type=ctx.workflow,
            step_name=ctx.step_label, attempt=ctx.attempt, success=success, model=model,
            tokens_in=tokens_in, tokens_cached=tokens_cached, tokens_out=tokens_out, items=items,
            metadata=metadata, tenant=ctx.tenant, created_at=now,
        )
        _settle(ctx=ctx, service=service, cost=cost, now=now)
        notify.history()
        History.objects.create(
            instance_id=ctx.instance_id, workflow=ctx.workflow, tenant=ctx.tenant,
            kind=HistoryKind.COST_RECORDED, step_name=ctx.step_label,
            data={"service": service, "cost": str(cost), "model": model, "attempt": ctx.attempt,
                  "success": success, "cost_id": row.id}, created_at=now,
        )
    return cost


def _settle(*, ctx: StepContext, service: str, cost: Decimal, now: datetime) -> None:
    held = {r.budget_id: r for r in BudgetReservation.objects.select_for_update().filter(
        id__in=ctx._reservations, service=service, state=ReservationState.HELD)}
    for budget in Budget.objects.select_for_update().filter(_covering(ctx, service), enabled=True):
        _roll(budget, now)
        reservation = held.get(budget.id)
        reserved = budget.reserved - (reservation.amount if reservation else ZERO)
        Budget.objects.filter(id=budget.id).update(spent=budget.spent + cost, reserved=reserved, updated_at=now)
        if reservation:
            BudgetReservation.objects.filter(id=reservation.id).update(
                state=ReservationState.SETTLED, actual=cost, settled_at=now)
            ctx._reservations.remove(reservation.id)


def price(*, service: str, model: str, usage: dict[str, int], at: datetime) -> Decimal:
    """Price usage with the project's pricer (settings.RUNLEDGER_PRICER), or 0 without one."""
    path = getattr(settings, "RUNLEDGER_PRICER", "")
    if not path:
        return ZERO
    pricer = import_string(path)
    return Decimal(pricer(service, model, usage, at)).quantize(Decimal("0.000001"))


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
