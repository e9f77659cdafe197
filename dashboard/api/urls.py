"""/api/: signed route ingress, then the REST API (OpenAPI at /api/openapi.json, docs at /api/docs)."""

from __future__ import annotations

from typing import Any

from django.urls import path

from dashboard.api.app import api
from dashboard.api.ingress import route_ingress
from dashboard.api.ingress_errors import counting_5xx

urlpatterns: list[Any] = [
    path("routes/<str:route>", counting_5xx(route_ingress), name="route-ingress"),
    path("", api.urls),
]
