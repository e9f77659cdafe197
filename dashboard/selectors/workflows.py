"""Per workflow type: summaries, the step graph of recent runs, the heat per node."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection
from datetime import datetime
from typing import Any

from django.db import connection
from django.db.models import (
    Aggregate,
    Count,
    DurationField,
    ExpressionWrapper,
    F,
    Max,
    Q,
    Sum,
    Value,
)
from django.db.models.functions import Coalesce

from dashboard.charts import step_shape
from dashboard.selectors.common import ZERO
from ingest.engine.models import (
    ApiCost,
    DeadLetter,
    DeadLetterState,
    Instance,
    Status,
    Step,
    StepStatus,
)

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
