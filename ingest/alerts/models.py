"""The alerts tables: channels, rules, alerts (one per firing group), notifications, callbacks."""

from __future__ import annotations

import json
from typing import Any

from django.db import models
from django.db.models import Q

from ingest.engine.models import EncryptedTextField


class ChannelKind(models.TextChoices):
    EMAIL = "email"
    SLACK = "slack"  # a Slack-compatible incoming webhook: {"text": ...}
    WEBHOOK = "webhook"  # a generic webhook, signed with HMAC and a timestamp as our ingress verifies


class Channel(models.Model):
    """Where notifications of a tenant go. Non-secret settings in `config` (email recipients);
    every secret (a webhook URL, an HMAC key, an SMTP password) in `secrets`, one JSON text field
    encrypted at rest with the project's Fernet keys."""

    tenant = models.CharField(max_length=100)
    name = models.CharField(max_length=100)
    kind = models.CharField(max_length=10, choices=ChannelKind.choices)
    config = models.JSONField(default=dict, blank=True)
    # SECRETS: a JSON object as text ({"url": ..., "hmac_key": ..., "smtp_password": ...}),
    # encrypted at rest (ingest.engine.secrets, RUNLEDGER_SECRET_KEYS).
    secrets = EncryptedTextField(blank=True, default="{}")
    enabled = models.BooleanField(default=True)
    created_at = models.DateTimeField()
    updated_at = models.DateTimeField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["tenant", "name"], name="alerts_channel_name")]

    def secret_values(self) -> dict[str, Any]:
        value = json.loads(self.secrets or "{}")
        return value if isinstance(value, dict) else {}

    def __str__(self) -> str:
        return f"{self.tenant}/{self.name} ({self.kind})"


class Condition(models.TextChoices):
    INSTANCE_FAILED = "instance_failed"
    COMPLETED_WITH_ERRORS = "completed_with_errors"
    DEAD_LETTER_NEW_SIGNATURE = "dead_letter_new_signature"
    DEAD_LETTER_GROWTH = "dead_letter_growth"
    BUDGET_THRESHOLD = "budget_threshold"
    APPROVAL_CREATED = "approval_created"
    APPROVAL_OVERDUE = "approval_overdue"
    BACKLOG_AGE = "backlog_age"
    NO_LIVE_WORKER = "no_live_worker"
    INGRESS_5XX_RATE = "ingress_5xx_rate"


class Rule(models.Model):
    """When to tell whom: a condition with its parameters, the channels, and the throttle window
    (one notification per group per window; what happens meanwhile goes into a summary)."""

    tenant = models.CharField(max_length=100)
    name = models.CharField(max_length=200)
    condition = models.CharField(max_length=40, choices=Condition.choices)
    params = models.JSONField(default=dict, blank=True)
    channels = models.ManyToManyField(Channel, related_name="rules")
    throttle_seconds = models.PositiveIntegerField(default=600)
    notify_resolved = models.BooleanField(default=True)
    enabled = models.BooleanField(default=True)
    created_by = models.CharField(max_length=150, blank=True, default="")
    created_at = models.DateTimeField()
    updated_at = models.DateTimeField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["tenant", "name"], name="alerts_rule_name")]
        indexes = [models.Index(fields=["condition", "enabled"], name="alerts_rule_condition")]

    def __str__(self) -> str:
        return f"{self.tenant}/{self.name} ({self.condition})"


class AlertState(models.TextChoices):
    FIRING = "firing"
    RESOLVED = "resolved"


class Alert(models.Model):
    """A rule firing for one group (a workflow, a signature, a budget and level, an approval):
    at most one firing per rule and group, resolved when its condition clears."""

    rule = models.ForeignKey(Rule, on_delete=models.CASCADE, related_name="alerts")
    tenant = models.CharField(max_length=100)
    group_key = models.CharField(max_length=300)
    state = models.CharField(max_length=10, choices=AlertState.choices, default=AlertState.FIRING)
    title = models.CharField(max_length=300)
    facts = models.JSONField(default=dict)  # the first event's facts
    count = models.PositiveIntegerField(default=1)  # events since it fired
    unsent = models.PositiveIntegerField(default=0)  # events since the last notification
    last_sent_at = models.DateTimeField(null=True, blank=True)
    first_at = models.DateTimeField()
    last_at = models.DateTimeField()
    resolved_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["rule", "group_key"], condition=Q(state="firing"), name="alerts_one_firing_per_group"
            )
        ]
        indexes = [models.Index(fields=["state", "rule"], name="alerts_alert_state")]


class NotificationKind(models.TextChoices):
    FIRING = "firing"
    SUMMARY = "summary"
    RESOLVED = "resolved"
    TEST = "test"


class DeliveryState(models.TextChoices):
    PENDING = "pending"
    DELIVERED = "delivered"
    FAILED = "failed"


class Notification(models.Model):
    """One message to one channel, delivered by an `alert-deliver` instance (`instance_id`)."""

    tenant = models.CharField(max_length=100)
    alert = models.ForeignKey(Alert, null=True, blank=True, on_delete=models.CASCADE, related_name="notifications")
    channel = models.ForeignKey(Channel, null=True, on_delete=models.SET_NULL, related_name="notifications")
    kind = models.CharField(max_length=10, choices=NotificationKind.choices)
    recipient = models.CharField(max_length=500)  # what the operator sees: addresses or a host
    subject = models.CharField(max_length=300)
    body = models.JSONField(default=dict)  # {"text": ..., "data": {...}}
    state = models.CharField(max_length=10, choices=DeliveryState.choices, default=DeliveryState.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    last_error = models.TextField(blank=True, default="")
    instance_id = models.CharField(max_length=100, blank=True, default="")
    created_at = models.DateTimeField()
    delivered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["tenant", "-created_at"], name="alerts_notification_recent")]


class CallbackSource(models.TextChoices):
    ROUTE = "route"
    API = "api"
    INSTANCE = "instance"


class RouteCallback(models.Model):
    """A route's callback URL: every instance its requests start carries it."""

    route = models.CharField(max_length=100, unique=True)  # ingest.triggers Route.name
    url = models.URLField(max_length=2000)
    created_at = models.DateTimeField()


class Callback(models.Model):
    """An instance's callback: when it ends, outcome and output are POSTed to `url`, signed with
    the tenant's ingress secret, by a `callback-deliver` instance (`delivery_instance_id`)."""

    instance_id = models.CharField(max_length=100, unique=True)
    tenant = models.CharField(max_length=100)
    url = models.URLField(max_length=2000)
    source = models.CharField(max_length=10, choices=CallbackSource.choices)
    state = models.CharField(max_length=10, choices=DeliveryState.choices, default=DeliveryState.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    last_status = models.IntegerField(null=True, blank=True)
    last_error = models.TextField(blank=True, default="")
    delivery_instance_id = models.CharField(max_length=100, blank=True, default="")
    created_at = models.DateTimeField()
    delivered_at = models.DateTimeField(null=True, blank=True)


class FollowState(models.Model):
    """Where the history follower stands (one row): the last history id read, and the ids below
    it not yet seen (a transaction holding a lower id can commit after a higher one)."""

    id = models.PositiveSmallIntegerField(primary_key=True, default=1)
    cursor = models.BigIntegerField(default=0)
    gaps = models.JSONField(default=dict)  # {"<id>": first missed, unix seconds}
    updated_at = models.DateTimeField()


class IngressError(models.Model):
    """A 5xx answered by signed ingress: the numerator of the ingress 5xx rate (the denominator
    is these plus the instances routes started, read from the history)."""

    route = models.CharField(max_length=100)
    tenant = models.CharField(max_length=100)
    status = models.PositiveSmallIntegerField()
    created_at = models.DateTimeField()

    class Meta:
        indexes = [models.Index(fields=["created_at"], name="alerts_ingress_error_time")]
