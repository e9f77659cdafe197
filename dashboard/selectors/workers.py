"""Reads of the workers page: each worker process seen in the last hour, its slots, its heartbeat
age, and what it runs now (the instances it holds leases on; other tenants' only counted)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Count, Q

from ingest.engine.models import Instance, WorkerHeartbeat

SHOWN_FOR = timedelta(hours=1)


@dataclass(frozen=True)
class Running:
    instance_id: str
    workflow: str
    tenant: str
    status: str
    started_at: datetime | None


@dataclass(frozen=True)
class WorkerRow:
    worker_id: str
    host: str
    pid: int
    slots: int
    started_at: datetime
    beat_at: datetime
    heartbeat_age: float  # seconds
    state: str  # "live", "silent" (no beat for a lease's length), "stopped"
    busy: int  # leases held, every tenant
    running: list[Running]  # those in the reader's tenants
    hidden: int  # busy slots running other tenants' instances


def worker_state(*, beat_at: datetime, stopped_at: datetime | None, now: datetime, lease: timedelta) -> str:
    """Live while it beats: it beats every third of a lease, so one lease without a beat is silence."""
    if stopped_at is not None:
        return "stopped"
    return "live" if now - beat_at <= lease else "silent"


def worker_rows(*, tenants: list[str], now: datetime) -> list[WorkerRow]:
    lease = timedelta(seconds=settings.RUNLEDGER_LEASE_SECONDS)
    workers = list(WorkerHeartbeat.objects.filter(beat_at__gte=now - SHOWN_FOR).order_by("-beat_at", "worker_id"))
    ids = [w.worker_id for w in workers]
    held = Instance.objects.filter(lease_owner__in=ids, lease_expires_at__gte=now)
    busy = dict(held.values("lease_owner").annotate(n=Count("id")).values_list("lease_owner", "n"))
    mine: dict[str, list[Running]] = {}
    for row in (
        held.filter(Q(tenant__in=tenants))
        .order_by("started_at")
        .values_list("lease_owner", "id", "workflow", "tenant", "status", "started_at")
    ):
        mine.setdefault(row[0], []).append(Running(*row[1:]))
    return [
        WorkerRow(
            w.worker_id,
            w.host,
            w.pid,
            w.slots,
            w.started_at,
            w.beat_at,
            max(0.0, (now - w.beat_at).total_seconds()),
            worker_state(beat_at=w.beat_at, stopped_at=w.stopped_at, now=now, lease=lease),
            busy.get(w.worker_id, 0),
            mine.get(w.worker_id, []),
            busy.get(w.worker_id, 0) - len(mine.get(w.worker_id, [])),
        )
        for w in workers
    ]
