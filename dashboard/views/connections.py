"""The Connections pages: each tenant's connections to Gong, Salesforce, its LLM provider,
DataForSEO and ZenRows, with the scheduled pull's cursor where there is one; create, edit, enable,
disable, delete and "test connection" (one cheap call through the real client). Secrets are
write-only: a form shows whether each is set and its masked end, never its value, and an empty
field keeps it. Every acting form submits once and names the version it was shown, so a stale tab
is refused (409) instead of undoing another's edit; every action is audited without secrets."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.http import Http404, HttpResponse
from django.shortcuts import redirect
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

from dashboard import access
from dashboard.audit import Audit, Origin, audited
from dashboard.connection_forms import ConnectionForm
from dashboard.models import Role
from dashboard.selectors import connections as sel
from dashboard.submissions import once
from dashboard.trigger_forms import add_refusal
from dashboard.views.common import HtmxHttpRequest, page, require_act, tenants
from ingest.pipelines import connections as conn
from ingest.pipelines.errors import ConnectionChanged, ConnectionNotFound
from ingest.pipelines.models import ConnectionKind
from ingest.triggers.errors import TriggerError


@require_GET
@access.require_role()
def connections(request: HtmxHttpRequest) -> HttpResponse:
    context = {
        "rows": sel.connection_rows(tenants=tenants(request), now=timezone.now()),
        "acting": set(access.acting_tenants(request.user)),
        "kinds": ConnectionKind.choices,
    }
    return page(request, "connections/list.html", context)


def _connection(request: HtmxHttpRequest, tenant: str, kind: str) -> sel.ConnectionRow:
    row = sel.connection_get(tenant=tenant, kind=kind, tenants=tenants(request), now=timezone.now())
    if row is None:
        raise Http404(f"no {kind[:40]} connection of tenant {tenant[:100]} in your tenants")
    return row


def _kind(raw: str) -> str:
    if raw not in conn.KIND_FIELDS:
        raise Http404(f"no connection kind {raw[:40]!r}; use one of {', '.join(conn.KIND_FIELDS)}")
    return raw


def _new_page(request: HtmxHttpRequest, form: ConnectionForm | None, *, status: int = 200) -> HttpResponse:
    return page(request, "connections/new.html", {"form": form, "kinds": ConnectionKind.choices}, status=status)


def _create_form(request: HtmxHttpRequest, kind: str, data: Any = None) -> ConnectionForm:
    initial = {"enabled": True, "provider": "openai", "options": {}}
    return ConnectionForm(data, kind=kind, tenants=access.acting_tenants(request.user), initial=initial)


@require_GET
@access.require_role(Role.OPERATOR)
def connection_new(request: HtmxHttpRequest) -> HttpResponse:
    """Pick a kind, then its form (`?kind=gong`): each kind asks only for what it reads."""
    raw = request.GET.get("kind", "")
    return _new_page(request, _create_form(request, _kind(raw)) if raw else None)


@require_POST
@access.require_role(Role.OPERATOR)
@once()
def connection_create_view(request: HtmxHttpRequest) -> HttpResponse:
    kind = _kind(request.POST.get("kind", ""))
    form = _create_form(request, kind, request.POST)
    if not form.is_valid():
        return _new_page(request, form, status=400)
    tenant, fields = form.cleaned_data["tenant"], form.connection_fields()
    require_act(request, tenant)
    try:
        audited(
            user=request.user,
            origin=Origin.of_request(request),
            audit=Audit(
                "connection.create", [tenant], {"tenant": tenant, "kind": kind, **conn.connection_audit_fields(fields)}
            ),
            run=lambda: conn.connection_create(tenant=tenant, kind=kind, **fields),
        )
    except TriggerError as exc:
        add_refusal(form, exc)
        return _new_page(request, form, status=exc.status if exc.status == 409 else 400)
    messages.success(request, f"{ConnectionKind(kind).label} connection of {tenant} saved. Test it below.")
    return redirect("triggers:connection", tenant=tenant, kind=kind)


def _edit_form(row: sel.ConnectionRow, data: Any = None) -> ConnectionForm:
    initial: dict[str, Any] = {
        "version": row.version,
        "base_url": row.base_url,
        "provider": row.provider or "openai",
        "model": row.model,
        "service": row.service,
        "organization_id": row.organization_id,
        "options": row.options,
        "enabled": row.enabled,
    }
    stored = {s.name: s.ends for s in row.secrets if s.set}
    return ConnectionForm(data, kind=row.kind, stored=stored, initial=initial)


def _detail_page(
    request: HtmxHttpRequest,
    row: sel.ConnectionRow,
    form: ConnectionForm | None = None,
    *,
    status: int = 200,
    refusal: str = "",
) -> HttpResponse:
    context = {
        "c": row,
        "form": form or _edit_form(row),
        "can_act": access.can_act(request.user, row.tenant),
        "refusal": refusal,
    }
    return page(request, "connections/detail.html", context, status=status)


@require_GET
@access.require_role()
def connection_detail(request: HtmxHttpRequest, tenant: str, kind: str) -> HttpResponse:
    return _detail_page(request, _connection(request, tenant, kind))


@require_POST
@access.require_role()
@once()
def connection_save(request: HtmxHttpRequest, tenant: str, kind: str) -> HttpResponse:
    row = _connection(request, tenant, kind)
    require_act(request, tenant)
    form = _edit_form(row, request.POST)
    if not form.is_valid():
        return _detail_page(request, row, form, status=400)
    fields, version = form.connection_fields(), form.cleaned_data["version"]
    try:
        audited(
            user=request.user,
            origin=Origin.of_request(request),
            audit=Audit(
                "connection.update", [tenant], {"tenant": tenant, "kind": kind, **conn.connection_audit_fields(fields)}
            ),
            run=lambda: conn.connection_update(tenant=tenant, kind=kind, version=version, **fields),
        )
    except TriggerError as exc:
        add_refusal(form, exc)
        return _detail_page(request, row, form, status=409 if isinstance(exc, ConnectionChanged) else 400)
    messages.success(request, f"{row.kind_label} connection of {tenant} saved.")
    return redirect("triggers:connection", tenant=tenant, kind=kind)


def _acted(request: HtmxHttpRequest, row: sel.ConnectionRow, action: str, run: Any) -> HttpResponse | None:
    """Run an audited action on `row`; the detail page with the refusal (409) when the row moved."""
    try:
        audited(
            user=request.user,
            origin=Origin.of_request(request),
            audit=Audit(f"connection.{action}", [row.tenant], {"tenant": row.tenant, "kind": row.kind}),
            run=run,
        )
    except ConnectionChanged as exc:
        fresh = sel.connection_get(tenant=row.tenant, kind=row.kind, tenants=[row.tenant], now=timezone.now())
        return _detail_page(request, fresh or row, status=409, refusal=str(exc))
    except ConnectionNotFound as exc:  # deleted by someone else since the page was read
        raise Http404(str(exc)) from None
    return None


def _set_enabled(request: HtmxHttpRequest, tenant: str, kind: str, enabled: bool) -> HttpResponse:
    row = _connection(request, tenant, kind)
    require_act(request, tenant)
    version = request.POST.get("version", "")[:30]
    refused = _acted(
        request,
        row,
        "enable" if enabled else "disable",
        lambda: conn.connection_set_enabled(tenant=tenant, kind=kind, enabled=enabled, version=version),
    )
    if refused is not None:
        return refused
    messages.success(
        request,
        f"{row.kind_label} connection of {tenant} {'enabled' if enabled else 'disabled'}."
        + ("" if enabled else " Its workflows use the environment's settings, if any, until it is enabled again."),
    )
    if request.POST.get("next") == "list":
        return redirect("triggers:connections")
    return redirect("triggers:connection", tenant=tenant, kind=kind)


@require_POST
@access.require_role()
@once()
def connection_enable(request: HtmxHttpRequest, tenant: str, kind: str) -> HttpResponse:
    return _set_enabled(request, tenant, kind, True)


@require_POST
@access.require_role()
@once()
def connection_disable(request: HtmxHttpRequest, tenant: str, kind: str) -> HttpResponse:
    return _set_enabled(request, tenant, kind, False)


@require_POST
@access.require_role()
@once()
def connection_test_view(request: HtmxHttpRequest, tenant: str, kind: str) -> HttpResponse:
    """One cheap call with the stored settings; its outcome is kept on the connection and shown."""
    _connection(request, tenant, kind)
    require_act(request, tenant)
    try:
        outcome = audited(
            user=request.user,
            origin=Origin.of_request(request),
            audit=Audit("connection.test", [tenant], {"tenant": tenant, "kind": kind}),
            run=lambda: conn.connection_test(tenant=tenant, kind=kind, now=timezone.now()),
        )
    except ConnectionNotFound as exc:  # deleted by someone else since the page was read
        raise Http404(str(exc)) from None
    if outcome.ok:
        messages.success(request, f"Test connection: ok. {outcome.message}")
    else:
        messages.error(request, f"Test connection failed: {outcome.message}")
    return redirect("triggers:connection", tenant=tenant, kind=kind)


@require_GET
@access.require_role()
def connection_delete_confirm(request: HtmxHttpRequest, tenant: str, kind: str) -> HttpResponse:
    row = _connection(request, tenant, kind)
    require_act(request, tenant)
    return page(request, "connections/delete.html", {"c": row})


@require_POST
@access.require_role()
@once()
def connection_delete_view(request: HtmxHttpRequest, tenant: str, kind: str) -> HttpResponse:
    row = _connection(request, tenant, kind)
    require_act(request, tenant)
    version = request.POST.get("version", "")[:30]
    refused = _acted(request, row, "delete", lambda: conn.connection_delete(tenant=tenant, kind=kind, version=version))
    if refused is not None:
        return refused
    messages.success(
        request, f"{row.kind_label} connection of {tenant} deleted; its secrets are gone. The instances it served stay."
    )
    return redirect("triggers:connections")
