"""The root URL map (ROOT_URLCONF): it mounts the admin, the API, the webhooks and the two page
families' url modules beside this file (`ops`: the operations pages under the "ops" namespace;
`triggers`: schedules, routes, subscriptions and workers; `runs`: login and the instances pages)."""

from __future__ import annotations

from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
    path("", include("dashboard.observability.urls")),  # /metrics, /healthz, /readyz
    path("api/", include("dashboard.api.urls")),
    path("hooks/", include("ingest.urls")),
    path("", include("dashboard.urls.ops")),
    path("", include("dashboard.urls.triggers")),
    path("", include("dashboard.urls.runs")),
]


handler400 = "dashboard.guard.bad_request"
handler403 = "dashboard.views.errors.permission_denied"
handler404 = "dashboard.views.errors.page_not_found"
handler500 = "dashboard.views.errors.server_error"
