"""Spend from api_costs by service, workflow, step, tenant and model over time.

Aggregates read the hourly rollups merged with the ledger (dashboard/rollups/reads.py): exact,
and over millions of rows as cheap as over the rollup's few thousand. The CSV export streams the
ledger's own rows."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any, cast

from django.db.models import (
    Count,
    Max,
    QuerySet,
    Sum,
)
from django.db.models.fields.json import KeyTextTransform

from dashboard.charts import step_shape
from dashboard.models import INSTANCE_PART_COSTS, InstanceCost
from dashboard.rollups import reads
from dashboard.rollups.sql import spend_sums
from dashboard.selectors.common import ZERO
from ingest.engine import ByVendor
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
# Breakdowns by a key of the cost rows' metadata (the RankDisco pipelines write `stage` and
# `domain`): no rollup splits by them, so they are summed from the ledger over the window.
METADATA_DIMENSIONS = ("stage", "domain")


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
    qs = ApiCost.objects.filter(tenant__in=_visible(tenants, f.tenant), created_at__gte=f.since)
    if f.until:
        qs = qs.filter(created_at__lt=f.until)
    for name, column in COST_DIMENSIONS.items():
        value = getattr(f, name)
        if value and name != "tenant":
            qs = qs.filter(**{column: value})
    return qs


def _scope(*, tenants: Collection[str] | None, f: CostFilters) -> reads.CostScope:
    equals = tuple(
        (COST_DIMENSIONS[name], getattr(f, name)) for name in COST_DIMENSIONS if getattr(f, name) and name != "tenant"
    )
    visible = None if tenants is None else _visible(tenants, f.tenant)
    return reads.CostScope(tenants=visible, since=f.since, until=f.until, equals=equals)


def cost_total(
    *, tenants: Collection[str], filters: CostFilters, view: reads.RollupView | None = None
) -> dict[str, Any]:
    got = reads.cost_grouped(_scope(tenants=tenants, f=filters), by=(), measures=("total", "calls"), view=view)
    row = got.get((), {"total": ZERO, "calls": 0})
    return {"total": row["total"] or ZERO, "calls": row["calls"]}


def cost_series(
    *,
    tenants: Collection[str],
    filters: CostFilters,
    by: str,
    daily: bool,
    view: reads.RollupView | None = None,
) -> list[dict[str, Any]]:
    """[{"bucket", "key", "total"}] per hour (or day) and per value of the `by` dimension.

    Buckets are built from UTC hours (what the rollups keep): a day collects the hours that start
    on it in local time (identical to local days wherever the offset is whole hours)."""
    column = COST_DIMENSIONS.get(by, "service")  # a metadata breakdown charts by service
    got = reads.cost_grouped(
        _scope(tenants=tenants, f=filters),
        by=(reads.BUCKET, column),
        measures=("total",),
        bucket="day" if daily else "hour",
        view=view,
    )
    merged: dict[tuple[datetime, str], Decimal] = defaultdict(lambda: ZERO)
    for (bucket, key), m in got.items():
        merged[(bucket, step_shape(key) if by == "step" else key)] += m["total"]
    return [{"bucket": b, "key": k, "total": t} for (b, k), t in sorted(merged.items())]


TREEMAP_LEVELS = ("service", "workflow", "step")


def treemap_levels(by: str) -> tuple[str, ...]:
    """The treemap's levels for the chosen breakdown: that dimension first, then what is left of
    service → workflow → step (three levels at most)."""
    first = by if by in COST_DIMENSIONS else "service"
    return (first, *[d for d in TREEMAP_LEVELS if d != first])[:3]


def cost_breakdown(
    *,
    tenants: Collection[str],
    filters: CostFilters,
    by: str = "service",
    view: reads.RollupView | None = None,
) -> list[dict[str, Any]]:
    """Spend per `treemap_levels(by)` (indexed steps merged): the treemap's rows, each
    {"path": (level values…), "total"} and, for the default levels, service/workflow/step too."""
    levels = treemap_levels(by)
    merged: dict[tuple[str, ...], Decimal] = defaultdict(lambda: ZERO)
    got = reads.cost_grouped(
        _scope(tenants=tenants, f=filters), by=tuple(COST_DIMENSIONS[d] for d in levels), measures=("total",), view=view
    )
    for key, m in got.items():
        path = tuple((step_shape(v) if d == "step" else v) or "(none)" for d, v in zip(levels, key, strict=True))
        merged[path] += m["total"]
    rows: list[dict[str, Any]] = []
    for path, total in sorted(merged.items(), key=lambda kv: (-kv[1], kv[0])):
        row: dict[str, Any] = {"path": path, "total": total}
        row.update(zip(levels, path, strict=True))
        rows.append(row)
    return rows


def cost_by_dimension(
    *,
    tenants: Collection[str],
    filters: CostFilters,
    by: str,
    limit: int = 12,
    view: reads.RollupView | None = None,
) -> list[dict[str, Any]]:
    if by in METADATA_DIMENSIONS:
        return _cost_by_metadata(tenants=tenants, filters=filters, key=by, limit=limit)
    column = COST_DIMENSIONS.get(by, "service")
    got = reads.cost_grouped(_scope(tenants=tenants, f=filters), by=(column,), measures=("total", "calls"), view=view)
    rows = [{"key": key, "total": m["total"], "calls": m["calls"]} for (key,), m in got.items()]
    return sorted(rows, key=lambda r: (-r["total"], r["key"]))[:limit]


def _cost_by_metadata(*, tenants: Collection[str], filters: CostFilters, key: str, limit: int) -> list[dict[str, Any]]:
    grouped = (
        _cost_qs(tenants=tenants, f=filters)
        .annotate(key=KeyTextTransform(key, "metadata"))
        .values("key")
        .annotate(total=Sum("cost"), calls=Count("id"))
    )
    rows = [{"key": r["key"] or "", "total": r["total"] or ZERO, "calls": r["calls"]} for r in grouped]
    return sorted(rows, key=lambda r: (-r["total"], r["key"]))[:limit]


# Each sort's keys, then the instance id. Calls tie often (most instances of a workflow make the
# same calls): among equal calls the latest spend comes first, which an index on (calls, last)
# answers by reading the window's newest instances, not every older one in id order.
INSTANCE_SORTS: dict[str, tuple[str, ...]] = {
    "-total": ("-total",),
    "total": ("total",),
    "-calls": ("-calls", "-last"),
    "-last": ("-last",),
}


def _visible(tenants: Collection[str], tenant: str) -> list[str]:
    # One predicate on tenant: `tenant IN (...) AND tenant = x` makes PostgreSQL multiply the two
    # selectivities and, expecting one row, scan the table.
    return [t for t in tenants if not tenant or t == tenant]


@dataclass(frozen=True)
class RunSpend:
    """Where each instance's spend in the selection is read: `rolled`, the instances whose whole
    spend lies inside the window, from a per-instance rollup (instance_id, workflow_type, tenant
    and the measures; None when no rollup answers the filters), and `ledger`, the api_costs rows
    of every other instance, summed per instance."""

    rolled: QuerySet[Any] | None
    ledger: QuerySet[ApiCost]


def run_spend(*, tenants: Collection[str], filters: CostFilters, view: reads.RollupView | None = None) -> RunSpend:
    """Each instance's spend in the selection, as `cost_by_instance` and the per-run percentiles
    read it (see RunSpend).

    From the per-instance rollups (`InstanceCost`; under a service, step or model filter the one
    split by it): an instance whose whole spend lies inside the window is read from them; the few
    whose spend straddles a window edge or changed since the roller's cursor are summed from the
    ledger. Filtered by two of service, step and model at once, which no rollup splits, the ledger
    answers for them all (~1 s over a week of 10 M rows: docs/dashboard-rollups.md), unless one of
    them implies the others in the window (`_implied`)."""
    view = view or reads.rollup_view()
    ledger = _cost_qs(tenants=tenants, f=filters).exclude(instance_id=None)
    split = [
        (column, getattr(filters, name))
        for name, column in COST_DIMENSIONS.items()
        if name in ("service", "step", "model") and getattr(filters, name)
    ]
    if not (view.usable and view.instances_built):
        return RunSpend(None, ledger)
    if len(split) > 1:
        split = _implied(split, tenants=tenants, filters=filters, view=view)
    if len(split) > 1:
        return RunSpend(None, ledger)
    visible = _visible(tenants, filters.tenant)
    base = InstanceCost.objects.filter(tenant__in=visible)
    if filters.workflow:
        base = base.filter(workflow_type=filters.workflow)
    # From the ledger: the instances changed since the cursor, and those with spend on both sides
    # of an edge (by their whole span: a service's span lies within it). Every other instance's
    # spend is wholly inside the window or wholly outside it.
    edges = set(view.dirty.cost_instances)
    for edge in [filters.since, filters.until]:
        if edge is not None:
            edges |= set(_straddling(base, edge).values_list("instance_id", flat=True))
    rolled: QuerySet[Any]
    if split:
        column, value = split[0]
        rolled = INSTANCE_PART_COSTS[column].objects.filter(tenant__in=visible, **{column: value})
        if filters.workflow:
            rolled = rolled.filter(workflow_type=filters.workflow)
    else:
        rolled = base
    if edges:
        rolled = rolled.exclude(instance_id__in=sorted(edges))
    inside = rolled.filter(first_at__gte=filters.since)
    if filters.until:
        inside = inside.filter(last_at__lt=filters.until)
    return RunSpend(inside, ledger.filter(instance_id__in=sorted(edges)) if edges else ledger.none())


def cost_by_instance(
    *,
    tenants: Collection[str],
    filters: CostFilters,
    sort: str = "-total",
    limit: int = 50,
    view: reads.RollupView | None = None,
    spend: RunSpend | None = None,
) -> list[dict[str, Any]]:
    """The instances that spent most (or most calls, latest, least) in the selection, read as
    `run_spend` says (pass its answer as `spend` when the page reads it for another figure too)."""
    order = sort if sort in INSTANCE_SORTS else "-total"
    spend = spend or run_spend(tenants=tenants, filters=filters, view=view)
    if spend.rolled is None:
        return _money(_instance_rows(spend.ledger, order, limit))
    keys = [k.replace("last", "last_at") for k in INSTANCE_SORTS[order]]
    top = [
        {
            "instance_id": r["instance_id"],
            "workflow_type": r["workflow_type"],
            "tenant": r["tenant"],
            "total": r["total"],
            "calls": r["calls"],
            "failed": r["failed"],
            "tokens_in": r["tokens_in"],
            "tokens_out": r["tokens_out"],
            "last": r["last_at"],
        }
        for r in spend.rolled.order_by(*keys, "instance_id").values(
            "instance_id", "workflow_type", "tenant", "total", "calls", "failed", "tokens_in", "tokens_out", "last_at"
        )[:limit]
    ]
    return _ranked(top + _instance_rows(spend.ledger, order, limit), order, limit)


def _implied(
    split: list[tuple[str, str]], *, tenants: Collection[str], filters: CostFilters, view: reads.RollupView
) -> list[tuple[str, str]]:
    """Of two or three of service/step/model, one whose rows in the window and scope all carry the
    others' values too (a model is one service's, a step calls one service): it alone selects the
    same rows, and its per-instance rollup answers. Checked on the hourly rollups, merged with the
    ledger as every figure is; otherwise `split` unchanged."""
    for column, value in split:
        others = [(c, v) for c, v in split if c != column]
        equals = ((column, value), *((("workflow_type", filters.workflow),) if filters.workflow else ()))
        scope = reads.CostScope(
            tenants=_visible(tenants, filters.tenant), since=filters.since, until=filters.until, equals=equals
        )
        got = reads.cost_grouped(scope, by=tuple(c for c, _ in others), measures=("calls",), view=view)
        if all(key == tuple(v for _, v in others) for key in got):
            return [(column, value)]
    return split


def _ranked(rows: list[dict[str, Any]], order: str, limit: int) -> list[dict[str, Any]]:
    """Sorted as the ledger query sorts them (the sort's keys, then the instance id)."""
    merged = sorted(_money(rows), key=lambda r: r["instance_id"])
    for key in reversed(INSTANCE_SORTS[order]):  # stable sorts: the last one decides first
        field = key.lstrip("-")
        merged.sort(key=lambda r: r[field], reverse=key.startswith("-"))  # noqa: B023 (used at once)
    return merged[:limit]


def _money(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    for r in rows:
        r["total"] = reads.money(r["total"])
    return rows


def _straddling(base: QuerySet[InstanceCost], at: datetime) -> QuerySet[InstanceCost]:
    """Instances with spend both before `at` and at or after it."""
    return _straddling_filter()(base, at)


def _straddling_span(base: QuerySet[InstanceCost], at: datetime) -> QuerySet[InstanceCost]:
    # Served by the GiST index instance_cost_span (dashboard/migrations/0002_rollups.py).
    return base.extra(where=["tstzrange(first_at, last_at, '[]') @> %s::timestamptz"], params=[at])


def _straddling_bounds(base: QuerySet[InstanceCost], at: datetime) -> QuerySet[InstanceCost]:
    return base.filter(first_at__lt=at, last_at__gte=at)


_straddling_filter = ByVendor[Callable[[QuerySet[InstanceCost], datetime], QuerySet[InstanceCost]]](
    postgresql=_straddling_span, sqlite=_straddling_bounds
)


def _instance_rows(qs: QuerySet[ApiCost], order: str, limit: int) -> list[dict[str, Any]]:
    return cast(
        "list[dict[str, Any]]",
        list(
            qs.values("instance_id", "workflow_type", "tenant")
            .annotate(**spend_sums(), last=Max("created_at"))
            .order_by(*INSTANCE_SORTS[order], "instance_id")[:limit]
        ),
    )


EXPORT_COLUMNS = (
    "created_at",
    "tenant",
    "service",
    "model",
    "workflow_type",
    "instance_id",
    "step_name",
    "attempt",
    "success",
    "cost",
    "tokens_in",
    "tokens_cached",
    "tokens_out",
    "items",
)


def cost_export_rows(*, tenants: Collection[str], filters: CostFilters) -> Iterator[tuple[Any, ...]]:
    """The filtered api_costs rows, streamed from a server-side cursor in chunks."""
    return (
        _cost_qs(tenants=tenants, f=filters)
        .order_by("created_at", "id")
        .values_list(*EXPORT_COLUMNS)
        .iterator(chunk_size=2000)
    )


def cost_filter_choices(
    *, tenants: Collection[str], since: datetime, view: reads.RollupView | None = None
) -> dict[str, list[str]]:
    columns = {name: column for name, column in COST_DIMENSIONS.items() if name != "step"}
    got = reads.cost_grouped(
        reads.CostScope(tenants=tenants, since=since), by=tuple(columns.values()), measures=("calls",), view=view
    )
    return {name: sorted({key[k] for key in got if key[k]})[:200] for k, name in enumerate(columns)}
