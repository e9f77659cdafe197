"""What happened to instances: the history feed, the search index, pending events and dead letters."""

from __future__ import annotations

from django.db import models
from django.db.models import Q

from ingest.engine.models.instances import Instance, Step


class HistoryKind(models.TextChoices):
    INSTANCE_CREATED = "instance.created"
    INSTANCE_STATUS = "instance.status"
    STEP_STARTED = "step.started"
    STEP_COMPLETED = "step.completed"
    STEP_RETRY = "step.retry"
    STEP_FAILED = "step.failed"
    STEP_SLEEP = "step.sleep"
    STEP_WAIT = "step.wait"
    STEP_PROGRESS = "step.progress"
    STEP_LOG = "step.log"  # a running attempt's lines were written to its step (runtime/steplog.py)
    HOOK = "hook"
    EVENT_RECEIVED = "event.received"
    COST_RECORDED = "cost.recorded"
    BUDGET = "budget"
    APPROVAL = "approval"
    OPERATOR = "operator"


# The rows that say why an instance waits (indexed by history_parked).
PARKED_KINDS = (HistoryKind.STEP_SLEEP, HistoryKind.STEP_WAIT, HistoryKind.STEP_RETRY)


class History(models.Model):
    """Append-only log of everything that happened. Its ids order what the dashboard shows live."""

    id = models.BigAutoField(primary_key=True)
    # Written under the lease guard or by services holding the instance's row (HOT_PATH_REFERENCES);
    # indexed by history_instance.
    instance = models.ForeignKey(
        Instance,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="history",
        db_index=False,
        db_constraint=False,
    )
    workflow = models.CharField(max_length=200, blank=True, default="")
    tenant = models.CharField(max_length=100, blank=True, default="")
    kind = models.CharField(max_length=40, choices=HistoryKind.choices)
    step_name = models.CharField(max_length=300, blank=True, default="")
    status = models.CharField(max_length=24, blank=True, default="")
    data = models.JSONField(default=dict)
    actor = models.CharField(max_length=150, blank=True, default="")
    reason = models.TextField(blank=True, default="")
    created_at = models.DateTimeField()

    class Meta:
        verbose_name = "history entry"
        verbose_name_plural = "history entries"
        indexes = [
            models.Index(fields=["instance", "id"], name="history_instance"),
            models.Index(fields=["tenant", "id"], name="history_tenant"),
            models.Index(fields=["created_at"], name="history_time"),
            # A waiting instance's newest parking row (why it waits: sleep, event, retry), for
            # the /metrics gauges: an index-only probe into a small index. Only these rows'
            # inserts add an entry (a few per parked instance, none per completed step).
            models.Index(
                fields=["instance", "id"], name="history_parked", include=["kind"], condition=Q(kind__in=PARKED_KINDS)
            ),
        ]


class InstanceSearch(models.Model):
    """An instance's params as text, for the instance list's "text in params" filter.

    Written only by database triggers (migration 0006): on an instance's insert, and on an
    update that sets `params`. Its trigram index (PostgreSQL) lives here, not on
    `engine_instance`, because every claim and every completion updates the instance row
    outside HOT (status and lease columns are indexed), and each such update re-indexed every
    trigram of the params there, at a cost on every update (docs/pipelines.md).
    Params never change after the insert, so this row is written once.
    """

    instance = models.OneToOneField(
        Instance, primary_key=True, on_delete=models.CASCADE, related_name="search", db_constraint=False
    )
    text = models.TextField()

    class Meta:
        db_table = "engine_instance_search"


class PendingEvent(models.Model):
    """An event sent to an instance, buffered per type until a `wait_for_event` takes it (FIFO)."""

    instance = models.ForeignKey(Instance, on_delete=models.CASCADE, related_name="events")
    type = models.CharField(max_length=200)
    payload = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField()
    consumed_at = models.DateTimeField(null=True, blank=True)
    consumed_by = models.ForeignKey(Step, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    sender = models.CharField(max_length=150, blank=True, default="")

    class Meta:
        indexes = [models.Index(fields=["instance", "type", "id"], name="event_fifo")]


class DeadLetterState(models.TextChoices):
    OPEN = "open"
    REDRIVEN = "redriven"
    DISCARDED = "discarded"


class DeadLetter(models.Model):
    """One per instance that errored, grouped on the dashboard by `signature`."""

    instance = models.OneToOneField(Instance, on_delete=models.CASCADE, related_name="dead_letter")
    workflow = models.CharField(max_length=200)
    tenant = models.CharField(max_length=100)
    step_name = models.CharField(max_length=300, blank=True, default="")
    error_name = models.CharField(max_length=200)
    error_message = models.TextField()
    error_traceback = models.TextField(blank=True, default="")
    signature = models.CharField(max_length=64)
    normalized_message = models.TextField()
    state = models.CharField(max_length=12, choices=DeadLetterState.choices, default=DeadLetterState.OPEN)
    created_at = models.DateTimeField()
    resolved_at = models.DateTimeField(null=True, blank=True)
    resolved_by = models.CharField(max_length=150, blank=True, default="")
    resolution = models.TextField(blank=True, default="")

    class Meta:
        indexes = [
            models.Index(fields=["state", "signature"], name="deadletter_group"),
            models.Index(fields=["state", "-created_at"], name="deadletter_recent"),
            # Open dead letters by workflow (/metrics): index-only, no heap page per letter.
            models.Index(fields=["workflow"], name="deadletter_open", condition=Q(state=DeadLetterState.OPEN)),
        ]


# ---- costs and budgets -------------------------------------------------------------------
