"""The root URL map (ROOT_URLCONF): it mounts the admin, the API, the webhooks and the two page
families' url modules beside this file (`ops`: the operations pages under the "ops" namespace;
`runs`: login and the instances pages)."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest, HttpResponse
from django.urls import include, path
from django.views import defaults

urlpatterns = [
    path("admin/", admin.site.urls),
    path("", include("dashboard.observability.urls")),  # /metrics, /healthz, /readyz
    path("api/", include("dashboard.api.urls")),
    path("hooks/", include("ingest.urls")),
    path("", include("dashboard.urls.ops")),
    path("", include("dashboard.urls.runs")),
]


def bad_request(request: HttpRequest, exception: Any) -> HttpResponse:
    """A request Django refuses before any view (an invalid Host header, say): the API answers
    in its own JSON error format, the pages with Django's page. What was wrong is not echoed
    back, as Django's own page does not either."""
    if request.path.startswith("/api/"):
        from dashboard.api.errors import error_response

        return error_response(400, "bad_request", "the request is malformed (an invalid Host header, for "
                              "example); nothing was done")
    return defaults.bad_request(request, exception)


handler400 = bad_request
