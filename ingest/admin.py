"""Admin for the pipelines' tables. Prices, keyword lists and connections are edited here;
facts, embeddings and signal evaluations are written by the workflows and shown read-only."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.core.exceptions import ValidationError
from django.http import HttpRequest

from ingest.engine import WriteOnlySecretsForm
from ingest.pipelines import models
from ingest.pipelines.cursors import LOOKBACK_OPTION, lookback_minutes_check
from ingest.pipelines.pricing import PRICE_FIELDS
from ingest.sources.outbound import LIMIT_OPTION, limit_parse


class ReadOnly(admin.ModelAdmin):  # type: ignore[type-arg]
    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(models.Price)
class PriceAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    """A price change is a new row with a later `effective_from`: past costs keep their price."""

    list_display = (*PRICE_FIELDS, "note")
    list_filter = ("service",)
    search_fields = ("service", "model")
    ordering = ("service", "model", "-effective_from")


@admin.register(models.KeywordList)
class KeywordListAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = ("tenant", "keyword_count", "updated_at")
    search_fields = ("tenant",)
    readonly_fields = ("updated_at",)

    @admin.display(description="keywords")
    def keyword_count(self, obj: models.KeywordList) -> int:
        return len(obj.keywords)

    def save_model(self, request: HttpRequest, obj: models.KeywordList, form: Any, change: bool) -> None:
        from ingest.pipelines.services import keyword_list_set

        saved = keyword_list_set(tenant=obj.tenant, keywords=[str(k) for k in obj.keywords])
        obj.pk, obj.keywords, obj.updated_at = saved.pk, saved.keywords, saved.updated_at


class ConnectionForm(WriteOnlySecretsForm):
    secret_fields = ("key", "secret", "refresh_token", "webhook_key")

    class Meta:
        model = models.Connection
        exclude = (
            "updated_at",
            "webhook_key_hash",
            "access_token",
            "access_token_expires_at",
            "instance_url",
            "last_tested_at",
            "last_test_ok",
            "last_test_message",
        )

    def clean_options(self) -> Any:
        """The options the pulls and the rate limits read, refused here with what is wrong
        rather than failing the connection's steps later."""
        options = self.cleaned_data.get("options")
        if not isinstance(options, dict):
            raise ValidationError('options are a JSON object, e.g. {"rate_limit": {"per_second": 3, "burst": 1}}')
        try:
            if LIMIT_OPTION in options:
                limit_parse(options[LIMIT_OPTION], what=LIMIT_OPTION)
            if LOOKBACK_OPTION in options:
                lookback_minutes_check(options[LOOKBACK_OPTION], what=LOOKBACK_OPTION)
        except ValueError as error:
            raise ValidationError(str(error)) from None
        if "reconcile" in options and not isinstance(options["reconcile"], bool):
            raise ValidationError("reconcile is true or false (false: no scheduled pulls of this connection)")
        return options


@admin.register(models.Connection)
class ConnectionAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    """Credentials are write-only (masked to their last 4 characters) and encrypted at rest."""

    form = ConnectionForm
    list_display = ("tenant", "kind", "base_url", "enabled", "updated_at", "last_tested_at", "last_test_ok")
    list_filter = ("kind", "enabled")
    readonly_fields = ("last_tested_at", "last_test_ok", "last_test_message")  # written by "test connection"
    search_fields = ("tenant",)

    def save_model(self, request: HttpRequest, obj: models.Connection, form: Any, change: bool) -> None:
        from django.utils import timezone

        from ingest.engine import lookup_hash

        obj.updated_at = timezone.now()
        obj.webhook_key_hash = lookup_hash(obj.webhook_key)
        # A refresh token typed into the options (the old place) would be stored in clear.
        if isinstance(obj.options, dict) and "refresh_token" in obj.options:
            obj.refresh_token = str(obj.options.pop("refresh_token") or "") or obj.refresh_token
        super().save_model(request, obj, form, change)


@admin.register(models.ConnectionCursor)
class ConnectionCursorAdmin(ReadOnly):
    """Written by the scheduled pulls only; the workflows page shows the same, per tenant."""

    list_display = ("connection", "cursor", "last_pull_at", "listed", "started", "last_error_at")
    list_select_related = ("connection",)


@admin.register(models.Fact)
class FactAdmin(ReadOnly):
    list_display = (
        "subject",
        "predicate",
        "object",
        "confidence",
        "source_authority",
        "valid",
        "observed_at",
        "tenant",
    )
    list_filter = ("tenant", "source_authority", "valid", "predicate")
    search_fields = ("subject", "id", "source_ref")
    show_full_result_count = False


@admin.register(models.SignalEvaluation)
class SignalEvaluationAdmin(ReadOnly):
    list_display = ("instance_id", "tenant", "workflow", "fact_count", "created_at")
    list_filter = ("tenant", "workflow")
    search_fields = ("instance_id", "source_ref")


@admin.register(models.FactEmbedding)
class FactEmbeddingAdmin(ReadOnly):
    list_display = ("fact", "tenant", "model", "dim", "created_at")
    list_filter = ("tenant", "model")
    exclude = ("vector",)
