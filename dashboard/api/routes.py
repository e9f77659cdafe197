"""/api/routes: what starts which workflow over signed HTTP, recent deliveries and their outcome,
the coalesce setting and its open windows; create, edit, enable, disable and delete, through the
same services (and so the same checks, every wrong field named at once) as the console.

`POST /api/routes/<name>` is the signed ingress itself (dashboard/api/urls.py routes it before
this API, whatever the method), so a route's own address here is `/api/routes/<name>/detail`."""

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
from dashboard.selectors.routes import RouteRow
from ingest.triggers.services import (
    route_coalesce_set,
    route_create,
    route_delete,
    route_set_enabled,
    route_update,
)
from ingest.triggers.services.routes import EDITABLE

router = Router(tags=["routes"])
E: dict[int, Any] = {400: s.ErrorOut, 401: s.ErrorOut, 403: s.ErrorOut, 404: s.ErrorOut, 422: s.ErrorOut}


class CoalesceIn(s.InputSchema):
    coalesce: dict[str, Any] | None = ts.coalesce_field()


class RoutesDeletedOut(Schema):
    name: str
    deleted: bool


def _route(request: HttpRequest, name: str) -> RouteRow:
    row = sel.route_page_get(name=name, tenants=access.tenants_for(request.user), now=timezone.now())
    if row is None:
        raise ApiProblem(404, "route_not_found", f"no route {name[:100]!r} is visible to this token")
    return row


def _acting(request: HttpRequest, name: str) -> str:
    tenant = _route(request, name).tenant
    require_act(request.user, tenant)
    return tenant


@router.get("/routes", response={200: list[RouteRow], **E}, summary="Routes, their coalesce and last deliveries")
def route_list(request: HttpRequest) -> list[RouteRow]:
    return sel.route_rows(tenants=access.tenants_for(request.user), now=timezone.now())


@router.post(
    "/routes",
    response={201: RouteRow, **E, 409: s.ErrorOut},
    summary="Create a route (every wrong field named at once; nothing is created on a refusal)",
)
def route_create_view(request: HttpRequest, body: ts.RouteIn) -> Status[RouteRow]:
    fields = body.model_dump()
    name, tenant = fields.pop("name"), fields.pop("tenant")
    if isinstance(tenant, str):
        require_act(request.user, tenant)
    acted(
        request,
        action="route.create",
        tenants=[tenant] if isinstance(tenant, str) else [],
        selection={"route": name, "tenant": tenant, **fields},
        run=lambda: route_create(name=name, tenant=tenant, **fields),
    )
    return Status(201, _route(request, name))


@router.get("/routes/{name}/detail", response={200: RouteRow, **E}, summary="A route and its 20 last deliveries")
def route_get(request: HttpRequest, name: str) -> RouteRow:
    return _route(request, name)


@router.patch(
    "/routes/{name}/detail",
    response={200: RouteRow, **E},
    summary="Edit a route's settings (every wrong field named at once; nothing changes on a refusal)",
)
def route_edit(request: HttpRequest, name: str, body: ts.RouteEditIn) -> RouteRow:
    tenant = _acting(request, name)
    fields = body.model_dump(exclude_unset=True)
    if not fields:
        raise ApiProblem(400, "nothing_to_change", f"send at least one of {', '.join(EDITABLE)}")
    acted(
        request,
        action="route.update",
        tenants=[tenant],
        selection={"route": name, **fields},
        run=lambda: route_update(name=name, **fields),
    )
    return _route(request, name)


@router.delete(
    "/routes/{name}/detail",
    response={200: RoutesDeletedOut, **E},
    summary="Delete a route: POST /api/routes/<name> answers 404 from then on",
)
def route_delete_view(request: HttpRequest, name: str) -> dict[str, Any]:
    tenant = _acting(request, name)
    acted(
        request, action="route.delete", tenants=[tenant], selection={"route": name}, run=lambda: route_delete(name=name)
    )
    return {"name": name, "deleted": True}


def _set(request: HttpRequest, name: str, enabled: bool) -> RouteRow:
    tenant = _acting(request, name)
    acted(
        request,
        action="route.enable" if enabled else "route.disable",
        tenants=[tenant],
        selection={"route": name},
        run=lambda: route_set_enabled(name=name, enabled=enabled),
    )
    return _route(request, name)


@router.post("/routes/{name}/enable", response={200: RouteRow, **E}, summary="Enable a route")
def route_enable(request: HttpRequest, name: str) -> RouteRow:
    return _set(request, name, True)


@router.post(
    "/routes/{name}/disable",
    response={200: RouteRow, **E},
    summary="Disable a route: its requests answer 409 route_disabled and start nothing",
)
def route_disable(request: HttpRequest, name: str) -> RouteRow:
    return _set(request, name, False)


@router.put(
    "/routes/{name}/coalesce",
    response={200: RouteRow, **E},
    summary="Set a route's debounce or batch (null or {} turns it off)",
)
def route_coalesce(request: HttpRequest, name: str, body: CoalesceIn) -> RouteRow:
    tenant = _acting(request, name)
    acted(
        request,
        action="route.coalesce",
        tenants=[tenant],
        selection={"route": name, "coalesce": body.coalesce},
        run=lambda: route_coalesce_set(name=name, coalesce_setting=body.coalesce),
    )
    return _route(request, name)
