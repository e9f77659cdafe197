"""A subscription's page and the operators' create, edit, enable, disable, delete and coalesce,
through the same services as the REST API and the CLI: every wrong field named at once, on its
field, and nothing changed; every change in the audit log. A subscription for every tenant's
events (tenant "") is read and changed by staff who operate somewhere."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpResponse
from django.shortcuts import redirect
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

from dashboard import access
from dashboard.audit import Audit, Origin, audited
from dashboard.models import Role
from dashboard.selectors import routes as sel
from dashboard.submissions import once
from dashboard.trigger_forms import (
    CoalesceForm,
    SubscriptionCreateForm,
    SubscriptionForm,
    add_refusal,
)
from dashboard.views.common import HtmxHttpRequest, coalesce_save, page, sees_global, tenants
from ingest.triggers.errors import TriggerError
from ingest.triggers.field_checks import startable_workflows
from ingest.triggers.services import (
    subscription_coalesce_set,
    subscription_create,
    subscription_delete,
    subscription_set_enabled,
    subscription_update,
)


def _get(request: HtmxHttpRequest, sub_id: int) -> sel.SubscriptionRow:
    row = sel.subscription_page_get(
        subscription_id=sub_id, tenants=tenants(request), see_global=sees_global(request), now=timezone.now()
    )
    if row is None:
        raise Http404(f"no subscription {sub_id} visible to you")
    return row


def _require_act(request: HtmxHttpRequest, tenant: str) -> list[str]:
    """The audit entry's tenants, once the user may change a subscription of `tenant`."""
    if not access.can_act_subscription(request.user, tenant):
        raise PermissionDenied(
            "changing this subscription needs the operator role in its tenant (staff, for one of every tenant)"
        )
    return [tenant] if tenant else []


def _edit_form(row: sel.SubscriptionRow, data: Any = None) -> SubscriptionForm:
    return SubscriptionForm(
        data,
        workflows=startable_workflows(),
        initial={"pattern": row.pattern, "workflow": row.workflow, "filters": row.filters, "enabled": row.enabled},
    )


def _page(
    request: HtmxHttpRequest,
    row: sel.SubscriptionRow,
    *,
    coalesce: CoalesceForm | None = None,
    edit: SubscriptionForm | None = None,
    status: int = 200,
) -> HttpResponse:
    context: dict[str, Any] = {
        "sub": row,
        "can_act": access.can_act_subscription(request.user, row.tenant),
        "form": coalesce or CoalesceForm(initial={"coalesce": row.coalesce or ""}),
        "edit": edit or _edit_form(row),
    }
    return page(request, "triggers/subscription_detail.html", context, status=status)


@require_GET
@access.require_role()
def subscription_detail(request: HtmxHttpRequest, sub_id: int) -> HttpResponse:
    return _page(request, _get(request, sub_id))


@require_POST
@access.require_role()
@once()
def subscription_save(request: HtmxHttpRequest, sub_id: int) -> HttpResponse:
    row = _get(request, sub_id)
    audit_tenants = _require_act(request, row.tenant)
    form = _edit_form(row, request.POST)
    if not form.is_valid():
        return _page(request, row, edit=form, status=400)
    fields = form.subscription_fields()
    try:
        audited(
            user=request.user,
            origin=Origin.of_request(request),
            audit=Audit("subscription.update", audit_tenants, {"subscription": sub_id, **fields}),
            run=lambda: subscription_update(subscription_id=sub_id, **fields),
        )
    except TriggerError as exc:
        add_refusal(form, exc)
        return _page(request, row, edit=form, status=400)
    messages.success(request, f"Subscription {fields['pattern']} saved.")
    return redirect("triggers:subscription", sub_id=sub_id)


def _create_form(request: HtmxHttpRequest, data: Any = None) -> SubscriptionCreateForm:
    return SubscriptionCreateForm(
        data,
        workflows=startable_workflows(),
        tenants=access.acting_tenants(request.user),
        every_tenant=access.can_act_subscription(request.user, ""),
        initial={"enabled": True, "filters": {}},
    )


def _new_page(request: HtmxHttpRequest, form: SubscriptionCreateForm, *, status: int = 200) -> HttpResponse:
    return page(request, "triggers/subscription_new.html", {"form": form}, status=status)


@require_GET
@access.require_role(Role.OPERATOR)
def subscription_new(request: HtmxHttpRequest) -> HttpResponse:
    return _new_page(request, _create_form(request))


@require_POST
@access.require_role(Role.OPERATOR)
@once()
def subscription_create_view(request: HtmxHttpRequest) -> HttpResponse:
    form = _create_form(request, request.POST)
    if not form.is_valid():
        return _new_page(request, form, status=400)
    tenant, fields = form.cleaned_data["tenant"], form.subscription_fields()
    audit_tenants = _require_act(request, tenant)
    try:
        sub = audited(
            user=request.user,
            origin=Origin.of_request(request),
            audit=Audit("subscription.create", audit_tenants, {"tenant": tenant, **fields}),
            run=lambda: subscription_create(tenant=tenant, **fields),
        )
    except TriggerError as exc:
        add_refusal(form, exc)
        return _new_page(request, form, status=400)
    messages.success(
        request,
        f"Subscription created: events {fields['pattern']} of {tenant or 'every tenant'} start {fields['workflow']}.",
    )
    return redirect("triggers:subscription", sub_id=sub.pk)


def _set_enabled(request: HtmxHttpRequest, sub_id: int, enabled: bool) -> HttpResponse:
    row = _get(request, sub_id)
    audit_tenants = _require_act(request, row.tenant)
    action = "enable" if enabled else "disable"
    audited(
        user=request.user,
        origin=Origin.of_request(request),
        audit=Audit(f"subscription.{action}", audit_tenants, {"subscription": sub_id}),
        run=lambda: subscription_set_enabled(subscription_id=sub_id, enabled=enabled),
    )
    messages.success(request, f"Subscription {row.pattern} {action}d.")
    return redirect("triggers:subscription", sub_id=sub_id)


@require_POST
@access.require_role()
@once()
def subscription_enable(request: HtmxHttpRequest, sub_id: int) -> HttpResponse:
    return _set_enabled(request, sub_id, True)


@require_POST
@access.require_role()
@once()
def subscription_disable(request: HtmxHttpRequest, sub_id: int) -> HttpResponse:
    return _set_enabled(request, sub_id, False)


@require_GET
@access.require_role()
def subscription_delete_confirm(request: HtmxHttpRequest, sub_id: int) -> HttpResponse:
    row = _get(request, sub_id)
    _require_act(request, row.tenant)
    return page(request, "triggers/subscription_delete.html", {"sub": row})


@require_POST
@access.require_role()
@once()
def subscription_delete_view(request: HtmxHttpRequest, sub_id: int) -> HttpResponse:
    row = _get(request, sub_id)
    audit_tenants = _require_act(request, row.tenant)
    audited(
        user=request.user,
        origin=Origin.of_request(request),
        audit=Audit(
            "subscription.delete",
            audit_tenants,
            {"subscription": sub_id, "pattern": row.pattern, "workflow": row.workflow},
        ),
        run=lambda: subscription_delete(subscription_id=sub_id),
    )
    messages.success(request, f"Subscription {row.pattern} deleted: it starts nothing more. What it started stays.")
    return redirect("triggers:routes")


@require_POST
@access.require_role()
@once()
def subscription_coalesce(request: HtmxHttpRequest, sub_id: int) -> HttpResponse:
    row = _get(request, sub_id)
    audit_tenants = _require_act(request, row.tenant)
    form = coalesce_save(
        request,
        audit=lambda setting: Audit(
            "subscription.coalesce", audit_tenants, {"subscription": sub_id, "coalesce": setting}
        ),
        run=lambda setting: subscription_coalesce_set(subscription_id=sub_id, coalesce_setting=setting),
    )
    if form.errors:
        return _page(request, row, coalesce=form, status=400)
    setting = form.cleaned_data["coalesce"]
    messages.success(request, f"Subscription {sub_id}: coalesce {'set' if setting else 'turned off'}.")
    return redirect("triggers:subscription", sub_id=sub_id)
