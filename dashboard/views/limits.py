"""The Limits page: per workflow and tenant, the concurrency cap that holds and how many run and
wait now; an operator of a tenant sets or removes its limits (audited, submitted once, refused
with 409 when the limit changed since the page showed it)."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import redirect
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

from dashboard import access
from dashboard.audit import Audit, Origin, audited
from dashboard.limit_forms import LimitForm, LimitRemoveForm
from dashboard.selectors import limits as sel
from dashboard.submissions import once
from dashboard.views.common import HtmxHttpRequest, page, tenants
from ingest.engine import ConcurrencyLimitChanged, EngineError
from ingest.engine.services import limits as engine_limits

TEMPLATE = "ops/limits.html"


def _context(request: HtmxHttpRequest, **extra: Any) -> dict[str, Any]:
    acting = access.acting_tenants(request.user)
    workflows = sel.limit_workflows()
    rows = sel.limit_rows(tenants=tenants(request), now=timezone.now())
    context: dict[str, Any] = {
        "rows": rows,
        "workflows": workflows,
        "acting": set(acting),
        "form": LimitForm(workflows=[w.name for w in workflows], tenants=acting, initial={"version": ""}),
    }
    context.update(extra)
    return context


@require_GET
@access.require_role()
def limits(request: HtmxHttpRequest) -> HttpResponse:
    return page(request, TEMPLATE, _context(request), fragment="table")


def _refused(request: HtmxHttpRequest, status: int, error: str, **extra: Any) -> HttpResponse:
    return page(request, TEMPLATE, _context(request, error=error, **extra), status=status)


@require_POST
@access.require_role()
@once()
def limit_save(request: HtmxHttpRequest) -> HttpResponse:
    acting = access.acting_tenants(request.user)
    if not acting:
        return _refused(request, 403, "Setting a concurrency limit needs the operator role in a tenant.")
    form = LimitForm(request.POST, workflows=[w.name for w in sel.limit_workflows()], tenants=acting)
    if not form.is_valid():
        # A tenant the user does not operate is refused here too: the choices are their tenants.
        return _refused(
            request,
            400,
            "The limit was not saved: "
            + "; ".join(
                f"{name.replace('_', ' ')}: {' '.join(str(e) for e in errs)}" for name, errs in form.errors.items()
            ),
            form=form,
        )
    d = form.cleaned_data
    # A form without a version creates a limit only where none is set (version "0").
    version = d["version"] or "0"
    try:
        audited(
            user=request.user,
            origin=Origin.of_request(request),
            audit=Audit(
                "limit.set",
                [d["tenant"]],
                {"workflow": d["workflow"], "tenant": d["tenant"], "max_concurrent": d["max_concurrent"]},
            ),
            run=lambda: engine_limits.concurrency_limit_set(
                workflow=d["workflow"],
                key=d["tenant"],
                max_concurrent=d["max_concurrent"],
                actor=request.user.get_username(),
                version=version,
            ),
        )
    except ConcurrencyLimitChanged as exc:
        return _refused(request, 409, str(exc), form=form)
    except EngineError as exc:
        return _refused(request, 400, str(exc), form=form)
    messages.success(
        request, f"{d['tenant']} runs at most {d['max_concurrent']} {d['workflow']} at once, from the next claim on."
    )
    return redirect("ops:limits")


@require_POST
@access.require_role()
@once()
def limit_remove(request: HtmxHttpRequest) -> HttpResponse:
    form = LimitRemoveForm(request.POST)
    if not form.is_valid():
        return _refused(
            request,
            400,
            "Nothing was removed: "
            + "; ".join(f"{name}: {' '.join(str(e) for e in errs)}" for name, errs in form.errors.items()),
        )
    d = form.cleaned_data
    if not access.can_act(request.user, d["tenant"]):
        return _refused(request, 403, f"Removing a limit of tenant {d['tenant']!r} needs the operator role there.")
    try:
        audited(
            user=request.user,
            origin=Origin.of_request(request),
            audit=Audit("limit.remove", [d["tenant"]], {"workflow": d["workflow"], "tenant": d["tenant"]}),
            run=lambda: engine_limits.concurrency_limit_delete(
                workflow=d["workflow"], key=d["tenant"], actor=request.user.get_username(), version=d["version"]
            ),
        )
    except ConcurrencyLimitChanged as exc:
        return _refused(request, 409, str(exc))
    except EngineError as exc:
        return _refused(request, 404, str(exc))
    messages.success(
        request, f"The limit of {d['tenant']} on {d['workflow']} is removed: the workflow's own cap applies again."
    )
    return redirect("ops:limits")
