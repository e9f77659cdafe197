"""A fan-out's aggregate: expected, received, results, started_at, updated_at. One FanOut row
per `step.fan_out` call, one FanOutItem row per item (its result or error, in input order by
`index`), so the parent reads every child's outcome from the ledger."""

from __future__ import annotations

from typing import Any

from django.db import models

from ingest.engine.models.instances import Instance, Step


class FanOutState(models.TextChoices):
    OPEN = "open"  # items still out
    COMPLETE = "complete"  # every item landed
    TIMED_OUT = "timed_out"  # the parent moved on at its timeout; the items still out are missing


class FanOutItemState(models.TextChoices):
    PENDING = "pending"
    COMPLETE = "complete"  # its instance completed (or completed_with_errors)
    ERRORED = "errored"  # its instance errored: retries exhausted, a dead letter
    TERMINATED = "terminated"  # an operator terminated its instance
    MISSING = "missing"  # still out when the fan-out timed out; a later outcome is not counted


class FanOut(models.Model):
    """The aggregate the parent waits on. Every item's outcome locks this row to count itself,
    so the last one knows it is the last and wakes the parent (a push, not a poll)."""

    instance = models.ForeignKey(Instance, on_delete=models.CASCADE, related_name="fan_outs")
    # The step it resolves: a restart that deletes the step deletes its fan-out too.
    step = models.OneToOneField(Step, on_delete=models.CASCADE, related_name="fan_out", db_constraint=False)
    step_name = models.CharField(max_length=300)  # the step's label (name, or name#2)
    handler = models.CharField(max_length=200)  # the handler's name, or the workflow's
    handler_kind = models.CharField(max_length=10)  # "function" or "workflow"
    item_workflow = models.CharField(max_length=200)  # what the items' instances run
    expected = models.IntegerField()
    created = models.IntegerField(default=0)  # items inserted so far (batch by batch)
    received = models.IntegerField(default=0)
    failed = models.IntegerField(default=0)
    state = models.CharField(max_length=12, choices=FanOutState.choices, default=FanOutState.OPEN)
    started_at = models.DateTimeField()
    updated_at = models.DateTimeField()
    deadline = models.DateTimeField()
    closed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["instance", "started_at"], name="fanout_instance")]

    def __str__(self) -> str:
        return f"{self.instance_id}:{self.step_name} {self.received}/{self.expected}"

    def results(self) -> list[Any]:
        """Every item's result in input order (None for an item that failed or is missing)."""
        return list(self.items.order_by("index").values_list("result", flat=True))


class FanOutItem(models.Model):
    """One item: its instance, its place in the input, and its outcome once it landed."""

    instance = models.OneToOneField(
        Instance, primary_key=True, on_delete=models.CASCADE, related_name="fan_out_item", db_constraint=False
    )
    fan_out = models.ForeignKey(
        FanOut, on_delete=models.CASCADE, related_name="items", db_index=False, db_constraint=False
    )
    index = models.IntegerField()
    state = models.CharField(max_length=12, choices=FanOutItemState.choices, default=FanOutItemState.PENDING)
    result = models.JSONField(null=True, blank=True)
    error_name = models.CharField(max_length=200, blank=True, default="")
    error_message = models.TextField(blank=True, default="")
    error_state = models.JSONField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["fan_out", "index"], name="fanout_item_index")]
