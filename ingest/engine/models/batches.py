"""Bulk actions by query: a frozen selection of instances (the batch) and each item's outcome.

A preview freezes the ids it counted (state `previewed`); a confirm starts one `runledger-batch`
instance per tenant that acts on exactly those items, at a capped rate. docs/bulk-actions.md.
"""

from __future__ import annotations

from django.db import models


class BatchState(models.TextChoices):
    PREVIEWED = "previewed"
    RUNNING = "running"
    DONE = "done"


class BatchItemState(models.TextChoices):
    PENDING = "pending"
    DONE = "done"
    SKIPPED = "skipped"  # no longer in a status the action applies to, or moved tenant
    FAILED = "failed"


class Batch(models.Model):
    action = models.CharField(max_length=20)
    state = models.CharField(max_length=12, choices=BatchState.choices, default=BatchState.PREVIEWED)
    actor = models.CharField(max_length=150)
    user_id = models.CharField(max_length=64)  # who previewed: only they may confirm
    reason = models.TextField(blank=True, default="")
    query = models.CharField(max_length=4000)  # the list's filters, as the URL said them
    tenants = models.JSONField(default=list)  # the tenants the selection was taken in
    rate_per_second = models.FloatField(default=10.0)
    total = models.IntegerField(default=0)  # how many ids the preview froze
    created_at = models.DateTimeField()
    confirmed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "engine_batch"
        indexes = [models.Index(fields=["user_id", "state", "created_at"], name="batch_owner")]


class BatchItem(models.Model):
    batch = models.ForeignKey(Batch, on_delete=models.CASCADE, related_name="items")
    instance_id = models.CharField(max_length=100)
    tenant = models.CharField(max_length=100)
    state = models.CharField(max_length=10, choices=BatchItemState.choices, default=BatchItemState.PENDING)
    detail = models.TextField(blank=True, default="")
    done_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "engine_batch_item"
        constraints = [models.UniqueConstraint(fields=["batch", "instance_id"], name="batch_item_once")]
        indexes = [models.Index(fields=["batch", "tenant", "state", "id"], name="batch_item_todo")]
