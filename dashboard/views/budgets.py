"""The budgets pages: every visible budget with its forecast, reservations and events, and the
form that sets one (scopes beyond tenant and instance for staff only)."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

from dashboard import access, forms
from dashboard import selectors as sel
from dashboard.audit import Audit
from dashboard.submissions import once
from dashboard.views.common import HtmxHttpRequest, engine_call, page, sees_global, tenants
from ingest.engine.models import BudgetScope
from ingest.engine.services import budgets as engine_budgets


def _budget_scopes(request: HttpRequest) -> list[str]:
    scopes = [BudgetScope.TENANT.value, BudgetScope.INSTANCE.value]
    if sees_global(request):
        scopes += [BudgetScope.WORKFLOW.value, BudgetScope.SERVICE.value]
    return scopes


def _may_edit_budget(request: HttpRequest, scope: str, key: str) -> bool:
    if scope == BudgetScope.TENANT:
        return access.can_act(request.user, key)
    if scope == BudgetScope.INSTANCE:
        tenant = sel.instance_tenant(instance_id=key, tenants=tenants(request))
        return tenant is not None and access.can_act(request.user, tenant)
    return sees_global(request) and bool(access.acting_tenants(request.user))


def _budget_tenants(request: HttpRequest, scope: str, key: str) -> list[str]:
    """The tenants a budget belongs to, for its audit entry: none for global scopes."""
    if scope == BudgetScope.TENANT:
        return [key]
    if scope == BudgetScope.INSTANCE:
        tenant = sel.instance_tenant(instance_id=key, tenants=tenants(request))
        return [tenant] if tenant else []
    return []


@require_GET
@access.require_role()
def budgets(request: HtmxHttpRequest) -> HttpResponse:
    visible, now, see_global = tenants(request), timezone.now(), sees_global(request)
    qs = list(sel.budgets_visible(tenants=visible, see_global=see_global))
    rows = sel.budget_rows(budgets=qs, now=now)
    context = {
        "rows": rows,
        "editable": {b.id for b in rows if _may_edit_budget(request, b.scope, b.key)},
        "can_create": bool(access.acting_tenants(request.user)),
        "reservations": sel.reservations_held(budget_ids=[b.id for b in rows]),
        "events": sel.budget_events(tenants=visible),
    }
    return page(request, "ops/budgets.html", context)


@require_GET
@access.require_role()
def budget_form(request: HtmxHttpRequest, budget_id: int | None = None) -> HttpResponse:
    if not access.acting_tenants(request.user):
        raise PermissionDenied("editing budgets needs the operator role")
    initial: dict[str, Any] = {"scope": BudgetScope.TENANT, "period": "day", "policy": "fail"}
    if budget_id is not None:
        b = sel.budget_get(tenants=tenants(request), see_global=sees_global(request), budget_id=budget_id)
        if not _may_edit_budget(request, b.scope, b.key):
            raise PermissionDenied("you may not edit this budget")
        initial = {"scope": b.scope, "key": b.key, "period": b.period, "limit": b.limit, "policy": b.policy}
    form = forms.BudgetForm(initial=initial, allowed_scopes=_budget_scopes(request))
    return render(
        request,
        "ops/budget_form.html",
        {"form": form, "editing": budget_id is not None, "tenants": access.acting_tenants(request.user)},
    )


@require_POST
@access.require_role()
@once()
def budget_save(request: HtmxHttpRequest) -> HttpResponse:
    form = forms.BudgetForm(request.POST, allowed_scopes=_budget_scopes(request))
    if not form.is_valid():
        return render(
            request, "ops/budget_form.html", {"form": form, "tenants": access.acting_tenants(request.user)}, status=400
        )
    d = form.cleaned_data
    if not _may_edit_budget(request, d["scope"], d["key"]):
        raise PermissionDenied(f"you may not set a {d['scope']} budget for {d['key']!r}")
    engine_call(
        request,
        engine_budgets.budget_upsert,
        f"Budget {d['scope']}:{d['key']} set to {d['limit']:.2f} per {d['period']} ({d['policy']}).",
        audit=Audit(
            "budget.set",
            _budget_tenants(request, d["scope"], d["key"]),
            {
                "scope": d["scope"],
                "key": d["key"],
                "period": d["period"],
                "limit": str(d["limit"]),
                "policy": d["policy"],
            },
        ),
        scope=d["scope"],
        key=d["key"],
        period=d["period"],
        limit=d["limit"],
        policy=d["policy"],
    )
    return redirect("ops:budgets")
