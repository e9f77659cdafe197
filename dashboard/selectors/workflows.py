"""Per workflow type: summaries, the step graph of recent runs, the heat per node."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection
from datetime import datetime, timedelta
from typing import Any, TypedDict

from django.db.models import (
    Count,
    Max,
    Q,
)

from dashboard.charts import step_shape
from dashboard.rollups import hist, reads
from dashboard.selectors.common import ZERO
from ingest.engine.models import (
    DeadLetter,
    DeadLetterState,
    Instance,
    RetentionBatch,
    Status,
    Step,
)
from ingest.engine.services.retention import retention_cutoff, retention_days, retention_due

# ---- workflow DAG ----------------------------------------------------------------------


class WorkflowSummary(TypedDict):
    """One workflow type's instances created in the window, by state, and the latest one's time."""

    workflow: str
    total: int
    running: int
    complete: int
    with_errors: int  # completed_with_errors: finished, a warning, not a failure
    errored: int
    last: datetime | None


class StepRun(TypedDict):
    """One step of a sampled run, as the DAG's layout reads it."""

    instance_id: str
    name: str
    position: int
    started_at: datetime
    ended_at: datetime | None


def workflow_summaries(*, tenants: Collection[str], since: datetime) -> list[WorkflowSummary]:
    return list(
        Instance.objects.filter(tenant__in=tenants, created_at__gte=since)
        .values("workflow")
        .annotate(
            total=Count("id"),
            running=Count("id", filter=Q(status__in=[Status.RUNNING, Status.WAITING, Status.QUEUED])),
            complete=Count("id", filter=Q(status=Status.COMPLETE)),
            with_errors=Count("id", filter=Q(status=Status.COMPLETED_WITH_ERRORS)),
            errored=Count("id", filter=Q(status=Status.ERRORED)),
            last=Max("created_at"),
        )
        .order_by("workflow")
    )


def instance_tenant(*, instance_id: str, tenants: Collection[str]) -> str | None:
    return Instance.objects.filter(id=instance_id, tenant__in=tenants).values_list("tenant", flat=True).first()


def workflow_known(*, tenants: Collection[str], name: str) -> bool:
    return Instance.objects.filter(tenant__in=tenants, workflow=name).exists()


def workflow_step_runs(*, tenants: Collection[str], name: str, sample: int = 40) -> list[list[StepRun]]:
    """Steps of the most recent runs (bounded sample), each run in position order."""
    ids = list(
        Instance.objects.filter(tenant__in=tenants, workflow=name)
        .exclude(status=Status.QUEUED)
        .order_by("-created_at")
        .values_list("id", flat=True)[:sample]
    )
    runs: dict[str, list[StepRun]] = defaultdict(list)
    for row in (
        Step.objects.filter(instance_id__in=ids)
        .order_by("instance_id", "position")
        .values("instance_id", "name", "position", "started_at", "ended_at")
    ):
        runs[row["instance_id"]].append(row)
    return list(runs.values())


def workflow_step_heat(
    *, tenants: Collection[str], name: str, since: datetime, view: reads.RollupView | None = None
) -> dict[str, dict[str, Any]]:
    """Per node (step shape) over the window: in flight, completed, retry rate, p95, cost, DLs.

    Steps count in the window they started in; p95 is the duration of completed steps, read from
    histograms (dashboard/rollups/hist.py: within 4.5 %), per step name, and for a node merging
    indexed steps the worst member's, the honest figure for the node."""
    view = view or reads.rollup_view()
    heat: dict[str, dict[str, Any]] = {}
    for step_name, f in reads.step_figures(workflow=name, tenants=tenants, since=since, view=view).items():
        node = heat.setdefault(step_shape(step_name), empty_heat())
        for k in ("n", "in_flight", "completed", "errored", "retried", "attempts"):
            node[k] += getattr(f, k)
        p95 = hist.percentile(f.durations or {}, 0.95)
        if p95 is not None:
            node["p95_parts"].append(timedelta(milliseconds=p95).total_seconds())
    scope = reads.CostScope(tenants=tenants, since=since, equals=(("workflow_type", name),))
    for (step_name,), m in reads.cost_grouped(scope, by=("step_name",), measures=("total",), view=view).items():
        heat.setdefault(step_shape(step_name), empty_heat())["cost"] += m["total"]
    for r in (
        DeadLetter.objects.filter(workflow=name, tenant__in=tenants, state=DeadLetterState.OPEN)
        .values("step_name")
        .annotate(n=Count("id"))
        .order_by()
    ):
        heat.setdefault(step_shape(r["step_name"]), empty_heat())["dead_letters"] += r["n"]
    for node in heat.values():
        parts = node.pop("p95_parts")
        node["p95"] = max(parts) if parts else None
        node["retry_rate"] = node["retried"] / node["n"] if node["n"] else 0.0
    return heat


def empty_heat() -> dict[str, Any]:
    return {
        "n": 0,
        "in_flight": 0,
        "completed": 0,
        "errored": 0,
        "retried": 0,
        "attempts": 0,
        "p95_parts": [],
        "cost": ZERO,
        "dead_letters": 0,
    }


class WorkflowRetention(TypedDict):
    days: int
    due: int  # finished instances of the reader's tenants past the retention period
    last_run: datetime | None  # the last purged batch of this workflow (any tenant)


def workflow_retention(*, tenants: Collection[str], name: str, now: datetime) -> WorkflowRetention:
    days = retention_days(name)
    due = retention_due(workflow=name, cutoff=retention_cutoff(days=days, now=now)).filter(tenant__in=tenants)
    last = RetentionBatch.objects.filter(workflow=name).order_by("-ran_at").values_list("ran_at", flat=True).first()
    return {"days": days, "due": due.count(), "last_run": last}


def version_tenants(*, workflow: str, version: int) -> set[str]:
    """Every tenant with an instance (of any status) that started on this version of the workflow."""
    return set(
        Instance.objects.filter(workflow=workflow, workflow_version=version)
        .values_list("tenant", flat=True)
        .distinct()
        .order_by()
    )
