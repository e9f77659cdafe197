"""What the operations page families share: the typed htmx request, the page-or-fragment render,
the tenant checks, and the call of an engine service whose refusal becomes a message.

Objects of other tenants are 404 (selectors filter by the user's tenants); acting needs
`access.can_act` on the object's tenant, checked in the view, server-side, whatever the template
shows. Every write is an engine service called with `actor=request.user.username`, in one
transaction with its audit entry (`dashboard.audit`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal, TypeVar

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django_htmx.middleware import HtmxDetails

from dashboard import access
from dashboard.audit import Audit, Origin, audited
from dashboard.live import ops_pages as live_pages
from dashboard.trigger_forms import CoalesceForm
from ingest.engine import EngineError
from ingest.triggers.errors import TriggerError

R = TypeVar("R")


class HtmxHttpRequest(HttpRequest):
    """A request that went through django-htmx's middleware (every page view's request)."""

    htmx: HtmxDetails


def page(
    request: HtmxHttpRequest, template: str, context: dict[str, Any], *, fragment: str | None = None, status: int = 200
) -> HttpResponse:
    """The whole page, or only `fragment` of it when htmx asks (filters, polling)."""
    name = f"{template}#{fragment}" if fragment and request.htmx and not request.htmx.boosted else template
    return render(request, name, context, status=status)


def tenants(request: HttpRequest) -> list[str]:
    return access.tenants_for(request.user)


def sees_global(request: HttpRequest) -> bool:
    return live_pages.sees_global(request.user)


def require_act(request: HttpRequest, tenant: str) -> None:
    if not access.can_act(request.user, tenant):
        raise PermissionDenied(f"acting on tenant {tenant!r} needs the operator role there")


def query(request: HttpRequest, **overrides: Any) -> str:
    return live_pages.query_string(request.GET, **overrides)


def engine_call(
    request: HttpRequest, fn: Callable[..., R], ok: str, *, audit: Audit, **kwargs: Any
) -> R | Literal[True] | None:
    """Call an engine service and write its audit entry (both or neither); its refusals
    (EngineError) become a message, never a 500.

    None when the engine refused; True when the service succeeded and returned nothing."""
    try:
        result = audited(
            user=request.user,
            origin=Origin.of_request(request),
            audit=audit,
            run=lambda: fn(actor=request.user.username, **kwargs),
        )
    except EngineError as exc:
        messages.error(request, str(exc))
        return None
    messages.success(request, ok)
    return result if result is not None else True


def coalesce_save(request: HttpRequest, *, audit: Callable[[Any], Audit], run: Callable[[Any], object]) -> CoalesceForm:
    """The posted coalesce setting of a route or subscription, saved with its audit entry (both or
    neither) when the form is valid; the service's refusal lands on the form's field. The caller
    answers 400 with the page while `form.errors`."""
    form = CoalesceForm(request.POST)
    if form.is_valid():
        setting = form.cleaned_data["coalesce"]
        try:
            audited(
                user=request.user, origin=Origin.of_request(request), audit=audit(setting), run=lambda: run(setting)
            )
        except TriggerError as exc:
            form.add_error("coalesce", str(exc))
    return form
