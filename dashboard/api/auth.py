"""Bearer-token authentication for the REST API, and the tenant checks every handler uses.

Roles and tenant scoping are the dashboard's (`dashboard.access`): a token acts as its user.
"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from django.utils import timezone
from ninja.security import HttpBearer

from dashboard import access
from dashboard.api.errors import ApiProblem
from ingest.triggers.services import api_token_authenticate


class ApiTokenAuth(HttpBearer):
    openapi_description = "An API token (rla_…) created for a user or service account."

    def authenticate(self, request: HttpRequest, token: str) -> Any | None:
        user = api_token_authenticate(token=token, now=timezone.now())
        if user is not None:
            request.user = user
        return user


def require_act(user: Any, tenant: str) -> None:
    """Operators act; a viewer gets 403, a non-member 404 (so ids of other tenants do not leak)."""
    if not access.can_read(user, tenant):
        raise ApiProblem(
            404, "tenant_not_found", f"tenant {tenant!r} is not visible to this token; use one of its tenants"
        )
    if not access.can_act(user, tenant):
        raise ApiProblem(
            403, "forbidden", f"this token's user is a viewer of tenant {tenant!r}; acting needs the operator role"
        )


def actor(user: Any) -> str:
    return f"api:{user.get_username()}"
