"""The workers table: one upsert per heartbeat (a single INSERT … ON CONFLICT), the stop mark,
and the purge of workers long gone."""

from __future__ import annotations

from datetime import datetime, timedelta

from ingest.engine.models.workers import WorkerHeartbeat

# A worker unseen this long is forgotten (its row deleted at the next worker's start).
FORGET_AFTER = timedelta(days=1)


def worker_beat(*, worker_id: str, host: str, pid: int, slots: int, now: datetime) -> None:
    """Record that the worker is alive now (inserting its row the first time)."""
    WorkerHeartbeat.objects.bulk_create(
        [WorkerHeartbeat(worker_id=worker_id, host=host, pid=pid, slots=slots, started_at=now, beat_at=now)],
        update_conflicts=True,
        unique_fields=["worker_id"],
        update_fields=["beat_at", "slots", "stopped_at"],
    )


def worker_stopped(*, worker_id: str, now: datetime) -> None:
    WorkerHeartbeat.objects.filter(pk=worker_id).update(stopped_at=now, beat_at=now)


def workers_forget(*, now: datetime) -> int:
    return WorkerHeartbeat.objects.filter(beat_at__lt=now - FORGET_AFTER).delete()[0]
