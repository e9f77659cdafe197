"""Concurrency limits per workflow and key value: the operators' overrides the claim honours."""

from __future__ import annotations

from django.db import models


class ConcurrencyLimit(models.Model):
    """At most `max_concurrent` instances of `workflow` whose concurrency key is `key` (for the
    shipped workflows: the tenant) run a turn at once, in place of the workflow's own cap.

    Read by the claim's SQL (sql/flow.py) on every claim of a keyed workflow, so a change holds
    from the next claim on, in every worker process; written by services/limits.py only.
    """

    workflow = models.CharField(max_length=200)
    key = models.CharField(max_length=200)
    max_concurrent = models.PositiveIntegerField()
    updated_at = models.DateTimeField()
    updated_by = models.CharField(max_length=150, blank=True, default="")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["workflow", "key"], name="concurrency_limit_one_per_key"),
            models.CheckConstraint(condition=models.Q(max_concurrent__gte=1), name="concurrency_limit_at_least_one"),
        ]

    def __str__(self) -> str:
        return f"{self.workflow}/{self.key}: at most {self.max_concurrent}"
