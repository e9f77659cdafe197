"""/api/subscriptions: which events start which workflow, the events they started, their coalesce
setting and open windows; create, edit, enable, disable and delete, through the same services
(and so the same checks, every wrong field named at once) as the console. A subscription for
every tenant's events (tenant "") is read and changed by staff only."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from django.utils import timezone
from ninja import Router, Schema, Status

from dashboard import access
from dashboard.api import schemas as s
from dashboard.api import trigger_schemas as ts
from dashboard.api.audit import acted
from dashboard.api.auth import require_act
from dashboard.api.errors import ApiProblem
from dashboard.selectors import routes as sel
from dashboard.selectors.routes import SubscriptionRow
from ingest.triggers.services import (
    subscription_coalesce_set,
    subscription_create,
    subscription_delete,
    subscription_set_enabled,
    subscription_update,
)
from ingest.triggers.services.subscriptions import EDITABLE

router = Router(tags=["subscriptions"])
E: dict[int, Any] = {400: s.ErrorOut, 401: s.ErrorOut, 403: s.ErrorOut, 404: s.ErrorOut, 422: s.ErrorOut}


class CoalesceIn(s.InputSchema):
    coalesce: dict[str, Any] | None = ts.coalesce_field()


class SubscriptionsDeletedOut(Schema):
    id: int
    deleted: bool


def _subscription(request: HttpRequest, sub_id: int) -> SubscriptionRow:
    row = sel.subscription_page_get(
        subscription_id=sub_id,
        tenants=access.tenants_for(request.user),
        see_global=access.sees_global(request.user),
        now=timezone.now(),
    )
    if row is None:
        raise ApiProblem(404, "subscription_not_found", f"no subscription {sub_id} is visible to this token")
    return row


def _require_act(request: HttpRequest, tenant: str) -> list[str]:
    """The audit entry's tenants, once the caller may change a subscription of `tenant`."""
    if tenant:
        require_act(request.user, tenant)
        return [tenant]
    if not access.can_act_subscription(request.user, ""):
        raise ApiProblem(403, "forbidden", "a subscription for every tenant is changed by staff operators only")
    return []


@router.get("/subscriptions", response={200: list[SubscriptionRow], **E})
def subscription_list(request: HttpRequest) -> list[SubscriptionRow]:
    return sel.subscription_rows(
        tenants=access.tenants_for(request.user), see_global=access.sees_global(request.user), now=timezone.now()
    )


@router.post(
    "/subscriptions",
    response={201: SubscriptionRow, **E},
    summary="Create a subscription (every wrong field named at once; nothing is created on a refusal)",
)
def subscription_create_view(request: HttpRequest, body: ts.SubscriptionIn) -> Status[SubscriptionRow]:
    fields = body.model_dump()
    tenant = fields.pop("tenant")
    tenants = _require_act(request, tenant) if isinstance(tenant, str) else []
    sub = acted(
        request,
        action="subscription.create",
        tenants=tenants,
        selection={"tenant": tenant, **fields},
        run=lambda: subscription_create(tenant=tenant, **fields),
    )
    return Status(201, _subscription(request, sub.pk))


@router.get("/subscriptions/{sub_id}", response={200: SubscriptionRow, **E})
def subscription_get(request: HttpRequest, sub_id: int) -> SubscriptionRow:
    return _subscription(request, sub_id)


@router.patch(
    "/subscriptions/{sub_id}",
    response={200: SubscriptionRow, **E},
    summary="Edit a subscription (every wrong field named at once; nothing changes on a refusal)",
)
def subscription_edit(request: HttpRequest, sub_id: int, body: ts.SubscriptionEditIn) -> SubscriptionRow:
    tenants = _require_act(request, _subscription(request, sub_id).tenant)
    fields = body.model_dump(exclude_unset=True)
    if not fields:
        raise ApiProblem(400, "nothing_to_change", f"send at least one of {', '.join(EDITABLE)}")
    acted(
        request,
        action="subscription.update",
        tenants=tenants,
        selection={"subscription": sub_id, **fields},
        run=lambda: subscription_update(subscription_id=sub_id, **fields),
    )
    return _subscription(request, sub_id)


@router.delete(
    "/subscriptions/{sub_id}",
    response={200: SubscriptionsDeletedOut, **E},
    summary="Delete a subscription: it starts nothing more; what it started stays",
)
def subscription_delete_view(request: HttpRequest, sub_id: int) -> dict[str, Any]:
    row = _subscription(request, sub_id)
    tenants = _require_act(request, row.tenant)
    acted(
        request,
        action="subscription.delete",
        tenants=tenants,
        selection={"subscription": sub_id, "pattern": row.pattern, "workflow": row.workflow},
        run=lambda: subscription_delete(subscription_id=sub_id),
    )
    return {"id": sub_id, "deleted": True}


def _set(request: HttpRequest, sub_id: int, enabled: bool) -> SubscriptionRow:
    tenants = _require_act(request, _subscription(request, sub_id).tenant)
    acted(
        request,
        action="subscription.enable" if enabled else "subscription.disable",
        tenants=tenants,
        selection={"subscription": sub_id},
        run=lambda: subscription_set_enabled(subscription_id=sub_id, enabled=enabled),
    )
    return _subscription(request, sub_id)


@router.post("/subscriptions/{sub_id}/enable", response={200: SubscriptionRow, **E})
def subscription_enable(request: HttpRequest, sub_id: int) -> SubscriptionRow:
    return _set(request, sub_id, True)


@router.post(
    "/subscriptions/{sub_id}/disable",
    response={200: SubscriptionRow, **E},
    summary="Disable a subscription: events published meanwhile start nothing",
)
def subscription_disable(request: HttpRequest, sub_id: int) -> SubscriptionRow:
    return _set(request, sub_id, False)


@router.put("/subscriptions/{sub_id}/coalesce", response={200: SubscriptionRow, **E})
def subscription_coalesce(request: HttpRequest, sub_id: int, body: CoalesceIn) -> SubscriptionRow:
    tenants = _require_act(request, _subscription(request, sub_id).tenant)
    acted(
        request,
        action="subscription.coalesce",
        tenants=tenants,
        selection={"subscription": sub_id, "coalesce": body.coalesce},
        run=lambda: subscription_coalesce_set(subscription_id=sub_id, coalesce_setting=body.coalesce),
    )
    return _subscription(request, sub_id)
