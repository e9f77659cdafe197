"""Retired workflow versions: a version no instance runs on any more, whose guarded code path
may be deleted. Instances of a retired version cannot be retried, restarted from a step or
forked (services/versions.py)."""

from __future__ import annotations

from django.db import models


class RetiredVersion(models.Model):
    workflow = models.CharField(max_length=200)
    version = models.IntegerField()
    retired_at = models.DateTimeField()
    retired_by = models.CharField(max_length=150, blank=True, default="")
    reason = models.TextField(blank=True, default="")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["workflow", "version"], name="retired_version_once")]

    def __str__(self) -> str:
        return f"{self.workflow} v{self.version} (retired)"
