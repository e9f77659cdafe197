"""Spend from api_costs by service, workflow, step, tenant and model over time."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

from django.db.models import (
    Count,
    F,
    Max,
    Q,
    QuerySet,
    Sum,
    Value,
)
from django.db.models.functions import Coalesce, TruncDay, TruncHour

from dashboard.charts import step_shape
from dashboard.selectors.common import ZERO
from ingest.engine.models import (
    ApiCost,
)

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
