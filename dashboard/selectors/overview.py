"""Overview counters: instances by status, throughput, steps in flight, what waits."""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from typing import TypedDict

from django.db.models import (
    Count,
    F,
    Q,
)
from django.db.models.functions import TruncHour

from dashboard.rollups import instance_reads, reads
from ingest.engine.models import (
    FINISHED_STATUSES,
    ApprovalRequest,
    ApprovalState,
    DeadLetter,
    DeadLetterState,
    Instance,
    Status,
    Step,
    StepStatus,
)

# ---- overview ----------------------------------------------------------------------------


class ThroughputRow(TypedDict):
    """Instances that finished in one hour, by outcome."""

    bucket: datetime
    complete: int
    with_errors: int
    errored: int


class StepInFlight(TypedDict):
    instance_id: str
    name: str
    attempts: int
    started_at: datetime
    workflow: str
    tenant: str


class ServiceSpend(TypedDict):
    service: str
    total: Decimal
    calls: int


def instance_status_counts(*, tenants: Collection[str], since: datetime | None = None) -> dict[str, int]:
    """Instances by status. With `since`, finished statuses count only instances created since
    then (the instances list's `range=` filter, so a tile's count is the count of the list it
    links to); live statuses (queued, running, paused, waiting) count every instance in them now."""
    # One query either way: with `since`, the recent count is a filtered aggregate beside the total.
    recent = Count("id", filter=Q(created_at__gte=since)) if since is not None else Count("id")
    rows = (
        Instance.objects.filter(tenant__in=tenants).values("status").annotate(n=Count("id"), recent=recent).order_by()
    )
    counts = {s.value: 0 for s in Status}
    for row in rows:
        windowed = since is not None and row["status"] in FINISHED_STATUSES
        counts[row["status"]] = row["recent"] if windowed else row["n"]
    return counts


def throughput_rows(*, tenants: Collection[str], since: datetime) -> list[ThroughputRow]:
    """Finished instances per hour: [{"bucket", "complete", "with_errors", "errored"}], oldest
    first. `with_errors` (completed_with_errors) is a warning, not a failure. A bucket is a UTC
    hour shown in local time (as the rollups keep them: the local hour wherever the zone's offset
    is whole hours)."""
    rows = (
        Instance.objects.filter(tenant__in=tenants, ended_at__gte=since, status__in=instance_reads.THROUGHPUT)
        .annotate(hour=TruncHour("ended_at", tzinfo=UTC))
        .values("hour", "status")
        .annotate(n=Count("id"))
        .order_by()
    )
    return _throughput(((r["hour"], r["status"]), r["n"]) for r in rows)


def _throughput(counts: Iterable[tuple[tuple[datetime, str], int]]) -> list[ThroughputRow]:
    column = {Status.COMPLETE: "complete", Status.COMPLETED_WITH_ERRORS: "with_errors", Status.ERRORED: "errored"}
    out: dict[datetime, ThroughputRow] = {}
    for (hour, status), n in counts:
        row = out.setdefault(
            hour, {"bucket": instance_reads.local_hour(hour), "complete": 0, "with_errors": 0, "errored": 0}
        )
        row[column[Status(status)]] += n  # type: ignore[literal-required]
    return [out[h] for h in sorted(out)]


@dataclass(frozen=True)
class OverviewFigures:
    counts: dict[str, int]
    throughput: list[ThroughputRow]
    in_flight_count: int


def overview_figures(*, tenants: Collection[str], since: datetime) -> OverviewFigures:
    """The tiles' counts (as `instance_status_counts`), the throughput (as `throughput_rows`) and the
    steps in flight (as `steps_in_flight_count`): from the instance rollups, exact and current
    (dashboard/rollups/instance_reads.py), or from the ledger when there are none to read."""
    got = instance_reads.overview_counts(tenants=tenants, since=since)
    if got is None:
        return OverviewFigures(
            instance_status_counts(tenants=tenants, since=since),
            throughput_rows(tenants=tenants, since=since),
            steps_in_flight_count(tenants=tenants),
        )
    return OverviewFigures(got.by_status, _throughput(got.ended.items()), got.running_steps)


# A paused instance (a budget gate waiting for an approval) keeps its step `running` in the
# ledger; only steps of instances that run now are in flight.
_IN_FLIGHT = (Status.RUNNING, Status.WAITING_FOR_PAUSE)


def steps_in_flight(*, tenants: Collection[str], limit: int = 12) -> list[StepInFlight]:
    return list(
        Step.objects.filter(instance__tenant__in=tenants, status=StepStatus.RUNNING, instance__status__in=_IN_FLIGHT)
        .order_by("started_at")
        .values(
            "instance_id",
            "name",
            "attempts",
            "started_at",
            workflow=F("instance__workflow"),
            tenant=F("instance__tenant"),
        )[:limit]
    )


def steps_in_flight_count(*, tenants: Collection[str]) -> int:
    return Step.objects.filter(
        instance__tenant__in=tenants, status=StepStatus.RUNNING, instance__status__in=_IN_FLIGHT
    ).count()


def dead_letters_open_count(*, tenants: Collection[str]) -> int:
    return DeadLetter.objects.filter(tenant__in=tenants, state=DeadLetterState.OPEN).count()


def approvals_pending_count(*, tenants: Collection[str]) -> int:
    return ApprovalRequest.objects.filter(tenant__in=tenants, state=ApprovalState.PENDING).count()


def spend_by_service(
    *, tenants: Collection[str], since: datetime, view: reads.RollupView | None = None
) -> list[ServiceSpend]:
    got = reads.cost_grouped(
        reads.CostScope(tenants=tenants, since=since), by=("service",), measures=("total", "calls"), view=view
    )
    rows: list[ServiceSpend] = [
        {"service": service, "total": m["total"], "calls": m["calls"]} for (service,), m in got.items()
    ]
    return sorted(rows, key=lambda r: (-r["total"], r["service"]))
