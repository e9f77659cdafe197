"""The roller: the only writer of the rollup tables.

One pass (`rollup_catch_up`), in one transaction with the state row locked:
1. read the history rows after the cursor (and the holes being watched) and advance the cursor;
2. recompute, from the ledger, every settled hour those rows dirtied and the per-instance spend
   of the instances they recorded costs for;
3. compute the hours that have closed since the last pass (at most `max_hours` of them, so a
   first catch-up over months of ledger is many short transactions, each resumable);
4. sum the local days those hours belong to again from the hourly rows (days.py);
5. store the new state with the rows, so a page never sees rows and a cursor that disagree.

Recomputing is idempotent (delete the hour's rows, insert them again from the ledger), so a pass
that runs twice, or after a crash, or reads a change twice, leaves the same rows.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Any

from django.db import transaction
from django.db.models import Min, Q, Sum

from dashboard.models import (
    INSTANCE_PART_COSTS,
    CostDaily,
    CostHourly,
    InstanceCost,
    InstanceDaily,
    InstanceEndedHourly,
    InstanceHourly,
    InstanceState,
    RollupState,
    StepDaily,
    StepHourIds,
    StepHourly,
)
from dashboard.rollups import days, hist, instance_counts, sql
from dashboard.rollups import dirty as dirty_mod

log = logging.getLogger("runledger.rollups")
STATE = "default"
READ_LIMIT = 50_000
FIRST_HOLE_SCAN = 10_000  # ids below the first cursor checked for holes (transactions in flight)


@dataclass(frozen=True)
class PassResult:
    history_rows: int
    hours_recomputed: int
    hours_closed: int
    instances_recomputed: int
    closed_until: datetime
    caught_up: bool  # nothing left to close and no history left unread


def state_get() -> RollupState | None:
    return RollupState.objects.filter(name=STATE).first()


def _state_locked(now: datetime) -> RollupState:
    state = RollupState.objects.select_for_update().filter(name=STATE).first()
    if state is not None and state.closed_until is not None:
        return state
    # First pass: everything up to the newest history row is in the ledger as it stands now, but
    # for transactions still running with lower ids: watch the recent holes.
    cursor = sql.history_max_id()
    present = set(sql.history_ids_between(low=max(0, cursor - FIRST_HOLE_SCAN), high=cursor))
    seen, next_xid = time.time(), (sql.transaction_horizon() or (0, 0))[1]
    holes = {i: (seen, next_xid) for i in range(max(1, cursor - FIRST_HOLE_SCAN + 1), cursor + 1) if i not in present}
    StepHourIds.objects.all().delete()
    StepHourIds.objects.bulk_create(
        [StepHourIds(hour=h, min_id=lo, max_id=hi) for h, lo, hi in sql.step_hour_ids_all()], batch_size=2000
    )
    starts = [t for t in (StepHourIds.objects.aggregate(m=Min("hour"))["m"], sql.costs_first_at()) if t]
    closed_until = dirty_mod.hour_of(min(starts)) if starts else dirty_mod.hour_of(now)
    state, _ = RollupState.objects.update_or_create(
        name=STATE,
        defaults={
            "cursor": cursor,
            "gaps": dirty_mod.holes_to_json(holes),
            "closed_until": closed_until,
            "instances_built": False,
            "instance_counts_built": False,
            "updated_at": now,
        },
    )
    return RollupState.objects.select_for_update().get(name=STATE)


def _hour_ranges(hours: set[datetime]) -> list[sql.Range]:
    """Consecutive hours merged into ranges (fewer OR terms in the ledger query)."""
    out: list[sql.Range] = []
    for h in sorted(hours):
        if out and out[-1][1] == h:
            out[-1] = (out[-1][0], h + timedelta(hours=1))
        else:
            out.append((h, h + timedelta(hours=1)))
    return out


def _step_columns(f: sql.StepFigures) -> dict[str, Any]:
    """A step rollup row's figures (hourly and daily tables alike)."""
    return {
        "n": f.n,
        "in_flight": f.in_flight,
        "completed": f.completed,
        "errored": f.errored,
        "retried": f.retried,
        "attempts": f.attempts,
        "durations": hist.pack(f.durations or {}),
    }


def _instance_cost_columns(r: dict[str, Any]) -> dict[str, Any]:
    """A per-instance spend row's columns from an aggregate over its api_costs (tokens may sum to NULL)."""
    return {
        "instance_id": r["instance_id"],
        "tenant": r["tenant"],
        "workflow_type": r["workflow_type"],
        "first_at": r["first_at"],
        "last_at": r["last_at"],
        "total": r["total"],
        "calls": r["calls"],
        "failed": r["failed"],
        "tokens_in": r["tokens_in"] or 0,
        "tokens_out": r["tokens_out"] or 0,
    }


def _write_steps(ranges: list[sql.Range]) -> None:
    StepHourly.objects.filter(sql.ranges_q("hour", ranges)).delete()
    where = step_rows_for(ranges)
    StepHourly.objects.bulk_create(
        [
            StepHourly(
                hour=h,
                workflow=w,
                tenant=t,
                step_name=name,
                **_step_columns(f),
            )
            for (h, w, t, name), f in sql.step_aggregate(ranges, where).items()
        ],
        batch_size=2000,
    )


def _write_costs(ranges: list[sql.Range]) -> None:
    CostHourly.objects.filter(sql.ranges_q("hour", ranges)).delete()
    CostHourly.objects.bulk_create(
        [
            CostHourly(
                hour=r["hour"],
                tenant=r["tenant"],
                service=r["service"],
                workflow_type=r["workflow_type"],
                step_name=r["step_name"],
                model=r["model"],
                total=r["total"],
                calls=r["calls"],
                failed=r["failed"],
                tokens_in=r["tokens_in"] or 0,
                tokens_out=r["tokens_out"] or 0,
            )
            for r in sql.cost_hour_rows(ranges)
        ],
        batch_size=2000,
    )


def _hours_in(ranges: Iterable[sql.Range]) -> set[datetime]:
    out: set[datetime] = set()
    for start, end in ranges:
        assert end is not None
        h = start
        while h < end:
            out.add(h)
            h += timedelta(hours=1)
    return out


def _write_days(day_list: Iterable[date]) -> None:
    """Daily rows again from the hourly ones, for these local days."""
    tz = days.zone()
    for day in sorted(set(day_list)):
        hours = days.hours_of_day(day, tz)
        StepDaily.objects.filter(day=day).delete()
        merged: dict[tuple[str, str, str], sql.StepFigures] = {}
        for w, t, name, n, fl, c, e, r, a, d in StepHourly.objects.filter(hour__in=hours).values_list(
            "workflow",
            "tenant",
            "step_name",
            "n",
            "in_flight",
            "completed",
            "errored",
            "retried",
            "attempts",
            "durations",
        ):
            merged.setdefault((w, t, name), sql.StepFigures()).add(
                sql.StepFigures(n, fl, c, e, r, a, hist.unpack_into({}, d))
            )
        StepDaily.objects.bulk_create(
            [
                StepDaily(
                    day=day,
                    workflow=w,
                    tenant=t,
                    step_name=name,
                    **_step_columns(f),
                )
                for (w, t, name), f in merged.items()
            ],
            batch_size=2000,
        )
        CostDaily.objects.filter(day=day).delete()
        CostDaily.objects.bulk_create(
            [
                CostDaily(day=day, **r)
                for r in CostHourly.objects.filter(hour__in=hours)
                .values(*sql.COST_KEY_FIELDS)
                .annotate(
                    total=Sum("total"),
                    calls=Sum("calls"),
                    failed=Sum("failed"),
                    tokens_in=Sum("tokens_in"),
                    tokens_out=Sum("tokens_out"),
                )
                .order_by()
            ],
            batch_size=2000,
        )


def _write_instances(instance_ids: set[str]) -> None:
    ids = sorted(instance_ids)
    for k in range(0, len(ids), 1000):
        chunk = ids[k : k + 1000]
        InstanceCost.objects.filter(instance_id__in=chunk).delete()
        InstanceCost.objects.bulk_create(
            [InstanceCost(**_instance_cost_columns(r)) for r in sql.instance_cost_rows(instance_ids=chunk)],
            batch_size=2000,
        )
        for column, model in INSTANCE_PART_COSTS.items():
            model.objects.filter(instance_id__in=chunk).delete()
            model.objects.bulk_create(
                [
                    model(**_instance_cost_columns(r), **{column: r[column]})
                    for r in sql.instance_part_cost_rows(column, instance_ids=chunk)
                ],
                batch_size=2000,
            )


@dataclass(frozen=True)
class Since:
    """The history rows after a cursor (or filling its holes), and what they dirtied."""

    touches: list[sql.Touch]
    dirty: dirty_mod.Dirty
    step_ids: list[tuple[int, datetime]]  # (id, start hour) of the touched instances' steps


def dirty_since(*, cursor: int, holes: Sequence[dirty_mod.IdRun], limit: int = READ_LIMIT) -> Since:
    touches = sql.history_touches(after=cursor, also=holes, limit=limit)
    t = dirty_mod.touched(touches)
    step_ids = sql.step_ids_of(instance_ids=t.step_instances) if t.step_instances else []
    span_hours = (
        dirty_mod.history_span_hours(sql.history_times_of(instance_ids=t.span_instances)) if t.span_instances else set()
    )
    dirty = dirty_mod.dirty_of(t, step_hours=[h for _, h in step_ids], span_hours=span_hours)
    return Since(touches, dirty, step_ids)


def step_rows_for(ranges: Sequence[sql.Range], *, instance_ids: Collection[str] = ()) -> sql.StepRows:
    """Where the steps started in `ranges` are: the id ranges of their hours, plus `instance_ids`
    (instances whose steps the roller has not seen yet)."""
    hours = Q(pk__in=[])
    for start, end in ranges:
        hours |= Q(hour__gte=dirty_mod.hour_of(start)) & (Q() if end is None else Q(hour__lt=end))
    found = sorted(StepHourIds.objects.filter(hours).values_list("min_id", "max_id"))
    merged: list[sql.IdRange] = []
    for lo, hi in found:
        if merged and lo <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(hi, merged[-1][1]))
        else:
            merged.append((lo, hi))
    return sql.StepRows(ids=merged, instance_ids=sorted(instance_ids))


def _hour_ids_extend(pairs: Iterable[tuple[int, datetime]]) -> None:
    """Widen StepHourIds so each hour's range holds these step ids."""
    wanted: dict[datetime, tuple[int, int]] = {}
    for step_id, hour in pairs:
        lo, hi = wanted.get(hour, (step_id, step_id))
        wanted[hour] = (min(lo, step_id), max(hi, step_id))
    if not wanted:
        return
    have = {
        h: (lo, hi)
        for h, lo, hi in StepHourIds.objects.filter(hour__in=list(wanted)).values_list("hour", "min_id", "max_id")
    }
    for hour, (lo, hi) in wanted.items():
        if hour not in have:
            StepHourIds.objects.create(hour=hour, min_id=lo, max_id=hi)
        elif lo < have[hour][0] or hi > have[hour][1]:
            StepHourIds.objects.filter(hour=hour).update(min_id=min(lo, have[hour][0]), max_id=max(hi, have[hour][1]))


def _instance_counts_pass(state: RollupState, touched: Collection[str], *, tz_changed: bool) -> int:
    """The instance counts' part of a pass (instance_counts.py); the retention batches seen."""
    batches = sql.retention_batches_after(max(0, state.retention_seen - instance_counts.RETENTION_RECHECK))
    seen = max([state.retention_seen, *(b[0] for b in batches)])
    if not state.instance_counts_built:
        instance_counts.build_all()
        return seen
    instance_counts.refresh({*touched, *instance_counts.purged(batches)})
    if tz_changed:
        instance_counts.all_days_rewrite()
    return seen


def rollup_catch_up(*, now: datetime, max_hours: int = 24) -> PassResult:
    """One pass of the roller (see the module docstring). Call until `caught_up`."""
    with transaction.atomic():
        state = _state_locked(now)
        assert state.closed_until is not None
        holes = dirty_mod.holes_from_json(state.gaps)
        since = dirty_since(cursor=state.cursor, holes=dirty_mod.id_runs(holes))
        touches, dirty = since.touches, since.dirty
        _hour_ids_extend(since.step_ids)
        cursor, holes = dirty_mod.cursor_advance(
            state.cursor, holes, [r.id for r in touches], now=time.time(), horizon=sql.transaction_horizon()
        )
        closed_until = state.closed_until
        # Hours at or past closed_until are computed below (or stay raw) whatever dirtied them.
        step_ranges = _hour_ranges({h for h in dirty.step_hours if h < closed_until})
        cost_ranges = _hour_ranges({h for h in dirty.cost_hours if h < closed_until})
        if step_ranges:
            _write_steps(step_ranges)
        if cost_ranges:
            _write_costs(cost_ranges)
        if state.instances_built and dirty.cost_instances:
            _write_instances(set(dirty.cost_instances))
        target = min(dirty_mod.hour_of(now), closed_until + timedelta(hours=max_hours))
        closing: list[sql.Range] = [(closed_until, target)] if target > closed_until else []
        if closing:
            _write_steps(closing)
            _write_costs(closing)
        tz_name = days.zone_name()
        if state.day_zone != tz_name:  # first pass, or the deployment's time zone changed: every day
            first = StepHourly.objects.aggregate(m=Min("hour"))["m"]
            first_cost = CostHourly.objects.aggregate(m=Min("hour"))["m"]
            starts = [t for t in (first, first_cost) if t is not None]
            day_set = (
                days.days_of(_hours_in([(min(starts), max(target, closed_until))]), days.zone()) if starts else set()
            )
        else:
            day_set = days.days_of(_hours_in([*step_ranges, *cost_ranges, *closing]), days.zone())
        _write_days(day_set)
        built = state.instances_built
        if not built:
            sql.instance_costs_build_all()
            built = True
        retention_seen = _instance_counts_pass(state, dirty.step_instances, tz_changed=state.day_zone != tz_name)
        RollupState.objects.filter(name=STATE).update(
            cursor=cursor,
            gaps=dirty_mod.holes_to_json(holes),
            closed_until=max(target, closed_until),
            instances_built=built,
            day_zone=tz_name,
            updated_at=now,
            instance_counts_built=True,
            retention_seen=retention_seen,
        )
    hours_closed = int((target - closed_until).total_seconds() // 3600) if closing else 0
    if not state.instances_built or hours_closed >= max_hours:  # a catch-up, not a routine pass
        sql.rollups_analyze()
    result = PassResult(
        history_rows=len(touches),
        hours_recomputed=len(_hours_in([*step_ranges, *cost_ranges])),
        hours_closed=hours_closed,
        instances_recomputed=len(dirty.cost_instances) if state.instances_built else 0,
        closed_until=max(target, closed_until),
        caught_up=max(target, closed_until) >= dirty_mod.hour_of(now) and len(touches) < READ_LIMIT,
    )
    if result.hours_closed or result.hours_recomputed:
        log.info("rollups: %s", result)
    return result


def rollup_rebuild(*, now: datetime) -> None:
    """Forget every rollup row and the state: the next passes compute everything again (after
    ledger writes that bypassed the engine, which leave no history rows to follow)."""
    with transaction.atomic():
        RollupState.objects.filter(name=STATE).delete()
        StepHourly.objects.all().delete()
        CostHourly.objects.all().delete()
        InstanceCost.objects.all().delete()
        for model in INSTANCE_PART_COSTS.values():
            model.objects.all().delete()
        StepHourIds.objects.all().delete()
        StepDaily.objects.all().delete()
        CostDaily.objects.all().delete()
        for table in (InstanceState, InstanceHourly, InstanceDaily, InstanceEndedHourly):
            table.objects.all().delete()
