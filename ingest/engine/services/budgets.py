"""Budgets an operator sets: create or update one (scope, key, period, limit, breach policy)."""

from __future__ import annotations

from decimal import Decimal, InvalidOperation

from django.db import transaction

from ingest.engine import clock
from ingest.engine.errors import (
    InvalidParams,
)
from ingest.engine.models import (
    Budget,
    History,
    HistoryKind,
)
from ingest.engine.periods import period_start
from ingest.engine.writes import notify


def budget_upsert(
    *,
    scope: str,
    key: str,
    period: str,
    limit: Decimal | str | int,
    policy: str = "fail",
    enabled: bool = True,
    actor: str = "",
) -> Budget:
    from ingest.engine.models import BreachPolicy, BudgetPeriod, BudgetScope

    if scope not in BudgetScope.values:
        raise InvalidParams(f"budget scope {scope!r} is not one of {', '.join(BudgetScope.values)}")
    if period not in BudgetPeriod.values:
        raise InvalidParams(f"budget period {period!r} is not one of {', '.join(BudgetPeriod.values)}")
    if policy not in BreachPolicy.values:
        raise InvalidParams(f"budget policy {policy!r} is not one of {', '.join(BreachPolicy.values)}")
    if not key:
        raise InvalidParams("a budget needs the key of its scope (a tenant, workflow, service or instance id)")
    try:
        amount = Decimal(str(limit)).quantize(Decimal("0.000001"))
    except (InvalidOperation, ValueError):
        raise InvalidParams(f"budget limit {limit!r} is not a number") from None
    if amount < 0:
        raise InvalidParams(f"budget limit {amount} must not be negative")
    now = clock.now()
    with transaction.atomic():
        budget, created = Budget.objects.select_for_update().get_or_create(
            scope=scope,
            key=key,
            period=period,
            defaults={
                "limit": amount,
                "policy": policy,
                "enabled": enabled,
                "period_start": period_start(period, now),
                "updated_at": now,
            },
        )
        before = str(budget.limit)
        if not created:
            budget.limit, budget.policy, budget.enabled, budget.updated_at = amount, policy, enabled, now
            budget.save()
        notify.history()
        History.objects.create(
            kind=HistoryKind.BUDGET,
            tenant=key if scope == "tenant" else "",
            workflow=key if scope == "workflow" else "",
            actor=actor,
            data={
                "action": "created" if created else "updated",
                "budget": budget.id,
                "scope": scope,
                "key": key,
                "period": period,
                "limit": str(amount),
                "previous": None if created else before,
                "policy": policy,
            },
            created_at=now,
        )
    return budget
