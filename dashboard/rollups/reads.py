"""Exact figures from rollups and ledger together: which time ranges each side answers.

A page reads the roller's state first, then the history rows after its cursor (normally a few
seconds' worth): the hours those rows dirtied, and every hour not closed yet, are read from the
ledger; every other whole hour of the window from the rollup rows (whole local days from the
daily rows); the partial hours at the window's edges from the ledger. Each hour is counted by exactly one side, so the
sum is the ledger's own aggregate at the moment of reading, whether or not the roller has run lately.

When the roller has fallen far behind (more history than one read takes) or never ran, every
range is read from the ledger: slow, still exact.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from typing import Any

from django.db.models import Count, Q, QuerySet, Sum
from django.db.models.functions import TruncHour
from django.utils import timezone

from dashboard.models import CostDaily, CostHourly, StepDaily, StepHourly
from dashboard.rollups import days, hist
from dashboard.rollups import dirty as dirty_mod
from dashboard.rollups.services import READ_LIMIT, dirty_since, state_get, step_rows_for
from dashboard.rollups.sql import Range, StepFigures, StepRows, costs_in, ranges_q, step_aggregate

HOUR = timedelta(hours=1)
MICRO = Decimal("0.000001")  # the ledger stores money with 6 decimals
MAX_ID = 2**63 - 1


@dataclass(frozen=True)
class RollupView:
    """What the rollups can answer right now."""

    closed_until: datetime | None  # None: no rollup to read (never ran, or too far behind)
    dirty: dirty_mod.Dirty
    instances_built: bool
    days_ok: bool  # the daily rows are in this deployment's time zone

    @property
    def usable(self) -> bool:
        return self.closed_until is not None


NOTHING = RollupView(None, dirty_mod.Dirty(), False, False)


def rollup_view() -> RollupView:
    state = state_get()
    if state is None or state.closed_until is None:
        return NOTHING
    since = dirty_since(cursor=state.cursor, holes=dirty_mod.hole_runs_from_json(state.gaps), limit=READ_LIMIT)
    if len(since.touches) >= READ_LIMIT:
        return NOTHING
    return RollupView(state.closed_until, since.dirty, state.instances_built, state.day_zone == days.zone_name())


def _ceil_hour(at: datetime) -> datetime:
    h = dirty_mod.hour_of(at)
    return h if h == at else h + HOUR


@dataclass(frozen=True)
class Split:
    """A time window cut by who answers it: daily rows (whole local days), hourly rows (whole
    hours), the ledger (the rest). Together they cover the window once."""

    days: list[date] = field(default_factory=list)
    hours: list[Range] = field(default_factory=list)
    raw: list[Range] = field(default_factory=list)


def _merge(ranges: list[Range], a: datetime, b: datetime | None) -> None:
    if b is not None and b <= a:
        return
    if ranges and ranges[-1][1] == a:
        ranges[-1] = (ranges[-1][0], b)
    else:
        ranges.append((a, b))


def split(
    view: RollupView,
    *,
    since: datetime,
    until: datetime | None,
    dirty_hours: frozenset[datetime],
    use_days: bool = True,
) -> Split:
    """[since, until) (until None: open). The rollups take whole, closed, clean hours (grouped in
    whole local days where `use_days`); the ledger everything else."""
    if until is not None and until <= since:
        return Split()
    if not view.usable:
        return Split(raw=[(since, until)])
    assert view.closed_until is not None
    last = view.closed_until if until is None else min(view.closed_until, dirty_mod.hour_of(until))
    clean: list[datetime] = []
    h = _ceil_hour(since)
    while h < last:
        if h not in dirty_hours:
            clean.append(h)
        h += HOUR
    whole_days: set[date] = set()
    if use_days and view.days_ok:
        tz, clean_set = days.zone(), set(clean)
        whole_days = {d for d in days.days_of(clean, tz) if all(x in clean_set for x in days.hours_of_day(d, tz))}
        by_day = {x: days.day_of(x, tz) for x in clean}
        clean = [x for x in clean if by_day[x] not in whole_days]
    out = Split(days=sorted(whole_days))
    covered = sorted([*clean, *(x for d in whole_days for x in days.hours_of_day(d, days.zone()))])
    cursor = since
    for x in covered:
        _merge(out.raw, cursor, x)
        cursor = x + HOUR
    _merge(out.raw, cursor, until)
    for x in clean:
        _merge(out.hours, x, x + HOUR)
    return out


# ---- steps ------------------------------------------------------------------------------------


def step_figures(
    *, workflow: str, tenants: Collection[str], since: datetime, view: RollupView | None = None
) -> dict[str, StepFigures]:
    """Per step name: the figures of the workflow's steps started since `since` in `tenants`."""
    view = view or rollup_view()
    parts = split(view, since=since, until=None, dirty_hours=view.dirty.step_hours)
    out: dict[str, StepFigures] = {}
    fields = ("step_name", "n", "in_flight", "completed", "errored", "retried", "attempts", "durations")
    rows: list[Iterable[tuple[Any, ...]]] = []
    if parts.days:
        rows.append(
            StepDaily.objects.filter(day__in=parts.days, workflow=workflow, tenant__in=list(tenants)).values_list(
                *fields
            )
        )
    if parts.hours:
        rows.append(
            StepHourly.objects.filter(
                ranges_q("hour", parts.hours), workflow=workflow, tenant__in=list(tenants)
            ).values_list(*fields)
        )
    for source in rows:
        for name, n, in_flight, completed, errored, retried, attempts, durations in source:
            out.setdefault(name, StepFigures()).add(
                StepFigures(n, in_flight, completed, errored, retried, attempts, hist.unpack_into({}, durations))
            )
    if parts.raw:
        where = (
            step_rows_for(parts.raw, instance_ids=view.dirty.step_instances)
            if view.usable
            else StepRows(ids=[(0, MAX_ID)])
        )
        for (_h, _w, _t, name), f in step_aggregate(parts.raw, where, workflow=workflow, tenants=tenants).items():
            out.setdefault(name, StepFigures()).add(f)
    return out


# ---- costs ------------------------------------------------------------------------------------

# Each measure as the rollup sums it and as the ledger computes it.
COST_MEASURES: dict[str, tuple[Any, Any]] = {
    "total": (Sum("total"), Sum("cost")),
    "calls": (Sum("calls"), Count("id")),
    "failed": (Sum("failed"), Count("id", filter=Q(success=False))),
    "tokens_in": (Sum("tokens_in"), Sum("tokens_in")),
    "tokens_out": (Sum("tokens_out"), Sum("tokens_out")),
}
BUCKET = "bucket"  # a group-by key: the time bucket (see `cost_grouped`)


@dataclass(frozen=True)
class CostScope:
    """Which api_costs rows: tenants (None: every tenant), a time window, exact column values."""

    tenants: Collection[str] | None
    since: datetime
    until: datetime | None = None
    equals: tuple[tuple[str, str], ...] = ()


def _bucket(hour: datetime, bucket: str) -> datetime:
    local = timezone.localtime(hour, days.zone())
    return local.replace(hour=0, minute=0, second=0, microsecond=0) if bucket == "day" else local


def cost_grouped(
    scope: CostScope,
    *,
    by: Sequence[str],
    measures: Sequence[str],
    bucket: str = "",
    view: RollupView | None = None,
) -> dict[tuple[Any, ...], dict[str, Any]]:
    """{key tuple (in `by` order): {measure: value}} over the scope, rollups and ledger merged.

    `by` holds api_costs columns and, with `bucket` "hour" or "day", BUCKET: the local hour, or the
    local day (days.py) as an aware local midnight."""
    view = view or rollup_view()
    parts = split(
        view, since=scope.since, until=scope.until, dirty_hours=view.dirty.cost_hours, use_days=bucket != "hour"
    )
    filters: dict[str, Any] = dict(scope.equals)
    if scope.tenants is not None:
        filters["tenant__in"] = list(scope.tenants)
    out: dict[tuple[Any, ...], dict[str, Any]] = {}

    def fold(rows: Iterable[dict[str, Any]], time_key: str, to_bucket: Any) -> None:
        for r in rows:
            key = tuple(to_bucket(r[time_key]) if k == BUCKET else r[k] for k in by)
            acc = out.get(key)
            if acc is None:
                out[key] = {m: r[m] or 0 for m in measures}
            else:
                for m in measures:
                    acc[m] += r[m] or 0

    def keys(time_key: str) -> list[str]:
        return [time_key if k == BUCKET else k for k in by]

    rollup_aggs = {m: COST_MEASURES[m][0] for m in measures}
    if parts.days:
        qs_days = CostDaily.objects.filter(day__in=parts.days, **filters)
        fold(
            _grouped(qs_days, keys("day"), rollup_aggs),
            "day",
            lambda d: timezone.make_aware(datetime.combine(d, time()), days.zone()),
        )
    if parts.hours:
        qs_hours = CostHourly.objects.filter(ranges_q("hour", parts.hours), **filters)
        fold(_grouped(qs_hours, keys("hour"), rollup_aggs), "hour", lambda h: _bucket(h, bucket))
    if parts.raw:
        qs_raw = costs_in(parts.raw).filter(**filters).annotate(hour=TruncHour("created_at", tzinfo=UTC))
        fold(
            _grouped(qs_raw, keys("hour"), {m: COST_MEASURES[m][1] for m in measures}),
            "hour",
            lambda h: _bucket(h, bucket),
        )
    if "total" in measures:  # SQLite sums decimals in floating point: back to the ledger's 6 places
        for acc in out.values():
            acc["total"] = money(acc["total"])
    return out


def money(value: Any) -> Decimal:
    return Decimal(str(value or 0)).quantize(MICRO)


def _grouped(qs: QuerySet[Any], by: Sequence[str], aggregates: dict[str, Any]) -> Iterable[dict[str, Any]]:
    if not by:  # one row for the whole selection (an empty values() would group by every column)
        return [qs.aggregate(**aggregates)]
    rows: Iterable[dict[str, Any]] = qs.values(*by).annotate(**aggregates).order_by()
    return rows
