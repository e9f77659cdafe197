"""Webhook routes; mounted under /hooks/ by dashboard/urls/__init__.py."""

from __future__ import annotations

from django.urls import path

from ingest.workflows import hooks

app_name = "ingest"

urlpatterns = [
    path("gong/<str:key>", hooks.gong_webhook, name="gong-webhook"),
    path("salesforce/<str:key>/cdc", hooks.salesforce_cdc, name="salesforce-cdc"),
    path("salesforce/<str:key>/outbound", hooks.salesforce_outbound, name="salesforce-outbound"),
]
