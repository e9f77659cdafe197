"""/api/routes, /api/subscriptions, /api/ingress-credentials: what starts which workflow, recent
deliveries and their outcome, coalesce settings and their open windows, and credential rotation
(the new token and secret are in the rotation's answer only).

`POST /api/routes/<name>` is the signed ingress itself (dashboard/api/urls.py routes it before
this API), so a route's own reads live under `/api/routes/<name>/...` sub-paths."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.http import HttpRequest, HttpResponse
from django.utils import timezone
from ninja import Router, Schema

from dashboard import access
from dashboard.api import schemas as s
from dashboard.api.audit import acted
from dashboard.api.auth import require_act
from dashboard.api.errors import ApiProblem
from dashboard.selectors import routes as sel
from dashboard.selectors.routes import RouteRow, SubscriptionRow
from ingest.triggers.services import (
    ingress_secret_rotate,
    route_coalesce_set,
    subscription_coalesce_set,
)

router = Router(tags=["routes"])
E: dict[int, Any] = {400: s.ErrorOut, 401: s.ErrorOut, 403: s.ErrorOut, 404: s.ErrorOut, 422: s.ErrorOut}


class CoalesceIn(s.InputSchema):
    coalesce: dict[str, Any] | None = None


class CredentialOut(Schema):
    tenant: str
    name: str
    token_prefix: str
    enabled: bool
    created_at: datetime


class RotatedOut(Schema):
    tenant: str
    name: str
    token: str
    secret: str


def _tenants(request: HttpRequest) -> list[str]:
    return access.tenants_for(request.user)


def _sees_global(request: HttpRequest) -> bool:
    return bool(request.user.is_staff or request.user.is_superuser)


def _route(request: HttpRequest, name: str) -> RouteRow:
    row = sel.route_page_get(name=name, tenants=_tenants(request), now=timezone.now())
    if row is None:
        raise ApiProblem(404, "route_not_found", f"no route {name[:100]!r} is visible to this token")
    return row


def _subscription(request: HttpRequest, sub_id: int) -> SubscriptionRow:
    row = sel.subscription_page_get(subscription_id=sub_id, tenants=_tenants(request),
                                    see_global=_sees_global(request), now=timezone.now())
    if row is None:
        raise ApiProblem(404, "subscription_not_found", f"no subscription {sub_id} is visible to this token")
    return row


@router.get("/routes", response={200: list[RouteRow], **E}, summary="Routes, their coalesce and last deliveries")
def route_list(request: HttpRequest) -> list[RouteRow]:
    return sel.route_rows(tenants=_tenants(request), now=timezone.now())


@router.get("/routes/{name}/detail", response={200: RouteRow, **E}, summary="A route and its 20 last deliveries")
def route_get(request: HttpRequest, name: str) -> RouteRow:
    return _route(request, name)


@router.put("/routes/{name}/coalesce", response={200: RouteRow, **E},
            summary="Set a route's debounce or batch (null or {} turns it off)")
def route_coalesce(request: HttpRequest, name: str, body: CoalesceIn) -> RouteRow:
    tenant = _route(request, name).tenant
    require_act(request.user, tenant)
    acted(request, action="route.coalesce", tenants=[tenant], selection={"route": name, "coalesce": body.coalesce},
          run=lambda: route_coalesce_set(name=name, coalesce_setting=body.coalesce))
    return _route(request, name)


@router.get("/subscriptions", response={200: list[SubscriptionRow], **E})
def subscription_list(request: HttpRequest) -> list[SubscriptionRow]:
    return sel.subscription_rows(tenants=_tenants(request), see_global=_sees_global(request), now=timezone.now())


@router.get("/subscriptions/{sub_id}", response={200: SubscriptionRow, **E})
def subscription_get(request: HttpRequest, sub_id: int) -> SubscriptionRow:
    return _subscription(request, sub_id)


@router.put("/subscriptions/{sub_id}/coalesce", response={200: SubscriptionRow, **E})
def subscription_coalesce(request: HttpRequest, sub_id: int, body: CoalesceIn) -> SubscriptionRow:
    row = _subscription(request, sub_id)
    if row.tenant:
        require_act(request.user, row.tenant)
    elif not (_sees_global(request) and access.acting_tenants(request.user)):
        raise ApiProblem(403, "forbidden", "a subscription for every tenant is changed by staff operators only")
    acted(request, action="subscription.coalesce", tenants=[row.tenant] if row.tenant else [],
          selection={"subscription": sub_id, "coalesce": body.coalesce},
          run=lambda: subscription_coalesce_set(subscription_id=sub_id, coalesce_setting=body.coalesce))
    return _subscription(request, sub_id)


@router.get("/ingress-credentials", response={200: list[CredentialOut], **E},
            summary="Ingress credentials: prefixes only, never a token or secret")
def credential_list(request: HttpRequest) -> list[sel.Credential]:
    return sel.credentials(tenants=_tenants(request))


@router.post("/ingress-credentials/{tenant}/{name}/rotate", response={200: RotatedOut, **E},
             summary="New token and secret, shown in this answer only; the old pair stops working")
def credential_rotate(request: HttpRequest, response: HttpResponse, tenant: str, name: str) -> dict[str, str]:
    require_act(request.user, tenant)
    response["Cache-Control"] = "no-store"
    _, token, secret = acted(request, action="ingress_secret.rotate", tenants=[tenant],
                             selection={"tenant": tenant, "name": name},
                             run=lambda: ingress_secret_rotate(tenant=tenant, name=name))
    return {"tenant": tenant, "name": name, "token": token, "secret": secret}
