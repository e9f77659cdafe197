"""URL map. Each page family owns its own urls module; this file only mounts them."""

from __future__ import annotations

from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/", include("dashboard.api.urls")),
    path("hooks/", include("ingest.urls")),
    path("", include("dashboard.urls_ops")),
    path("", include("dashboard.urls_runs")),
]


handler400 = "dashboard.guard.bad_request"
