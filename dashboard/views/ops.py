"""Operations pages: overview, workflow DAG, dead letters, costs, budgets, approvals.

Thin interfaces: reads come from `dashboard.selectors` (its operations modules), figures from `dashboard.charts`,
every write is an engine service called with `actor=request.user.username`. Objects of other
tenants are 404 (selectors filter by the user's tenants); acting needs `access.can_act` on the
object's tenant, checked here, server-side, whatever the template shows.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from datetime import datetime, timedelta
from decimal import Decimal
from types import ModuleType
from typing import Any
from urllib.parse import urlencode

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST
from django_htmx.middleware import HtmxDetails

from dashboard import access, charts, forms
from dashboard import selectors as sel
from dashboard.live import ops_pages as live_pages
from dashboard.rollups.reads import rollup_view
from ingest.engine.errors import EngineError
from ingest.engine.models import ApprovalState, BudgetScope
from ingest.triggers.errors import InputRejected
from ingest.triggers.limits import datetime_in_range as in_range


class HtmxHttpRequest(HttpRequest):
    htmx: HtmxDetails


def _services() -> ModuleType:
    # Imported at call time: the engine's services module is the only writer of its tables.
    from ingest.engine import services

    return services


def _page(request: HtmxHttpRequest, template: str, context: dict[str, Any], *,
          fragment: str | None = None, status: int = 200) -> HttpResponse:
    """The whole page, or only `fragment` of it when htmx asks (filters, polling)."""
    name = f"{template}#{fragment}" if fragment and request.htmx and not request.htmx.boosted else template
    return render(request, name, context, status=status)


def _tenants(request: HttpRequest) -> list[str]:
    return access.tenants_for(request.user)


def _sees_global(request: HttpRequest) -> bool:
    return live_pages.sees_global(request.user)


def _require_act(request: HttpRequest, tenant: str) -> None:
    if not access.can_act(request.user, tenant):
        raise PermissionDenied(f"acting on tenant {tenant!r} needs the operator role there")


def _query(request: HttpRequest, **overrides: Any) -> str:
    return live_pages.query_string(request.GET, **overrides)


# ---- overview ----------------------------------------------------------------------------


@require_GET
@access.require_role()
def overview(request: HtmxHttpRequest) -> HttpResponse:
    return _page(request, "ops/overview.html", live_pages.overview_context(request.user, request.GET),
                 fragment="live")


# ---- workflow DAG ------------------------------------------------------------------------


def _window(request: HttpRequest, allowed: tuple[str, ...] = ("1h", "24h", "7d")) -> str:
    w = request.GET.get("window", "24h")
    return w if w in allowed else "24h"


@require_GET
@access.require_role()
def workflows(request: HtmxHttpRequest) -> HttpResponse:
    window, now = _window(request), timezone.now()
    rows = sel.workflow_summaries(tenants=_tenants(request), since=sel.window_start(window, now=now))
    return _page(request, "ops/workflows.html", {"rows": rows, "window": window, "windows": ("1h", "24h", "7d")},
                 fragment="results")


@require_GET
@access.require_role()
def workflow_dag(request: HtmxHttpRequest, name: str) -> HttpResponse:
    context = live_pages.workflow_dag_context(request.user, request.GET, name=name)
    if context is None:
        raise Http404("no runs of this workflow in your tenants")
    return _page(request, "ops/workflow_dag.html", context, fragment="dag")


# ---- dead letters --------------------------------------------------------------------------


_dl_filters = live_pages.dead_letter_filters


@require_GET
@access.require_role()
def dead_letters(request: HtmxHttpRequest) -> HttpResponse:
    return _page(request, "ops/dead_letters.html", live_pages.dead_letters_context(request.user, request.GET),
                 fragment="results")


@require_GET
@access.require_role()
def dead_letter_detail(request: HtmxHttpRequest, dl_id: int) -> HttpResponse:
    dl = sel.dead_letter_get(tenants=_tenants(request), dead_letter_id=dl_id)
    context = {"dl": dl, "can_act": access.can_act(request.user, dl.tenant),
               "reason_form": forms.ReasonForm()}
    return _page(request, "ops/dead_letter_detail.html", context)


def _engine_call(request: HttpRequest, fn: Any, ok: str, **kwargs: Any) -> Any:
    """Call an engine service; its refusals (EngineError) become a message, never a 500."""
    try:
        result = fn(actor=request.user.username, **kwargs)
    except EngineError as exc:
        messages.error(request, str(exc))
        return None
    messages.success(request, ok)
    return result if result is not None else True


@require_POST
@access.require_role()
def dead_letter_retry(request: HtmxHttpRequest, dl_id: int) -> HttpResponse:
    dl = sel.dead_letter_get(tenants=_tenants(request), dead_letter_id=dl_id)
    _require_act(request, dl.tenant)
    form = forms.ReasonForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Retry needs a reason.")
        return redirect("ops:dead_letter", dl_id=dl.id)
    _engine_call(request, _services().instance_retry, f"Instance {dl.instance_id} retried from step {dl.step_name}.",
                 instance_id=dl.instance_id, reason=form.cleaned_data["reason"])
    return redirect("ops:dead_letter", dl_id=dl.id)


@require_POST
@access.require_role()
def dead_letter_discard(request: HtmxHttpRequest, dl_id: int) -> HttpResponse:
    dl = sel.dead_letter_get(tenants=_tenants(request), dead_letter_id=dl_id)
    _require_act(request, dl.tenant)
    form = forms.ReasonForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Discarding needs a reason.")
        return redirect("ops:dead_letter", dl_id=dl.id)
    _engine_call(request, _services().dead_letter_discard, f"Dead letter of {dl.instance_id} discarded.",
                 dead_letter_id=dl.id, reason=form.cleaned_data["reason"])
    return redirect("ops:dead_letter", dl_id=dl.id)


@require_GET
@access.require_role()
def dead_letter_replay_form(request: HtmxHttpRequest, dl_id: int) -> HttpResponse:
    dl = sel.dead_letter_get(tenants=_tenants(request), dead_letter_id=dl_id)
    _require_act(request, dl.tenant)
    form = forms.ReplayForm(initial={"params": json.dumps(dl.instance.params, indent=2, sort_keys=True)})
    return render(request, "ops/dead_letter_replay.html", {"dl": dl, "form": form})


@require_POST
@access.require_role()
def dead_letter_replay(request: HtmxHttpRequest, dl_id: int) -> HttpResponse:
    """Two steps: without `confirm` show the diff of the edit; with it, replay as a new instance."""
    dl = sel.dead_letter_get(tenants=_tenants(request), dead_letter_id=dl_id)
    _require_act(request, dl.tenant)
    form = forms.ReplayForm(request.POST, original=dl.instance.params)
    if not form.is_valid():
        return render(request, "ops/dead_letter_replay.html", {"dl": dl, "form": form}, status=400)
    params = form.cleaned_data["params"]
    diff = forms.params_diff(dl.instance.params, params)
    if "confirm" not in request.POST:
        return render(request, "ops/dead_letter_replay.html",
                      {"dl": dl, "form": form, "diff": diff, "preview": True, "edited": bool(diff)})
    new = _engine_call(
        request, _services().instance_replay,
        f"Replayed {dl.instance_id} {'with edited params' if diff else 'with the same params'}.",
        instance_id=dl.instance_id, params=params if diff else None, reason=form.cleaned_data["reason"],
    )
    if new is None:
        return redirect("ops:dead_letter", dl_id=dl.id)
    return redirect(f"/instances/{getattr(new, 'id', '')}/" if getattr(new, "id", None) else reverse("ops:dead_letter", args=[dl.id]))


def _selection(request: HttpRequest, data: Any) -> tuple[sel.DeadLetterFilters, list[int], list[int]]:
    """(filters, ids the user may act on, ids they may only see) for a bulk action."""
    f = _dl_filters(data)
    if any(str(i).isdigit() and len(str(i)) > 18 for i in data.getlist("ids")):  # past 64 bits
        raise InputRejected("ids holds a number too long to be a dead letter id; select dead letters "
                            "from the list")
    ids = [int(i) for i in data.getlist("ids") if str(i).isdigit()]
    acting = access.acting_tenants(request.user)
    mine = sel.dead_letter_selection_ids(tenants=acting, filters=f, ids=ids)
    visible = sel.dead_letter_selection_ids(tenants=_tenants(request), filters=f, ids=ids)
    return f, mine, [i for i in visible if i not in set(mine)]


@require_GET
@access.require_role()
def dead_letter_redrive_preview(request: HtmxHttpRequest) -> HttpResponse:
    f, ids, read_only = _selection(request, request.GET)
    if not ids and read_only:
        raise PermissionDenied("redriving needs the operator role in these tenants")
    estimate = sel.redrive_estimate(dead_letter_ids=ids)
    context = {
        "f": f, "ids": ids, "explicit_ids": request.GET.getlist("ids"), "estimate": estimate,
        "skipped": len(read_only), "form": forms.RedriveForm(), "query": _query(request),
    }
    return render(request, "ops/dead_letter_redrive.html", context)


@require_POST
@access.require_role()
def dead_letter_redrive(request: HtmxHttpRequest) -> HttpResponse:
    f, ids, read_only = _selection(request, request.POST)
    if not ids:
        if read_only:
            raise PermissionDenied("redriving needs the operator role in these tenants")
        messages.info(request, "Nothing to redrive: the selection has no open dead letters.")
        return redirect("ops:dead_letters")
    form = forms.RedriveForm(request.POST)
    if not form.is_valid():
        estimate = sel.redrive_estimate(dead_letter_ids=ids)
        return render(request, "ops/dead_letter_redrive.html",
                      {"f": f, "ids": ids, "explicit_ids": request.POST.getlist("ids"),
                       "estimate": estimate, "skipped": len(read_only), "form": form}, status=400)
    count = _engine_call(
        request, _services().dead_letter_redrive, "Redrive started.",
        ids=ids, signature=f.signature or None, rate_per_second=form.cleaned_data["rate_per_second"],
        reason=form.cleaned_data["reason"],
    )
    if count is not None and count is not True:
        messages.info(request, f"{count} instance(s) queued at {form.cleaned_data['rate_per_second']:g}/s.")
    return redirect(f"{reverse('ops:dead_letters')}?{urlencode({'signature': f.signature} if f.signature else {})}")


# ---- costs -----------------------------------------------------------------------------


def _cost_filters(request: HttpRequest, now: datetime) -> tuple[sel.CostFilters, str]:
    g = request.GET
    window = g.get("window", "7d") if g.get("window") in {"24h", "7d", "30d"} else "7d"
    since, until = sel.window_start(window, now=now), None
    try:
        if g.get("from"):
            since = timezone.make_aware(in_range(datetime.fromisoformat(g["from"]), what="from"))
            window = "custom"
        if g.get("to"):
            until = timezone.make_aware(in_range(datetime.fromisoformat(g["to"]), what="to")) + timedelta(days=1)
            window = "custom"
    except ValueError:
        pass
    return sel.CostFilters(
        since=since, until=until, service=g.get("service", ""), workflow=g.get("workflow", ""),
        step=g.get("step", ""), tenant=g.get("tenant", ""), model=g.get("model", ""),
    ), window


@require_GET
@access.require_role()
def costs(request: HtmxHttpRequest) -> HttpResponse:
    tenants, now = _tenants(request), timezone.now()
    f, window = _cost_filters(request, now)
    by = request.GET.get("by", "service") if request.GET.get("by") in sel.COST_DIMENSIONS else "service"
    daily = (f.until or now) - f.since > timedelta(days=7)
    budgets = sel.budget_rows(budgets=list(sel.budgets_visible(tenants=tenants, see_global=_sees_global(request))), now=now)
    burn = sorted(budgets, key=lambda b: -b.forecast.used_pct)[:6]
    view = rollup_view()  # one read of the roller's state for every figure on the page
    burns = {b.id: sel.budget_burn_rows(budget=b, tenants=tenants, see_global=_sees_global(request), view=view)
             for b in burn}
    series = sel.cost_series(tenants=tenants, filters=f, by=by, daily=daily, view=view)
    context = {
        "f": f, "window": window, "by": by, "dimensions": list(sel.COST_DIMENSIONS),
        "selected": {name: getattr(f, name) for name in sel.COST_DIMENSIONS},
        "choices": sel.cost_filter_choices(tenants=tenants, since=f.since, view=view),
        "total": sel.cost_total(tenants=tenants, filters=f, view=view),
        "series_html": charts.figure_html(charts.spend_series_figure(series, since=f.since, until=f.until or now)),
        "treemap_html": charts.figure_html(charts.spend_treemap_figure(sel.cost_breakdown(tenants=tenants, filters=f,
                                                                                           view=view))),
        "by_dimension": sel.cost_by_dimension(tenants=tenants, filters=f, by=by, view=view),
        "instances": sel.cost_by_instance(tenants=tenants, filters=f, sort=request.GET.get("sort", "-total"),
                                          view=view),
        "sort": request.GET.get("sort", "-total"),
        "budgets": budgets,
        "burn_html": charts.figure_html(charts.burn_down_figure(burn, burns, now=now)) if burn else "",
        "query": _query(request),
        "from_value": request.GET.get("from", ""), "to_value": request.GET.get("to", ""),
    }
    return _page(request, "ops/costs.html", context, fragment="results")


class _Echo:
    def write(self, value: str) -> str:
        return value


@require_GET
@access.require_role()
def costs_export(request: HtmxHttpRequest) -> StreamingHttpResponse:
    f, _ = _cost_filters(request, timezone.now())
    rows = sel.cost_export_rows(tenants=_tenants(request), filters=f)
    writer = csv.writer(_Echo())

    def lines() -> Iterator[str]:
        yield writer.writerow(sel.EXPORT_COLUMNS)
        for row in rows:
            yield writer.writerow([_csv_cell(v) for v in row])

    response = StreamingHttpResponse(lines(), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="api-costs-{timezone.now():%Y%m%d-%H%M}.csv"'
    return response


def _csv_cell(value: Any) -> Any:
    if isinstance(value, Decimal):
        return f"{value:.6f}"
    if isinstance(value, datetime):
        return value.isoformat()
    return "" if value is None else value


# ---- budgets ---------------------------------------------------------------------------


def _budget_scopes(request: HttpRequest) -> list[str]:
    scopes = [BudgetScope.TENANT.value, BudgetScope.INSTANCE.value]
    if _sees_global(request):
        scopes += [BudgetScope.WORKFLOW.value, BudgetScope.SERVICE.value]
    return scopes


def _may_edit_budget(request: HttpRequest, scope: str, key: str) -> bool:
    if scope == BudgetScope.TENANT:
        return access.can_act(request.user, key)
    if scope == BudgetScope.INSTANCE:
        tenant = sel.instance_tenant(instance_id=key, tenants=_tenants(request))
        return tenant is not None and access.can_act(request.user, tenant)
    return _sees_global(request) and bool(access.acting_tenants(request.user))


@require_GET
@access.require_role()
def budgets(request: HtmxHttpRequest) -> HttpResponse:
    tenants, now, see_global = _tenants(request), timezone.now(), _sees_global(request)
    qs = list(sel.budgets_visible(tenants=tenants, see_global=see_global))
    rows = sel.budget_rows(budgets=qs, now=now)
    context = {
        "rows": rows,
        "editable": {b.id for b in rows if _may_edit_budget(request, b.scope, b.key)},
        "can_create": bool(access.acting_tenants(request.user)),
        "reservations": sel.reservations_held(budget_ids=[b.id for b in rows]),
        "events": sel.budget_events(tenants=tenants),
    }
    return _page(request, "ops/budgets.html", context)


@require_GET
@access.require_role()
def budget_form(request: HtmxHttpRequest, budget_id: int | None = None) -> HttpResponse:
    if not access.acting_tenants(request.user):
        raise PermissionDenied("editing budgets needs the operator role")
    initial: dict[str, Any] = {"scope": BudgetScope.TENANT, "period": "day", "policy": "fail"}
    if budget_id is not None:
        b = sel.budget_get(tenants=_tenants(request), see_global=_sees_global(request), budget_id=budget_id)
        if not _may_edit_budget(request, b.scope, b.key):
            raise PermissionDenied("you may not edit this budget")
        initial = {"scope": b.scope, "key": b.key, "period": b.period, "limit": b.limit, "policy": b.policy}
    form = forms.BudgetForm(initial=initial, allowed_scopes=_budget_scopes(request))
    return render(request, "ops/budget_form.html", {"form": form, "editing": budget_id is not None,
                                                     "tenants": access.acting_tenants(request.user)})


@require_POST
@access.require_role()
def budget_save(request: HtmxHttpRequest) -> HttpResponse:
    form = forms.BudgetForm(request.POST, allowed_scopes=_budget_scopes(request))
    if not form.is_valid():
        return render(request, "ops/budget_form.html", {"form": form, "tenants": access.acting_tenants(request.user)},
                      status=400)
    d = form.cleaned_data
    if not _may_edit_budget(request, d["scope"], d["key"]):
        raise PermissionDenied(f"you may not set a {d['scope']} budget for {d['key']!r}")
    _engine_call(request, _services().budget_upsert,
                 f"Budget {d['scope']}:{d['key']} set to {d['limit']:.2f} per {d['period']} ({d['policy']}).",
                 scope=d["scope"], key=d["key"], period=d["period"], limit=d["limit"], policy=d["policy"])
    return redirect("ops:budgets")


# ---- approvals -------------------------------------------------------------------------


@require_GET
@access.require_role()
def approvals(request: HtmxHttpRequest) -> HttpResponse:
    return _page(request, "ops/approvals.html", live_pages.approvals_context(request.user), fragment="inbox")


def _approval_context(request: HttpRequest, req: Any, form: Any = None) -> dict[str, Any]:
    form_class = forms.approval_form_class(req.fields or [])
    return {
        "req": req, "form": form or form_class(prefix=None), "can_act": access.can_act(request.user, req.tenant),
        "answerable": req.state == ApprovalState.PENDING, "now": timezone.now(),
        "context_items": sorted((req.context or {}).items()),
    }


@require_GET
@access.require_role()
def approval_detail(request: HtmxHttpRequest, approval_id: int) -> HttpResponse:
    req = sel.approval_get(tenants=_tenants(request), approval_id=approval_id)
    return render(request, "ops/approval_detail.html", _approval_context(request, req))


@require_POST
@access.require_role()
def approval_answer(request: HtmxHttpRequest, approval_id: int) -> HttpResponse:
    req = sel.approval_get(tenants=_tenants(request), approval_id=approval_id)
    _require_act(request, req.tenant)
    if req.state != ApprovalState.PENDING:
        who = f" by {req.answered_by}" if req.answered_by else ""
        ctx = _approval_context(request, req)
        ctx["refusal"] = f"This request was already {req.state}{who}; it takes no second answer."
        return render(request, "ops/approval_detail.html", ctx, status=409)
    form = forms.approval_form_class(req.fields or [])(request.POST)
    if not form.is_valid():
        return render(request, "ops/approval_detail.html", _approval_context(request, req, form), status=400)
    try:
        _services().approval_answer(
            approval_id=req.id, approved=form.cleaned_data["decision"] == "approve", values=form.values(),
            comment=form.cleaned_data.get("comment", ""), actor=request.user.username,
        )
    except EngineError as exc:
        req.refresh_from_db()
        ctx = _approval_context(request, req, form)
        ctx["refusal"] = str(exc)
        return render(request, "ops/approval_detail.html", ctx, status=409)
    verb = "Approved" if form.cleaned_data["decision"] == "approve" else "Rejected"
    messages.success(request, f"{verb}: {req.title}. Instance {req.instance_id} continues.")
    return redirect("ops:approvals")

