from __future__ import annotations

from django.apps import AppConfig


class ObservabilityConfig(AppConfig):
    name = "dashboard.observability"
    label = "observability"
    verbose_name = "Runledger observability"
    default_auto_field = "django.db.models.BigAutoField"
