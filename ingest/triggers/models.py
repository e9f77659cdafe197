"""Triggers' tables: HTTP routes and their tenants' secrets, idempotency keys, cron schedules,
event subscriptions and published events, token buckets, and API tokens.

Writes go through `ingest.triggers.services`; reads through `ingest.triggers.selectors`.
"""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models

from ingest.engine.models import EncryptedTextField
from ingest.triggers import coalesce
from ingest.triggers.errors import InvalidCoalesce

# A route's and a subscription's coalesce setting, checked in `clean` (ingest/triggers/coalesce.py).
COALESCE_HELP = (
    'Debounce or batch the events: {"debounce": {"key": "account", "period": "30 seconds"}} '
    'or {"batch": {"max_size": 100, "timeout": "10 seconds"}} (docs/engine-contract.md).'
)


class Route(models.Model):
    """`POST /api/routes/{name}` starts `workflow` for `tenant`."""

    name = models.SlugField(max_length=100, unique=True)
    workflow = models.CharField(max_length=200)
    tenant = models.CharField(max_length=100, default="default")
    enabled = models.BooleanField(default=True)
    sync_default = models.BooleanField(default=False, help_text="Wait for the output unless the caller passes ?wait=0.")
    wait_seconds = models.FloatField(default=30.0, help_text="How long a sync request waits.")
    rate_limit_per_minute = models.PositiveIntegerField(
        null=True, blank=True, help_text="Requests per minute for this route; empty means no limit."
    )
    idempotency_ttl_seconds = models.PositiveIntegerField(default=24 * 3600)
    priority = models.IntegerField(default=0)
    description = models.TextField(blank=True, default="")
    coalesce = models.JSONField(default=dict, blank=True, help_text=COALESCE_HELP)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"{self.name} → {self.workflow} ({self.tenant})"

    def clean(self) -> None:
        _clean_coalesce(self.coalesce)


class IngressSecret(models.Model):
    """A tenant's ingress credentials: the bearer token and the HMAC secret that signs bodies.

    A tenant may hold several: a request is accepted by any enabled one whose token matches. The
    token is stored as its SHA-256 (it is only compared); the HMAC secret is needed as is to verify
    a signature, so it is stored encrypted (ingest.engine.secrets). A rotation keeps the pair it
    replaced in the `previous_*` columns, accepted until `previous_valid_until` (the overlap the
    operator chose; none: the columns are empty), so callers can move to the new pair meanwhile.
    """

    tenant = models.CharField(max_length=100)
    name = models.CharField(max_length=100, default="default")
    token_hash = models.CharField(max_length=64, unique=True)
    token_prefix = models.CharField(max_length=16, blank=True, default="")
    hmac_secret = EncryptedTextField()
    enabled = models.BooleanField(default=True)
    rate_limit_per_minute = models.PositiveIntegerField(
        null=True, blank=True, help_text="Requests per minute for the tenant across its routes."
    )
    created_at = models.DateTimeField(auto_now_add=True)
    rotated_at = models.DateTimeField(null=True, blank=True)
    previous_token_hash = models.CharField(max_length=64, unique=True, null=True, blank=True)
    previous_token_prefix = models.CharField(max_length=16, blank=True, default="")
    previous_hmac_secret = EncryptedTextField(null=True, blank=True)
    previous_valid_until = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["tenant", "name"], name="ingress_secret_tenant_name"),
        ]

    def __str__(self) -> str:
        return f"{self.tenant}/{self.name} ({self.token_prefix}…)"


class IdempotencyKey(models.Model):
    """The first request with a key wins; the unique constraint settles concurrent duplicates."""

    tenant = models.CharField(max_length=100)
    route = models.CharField(max_length=100)
    key = models.CharField(max_length=200)
    body_sha256 = models.CharField(max_length=64)
    instance_id = models.CharField(max_length=100)
    created_at = models.DateTimeField()
    expires_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["tenant", "route", "key"], name="idempotency_key_unique"),
        ]
        indexes = [models.Index(fields=["expires_at"], name="idempotency_expiry")]


class SeenSignature(models.Model):
    """A signed ingress request accepted without an Idempotency-Key, remembered while its
    timestamp is inside the signature window: the same bytes sent again cannot start a second
    instance. In the database, so every web process sees it; expired rows are purged."""

    digest = models.CharField(max_length=64, primary_key=True)  # SHA-256 of timestamp + signature
    tenant = models.CharField(max_length=100)
    route = models.CharField(max_length=100)
    instance_id = models.CharField(max_length=100)
    expires_at = models.DateTimeField()

    class Meta:
        indexes = [models.Index(fields=["expires_at"], name="seen_signature_expiry")]


def _clean_coalesce(value: object) -> None:
    try:
        coalesce.parse(value)
    except InvalidCoalesce as exc:
        raise ValidationError({"coalesce": str(exc)}) from None


class MissedFirePolicy(models.TextChoices):
    SKIP = "skip"  # fires missed while no scheduler ran are dropped
    CATCH_UP = "catch_up"  # the latest `catch_up_limit` missed fires run


class Schedule(models.Model):
    """A cron schedule as data. Each fire creates instance `{name}-{scheduled time}`."""

    name = models.SlugField(max_length=60, unique=True)
    workflow = models.CharField(max_length=200)
    cron = models.CharField(max_length=200)
    timezone = models.CharField(max_length=64, default="UTC")
    params = models.JSONField(default=dict, blank=True)
    tenant = models.CharField(max_length=100, default="default")
    enabled = models.BooleanField(default=True)
    missed_fire_policy = models.CharField(
        max_length=10, choices=MissedFirePolicy.choices, default=MissedFirePolicy.SKIP
    )
    catch_up_limit = models.PositiveIntegerField(default=1)
    # The scheduled time of the last fire (UTC): fires after it are due.
    last_fire_at = models.DateTimeField(null=True, blank=True)
    last_instance_id = models.CharField(max_length=100, blank=True, default="")
    # Every scheduled time up to here has been decided (fired or skipped).
    checked_until = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True, default="")
    next_fire_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField()
    updated_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"{self.name}: {self.cron} ({self.timezone}) → {self.workflow}"


class Subscription(models.Model):
    """Start `workflow` for every published event whose type matches `pattern` (a glob)."""

    workflow = models.CharField(max_length=200)
    pattern = models.CharField(max_length=200, help_text="fnmatch glob: user.*, gong.call.*")
    filters = models.JSONField(
        default=dict, blank=True, help_text='Payload fields that must be equal: {"plan": "pro"}.'
    )
    tenant = models.CharField(
        max_length=100, blank=True, default="", help_text="Only this tenant's events; empty: all."
    )
    enabled = models.BooleanField(default=True)
    coalesce = models.JSONField(default=dict, blank=True, help_text=COALESCE_HELP)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"{self.pattern} → {self.workflow}"

    def clean(self) -> None:
        _clean_coalesce(self.coalesce)


class CoalesceWindow(models.Model):
    """The debounce or batch window of one key: the queued instance its events go to, until it starts.

    `source` is "route:<name>" or "subscription:<id>"; one row per (source, key), reopened in
    place for each window (`generation`). The instance exists from the window's first event
    (queued, starting at `starts_at`), so the dashboard shows it and a worker starts it when due:
    no other process has to flush anything. `instance_id` is empty once a full batch started.
    """

    source = models.CharField(max_length=120)
    key = models.CharField(max_length=210, blank=True, default="")
    mode = models.CharField(max_length=10)
    instance_id = models.CharField(max_length=100, blank=True, default="")
    generation = models.PositiveIntegerField(default=0)
    workflow = models.CharField(max_length=200)
    tenant = models.CharField(max_length=100)
    count = models.PositiveIntegerField(default=0)
    payloads = models.JSONField(default=list, blank=True)  # batch: every payload so far
    bytes = models.PositiveIntegerField(default=0)
    first_at = models.DateTimeField()
    last_at = models.DateTimeField()
    starts_at = models.DateTimeField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["source", "key"], name="coalesce_window_source_key")]
        indexes = [models.Index(fields=["tenant", "starts_at"], name="coalesce_window_tenant")]

    def __str__(self) -> str:
        return f"{self.source} [{self.key or '*'}] → {self.instance_id} ({self.count} events)"


class PublishedEvent(models.Model):
    """One row per event id: publishing the same id again does nothing."""

    id = models.CharField(primary_key=True, max_length=200)
    type = models.CharField(max_length=200)
    tenant = models.CharField(max_length=100, default="default")
    data = models.JSONField(default=dict, blank=True)
    instance_id = models.CharField(max_length=100, blank=True, default="")
    started = models.JSONField(default=list, blank=True)
    delivered = models.JSONField(default=list, blank=True)
    actor = models.CharField(max_length=150, blank=True, default="")
    created_at = models.DateTimeField()

    class Meta:
        indexes = [models.Index(fields=["type", "-created_at"], name="published_event_type")]


class TokenBucket(models.Model):
    """A durable token bucket shared by every process: ingress limits and outbound API keys."""

    key = models.CharField(max_length=200, unique=True)
    capacity = models.FloatField()
    refill_per_second = models.FloatField()
    tokens = models.FloatField()
    updated_at = models.DateTimeField()
    # A provider said 429 with Retry-After: nobody takes a token before this.
    blocked_until = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"{self.key}: {self.tokens:.1f}/{self.capacity:g}"


class ApiToken(models.Model):
    """A REST API bearer token for a user or a service account (a user without a password).

    Only the SHA-256 of the token is stored; the token is shown once when it is created.
    """

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100)
    token_hash = models.CharField(max_length=64, unique=True)
    token_prefix = models.CharField(max_length=16)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"{self.name} ({self.token_prefix}…) for {self.user}"
