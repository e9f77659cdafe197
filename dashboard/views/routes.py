"""The routes page (with the subscriptions and ingress credentials beside them) and a route's own:
what starts which workflow, recent deliveries, the coalesce setting and its open windows, and
routes created, edited, enabled, disabled and deleted by operators, every wrong field named at
once. Subscriptions: views/subscriptions.py; credentials: views/credentials.py."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.http import Http404, HttpResponse
from django.shortcuts import redirect
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

from dashboard import access
from dashboard.audit import Audit, Origin, audited
from dashboard.models import Role
from dashboard.selectors import routes as sel
from dashboard.submissions import once
from dashboard.trigger_forms import CoalesceForm, RouteCreateForm, RouteForm, add_refusal
from dashboard.views.common import HtmxHttpRequest, coalesce_save, page, require_act, sees_global, tenants
from ingest.triggers.errors import TriggerError
from ingest.triggers.field_checks import startable_workflows
from ingest.triggers.models import Route
from ingest.triggers.services import (
    route_coalesce_set,
    route_create,
    route_delete,
    route_set_enabled,
    route_update,
)
from ingest.triggers.services.routes import EDITABLE


@require_GET
@access.require_role()
def routes(request: HtmxHttpRequest) -> HttpResponse:
    now, visible = timezone.now(), tenants(request)
    context = {
        "routes": sel.route_rows(tenants=visible, now=now),
        "subscriptions": sel.subscription_rows(tenants=visible, see_global=sees_global(request), now=now),
        "credentials": sel.credentials(tenants=visible, now=now),
        "acting": set(access.acting_tenants(request.user)),
    }
    return page(request, "triggers/routes.html", context)


def _route(request: HtmxHttpRequest, name: str) -> sel.RouteRow:
    row = sel.route_page_get(name=name, tenants=tenants(request), now=timezone.now())
    if row is None:
        raise Http404(f"no route {name[:100]!r} in your tenants")
    return row


def _route_page(
    request: HtmxHttpRequest, row: sel.RouteRow, form: CoalesceForm, status: int = 200, edit: RouteForm | None = None
) -> HttpResponse:
    context: dict[str, Any] = {
        "r": row,
        "form": form,
        "can_act": access.can_act(request.user, row.tenant),
        "edit": edit or _edit_form(name=row.name),
    }
    return page(request, "triggers/route_detail.html", context, status=status)


def _edit_form(*, name: str, data: Any = None) -> RouteForm:
    route = Route.objects.filter(name=name).values(*EDITABLE).first() or {}
    return RouteForm(data, workflows=startable_workflows(), initial=route)


@require_GET
@access.require_role()
def route_detail(request: HtmxHttpRequest, name: str) -> HttpResponse:
    row = _route(request, name)
    return _route_page(request, row, CoalesceForm(initial={"coalesce": row.coalesce or ""}))


@require_POST
@access.require_role()
@once()
def route_save(request: HtmxHttpRequest, name: str) -> HttpResponse:
    row = _route(request, name)
    require_act(request, row.tenant)
    form = _edit_form(name=name, data=request.POST)
    coalesce = CoalesceForm(initial={"coalesce": row.coalesce or ""})
    if not form.is_valid():
        return _route_page(request, row, coalesce, status=400, edit=form)
    fields = form.route_fields()
    try:
        audited(
            user=request.user,
            origin=Origin.of_request(request),
            audit=Audit("route.update", [row.tenant], {"route": name, **fields}),
            run=lambda: route_update(name=name, **fields),
        )
    except TriggerError as exc:
        add_refusal(form, exc)
        return _route_page(request, row, coalesce, status=400, edit=form)
    messages.success(request, f"Route {name} saved.")
    return redirect("triggers:route", name=name)


def _create_form(request: HtmxHttpRequest, data: Any = None) -> RouteCreateForm:
    return RouteCreateForm(
        data,
        workflows=startable_workflows(),
        tenants=access.acting_tenants(request.user),
        initial={"enabled": True, "wait_seconds": 30.0, "idempotency_ttl_seconds": 24 * 3600, "priority": 0},
    )


def _new_page(request: HtmxHttpRequest, form: RouteCreateForm, *, status: int = 200) -> HttpResponse:
    return page(request, "triggers/route_new.html", {"form": form}, status=status)


@require_GET
@access.require_role(Role.OPERATOR)
def route_new(request: HtmxHttpRequest) -> HttpResponse:
    return _new_page(request, _create_form(request))


@require_POST
@access.require_role(Role.OPERATOR)
@once()
def route_create_view(request: HtmxHttpRequest) -> HttpResponse:
    form = _create_form(request, request.POST)
    if not form.is_valid():
        return _new_page(request, form, status=400)
    name, tenant, fields = form.cleaned_data["name"], form.cleaned_data["tenant"], form.route_fields()
    require_act(request, tenant)
    try:
        audited(
            user=request.user,
            origin=Origin.of_request(request),
            audit=Audit("route.create", [tenant], {"route": name, "tenant": tenant, **fields}),
            run=lambda: route_create(name=name, tenant=tenant, **fields),
        )
    except TriggerError as exc:
        add_refusal(form, exc)
        return _new_page(request, form, status=400)
    messages.success(
        request,
        f"Route {name} created: POST /api/routes/{name} with an ingress credential of "
        f"{tenant} starts {fields['workflow']}.",
    )
    return redirect("triggers:route", name=name)


@require_GET
@access.require_role()
def route_delete_confirm(request: HtmxHttpRequest, name: str) -> HttpResponse:
    row = _route(request, name)
    require_act(request, row.tenant)
    return page(request, "triggers/route_delete.html", {"r": row})


@require_POST
@access.require_role()
@once()
def route_delete_view(request: HtmxHttpRequest, name: str) -> HttpResponse:
    row = _route(request, name)
    require_act(request, row.tenant)
    audited(
        user=request.user,
        origin=Origin.of_request(request),
        audit=Audit("route.delete", [row.tenant], {"route": name, "workflow": row.workflow}),
        run=lambda: route_delete(name=name),
    )
    messages.success(request, f"Route {name} deleted: POST /api/routes/{name} answers 404 from now on.")
    return redirect("triggers:routes")


@require_POST
@access.require_role()
@once()
def route_coalesce(request: HtmxHttpRequest, name: str) -> HttpResponse:
    row = _route(request, name)
    require_act(request, row.tenant)
    form = coalesce_save(
        request,
        audit=lambda setting: Audit("route.coalesce", [row.tenant], {"route": name, "coalesce": setting}),
        run=lambda setting: route_coalesce_set(name=name, coalesce_setting=setting),
    )
    if form.errors:
        return _route_page(request, row, form, status=400)
    messages.success(request, f"Route {name}: coalesce {'set' if form.cleaned_data['coalesce'] else 'turned off'}.")
    return redirect("triggers:route", name=name)


@require_POST
@access.require_role()
@once()
def route_enable(request: HtmxHttpRequest, name: str) -> HttpResponse:
    return _set_enabled(request, name, True)


@require_POST
@access.require_role()
@once()
def route_disable(request: HtmxHttpRequest, name: str) -> HttpResponse:
    return _set_enabled(request, name, False)


def _set_enabled(request: HtmxHttpRequest, name: str, enabled: bool) -> HttpResponse:
    row = _route(request, name)
    require_act(request, row.tenant)
    action = "enable" if enabled else "disable"
    audited(
        user=request.user,
        origin=Origin.of_request(request),
        audit=Audit(f"route.{action}", [row.tenant], {"route": name}),
        run=lambda: route_set_enabled(name=name, enabled=enabled),
    )
    messages.success(
        request,
        f"Route {name} {action}d."
        + ("" if enabled else f" POST /api/routes/{name} answers 409 route_disabled until it is enabled."),
    )
    if request.POST.get("next") == "list":
        return redirect("triggers:routes")
    return redirect("triggers:route", name=name)
