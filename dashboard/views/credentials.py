"""Ingress credentials in the console: operators make one for a tenant they operate, and rotate
one after a confirmation that asks why and how long the old pair keeps working. The new token and
HMAC secret are in the answer to that POST and nowhere else, ever (never cached, never redirected
to, never in the audit entry): only their first characters are kept in view. A credential is
disabled (its requests answer 401 until it is enabled again) or deleted after a confirmation."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.http import Http404, HttpResponse
from django.shortcuts import redirect
from django.utils import timezone
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_POST

from dashboard import access
from dashboard.audit import Audit, Origin, audited
from dashboard.credential_forms import CredentialForm, RotateForm
from dashboard.models import Role
from dashboard.selectors import routes as sel
from dashboard.submissions import once
from dashboard.trigger_forms import add_refusal
from dashboard.views.common import HtmxHttpRequest, page, require_act, tenants
from ingest.triggers.errors import TriggerError
from ingest.triggers.models import IngressSecret
from ingest.triggers.services import (
    ingress_secret_create,
    ingress_secret_delete,
    ingress_secret_rotate,
    ingress_secret_set_enabled,
)


def _credential(request: HtmxHttpRequest, tenant: str, name: str) -> sel.Credential:
    row = sel.credential_get(tenant=tenant, name=name, tenants=tenants(request), now=timezone.now())
    if row is None:
        raise Http404(f"no ingress credential {tenant[:100]}/{name[:100]} in your tenants")
    return row


def _shown(request: HtmxHttpRequest, row: IngressSecret, token: str, secret: str, *, rotated: bool) -> HttpResponse:
    context = {
        "tenant": row.tenant,
        "name": row.name,
        "token": token,
        "secret": secret,
        "rotated": rotated,
        "previous_valid_until": row.previous_valid_until,
        "base_url": request.build_absolute_uri("/").rstrip("/"),
    }
    return page(request, "triggers/credential_shown.html", context)


def _new_page(request: HtmxHttpRequest, form: CredentialForm, *, status: int = 200) -> HttpResponse:
    return page(request, "triggers/credential_new.html", {"form": form}, status=status)


def _create_form(request: HtmxHttpRequest, data: Any = None) -> CredentialForm:
    return CredentialForm(data, tenants=access.acting_tenants(request.user), initial={"name": "default"})


@require_GET
@access.require_role(Role.OPERATOR)
def credential_new(request: HtmxHttpRequest) -> HttpResponse:
    return _new_page(request, _create_form(request))


@never_cache
@require_POST
@access.require_role(Role.OPERATOR)
@once(repeat_to="triggers:routes")
def credential_create(request: HtmxHttpRequest) -> HttpResponse:
    form = _create_form(request, request.POST)
    if not form.is_valid():
        return _new_page(request, form, status=400)
    tenant, name, rate = (form.cleaned_data[k] for k in ("tenant", "name", "rate_limit_per_minute"))
    require_act(request, tenant)
    try:
        row, token, secret = audited(
            user=request.user,
            origin=Origin.of_request(request),
            audit=Audit(
                "ingress_secret.create", [tenant], {"tenant": tenant, "name": name, "rate_limit_per_minute": rate}
            ),
            run=lambda: ingress_secret_create(tenant=tenant, name=name, rate_limit_per_minute=rate),
        )
    except TriggerError as exc:
        add_refusal(form, exc)
        return _new_page(request, form, status=400)
    return _shown(request, row, token, secret, rotated=False)


def _rotate_page(request: HtmxHttpRequest, c: sel.Credential, form: RotateForm, *, status: int = 200) -> HttpResponse:
    return page(request, "triggers/credential_rotate.html", {"c": c, "form": form}, status=status)


@require_GET
@access.require_role()
def credential_rotate_confirm(request: HtmxHttpRequest, tenant: str, name: str) -> HttpResponse:
    c = _credential(request, tenant, name)
    require_act(request, tenant)
    return _rotate_page(request, c, RotateForm())


@never_cache
@require_POST
@access.require_role()
@once(repeat_to="triggers:routes")
def credential_rotate(request: HtmxHttpRequest, tenant: str, name: str) -> HttpResponse:
    """Rotate and show the new pair once, in this answer (never cached, never redirected to)."""
    c = _credential(request, tenant, name)
    require_act(request, tenant)
    form = RotateForm(request.POST)
    if not form.is_valid():
        return _rotate_page(request, c, form, status=400)
    reason, overlap = form.cleaned_data["reason"], form.cleaned_data["overlap_seconds"]
    try:
        row, token, secret = audited(
            user=request.user,
            origin=Origin.of_request(request),
            audit=Audit(
                "ingress_secret.rotate",
                [tenant],
                {"tenant": tenant, "name": name, "overlap_seconds": overlap},
                reason=reason,
            ),
            run=lambda: ingress_secret_rotate(
                tenant=tenant, name=name, now=timezone.now(), overlap_seconds=overlap, reason=reason
            ),
        )
    except TriggerError as exc:
        add_refusal(form, exc)
        return _rotate_page(request, c, form, status=400)
    return _shown(request, row, token, secret, rotated=True)


def _set_enabled(request: HtmxHttpRequest, tenant: str, name: str, enabled: bool) -> HttpResponse:
    _credential(request, tenant, name)
    require_act(request, tenant)
    action = "enable" if enabled else "disable"
    audited(
        user=request.user,
        origin=Origin.of_request(request),
        audit=Audit(f"ingress_secret.{action}", [tenant], {"tenant": tenant, "name": name}),
        run=lambda: ingress_secret_set_enabled(tenant=tenant, name=name, enabled=enabled),
    )
    messages.success(
        request,
        f"Ingress credential {tenant}/{name} {action}d."
        + ("" if enabled else " Requests signed with it answer 401 until it is enabled again."),
    )
    return redirect("triggers:routes")


@require_POST
@access.require_role()
@once()
def credential_enable(request: HtmxHttpRequest, tenant: str, name: str) -> HttpResponse:
    return _set_enabled(request, tenant, name, True)


@require_POST
@access.require_role()
@once()
def credential_disable(request: HtmxHttpRequest, tenant: str, name: str) -> HttpResponse:
    return _set_enabled(request, tenant, name, False)


@require_GET
@access.require_role()
def credential_delete_confirm(request: HtmxHttpRequest, tenant: str, name: str) -> HttpResponse:
    c = _credential(request, tenant, name)
    require_act(request, tenant)
    return page(request, "triggers/credential_delete.html", {"c": c})


@require_POST
@access.require_role()
@once()
def credential_delete(request: HtmxHttpRequest, tenant: str, name: str) -> HttpResponse:
    _credential(request, tenant, name)
    require_act(request, tenant)
    audited(
        user=request.user,
        origin=Origin.of_request(request),
        audit=Audit("ingress_secret.delete", [tenant], {"tenant": tenant, "name": name}),
        run=lambda: ingress_secret_delete(tenant=tenant, name=name),
    )
    messages.success(
        request, f"Ingress credential {tenant}/{name} deleted: requests signed with it answer 401 from now on."
    )
    return redirect("triggers:routes")
