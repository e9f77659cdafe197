"""The overview's instance counts, kept by the roller: instances by the hour (and local day) they
were created, tenant, workflow and status, with their running steps; finished instances by the
hour they ended. Read by instance_reads.py.

`InstanceState` is each instance as the roller last saw it. A history row of an instance (every
status change writes one, and so does every step start or end) makes the roller read the
instance again from the ledger; when its row changed (status, end, running steps), the hours it
counted in before and counts in now (created hour, ended hour: an instance retried after it
ended moves out of its old ended hour) are computed again from `InstanceState`, and the local days
of the created hours from the hourly rows. So every count is exact as of the roller's cursor.

Retention deletes finished instances with their history, leaving no row to follow: each pass
looks at the recent `RetentionBatch` rows instead, and drops the instances of the batch's
workflow that ended before its cutoff and are no longer in the ledger.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from datetime import UTC, date, datetime, timedelta
from typing import Any

from django.db.models import Count, Exists, OuterRef, Q, Sum
from django.db.models.functions import TruncHour

from dashboard.models import InstanceDaily, InstanceEndedHourly, InstanceHourly, InstanceState
from dashboard.rollups import days, sql
from dashboard.rollups.dirty import hour_of
from ingest.engine.models import Instance

HOUR = timedelta(hours=1)
CHUNK = 1000
# Retention batches looked at again on every pass: one that committed after a later one (ids come
# from a sequence) is still applied. Looking again finds nothing to drop once applied.
RETENTION_RECHECK = 50


def _ranges_q(field: str, hours: Iterable[datetime]) -> Q:
    q = Q(pk__in=[])
    start: datetime | None = None
    end: datetime | None = None
    for h in sorted(set(hours)):
        if end == h:
            end = h + HOUR
            continue
        if start is not None:
            q |= Q(**{f"{field}__gte": start, f"{field}__lt": end})
        start, end = h, h + HOUR
    if start is not None:
        q |= Q(**{f"{field}__gte": start, f"{field}__lt": end})
    return q


def _count_columns(r: Mapping[str, Any]) -> dict[str, Any]:
    """A count row's columns from its aggregate: instances (`c`) and their running steps (`r`, NULL when none)."""
    return {
        "tenant": r["tenant"],
        "workflow": r["workflow"],
        "status": r["status"],
        "n": r["c"],
        "running_steps": r["r"] or 0,
    }


def _write_created(hours: Collection[datetime] | None) -> None:
    """Recompute these hours (None: every hour) from InstanceState."""
    if hours is not None and not hours:
        return
    InstanceHourly.objects.filter(Q() if hours is None else _ranges_q("hour", hours)).delete()
    rows = (
        InstanceState.objects.filter(Q(~Q(created_at=None)) if hours is None else _ranges_q("created_at", hours))
        .annotate(h=TruncHour("created_at", tzinfo=UTC))
        .values("h", "tenant", "workflow", "status")
        .annotate(c=Count("instance_id"), r=Sum("running_steps"))
        .order_by()
    )
    InstanceHourly.objects.bulk_create(
        [InstanceHourly(hour=r["h"], **_count_columns(r)) for r in rows],
        batch_size=2000,
    )


def _write_days(day_list: Iterable[date]) -> None:
    tz = days.zone()
    for day in sorted(set(day_list)):
        InstanceDaily.objects.filter(day=day).delete()
        rows = (
            InstanceHourly.objects.filter(hour__in=days.hours_of_day(day, tz))
            .values("tenant", "workflow", "status")
            .annotate(c=Sum("n"), r=Sum("running_steps"))
            .order_by()
        )
        InstanceDaily.objects.bulk_create(
            [InstanceDaily(day=day, **_count_columns(r)) for r in rows],
            batch_size=2000,
        )


def _write_ended(hours: Collection[datetime] | None) -> None:
    """Recompute these hours (None: every hour) from InstanceState."""
    if hours is not None and not hours:
        return
    InstanceEndedHourly.objects.filter(Q() if hours is None else _ranges_q("hour", hours)).delete()
    rows = (
        InstanceState.objects.filter(Q(~Q(ended_at=None)) if hours is None else _ranges_q("ended_at", hours))
        .annotate(h=TruncHour("ended_at", tzinfo=UTC))
        .values("h", "tenant", "workflow", "status")
        .annotate(c=Count("instance_id"))
        .order_by()
    )
    InstanceEndedHourly.objects.bulk_create(
        [
            InstanceEndedHourly(hour=r["h"], tenant=r["tenant"], workflow=r["workflow"], status=r["status"], n=r["c"])
            for r in rows
        ],
        batch_size=2000,
    )


def all_days_rewrite() -> None:
    """Every local day again from the hourly rows (the deployment's time zone changed)."""
    InstanceDaily.objects.all().delete()
    _write_days(days.days_of(InstanceHourly.objects.values_list("hour", flat=True).distinct(), days.zone()))


def build_all() -> None:
    """Everything from the ledger as it stands (the first pass, or after a rebuild)."""
    sql.instance_states_build_all()
    _write_created(None)
    _write_ended(None)
    all_days_rewrite()


def purged(batches: Iterable[tuple[int, str, datetime]]) -> set[str]:
    """Instances `InstanceState` still holds that these retention batches deleted: of the batch's
    workflow, ended before its cutoff, and no longer in the ledger."""
    cutoffs: dict[str, datetime] = {}
    for _id, workflow, cutoff in batches:
        cutoffs[workflow] = max(cutoff, cutoffs.get(workflow, cutoff))
    gone: set[str] = set()
    for workflow, cutoff in cutoffs.items():
        gone |= set(
            InstanceState.objects.filter(workflow=workflow, ended_at__lt=cutoff)
            .filter(~Exists(Instance.objects.filter(pk=OuterRef("instance_id"))))
            .values_list("instance_id", flat=True)
        )
    return gone


def state_rows(instance_ids: Collection[str]) -> dict[str, dict[str, Any]]:
    """`InstanceState` rows of these instances, by id."""
    return {
        r["instance_id"]: r
        for r in InstanceState.objects.filter(instance_id__in=list(instance_ids)).values(*sql.INSTANCE_STATE_FIELDS)
    }


def refresh(instance_ids: Collection[str]) -> int:
    """Read these instances again from the ledger; recompute the hours and days of those whose row
    changed (what they counted in before, and now). How many changed."""
    ids = sorted(instance_ids)
    created: set[datetime] = set()
    ended: set[datetime] = set()
    changed = 0
    for k in range(0, len(ids), CHUNK):
        chunk = ids[k : k + CHUNK]
        old = state_rows(chunk)
        new = {r["instance_id"]: r for r in sql.instance_states(instance_ids=chunk)}
        moved = [i for i in chunk if old.get(i) != new.get(i)]
        if not moved:
            continue
        changed += len(moved)
        for i in moved:
            for row in (old.get(i), new.get(i)):
                if row is not None:
                    created.add(hour_of(row["created_at"]))
                    if row["ended_at"] is not None:
                        ended.add(hour_of(row["ended_at"]))
        InstanceState.objects.filter(instance_id__in=moved).delete()
        InstanceState.objects.bulk_create([InstanceState(**new[i]) for i in moved if i in new], batch_size=2000)
    _write_created(created)
    _write_ended(ended)
    _write_days(days.days_of(created, days.zone()))
    return changed
