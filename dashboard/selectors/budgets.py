"""Budgets: which a user sees, their forecasts, burn-down rows, reservations, breaches."""

from __future__ import annotations

import calendar
from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any, TypedDict

from django.db.models import (
    Count,
    F,
    Q,
    QuerySet,
    Sum,
)
from django.db.models.functions import TruncHour
from django.http import Http404

from dashboard.rollups import reads
from dashboard.selectors.common import MICRO, ZERO
from ingest.engine.models import (
    ApiCost,
    ApprovalKind,
    ApprovalRequest,
    ApprovalState,
    Budget,
    BudgetPeriod,
    BudgetReservation,
    BudgetScope,
    History,
    HistoryKind,
    Instance,
    ReservationState,
)

# ---- budgets ----------------------------------------------------------------------------


def budgets_visible(*, tenants: Collection[str], see_global: bool) -> QuerySet[Budget]:
    """Tenant budgets of the user's tenants and instance budgets of their instances.

    Workflow and service budgets span every tenant (their `spent` sums everyone's spend), so
    only users who may see global figures (admins) get them.
    """
    own = Q(scope=BudgetScope.TENANT, key__in=tenants) | Q(
        scope=BudgetScope.INSTANCE,
        key__in=Instance.objects.filter(tenant__in=tenants).values("id"),
    )
    if see_global:
        own |= Q(scope__in=[BudgetScope.WORKFLOW, BudgetScope.SERVICE])
    return Budget.objects.filter(own).order_by("scope", "key", "period")


def budget_get(*, tenants: Collection[str], see_global: bool, budget_id: int) -> Budget:
    budget = budgets_visible(tenants=tenants, see_global=see_global).filter(id=budget_id).first()
    if budget is None:
        raise Http404("no such budget")
    return budget


def period_end(period: str, start: datetime) -> datetime:
    if period == BudgetPeriod.HOUR:
        return start + timedelta(hours=1)
    if period == BudgetPeriod.DAY:
        return start + timedelta(days=1)
    days = calendar.monthrange(start.year, start.month)[1]
    return start + timedelta(days=days)


@dataclass(frozen=True)
class Forecast:
    """Where a budget is heading at its current spend rate (linear over the period so far)."""

    rate_per_hour: Decimal
    remaining: Decimal
    used_pct: float
    runs_out_at: datetime | None  # None: not at this rate before the period resets
    projected: Decimal  # spend at the period's end at this rate
    state: str  # "ok" | "at-risk" | "exhausted"

    @property
    def bar_pct(self) -> float:
        return max(0.0, min(self.used_pct, 100.0))


def budget_forecast(
    *, spent: Decimal, limit: Decimal, period_start: datetime, period_end: datetime, now: datetime
) -> Forecast:
    """Linear forecast: the rate is spent ÷ time elapsed in the period; pure, `now` passed in."""
    remaining = limit - spent
    used_pct = float(spent / limit * 100) if limit > 0 else 100.0
    elapsed_h = Decimal(max((now - period_start).total_seconds(), 1.0)) / Decimal(3600)
    left_h = Decimal(max((period_end - now).total_seconds(), 0.0)) / Decimal(3600)
    rate = (spent / elapsed_h).quantize(MICRO) if spent > 0 else ZERO
    projected = (spent * (elapsed_h + left_h) / elapsed_h).quantize(MICRO) if spent > 0 else ZERO
    if remaining <= 0:
        return Forecast(rate, remaining, used_pct, now, projected, "exhausted")
    if rate <= 0:
        return Forecast(rate, remaining, used_pct, None, projected, "ok")
    runs_out = now + timedelta(hours=float(remaining / rate))
    if runs_out >= period_end:
        return Forecast(rate, remaining, used_pct, None, projected, "ok")
    return Forecast(rate, remaining, used_pct, runs_out, projected, "at-risk")


class SpendBucket(TypedDict):
    """Spend in one (local) hour of a budget's period."""

    bucket: datetime
    total: Decimal


class ReservationRow(TypedDict):
    """A reservation still held against a budget, with that budget's scope, key and period."""

    id: int
    instance_id: str
    step_name: str
    attempt: int
    service: str
    amount: Decimal
    created_at: datetime
    scope: str
    key: str
    period: str


class BudgetEvent(TypedDict):
    """A History row of kind "budget"; `breach` tells a refused or held spend from a limit change."""

    id: int
    instance_id: str
    workflow: str
    tenant: str
    step_name: str
    status: str
    data: Any
    actor: str
    created_at: datetime
    breach: bool


@dataclass(frozen=True)
class BudgetRow:
    id: int
    scope: str
    key: str
    period: str
    limit: Decimal
    spent: Decimal
    reserved: Decimal
    policy: str
    enabled: bool
    period_start: datetime
    period_end: datetime
    forecast: Forecast
    # Runs held by this budget: pending budget approvals (the spend each step asked for is not
    # spent, so the meter alone would read "0 %, lasts the period" while the budget blocks).
    waiting: int = 0
    waiting_asked: Decimal = ZERO


def budget_rows(*, budgets: Collection[Budget], now: datetime) -> list[BudgetRow]:
    budgets = list(budgets)
    held = (
        {
            row["budget_id"]: (row["n"], row["asked"] or ZERO)
            for row in ApprovalRequest.objects.filter(
                kind=ApprovalKind.BUDGET, state=ApprovalState.PENDING, budget_id__in=[b.id for b in budgets]
            )
            .values("budget_id")
            .annotate(n=Count("id"), asked=Sum("requested_amount"))
        }
        if budgets
        else {}
    )
    rows = []
    for b in budgets:
        end = period_end(b.period, b.period_start)
        fc = budget_forecast(spent=b.spent, limit=b.limit, period_start=b.period_start, period_end=end, now=now)
        waiting, asked = held.get(b.id, (0, ZERO))
        rows.append(
            BudgetRow(
                b.id,
                b.scope,
                b.key,
                b.period,
                b.limit,
                b.spent,
                b.reserved,
                b.policy,
                b.enabled,
                b.period_start,
                end,
                fc,
                waiting,
                asked,
            )
        )
    return rows


_SCOPE_FILTER = {
    BudgetScope.TENANT: "tenant",
    BudgetScope.WORKFLOW: "workflow_type",
    BudgetScope.SERVICE: "service",
    BudgetScope.INSTANCE: "instance_id",
}


def budget_burn_rows(
    *, budget: BudgetRow, tenants: Collection[str], see_global: bool, view: reads.RollupView | None = None
) -> list[SpendBucket]:
    """Spend per hour inside the budget's current period: [{"bucket", "total"}], local hours."""
    column = _SCOPE_FILTER[BudgetScope(budget.scope)]
    if column == "instance_id":  # one instance's rows: few, and indexed (the rollups have no instance)
        qs = ApiCost.objects.filter(created_at__gte=budget.period_start, instance_id=budget.key)
        if not see_global:
            qs = qs.filter(tenant__in=tenants)
        return list(
            qs.annotate(bucket=TruncHour("created_at")).values("bucket").annotate(total=Sum("cost")).order_by("bucket")
        )
    scope = reads.CostScope(
        tenants=None if see_global else tenants, since=budget.period_start, equals=((column, budget.key),)
    )
    got = reads.cost_grouped(scope, by=(reads.BUCKET,), measures=("total",), bucket="hour", view=view)
    return [{"bucket": bucket, "total": m["total"]} for (bucket,), m in sorted(got.items())]


def reservations_held(*, budget_ids: Collection[int], limit: int = 50) -> list[ReservationRow]:
    return list(
        BudgetReservation.objects.filter(budget_id__in=budget_ids, state=ReservationState.HELD)
        .order_by("-created_at")
        .values(
            "id",
            "instance_id",
            "step_name",
            "attempt",
            "service",
            "amount",
            "created_at",
            scope=F("budget__scope"),
            key=F("budget__key"),
            period=F("budget__period"),
        )[:limit]
    )


def budget_events(*, tenants: Collection[str], limit: int = 30) -> list[BudgetEvent]:
    """Recent History rows of kind "budget": breaches (a spend refused or sent for approval) and
    limit changes (`data.action`), newest first, each marked with `breach`."""
    rows = (
        History.objects.filter(tenant__in=tenants, kind=HistoryKind.BUDGET)
        .order_by("-id")
        .values("id", "instance_id", "workflow", "tenant", "step_name", "status", "data", "actor", "created_at")[:limit]
    )
    return [{**r, "breach": "action" not in (r["data"] or {})} for r in rows]
