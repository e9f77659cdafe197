"""Admin for routes, ingress secrets, schedules, subscriptions, buckets and API tokens.

Admin actions are thin: they call the services, which validate.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.core.exceptions import ValidationError
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils import timezone

from ingest.engine import mask
from ingest.triggers import cron
from ingest.triggers.errors import TriggerError
from ingest.triggers.models import (
    ApiToken,
    IdempotencyKey,
    IngressSecret,
    PublishedEvent,
    Route,
    Schedule,
    Subscription,
    TokenBucket,
)
from ingest.triggers.services import schedule_run_now, schedule_set_enabled

# ModelAdmin is generic only in django-stubs: ModelAdmin[Route] would fail at run time (without
# django-stubs-ext's monkeypatch, which is not a runtime dependency), hence the type-arg ignores.


@admin.register(Route)
class RouteAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = ("name", "workflow", "tenant", "enabled", "sync_default", "rate_limit_per_minute")
    list_filter = ("enabled", "tenant")
    search_fields = ("name", "workflow")


@admin.register(IngressSecret)
class IngressSecretAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = ("tenant", "name", "token_prefix", "enabled", "rate_limit_per_minute", "created_at")
    list_filter = ("enabled", "tenant")
    # Secrets are minted with `ingress_secret_create` (it shows the token once); not typed in here.
    # The HMAC secret is encrypted at rest and shown masked, never in clear.
    # A rotation's previous pair shows its prefix and end only; its secret is not shown at all.
    fields = (
        "tenant",
        "name",
        "token_hash",
        "token_prefix",
        "hmac_secret_masked",
        "enabled",
        "rate_limit_per_minute",
        "rotated_at",
        "previous_token_prefix",
        "previous_valid_until",
    )
    readonly_fields = (
        "token_hash",
        "token_prefix",
        "hmac_secret_masked",
        "rotated_at",
        "previous_token_prefix",
        "previous_valid_until",
    )

    @admin.display(description="HMAC secret")
    def hmac_secret_masked(self, obj: IngressSecret) -> str:
        return mask(obj.hmac_secret)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False


@admin.register(IdempotencyKey)
class IdempotencyKeyAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = ("tenant", "route", "key", "instance_id", "created_at", "expires_at")
    search_fields = ("key", "instance_id")


@admin.register(Schedule)
class ScheduleAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = ("name", "workflow", "cron", "timezone", "enabled", "next_fire_at", "last_fire_at")
    list_filter = ("enabled", "tenant")
    readonly_fields = (
        "last_fire_at",
        "last_instance_id",
        "next_fire_at",
        "checked_until",
        "last_error",
        "created_at",
        "updated_at",
    )
    actions = ("run_now", "enable", "disable")

    def save_model(self, request: HttpRequest, obj: Schedule, form: Any, change: bool) -> None:
        now = timezone.now()
        try:
            obj.cron = cron.validate_cron(obj.cron)
            cron.zone(obj.timezone)
        except TriggerError as exc:
            raise ValidationError(str(exc)) from None
        if not change:
            obj.created_at = obj.checked_until = now
        obj.updated_at = now
        fires = cron.upcoming(obj, now=now, count=1) if obj.enabled else []
        obj.next_fire_at = fires[0] if fires else None
        super().save_model(request, obj, form, change)

    @admin.action(description="Run now")
    def run_now(self, request: HttpRequest, queryset: QuerySet[Schedule]) -> None:
        for schedule in queryset:
            instance_id = schedule_run_now(name=schedule.name, now=timezone.now(), actor=request.user.get_username())
            self.message_user(request, f"{schedule.name}: started {instance_id}", messages.SUCCESS)

    @admin.action(description="Enable")
    def enable(self, request: HttpRequest, queryset: QuerySet[Schedule]) -> None:
        for schedule in queryset:
            schedule_set_enabled(name=schedule.name, enabled=True, now=timezone.now())

    @admin.action(description="Disable")
    def disable(self, request: HttpRequest, queryset: QuerySet[Schedule]) -> None:
        for schedule in queryset:
            schedule_set_enabled(name=schedule.name, enabled=False, now=timezone.now())


@admin.register(Subscription)
class SubscriptionAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = ("pattern", "workflow", "tenant", "filters", "enabled")
    list_filter = ("enabled",)


@admin.register(PublishedEvent)
class PublishedEventAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = ("id", "type", "tenant", "created_at")
    search_fields = ("id", "type")


@admin.register(TokenBucket)
class TokenBucketAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = ("key", "capacity", "refill_per_second", "tokens", "blocked_until")


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = ("name", "user", "token_prefix", "created_at", "last_used_at", "revoked_at")
    readonly_fields = ("token_hash", "token_prefix", "last_used_at")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # minted with `api_token_create`, which shows the token once
