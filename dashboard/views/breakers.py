"""The circuit breakers page: every breaker the user may see with its state, and a breaker's
transitions; an operator resets one (audited, with a reason), as a budget is edited."""

from __future__ import annotations

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_GET, require_POST

from dashboard import access
from dashboard.audit import Audit
from dashboard.query_params import QueryReader
from dashboard.selectors import breakers as sel
from dashboard.submissions import once
from dashboard.views.common import HtmxHttpRequest, engine_call, page, sees_global, tenants
from ingest.engine.models import BreakerState, CircuitBreaker
from ingest.engine.services import breakers as engine_breakers

MAX_REASON = 500


def may_reset(request: HttpRequest, breaker: CircuitBreaker) -> bool:
    if breaker.tenant:
        return access.can_act(request.user, breaker.tenant)
    return sees_global(request) and bool(access.acting_tenants(request.user))


@require_GET
@access.require_role()
def breakers(request: HtmxHttpRequest) -> HttpResponse:
    reader = QueryReader(request.GET)
    state = reader.choice("state", BreakerState.values)
    reader.done()
    rows = sel.breakers_visible(tenants=tenants(request), see_global=sees_global(request), state=state)
    context = {
        "rows": rows,
        "state": state,
        "states": BreakerState.choices,
        "resettable": {r.breaker.key for r in rows if may_reset(request, r.breaker)},
    }
    return page(request, "ops/breakers.html", context, fragment="table")


@require_GET
@access.require_role()
def breaker_detail(request: HtmxHttpRequest, key: str) -> HttpResponse:
    breaker = sel.breaker_get(key=key, tenants=tenants(request), see_global=sees_global(request))
    if breaker is None:
        raise Http404("no such circuit breaker")
    context = {"b": breaker, "transitions": sel.breaker_transitions(key=key), "can_reset": may_reset(request, breaker)}
    return page(request, "ops/breaker_detail.html", context, fragment="state")


@require_POST
@access.require_role()
@once()
def breaker_reset(request: HtmxHttpRequest) -> HttpResponse:
    key = request.POST.get("key", "")
    breaker = sel.breaker_get(key=key, tenants=tenants(request), see_global=sees_global(request))
    if breaker is None:
        raise Http404("no such circuit breaker")
    if not may_reset(request, breaker):
        messages.error(
            request,
            "Resetting this breaker needs the operator role in its tenant"
            + ("" if breaker.tenant else " and staff access (it is shared by every tenant)")
            + ".",
        )
        return HttpResponse(status=403, content=b"You may not reset this circuit breaker.")
    reason = request.POST.get("reason", "").strip()
    if len(reason) > MAX_REASON:
        return HttpResponse(
            status=400, content=f"The reason is {len(reason)} characters; at most {MAX_REASON}.".encode()
        )
    engine_call(
        request,
        engine_breakers.breaker_reset,
        f"Circuit breaker {key} reset: calls go again.",
        audit=Audit(
            "breaker.reset",
            [breaker.tenant] if breaker.tenant else [],
            {"key": key, "state_before": breaker.state},
            reason,
        ),
        key=key,
        reason=reason,
    )
    return redirect("ops:breaker", key=key)
