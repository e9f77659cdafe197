"""Per-workflow metrics (optionally one workflow's), over a window, for the caller's tenants.

Instances are those created in the window (the `instance_tenant` index); their counts by
status, rates per minute, and the p50/p95 of the finished ones' durations (creation to finish);
spend is the api_costs recorded in the window, read through the dashboard's rollups.
"""

from __future__ import annotations

import math
import re
from collections.abc import Collection
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Protocol

from django.db import connection
from django.db.models import Count

from dashboard.rollups.reads import CostScope, cost_grouped
from ingest.engine import ByVendor
from ingest.engine.models import Instance

WINDOWS = {
    "15m": timedelta(minutes=15),
    "1h": timedelta(hours=1),
    "6h": timedelta(hours=6),
    "24h": timedelta(hours=24),
    "7d": timedelta(days=7),
    "30d": timedelta(days=30),
}
_WINDOW = re.compile(r"^(\d{1,4})([mhd])$")
_UNIT = {"m": timedelta(minutes=1), "h": timedelta(hours=1), "d": timedelta(days=1)}
MAX_WINDOW = timedelta(days=90)


class InvalidWindow(ValueError):
    """The window is not a duration this API answers."""


def parse_window(raw: str) -> timedelta:
    """`15m`, `1h`, `36h`, `7d`…: a number and m, h or d, from 1 minute to 90 days."""
    match = _WINDOW.match(raw.strip())
    if not match:
        raise InvalidWindow(
            f"window {raw[:40]!r} is not a duration like 15m, 1h, 24h or 7d (a number followed by m, h or d)"
        )
    window = int(match.group(1)) * _UNIT[match.group(2)]
    if not timedelta(minutes=1) <= window <= MAX_WINDOW:
        raise InvalidWindow(f"window {raw!r} must be between 1m and 90d")
    return window


def percentile(sorted_values: list[float], q: float) -> float | None:
    """Nearest-rank percentile of an ascending list (None when empty)."""
    if not sorted_values:
        return None
    rank = max(1, math.ceil(q * len(sorted_values)))
    return sorted_values[rank - 1]


@dataclass
class WorkflowFigures:
    workflow: str
    counts: dict[str, int] = field(default_factory=dict)
    started_per_minute: float = 0.0
    finished_per_minute: float = 0.0
    error_rate: float | None = None  # errored / finished
    p50_seconds: float | None = None
    p95_seconds: float | None = None
    cost_usd: Decimal = Decimal("0")
    cost_calls: int = 0


def _durations(
    *, tenants: Collection[str], since: datetime, until: datetime, workflow: str | None
) -> dict[str, list[float]]:
    qs = Instance.objects.filter(
        tenant__in=list(tenants), created_at__gte=since, created_at__lt=until, ended_at__isnull=False
    )
    if workflow:
        qs = qs.filter(workflow=workflow)
    out: dict[str, list[float]] = {}
    for name, created, ended in qs.values_list("workflow", "created_at", "ended_at").iterator(chunk_size=5000):
        if ended is not None:  # the filter says so; the type does not
            out.setdefault(name, []).append(max(0.0, (ended - created).total_seconds()))
    return out


def _pg_percentiles(
    *, tenants: Collection[str], since: datetime, until: datetime, workflow: str | None
) -> dict[str, tuple[float | None, float | None]]:
    # PostgreSQL sorts in the database: the rows need not travel to Python.
    sql = """SELECT workflow,
                    percentile_disc(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM ended_at - created_at)),
                    percentile_disc(0.95) WITHIN GROUP (ORDER BY extract(epoch FROM ended_at - created_at))
             FROM engine_instance
             WHERE tenant = ANY(%s) AND created_at >= %s AND created_at < %s AND ended_at IS NOT NULL
               AND (%s = '' OR workflow = %s)
             GROUP BY workflow"""
    with connection.cursor() as cursor:
        cursor.execute(sql, [list(tenants), since, until, workflow or "", workflow or ""])
        return {w: (None if a is None else float(a), None if b is None else float(b)) for w, a, b in cursor.fetchall()}


def _py_percentiles(
    *, tenants: Collection[str], since: datetime, until: datetime, workflow: str | None
) -> dict[str, tuple[float | None, float | None]]:
    pcts: dict[str, tuple[float | None, float | None]] = {}
    for name, values in _durations(tenants=tenants, since=since, until=until, workflow=workflow).items():
        values.sort()
        pcts[name] = (percentile(values, 0.5), percentile(values, 0.95))
    return pcts


class _Percentiles(Protocol):
    def __call__(
        self, *, tenants: Collection[str], since: datetime, until: datetime, workflow: str | None
    ) -> dict[str, tuple[float | None, float | None]]: ...


_percentiles = ByVendor[_Percentiles](postgresql=_pg_percentiles, sqlite=_py_percentiles)


def workflow_metrics(
    *, tenants: Collection[str], now: datetime, window: timedelta, workflow: str | None = None
) -> list[WorkflowFigures]:
    since = now - window
    minutes = window.total_seconds() / 60
    qs = Instance.objects.filter(tenant__in=list(tenants), created_at__gte=since, created_at__lt=now)
    if workflow:
        qs = qs.filter(workflow=workflow)
    figures: dict[str, WorkflowFigures] = {}
    for name, status, n in qs.values_list("workflow", "status").annotate(n=Count("id")).order_by():
        figures.setdefault(name, WorkflowFigures(name)).counts[status] = n
    pcts = _percentiles()(tenants=tenants, since=since, until=now, workflow=workflow)
    equals = (("workflow_type", workflow),) if workflow else ()
    costs = cost_grouped(
        CostScope(tenants=list(tenants), since=since, until=now, equals=equals),
        by=["workflow_type"],
        measures=["total", "calls"],
    )
    for (name,), acc in costs.items():
        fig = figures.setdefault(name, WorkflowFigures(name))
        fig.cost_usd, fig.cost_calls = Decimal(acc["total"]), int(acc["calls"])
    for name, fig in figures.items():
        # completed_with_errors finished: a warning, so in `finished` but not in the error rate
        finished = sum(fig.counts.get(s, 0) for s in ("complete", "completed_with_errors", "errored", "terminated"))
        fig.started_per_minute = round(sum(fig.counts.values()) / minutes, 6)
        fig.finished_per_minute = round(finished / minutes, 6)
        fig.error_rate = round(fig.counts.get("errored", 0) / finished, 6) if finished else None
        fig.p50_seconds, fig.p95_seconds = pcts.get(name, (None, None))
    return sorted(figures.values(), key=lambda f: f.workflow)
