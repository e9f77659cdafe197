"""The overview's counts from the instance rollups (instance_counts.py), exact and current.

The rollups hold every instance as of the roller's cursor. A read takes them, then the instances
whose history rows came after the cursor (or fill a hole below it) and those a retention batch
deleted since: it takes away what each counted as of the cursor (its `InstanceState` row) and
adds what it counts now (its ledger row). The window's partial first hour is read from
`InstanceState` and corrected the same way. Rollup rows and `InstanceState` must be read as of one
pass: the read checks that no pass committed meanwhile, and reads again when one did.

None when there is nothing to read (the roller never built them, or lags by more history than a
read takes): the caller counts from the ledger.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Any

from django.db.models import Count, Sum
from django.utils import timezone

from dashboard.models import (
    InstanceDaily,
    InstanceEndedHourly,
    InstanceHourly,
    InstanceState,
    RollupState,
)
from dashboard.rollups import days, instance_counts, sql
from dashboard.rollups import dirty as dirty_mod
from dashboard.rollups.services import READ_LIMIT, state_get
from ingest.engine.models import FINISHED_STATUSES, Status

HOUR = timedelta(hours=1)
THROUGHPUT = (Status.COMPLETE, Status.COMPLETED_WITH_ERRORS, Status.ERRORED)
# A paused instance (a budget gate waiting for an approval) keeps its step `running` in the
# ledger; only steps of instances that run now are in flight.
IN_FLIGHT = (Status.RUNNING, Status.WAITING_FOR_PAUSE)
LIVE = tuple(s for s in Status.values if s not in FINISHED_STATUSES)


@dataclass(frozen=True)
class OverviewCounts:
    by_status: dict[str, int]  # live statuses: every instance; finished ones: created since `since`
    ended: dict[tuple[datetime, str], int]  # (UTC hour ended, status) -> finished instances since `since`
    running_steps: int  # steps running in instances that run now


def _version(state: RollupState | None) -> tuple[Any, ...]:
    return (None,) if state is None else (state.cursor, state.updated_at, state.retention_seen)


def overview_counts(*, tenants: Collection[str], since: datetime, attempts: int = 3) -> OverviewCounts | None:
    for _ in range(attempts):
        state = state_get()
        if state is None or not state.instance_counts_built or state.day_zone != days.zone_name():
            return None
        touches = sql.history_touches(
            after=state.cursor, also=dirty_mod.hole_runs_from_json(state.gaps), limit=READ_LIMIT
        )
        if len(touches) >= READ_LIMIT:
            return None
        changed = {t.instance_id for t in touches if t.instance_id}
        batches = sql.retention_batches_after(max(0, state.retention_seen - instance_counts.RETENTION_RECHECK))
        changed |= instance_counts.purged(batches)
        got = _from_rollups(tenants=tenants, since=since)
        old = instance_counts.state_rows(changed) if changed else {}
        if _version(state_get()) != _version(state):
            continue  # a pass committed between the reads: they may disagree
        new = sql.instance_states(instance_ids=changed) if changed else []
        _apply(got, old.values(), -1, tenants=tenants, since=since)
        _apply(got, new, +1, tenants=tenants, since=since)
        return OverviewCounts(
            by_status={s: got.by_status.get(s, 0) for s in Status.values},
            ended={k: n for k, n in got.ended.items() if n},
            running_steps=got.running_steps,
        )
    return None


@dataclass
class _Counts:
    by_status: Counter[str]
    ended: Counter[tuple[datetime, str]]
    running_steps: int


def _first_whole_day(start: datetime) -> tuple[date, datetime]:
    """The first local day whose hours all start at or after `start` (a whole hour), and its first
    hour."""
    tz = days.zone()
    day = days.day_of(start, tz)
    first = days.hours_of_day(day, tz)[0]
    if first < start:
        day += timedelta(days=1)
        first = days.hours_of_day(day, tz)[0]
    return day, first


def _from_rollups(*, tenants: Collection[str], since: datetime) -> _Counts:
    """The counts as of the roller's cursor."""
    visible = list(tenants)
    whole = dirty_mod.hour_of(since) + (HOUR if dirty_mod.hour_of(since) != since else timedelta(0))
    by_status: Counter[str] = Counter()
    running = 0
    # Live statuses count every instance in them now, whatever its age: all days.
    for status, c, r in (
        InstanceDaily.objects.filter(tenant__in=visible, status__in=LIVE)
        .values("status")
        .annotate(c=Sum("n"), r=Sum("running_steps"))
        .order_by()
        .values_list("status", "c", "r")
    ):
        by_status[status] += c or 0
        if status in IN_FLIGHT:
            running += r or 0
    # Finished ones count the instances created since `since`: the partial first hour from
    # InstanceState, whole hours up to the first whole local day, whole days from then on.
    finished = list(FINISHED_STATUSES)
    first_day, first_day_hour = _first_whole_day(whole)
    parts: list[Iterable[tuple[str, Any]]] = [
        InstanceState.objects.filter(
            tenant__in=visible, status__in=finished, created_at__gte=since, created_at__lt=whole
        )
        .values("status")
        .annotate(c=Count("instance_id"))
        .order_by()
        .values_list("status", "c"),
        InstanceDaily.objects.filter(tenant__in=visible, status__in=finished, day__gte=first_day)
        .values("status")
        .annotate(c=Sum("n"))
        .order_by()
        .values_list("status", "c"),
    ]
    if first_day_hour > whole:
        parts.append(
            InstanceHourly.objects.filter(
                tenant__in=visible, status__in=finished, hour__gte=whole, hour__lt=first_day_hour
            )
            .values("status")
            .annotate(c=Sum("n"))
            .order_by()
            .values_list("status", "c")
        )
    for rows in parts:
        for status, c in rows:
            by_status[status] += c or 0
    ended: Counter[tuple[datetime, str]] = Counter()
    edge = InstanceState.objects.filter(
        tenant__in=visible, status__in=THROUGHPUT, ended_at__gte=since, ended_at__lt=whole
    ).values_list("ended_at", "status")
    for at, status in edge:
        assert at is not None
        ended[(dirty_mod.hour_of(at), status)] += 1
    for hour, status, n in (
        InstanceEndedHourly.objects.filter(tenant__in=visible, status__in=THROUGHPUT, hour__gte=whole)
        .values("hour", "status")
        .annotate(c=Sum("n"))
        .order_by()
        .values_list("hour", "status", "c")
    ):
        ended[(hour, status)] += n or 0
    return _Counts(by_status, ended, running)


def _apply(
    got: _Counts, rows: Iterable[dict[str, Any]], sign: int, *, tenants: Collection[str], since: datetime
) -> None:
    """Add (sign +1) or take away (-1) what each instance row counts in the overview."""
    visible = set(tenants)
    for r in rows:
        if r["tenant"] not in visible:
            continue
        status = r["status"]
        if status not in FINISHED_STATUSES:
            got.by_status[status] += sign
            if status in IN_FLIGHT:
                got.running_steps += sign * r["running_steps"]
        elif r["created_at"] >= since:
            got.by_status[status] += sign
        if status in THROUGHPUT and r["ended_at"] is not None and r["ended_at"] >= since:
            got.ended[(dirty_mod.hour_of(r["ended_at"]), status)] += sign


def local_hour(hour: datetime) -> datetime:
    """A UTC hour as the throughput chart buckets it (local time)."""
    return timezone.localtime(hour, days.zone())
