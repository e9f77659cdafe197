"""/api/audit: the operator actions of the caller's tenants; and `acted`, how every API handler
that acts runs its engine call together with its audit entry."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any, TypeVar

from django.http import HttpRequest
from ninja import Field, Query, Router, Schema

from dashboard import access
from dashboard.api import schemas as s
from dashboard.api.openapi import SPACES_RUN
from dashboard.audit import Audit, Origin, affected_count, audited
from dashboard.models import AuditSource
from dashboard.selectors.audit import AuditFilters, audit_page

R = TypeVar("R")
router = Router(tags=["audit"])
E: dict[int, Any] = {400: s.ErrorOut, 401: s.ErrorOut, 422: s.ErrorOut}


def acted(
    request: HttpRequest,
    *,
    action: str,
    tenants: Iterable[str],
    selection: dict[str, Any],
    run: Callable[[], R],
    reason: str = "",
    affected: Callable[[R], int] = affected_count,
) -> R:
    """Run an API action and write its audit entry (source "api"), both or neither."""
    return audited(
        user=request.user,
        origin=Origin.of_request(request, source=AuditSource.API),
        audit=Audit(action, list(tenants), selection, reason),
        run=run,
        affected=affected,
    )


class AuditQuery(Schema):
    action: str | None = None
    actor: str | None = None
    source: str | None = Field(
        None,
        json_schema_extra={"pattern": f"^{SPACES_RUN}(?:{'|'.join(AuditSource.values)})?{SPACES_RUN}$"},
        description="web, api or cli",
    )
    tenant: str | None = None
    before: int | None = None
    limit: int = 50


class AuditOut(Schema):
    id: int
    created_at: datetime
    actor: str
    action: str
    source: str
    ip: str | None
    user_agent: str
    tenants: list[str]
    selection: dict[str, Any]
    affected: int
    reason: str


class AuditPageOut(Schema):
    items: list[AuditOut]
    next_before: int | None


@router.get(
    "",
    response={200: AuditPageOut, **E},
    summary="Operator actions (dashboard, API, CLI) in the caller's tenants, newest first",
)
def audit_list(request: HttpRequest, q: Query[AuditQuery]) -> dict[str, Any]:
    page = audit_page(
        tenants=access.tenants_for(request.user),
        see_global=bool(request.user.is_staff or request.user.is_superuser),
        filters=AuditFilters.from_query(q.dict()),
        before=q.before,
        limit=q.limit,
    )
    return {"items": page.rows, "next_before": page.next_before}
