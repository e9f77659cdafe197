"""Mounted at the site's root: scrapers and probes expect these exact paths."""

from __future__ import annotations

from django.urls import path

from dashboard.observability import views

urlpatterns = [
    path("metrics", views.metrics, name="metrics"),
    path("healthz", views.healthz, name="healthz"),
    path("readyz", views.readyz, name="readyz"),
]
