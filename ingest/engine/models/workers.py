"""Worker processes as the workers page sees them: one row per worker id, beaten by its heartbeat."""

from __future__ import annotations

from django.db import models


class WorkerHeartbeat(models.Model):
    """A worker process: where it runs, its slots, when it last beat. What it runs now is read
    from the instances it holds leases on (`Instance.lease_owner`), never copied here."""

    worker_id = models.CharField(primary_key=True, max_length=100)
    host = models.CharField(max_length=200, blank=True, default="")
    pid = models.IntegerField(default=0)
    slots = models.PositiveIntegerField(default=0)
    started_at = models.DateTimeField()
    beat_at = models.DateTimeField()
    stopped_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["-beat_at"], name="worker_heartbeat_recent")]

    def __str__(self) -> str:
        return f"{self.worker_id} ({self.slots} slots)"
