"""The call journal: what a step attempt was answered and what it booked, kept apart from the step.

One row per effect of a step that pays an outside system: the answer of a paid call, or a cost
booked after one (ingest/engine/runtime/journal.py). A row commits on its own as soon as the
answer arrives, so a worker that dies before the step's completion commits leaves it behind, and
the retry reads the answer instead of paying for it again.
"""

from __future__ import annotations

from django.db import models

from ingest.engine.models.instances import Instance


class JournalKind(models.TextChoices):
    CALL = "call"  # a paid call's answer
    COST = "cost"  # an api_costs row booked after a paid call


class CallJournal(models.Model):
    """One effect of a step attempt, keyed by the step's idempotency key and its ordinal there.

    `answer` is sealed (`{"$sealed": …}`) when the step is sensitive. `attempt` is the attempt the
    row belongs to: the attempt that wrote it, or the one that took it over from a lost attempt.
    """

    instance = models.ForeignKey(Instance, on_delete=models.CASCADE, related_name="+", db_index=False)
    key = models.CharField(max_length=500)  # the step's idempotency key
    ordinal = models.IntegerField()  # 1, 2, … in the order the attempt made its calls and bookings
    attempt = models.IntegerField()
    kind = models.CharField(max_length=8, choices=JournalKind.choices)
    provider = models.CharField(max_length=100)  # the provider called, or the service booked
    fingerprint = models.CharField(max_length=64)  # what was asked: a replay answers only the same question
    answer = models.JSONField()
    created_at = models.DateTimeField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["key", "ordinal"], name="journal_key_ordinal")]
        indexes = [models.Index(fields=["instance"], name="journal_instance")]
