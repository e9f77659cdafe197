"""A budget breach, as seen from inside a step: the history row that records it, then the budget's
policy: fail the step, or ask an operator (one approval request per budget) and wait for the answer."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal

from django.db import IntegrityError, transaction

from ingest.engine.costs.spend import StepSpend
from ingest.engine.errors import BudgetExceeded
from ingest.engine.models import (
    ApprovalKind,
    ApprovalRequest,
    ApprovalState,
    BreachPolicy,
    Budget,
    History,
    HistoryKind,
)
from ingest.engine.writes import notify


def budget_breach(*, ctx: StepSpend, service: str, amount: Decimal, budget: Budget, now: datetime) -> str:
    """Record that a spend of `amount` would pass `budget` and apply its policy: BudgetExceeded when
    it fails (or an operator already denied this step), else the facts of the operator's question,
    asked once per budget, which the step waits on (the caller raises AwaitApproval with them)."""
    facts = (
        f"budget {budget.scope}:{budget.key} ({budget.period}) has {budget.limit} with "
        f"{budget.spent} spent and {budget.reserved} held; step {ctx.step_label!r} of instance "
        f"{ctx.instance_id} asked for {amount} on {service}"
    )
    denied = ApprovalRequest.objects.filter(
        instance_id=ctx.instance_id,
        kind=ApprovalKind.BUDGET,
        budget=budget,
        step_name=ctx.step_label,
        state__in=[ApprovalState.REJECTED, ApprovalState.EXPIRED],
    ).exists()
    notify.history()
    History.objects.create(
        instance_id=ctx.instance_id,
        workflow=ctx.workflow,
        tenant=ctx.tenant,
        kind=HistoryKind.BUDGET,
        step_name=ctx.step_label,
        data={
            "budget": budget.id,
            "service": service,
            "amount": str(amount),
            "limit": str(budget.limit),
            "spent": str(budget.spent),
            "reserved": str(budget.reserved),
            "policy": budget.policy,
            "denied": denied,
        },
        created_at=now,
    )
    if budget.policy == BreachPolicy.FAIL or denied:
        raise BudgetExceeded(
            facts + ("; an operator denied raising it" if denied else "; raise the limit or wait for the next period")
        )
    pending = ApprovalRequest.objects.filter(
        instance_id=ctx.instance_id, kind=ApprovalKind.BUDGET, budget=budget, state=ApprovalState.PENDING
    ).exists()
    if not pending:
        _ask(ctx=ctx, service=service, amount=amount, budget=budget, facts=facts, now=now)
    return facts


def _ask(*, ctx: StepSpend, service: str, amount: Decimal, budget: Budget, facts: str, now: datetime) -> None:
    """The operator's question; a parallel step of the instance that asked first already did."""
    try:
        with transaction.atomic():
            ApprovalRequest.objects.create(
                instance_id=ctx.instance_id,
                tenant=ctx.tenant,
                workflow=ctx.workflow,
                kind=ApprovalKind.BUDGET,
                step_name=ctx.step_label,
                title=f"Budget {budget.scope}:{budget.key} would be exceeded",
                description=facts,
                budget=budget,
                requested_amount=amount,
                fields=[
                    {
                        "name": "amount",
                        "label": "Raise the limit once by",
                        "type": "number",
                        "required": True,
                        "default": str(amount),
                    }
                ],
                context={"service": service, "limit": str(budget.limit), "spent": str(budget.spent)},
                created_at=now,
            )
    except IntegrityError:
        pass  # approval_one_pending_per_budget: one request answers every step waiting on it
