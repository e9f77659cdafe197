"""What retention did: one row per purged batch, for the workflow page and for an operator who
looks for an archived instance (which file holds it)."""

from __future__ import annotations

from django.db import models


class RetentionBatch(models.Model):
    """A batch of finished instances archived to `archive` (gzip JSON lines) and then purged."""

    workflow = models.CharField(max_length=200)
    ran_at = models.DateTimeField()
    cutoff = models.DateTimeField()  # instances that ended before this were due
    purged = models.IntegerField()
    archive = models.CharField(max_length=500)
    first_instance_id = models.CharField(max_length=100, blank=True, default="")
    last_instance_id = models.CharField(max_length=100, blank=True, default="")

    class Meta:
        indexes = [models.Index(fields=["workflow", "-ran_at"], name="retention_workflow_recent")]
