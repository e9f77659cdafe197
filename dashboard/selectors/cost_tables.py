"""The costs page's tables beside its charts: spend per day by workflow and step, and what one
run costs per workflow (p50, p90, p99 of the runs' spend in the window).

The day table reads the same rollups as the chart (reads.cost_grouped: exact, a few thousand rows
whatever the ledger's size). The percentiles read each run's spend where `run_spend` says (the
per-instance rollup for runs wholly inside the window, the ledger for the rest), in one statement
on PostgreSQL (percentile_cont over both), in Python on SQLite."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Collection
from dataclasses import dataclass
from datetime import date
from decimal import Decimal
from typing import Any

from django.db import connection
from django.db.models import Sum

from dashboard.charts import step_shape
from dashboard.rollups import reads
from dashboard.selectors.costs import CostFilters, RunSpend, _scope, run_spend
from ingest.engine import ByVendor

DAY_ROWS = 300  # past this, the table says how many it left out: narrow the filters or export
PERCENTILES = (0.5, 0.9, 0.99)


@dataclass(frozen=True)
class CostDayRow:
    day: date
    workflow: str
    step: str  # its shape: persist-facts-3 and persist-facts-4 are one row, persist-facts-N
    calls: int
    total: Decimal


@dataclass(frozen=True)
class CostDays:
    rows: list[CostDayRow]
    left_out: int  # rows past DAY_ROWS
    day_totals: dict[date, Decimal]


def cost_by_day(
    *, tenants: Collection[str], filters: CostFilters, view: reads.RollupView | None = None, limit: int = DAY_ROWS
) -> CostDays:
    """Spend per local day, workflow and step in the selection: newest day first, then the
    costliest workflow and step of the day."""
    got = reads.cost_grouped(
        _scope(tenants=tenants, f=filters),
        by=(reads.BUCKET, "workflow_type", "step_name"),
        measures=("total", "calls"),
        bucket="day",
        view=view,
    )
    merged: dict[tuple[date, str, str], list[Any]] = {}
    for (bucket, workflow, step), m in got.items():
        key = (bucket.date(), workflow or "", step_shape(step) if step else "")
        acc = merged.setdefault(key, [0, Decimal(0)])
        acc[0] += m["calls"]
        acc[1] += m["total"]
    rows = [
        CostDayRow(day=d, workflow=w, step=s, calls=int(c), total=reads.money(t))
        for (d, w, s), (c, t) in merged.items()
        if c or t
    ]
    rows.sort(key=lambda r: (-r.day.toordinal(), -r.total, r.workflow, r.step))
    totals: dict[date, Decimal] = defaultdict(lambda: Decimal(0))
    for r in rows:
        totals[r.day] += r.total
    return CostDays(
        rows=rows[:limit], left_out=max(0, len(rows) - limit), day_totals={d: reads.money(t) for d, t in totals.items()}
    )


@dataclass(frozen=True)
class RunCostPercentiles:
    workflow: str
    runs: int
    p50: Decimal
    p90: Decimal
    p99: Decimal


def percentile_cont(ordered: list[float], q: float) -> float:
    """PostgreSQL's percentile_cont over sorted values: linear between the two nearest ranks."""
    at = q * (len(ordered) - 1)
    lo, hi = math.floor(at), math.ceil(at)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (at - lo)


def cost_run_percentiles(
    *,
    tenants: Collection[str],
    filters: CostFilters,
    view: reads.RollupView | None = None,
    spend: RunSpend | None = None,
) -> list[RunCostPercentiles]:
    """Per workflow, how many runs spent in the selection and the p50, p90 and p99 of what each
    spent there (a run's spend inside the window: a run that straddles an edge counts its part)."""
    spend = spend or run_spend(tenants=tenants, filters=filters, view=view)
    ledger = spend.ledger.values("instance_id", "workflow_type").annotate(total=Sum("cost")).order_by()
    parts = (
        [ledger]
        if spend.rolled is None
        else [spend.rolled.values("instance_id", "workflow_type", "total").order_by(), ledger]
    )
    parts = [p for p in parts if not p.query.is_empty()]  # no edge instances: no ledger part
    if not parts:
        return []
    found = _percentiles()(parts)
    return sorted(found, key=lambda r: (-r.p50, r.workflow))


def _percentiles_sql(parts: list[Any]) -> list[RunCostPercentiles]:
    compiled = [p.query.sql_with_params() for p in parts]
    union = " UNION ALL ".join(f"({sql})" for sql, _ in compiled)
    params = [v for _, ps in compiled for v in ps]
    with connection.cursor() as cursor:
        # r holds one row per run: (instance_id, workflow_type, its spend); each part's columns
        # are in that order (values() above), so the union lines them up.
        cursor.execute(
            f"SELECT r.workflow_type, count(*), percentile_cont(ARRAY[{', '.join(map(str, PERCENTILES))}]) "  # noqa: S608 - compiled by the ORM
            f"WITHIN GROUP (ORDER BY r.total) FROM ({union}) AS r (instance_id, workflow_type, total) "
            "GROUP BY r.workflow_type",
            params,
        )
        rows = cursor.fetchall()
    return [
        RunCostPercentiles(
            workflow=w or "", runs=int(n), p50=reads.money(q[0]), p90=reads.money(q[1]), p99=reads.money(q[2])
        )
        for w, n, q in rows
    ]


def _percentiles_python(parts: list[Any]) -> list[RunCostPercentiles]:
    by_workflow: dict[str, list[float]] = defaultdict(list)
    for part in parts:
        for r in part:
            by_workflow[r["workflow_type"] or ""].append(float(r["total"] or 0))
    out = []
    for workflow, values in by_workflow.items():
        values.sort()
        q = [percentile_cont(values, p) for p in PERCENTILES]
        out.append(
            RunCostPercentiles(
                workflow=workflow, runs=len(values), p50=reads.money(q[0]), p90=reads.money(q[1]), p99=reads.money(q[2])
            )
        )
    return out


_percentiles = ByVendor[Callable[[list[Any]], list[RunCostPercentiles]]](
    postgresql=_percentiles_sql, sqlite=_percentiles_python
)
