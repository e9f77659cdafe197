"""Reads for the operations pages: overview, workflow DAG, dead letters, costs, budgets, approvals.

Every selector takes the caller's `tenants` and never returns a row outside them. Aggregates run
in the database (GROUP BY over an indexed time window); Python only merges the few grouped rows
(indexed step names into one node, for instance). Money stays `Decimal` end to end.
"""

from __future__ import annotations

import calendar
from collections import defaultdict
from collections.abc import Collection, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from django.db import connection
from django.db.models import (
    Aggregate,
    CharField,
    Count,
    DurationField,
    ExpressionWrapper,
    F,
    Max,
    Min,
    Q,
    QuerySet,
    Sum,
    Value,
)
from django.db.models.functions import Cast, Coalesce, Concat, TruncDay, TruncHour
from django.http import Http404

from dashboard.charts import step_shape
from ingest.engine.models import (
    ApiCost,
    ApprovalRequest,
    ApprovalState,
    Budget,
    BudgetPeriod,
    BudgetReservation,
    BudgetScope,
    DeadLetter,
    DeadLetterState,
    History,
    HistoryKind,
    Instance,
    ReservationState,
    Status,
    Step,
    StepStatus,
)

ZERO = Decimal("0")
MICRO = Decimal("0.000001")  # the ledger stores money with 6 decimals
WINDOWS: dict[str, timedelta] = {
    "1h": timedelta(hours=1),
    "24h": timedelta(hours=24),
    "7d": timedelta(days=7),
    "30d": timedelta(days=30),
}


def window_start(window: str, *, now: datetime) -> datetime:
    return now - WINDOWS.get(window, WINDOWS["24h"])


# ---- overview ----------------------------------------------------------------------------


def instance_status_counts(*, tenants: Collection[str]) -> dict[str, int]:
    rows = (
        Instance.objects.filter(tenant__in=tenants)
        .values("status")
        .annotate(n=Count("id"))
        .order_by()
    )
    counts = {s.value: 0 for s in Status}
    for row in rows:
        counts[row["status"]] = row["n"]
    return counts


def throughput_rows(*, tenants: Collection[str], since: datetime) -> list[dict[str, Any]]:
    """Finished instances per hour: [{"bucket", "complete", "errored"}], oldest first."""
    rows = (
        Instance.objects.filter(
            tenant__in=tenants,
            ended_at__gte=since,
            status__in=[Status.COMPLETE, Status.ERRORED],
        )
        .annotate(bucket=TruncHour("ended_at"))
        .values("bucket")
        .annotate(
            complete=Count("id", filter=Q(status=Status.COMPLETE)),
            errored=Count("id", filter=Q(status=Status.ERRORED)),
        )
        .order_by("bucket")
    )
    return list(rows)


def steps_in_flight(*, tenants: Collection[str], limit: int = 12) -> list[dict[str, Any]]:
    return list(
        Step.objects.filter(instance__tenant__in=tenants, status=StepStatus.RUNNING)
        .order_by("started_at")
        .values(
            "instance_id", "name", "attempts", "started_at",
            workflow=F("instance__workflow"), tenant=F("instance__tenant"),
        )[:limit]
    )


def steps_in_flight_count(*, tenants: Collection[str]) -> int:
    return Step.objects.filter(instance__tenant__in=tenants, status=StepStatus.RUNNING).count()


def dead_letters_open_count(*, tenants: Collection[str]) -> int:
    return DeadLetter.objects.filter(tenant__in=tenants, state=DeadLetterState.OPEN).count()


def approvals_pending_count(*, tenants: Collection[str]) -> int:
    return ApprovalRequest.objects.filter(tenant__in=tenants, state=ApprovalState.PENDING).count()


def spend_by_service(*, tenants: Collection[str], since: datetime) -> list[dict[str, Any]]:
    return list(
        ApiCost.objects.filter(tenant__in=tenants, created_at__gte=since)
        .values("service")
        .annotate(total=Sum("cost"), calls=Count("id"))
        .order_by("-total")
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


def budget_rows(*, budgets: Collection[Budget], now: datetime) -> list[BudgetRow]:
    rows = []
    for b in budgets:
        end = period_end(b.period, b.period_start)
        fc = budget_forecast(
            spent=b.spent, limit=b.limit, period_start=b.period_start, period_end=end, now=now
        )
        rows.append(
            BudgetRow(b.id, b.scope, b.key, b.period, b.limit, b.spent, b.reserved, b.policy,
                      b.enabled, b.period_start, end, fc)
        )
    return rows


_SCOPE_FILTER = {
    BudgetScope.TENANT: "tenant",
    BudgetScope.WORKFLOW: "workflow_type",
    BudgetScope.SERVICE: "service",
    BudgetScope.INSTANCE: "instance_id",
}


def budget_burn_rows(
    *, budget: BudgetRow, tenants: Collection[str], see_global: bool
) -> list[dict[str, Any]]:
    """Spend per hour inside the budget's current period: [{"bucket", "total"}]."""
    qs = ApiCost.objects.filter(
        created_at__gte=budget.period_start, **{_SCOPE_FILTER[BudgetScope(budget.scope)]: budget.key}
    )
    if not see_global:
        qs = qs.filter(tenant__in=tenants)
    return list(
        qs.annotate(bucket=TruncHour("created_at"))
        .values("bucket")
        .annotate(total=Sum("cost"))
        .order_by("bucket")
    )


def reservations_held(*, budget_ids: Collection[int], limit: int = 50) -> list[dict[str, Any]]:
    return list(
        BudgetReservation.objects.filter(budget_id__in=budget_ids, state=ReservationState.HELD)
        .order_by("-created_at")
        .values(
            "id", "instance_id", "step_name", "attempt", "service", "amount", "created_at",
            scope=F("budget__scope"), key=F("budget__key"), period=F("budget__period"),
        )[:limit]
    )


def budget_events(*, tenants: Collection[str], limit: int = 30) -> list[dict[str, Any]]:
    """Recent History rows of kind "budget": breaches (a spend refused or sent for approval) and
    limit changes (`data.action`), newest first, each marked with `breach`."""
    rows = list(
        History.objects.filter(tenant__in=tenants, kind=HistoryKind.BUDGET)
        .order_by("-id")
        .values("id", "instance_id", "workflow", "tenant", "step_name", "status", "data", "actor",
                "created_at")[:limit]
    )
    for r in rows:
        r["breach"] = "action" not in (r["data"] or {})
    return rows


# ---- dead letters ----------------------------------------------------------------------


@dataclass(frozen=True)
class DeadLetterFilters:
    state: str = DeadLetterState.OPEN
    workflow: str = ""
    step: str = ""
    error: str = ""
    tenant: str = ""
    signature: str = ""
    q: str = ""


def _dead_letter_qs(*, tenants: Collection[str], f: DeadLetterFilters) -> QuerySet[DeadLetter]:
    qs = DeadLetter.objects.filter(tenant__in=tenants)
    if f.state:
        qs = qs.filter(state=f.state)
    if f.workflow:
        qs = qs.filter(workflow=f.workflow)
    if f.step:
        qs = qs.filter(step_name=f.step)
    if f.error:
        qs = qs.filter(error_name=f.error)
    if f.tenant:
        qs = qs.filter(tenant=f.tenant)
    if f.signature:
        qs = qs.filter(signature=f.signature)
    if f.q:
        qs = qs.filter(Q(error_message__icontains=f.q) | Q(instance_id__startswith=f.q))
    return qs


@dataclass(frozen=True)
class DeadLetterGroup:
    signature: str
    workflow: str
    step_shape: str
    error_name: str
    normalized_message: str
    count: int
    first_seen: datetime
    last_seen: datetime
    tenants: list[str]
    example: dict[str, Any]


def dead_letter_groups(
    *, tenants: Collection[str], filters: DeadLetterFilters, sort: str = "count", limit: int = 100
) -> list[DeadLetterGroup]:
    qs = _dead_letter_qs(tenants=tenants, f=filters)
    order = {"count": "-n", "last": "-last", "first": "first"}.get(sort, "-n")
    grouped = list(
        qs.values("signature")
        .annotate(
            n=Count("id"), first=Min("created_at"), last=Max("created_at"), example_id=Max("id"),
        )
        .order_by(order, "signature")[:limit]
    )
    sigs = [g["signature"] for g in grouped]
    tenants_hit: dict[str, list[str]] = defaultdict(list)
    for sig, tenant in (
        qs.filter(signature__in=sigs).values_list("signature", "tenant").distinct().order_by("tenant")
    ):
        tenants_hit[sig].append(tenant)
    examples = {
        d["id"]: d
        for d in DeadLetter.objects.filter(id__in=[g["example_id"] for g in grouped]).values(
            "id", "instance_id", "workflow", "step_name", "error_name", "error_message",
            "normalized_message", "tenant", "created_at",
        )
    }
    out = []
    for g in grouped:
        ex = examples[g["example_id"]]
        out.append(
            DeadLetterGroup(
                g["signature"], ex["workflow"], step_shape(ex["step_name"]), ex["error_name"],
                ex["normalized_message"], g["n"], g["first"], g["last"],
                tenants_hit[g["signature"]], ex,
            )
        )
    return out


def dead_letter_items(
    *, tenants: Collection[str], filters: DeadLetterFilters, limit: int = 200
) -> list[dict[str, Any]]:
    return list(
        _dead_letter_qs(tenants=tenants, f=filters)
        .order_by("-created_at", "-id")
        .values("id", "instance_id", "workflow", "tenant", "step_name", "error_name",
                "error_message", "state", "created_at", "resolved_by", "resolution")[:limit]
    )


def dead_letter_get(*, tenants: Collection[str], dead_letter_id: int) -> DeadLetter:
    dl = (
        DeadLetter.objects.select_related("instance")
        .filter(tenant__in=tenants, id=dead_letter_id)
        .first()
    )
    if dl is None:
        raise Http404("no such dead letter")
    return dl


def dead_letter_selection_ids(
    *, tenants: Collection[str], filters: DeadLetterFilters, ids: Collection[int] = ()
) -> list[int]:
    """Open dead letters a bulk action would touch: the filtered set, narrowed to `ids` if given."""
    qs = _dead_letter_qs(tenants=tenants, f=filters).filter(state=DeadLetterState.OPEN)
    if ids:
        qs = qs.filter(id__in=ids)
    return list(qs.order_by("id").values_list("id", flat=True))


@dataclass(frozen=True)
class RedriveEstimate:
    instances: int
    total: Decimal
    lines: list[dict[str, Any]] = field(default_factory=list)  # per workflow+step


def step_cost_per_attempt(*, pairs: Collection[tuple[str, str]]) -> dict[tuple[str, str], Decimal]:
    """Average api_costs spend of one attempt of each (workflow, step), from its whole history."""
    if not pairs:
        return {}
    cond = Q()
    for wf, st in pairs:
        cond |= Q(workflow_type=wf, step_name=st)
    # An attempt may record several api_costs rows (one per service): count attempts, not rows.
    attempt_key = Concat(
        F("instance_id"), Value(":"), Cast("attempt", output_field=CharField()),
        output_field=CharField(),
    )
    rows = (
        ApiCost.objects.filter(cond)
        .values("workflow_type", "step_name")
        .annotate(total=Sum("cost"), attempts=Count(attempt_key, distinct=True))
        .order_by()
    )
    return {
        (r["workflow_type"], r["step_name"]): (r["total"] / r["attempts"] if r["attempts"] else ZERO)
        for r in rows
    }


def redrive_estimate(*, dead_letter_ids: Collection[int]) -> RedriveEstimate:
    """How many instances, and what re-running each failed step once is likely to cost."""
    per_step = list(
        DeadLetter.objects.filter(id__in=dead_letter_ids)
        .values("workflow", "step_name")
        .annotate(n=Count("id"))
        .order_by("workflow", "step_name")
    )
    avg = step_cost_per_attempt(pairs=[(r["workflow"], r["step_name"]) for r in per_step])
    lines, total, count = [], ZERO, 0
    for r in per_step:
        each = avg.get((r["workflow"], r["step_name"]), ZERO)
        subtotal = each * r["n"]
        lines.append({**r, "per_attempt": each, "subtotal": subtotal})
        total += subtotal
        count += r["n"]
    return RedriveEstimate(count, total, lines)


# ---- costs -----------------------------------------------------------------------------


COST_DIMENSIONS = {
    "service": "service",
    "workflow": "workflow_type",
    "step": "step_name",
    "tenant": "tenant",
    "model": "model",
}


@dataclass(frozen=True)
class CostFilters:
    since: datetime
    until: datetime | None = None
    service: str = ""
    workflow: str = ""
    step: str = ""
    tenant: str = ""
    model: str = ""


def _cost_qs(*, tenants: Collection[str], f: CostFilters) -> QuerySet[ApiCost]:
    qs = ApiCost.objects.filter(tenant__in=tenants, created_at__gte=f.since)
    if f.until:
        qs = qs.filter(created_at__lt=f.until)
    for name, column in COST_DIMENSIONS.items():
        value = getattr(f, name)
        if value:
            qs = qs.filter(**{column: value})
    return qs


def cost_total(*, tenants: Collection[str], filters: CostFilters) -> dict[str, Any]:
    return _cost_qs(tenants=tenants, f=filters).aggregate(
        total=Coalesce(Sum("cost"), Value(ZERO)), calls=Count("id")
    )


def cost_series(
    *, tenants: Collection[str], filters: CostFilters, by: str, daily: bool
) -> list[dict[str, Any]]:
    """[{"bucket", "key", "total"}] per hour (or day) and per value of the `by` dimension."""
    column = COST_DIMENSIONS.get(by, "service")
    trunc = TruncDay("created_at") if daily else TruncHour("created_at")
    rows = (
        _cost_qs(tenants=tenants, f=filters)
        .annotate(bucket=trunc, key=F(column))
        .values("bucket", "key")
        .annotate(total=Sum("cost"))
        .order_by("bucket", "key")
    )
    if by != "step":
        return list(rows)
    merged: dict[tuple[Any, str], Decimal] = defaultdict(lambda: ZERO)
    for r in rows:
        merged[(r["bucket"], step_shape(r["key"]))] += r["total"]
    return [{"bucket": b, "key": k, "total": t} for (b, k), t in sorted(merged.items())]


def cost_breakdown(*, tenants: Collection[str], filters: CostFilters) -> list[dict[str, Any]]:
    """Spend per service → workflow → step (indexed steps merged): the treemap's rows."""
    merged: dict[tuple[str, str, str], Decimal] = defaultdict(lambda: ZERO)
    for r in (
        _cost_qs(tenants=tenants, f=filters)
        .values("service", "workflow_type", "step_name")
        .annotate(total=Sum("cost"))
        .order_by()
    ):
        merged[(r["service"], r["workflow_type"] or "(none)", step_shape(r["step_name"]) or "(none)")] += r["total"]
    return [
        {"service": s, "workflow": w, "step": st, "total": t}
        for (s, w, st), t in sorted(merged.items(), key=lambda kv: -kv[1])
    ]


def cost_by_dimension(
    *, tenants: Collection[str], filters: CostFilters, by: str, limit: int = 12
) -> list[dict[str, Any]]:
    column = COST_DIMENSIONS.get(by, "service")
    return list(
        _cost_qs(tenants=tenants, f=filters)
        .values(key=F(column))
        .annotate(total=Sum("cost"), calls=Count("id"))
        .order_by("-total")[:limit]
    )


def cost_by_instance(
    *, tenants: Collection[str], filters: CostFilters, sort: str = "-total", limit: int = 50
) -> list[dict[str, Any]]:
    order = sort if sort in {"-total", "total", "-calls", "-last"} else "-total"
    return list(
        _cost_qs(tenants=tenants, f=filters)
        .exclude(instance_id=None)
        .values("instance_id", "workflow_type", "tenant")
        .annotate(
            total=Sum("cost"), calls=Count("id"), failed=Count("id", filter=Q(success=False)),
            tokens_in=Sum("tokens_in"), tokens_out=Sum("tokens_out"), last=Max("created_at"),
        )
        .order_by(order, "instance_id")[:limit]
    )


EXPORT_COLUMNS = (
    "created_at", "tenant", "service", "model", "workflow_type", "instance_id", "step_name",
    "attempt", "success", "cost", "tokens_in", "tokens_cached", "tokens_out", "items",
)


def cost_export_rows(*, tenants: Collection[str], filters: CostFilters) -> Iterator[tuple[Any, ...]]:
    """The filtered api_costs rows, streamed from a server-side cursor in chunks."""
    return (
        _cost_qs(tenants=tenants, f=filters)
        .order_by("created_at", "id")
        .values_list(*EXPORT_COLUMNS)
        .iterator(chunk_size=2000)
    )


def cost_filter_choices(*, tenants: Collection[str], since: datetime) -> dict[str, list[str]]:
    qs = ApiCost.objects.filter(tenant__in=tenants, created_at__gte=since)
    return {
        name: sorted(v for v in qs.values_list(column, flat=True).distinct().order_by() if v)[:200]
        for name, column in COST_DIMENSIONS.items()
        if name != "step"
    }


# ---- approvals -------------------------------------------------------------------------


def approvals_pending(*, tenants: Collection[str]) -> list[ApprovalRequest]:
    return list(
        ApprovalRequest.objects.filter(tenant__in=tenants, state=ApprovalState.PENDING)
        .select_related("budget")
        .order_by(F("due_at").asc(nulls_last=True), "created_at")
    )


def approvals_recent(*, tenants: Collection[str], limit: int = 15) -> list[ApprovalRequest]:
    return list(
        ApprovalRequest.objects.filter(tenant__in=tenants)
        .exclude(state=ApprovalState.PENDING)
        .order_by(F("answered_at").desc(nulls_last=True), "-created_at")[:limit]
    )


def approval_get(*, tenants: Collection[str], approval_id: int) -> ApprovalRequest:
    req = (
        ApprovalRequest.objects.select_related("budget", "instance")
        .filter(tenant__in=tenants, id=approval_id)
        .first()
    )
    if req is None:
        raise Http404("no such approval request")
    return req


# ---- workflow DAG ----------------------------------------------------------------------


def workflow_summaries(*, tenants: Collection[str], since: datetime) -> list[dict[str, Any]]:
    return list(
        Instance.objects.filter(tenant__in=tenants, created_at__gte=since)
        .values("workflow")
        .annotate(
            total=Count("id"),
            running=Count("id", filter=Q(status__in=[Status.RUNNING, Status.WAITING, Status.QUEUED])),
            complete=Count("id", filter=Q(status=Status.COMPLETE)),
            errored=Count("id", filter=Q(status=Status.ERRORED)),
            last=Max("created_at"),
        )
        .order_by("workflow")
    )


def instance_tenant(*, instance_id: str, tenants: Collection[str]) -> str | None:
    return (
        Instance.objects.filter(id=instance_id, tenant__in=tenants)
        .values_list("tenant", flat=True)
        .first()
    )


def workflow_known(*, tenants: Collection[str], name: str) -> bool:
    return Instance.objects.filter(tenant__in=tenants, workflow=name).exists()


def workflow_step_runs(
    *, tenants: Collection[str], name: str, sample: int = 40
) -> list[list[dict[str, Any]]]:
    """Steps of the most recent runs (bounded sample), each run in position order."""
    ids = list(
        Instance.objects.filter(tenant__in=tenants, workflow=name)
        .exclude(status=Status.QUEUED)
        .order_by("-created_at")
        .values_list("id", flat=True)[:sample]
    )
    runs: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in (
        Step.objects.filter(instance_id__in=ids)
        .order_by("instance_id", "position")
        .values("instance_id", "name", "position", "started_at", "ended_at")
    ):
        runs[row["instance_id"]].append(row)
    return list(runs.values())


class _P95(Aggregate):
    # PostgreSQL only; SQLite falls back to a bounded sample (see workflow_step_heat).
    function = "percentile_cont"
    template = "percentile_cont(0.95) WITHIN GROUP (ORDER BY %(expressions)s)"
    output_field = DurationField()


def _percentile(values: list[float], pct: float) -> float | None:
    if not values:
        return None
    values = sorted(values)
    k = (len(values) - 1) * pct
    lo, hi = int(k), min(int(k) + 1, len(values) - 1)
    return values[lo] + (values[hi] - values[lo]) * (k - lo)


def workflow_step_heat(
    *, tenants: Collection[str], name: str, since: datetime
) -> dict[str, dict[str, Any]]:
    """Per node (step shape) over the window: in flight, completed, retry rate, p95, cost, DLs."""
    steps = Step.objects.filter(
        instance__workflow=name, instance__tenant__in=tenants, started_at__gte=since
    )
    duration = ExpressionWrapper(F("ended_at") - F("started_at"), output_field=DurationField())
    agg: dict[str, Any] = {
        "n": Count("id"),
        "in_flight": Count("id", filter=Q(status__in=[StepStatus.RUNNING, StepStatus.SLEEPING, StepStatus.WAITING])),
        "completed": Count("id", filter=Q(status=StepStatus.COMPLETE)),
        "errored": Count("id", filter=Q(status=StepStatus.ERRORED)),
        "retried": Count("id", filter=Q(attempts__gt=1)),
        "attempts": Coalesce(Sum("attempts"), Value(0)),
    }
    pg = connection.vendor == "postgresql"
    if pg:
        agg["p95"] = _P95(duration, filter=Q(status=StepStatus.COMPLETE))
    heat: dict[str, dict[str, Any]] = {}
    for r in steps.values("name").annotate(**agg).order_by():
        node = heat.setdefault(step_shape(r["name"]), _empty_heat())
        for k in ("n", "in_flight", "completed", "errored", "retried", "attempts"):
            node[k] += r[k]
        if pg and r["p95"] is not None:
            node["p95_parts"].append(r["p95"].total_seconds())
    if not pg:
        samples: dict[str, list[float]] = defaultdict(list)
        for step_name, d in (
            steps.filter(status=StepStatus.COMPLETE, ended_at__isnull=False)
            .annotate(d=duration)
            .values_list("name", "d")
            .order_by("-started_at")[:50000]
        ):
            samples[step_shape(step_name)].append(d.total_seconds())
        for shape, values in samples.items():
            heat.setdefault(shape, _empty_heat())["p95_parts"] = [_percentile(values, 0.95)]
    for r in (
        ApiCost.objects.filter(workflow_type=name, tenant__in=tenants, created_at__gte=since)
        .values("step_name")
        .annotate(total=Sum("cost"))
        .order_by()
    ):
        heat.setdefault(step_shape(r["step_name"]), _empty_heat())["cost"] += r["total"]
    for r in (
        DeadLetter.objects.filter(workflow=name, tenant__in=tenants, state=DeadLetterState.OPEN)
        .values("step_name")
        .annotate(n=Count("id"))
        .order_by()
    ):
        heat.setdefault(step_shape(r["step_name"]), _empty_heat())["dead_letters"] += r["n"]
    for node in heat.values():
        parts = [p for p in node.pop("p95_parts") if p is not None]
        # Indexed steps merged: the worst member's p95 is the honest figure for the node.
        node["p95"] = max(parts) if parts else None
        node["retry_rate"] = node["retried"] / node["n"] if node["n"] else 0.0
    return heat


def _empty_heat() -> dict[str, Any]:
    return {"n": 0, "in_flight": 0, "completed": 0, "errored": 0, "retried": 0, "attempts": 0,
            "p95_parts": [], "cost": ZERO, "dead_letters": 0}
