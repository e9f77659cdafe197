"""Circuit breakers: one row per outbound key, shared by every worker, and their transitions."""

from __future__ import annotations

from django.db import models


class BreakerState(models.TextChoices):
    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half_open"


class CircuitBreaker(models.Model):
    """The state of one outbound key's breaker (ingest/engine/breaker.py decides, this stores).

    `tenant` is blank for a key shared by every tenant (a provider account of the operator's),
    else the tenant whose key it is: the dashboard shows and resets it by that tenant's rules.
    """

    key = models.CharField(primary_key=True, max_length=200)
    tenant = models.CharField(max_length=100, blank=True, default="")
    state = models.CharField(max_length=12, choices=BreakerState.choices, default=BreakerState.CLOSED)
    failures = models.IntegerField(default=0)
    window_started_at = models.DateTimeField(null=True, blank=True)
    opened_at = models.DateTimeField(null=True, blank=True)
    next_probe_at = models.DateTimeField(null=True, blank=True)
    probe_started_at = models.DateTimeField(null=True, blank=True)
    # The policy the last caller passed, for the dashboard (callers own the policy).
    threshold = models.IntegerField(default=5)
    window_seconds = models.FloatField(default=60.0)
    cooldown_seconds = models.FloatField(default=30.0)
    updated_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"breaker {self.key} ({self.state})"


class BreakerTransition(models.Model):
    """Append-only: every change of a breaker's state, and who made it (blank: the engine)."""

    breaker = models.ForeignKey(CircuitBreaker, on_delete=models.CASCADE, related_name="transitions")
    from_state = models.CharField(max_length=12)
    to_state = models.CharField(max_length=12)
    failures = models.IntegerField(default=0)
    reason = models.TextField(blank=True, default="")
    actor = models.CharField(max_length=150, blank=True, default="")
    created_at = models.DateTimeField()

    class Meta:
        indexes = [models.Index(fields=["breaker", "-id"], name="breaker_transition_recent")]
