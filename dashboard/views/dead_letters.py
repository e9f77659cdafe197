"""The dead letters pages: the groups by error signature, one dead letter, and the operator's
retry, discard, replay (with edited params) and bulk redrive of a selection."""

from __future__ import annotations

import json
from collections.abc import Callable
from urllib.parse import urlencode

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, QueryDict
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from dashboard import access, forms
from dashboard import selectors as sel
from dashboard.live import ops_pages as live_pages
from dashboard.views.common import HtmxHttpRequest, engine_call, page, query, require_act, tenants
from ingest.engine.models import DeadLetter
from ingest.engine.services import control as engine_control
from ingest.engine.services import dead_letters as engine_dead_letters
from ingest.triggers.errors import InputRejected


@require_GET
@access.require_role()
def dead_letters(request: HtmxHttpRequest) -> HttpResponse:
    return page(request, "ops/dead_letters.html", live_pages.dead_letters_context(request.user, request.GET),
                fragment="results")


@require_GET
@access.require_role()
def dead_letter_detail(request: HtmxHttpRequest, dl_id: int) -> HttpResponse:
    dl = sel.dead_letter_get(tenants=tenants(request), dead_letter_id=dl_id)
    context = {"dl": dl, "can_act": access.can_act(request.user, dl.tenant),
               "reason_form": forms.ReasonForm()}
    return page(request, "ops/dead_letter_detail.html", context)


def _act_with_reason(request: HttpRequest, dl_id: int, *, missing: str,
                     act: Callable[[DeadLetter, str], object]) -> HttpResponse:
    """The shape of retry and discard: the operator's check, a reason, the act, back to the letter."""
    dl = sel.dead_letter_get(tenants=tenants(request), dead_letter_id=dl_id)
    require_act(request, dl.tenant)
    form = forms.ReasonForm(request.POST)
    if not form.is_valid():
        messages.error(request, missing)
    else:
        act(dl, form.cleaned_data["reason"])
    return redirect("ops:dead_letter", dl_id=dl.id)


@require_POST
@access.require_role()
def dead_letter_retry(request: HtmxHttpRequest, dl_id: int) -> HttpResponse:
    return _act_with_reason(request, dl_id, missing="Retry needs a reason.", act=lambda dl, reason: engine_call(
        request, engine_control.instance_retry, f"Instance {dl.instance_id} retried from step {dl.step_name}.",
        instance_id=dl.instance_id, reason=reason))


@require_POST
@access.require_role()
def dead_letter_discard(request: HtmxHttpRequest, dl_id: int) -> HttpResponse:
    return _act_with_reason(request, dl_id, missing="Discarding needs a reason.", act=lambda dl, reason: engine_call(
        request, engine_dead_letters.dead_letter_discard, f"Dead letter of {dl.instance_id} discarded.",
        dead_letter_id=dl.id, reason=reason))


@require_GET
@access.require_role()
def dead_letter_replay_form(request: HtmxHttpRequest, dl_id: int) -> HttpResponse:
    dl = sel.dead_letter_get(tenants=tenants(request), dead_letter_id=dl_id)
    require_act(request, dl.tenant)
    form = forms.ReplayForm(initial={"params": json.dumps(dl.instance.params, indent=2, sort_keys=True)})
    return render(request, "ops/dead_letter_replay.html", {"dl": dl, "form": form})


@require_POST
@access.require_role()
def dead_letter_replay(request: HtmxHttpRequest, dl_id: int) -> HttpResponse:
    """Two steps: without `confirm` show the diff of the edit; with it, replay as a new instance."""
    dl = sel.dead_letter_get(tenants=tenants(request), dead_letter_id=dl_id)
    require_act(request, dl.tenant)
    form = forms.ReplayForm(request.POST, original=dl.instance.params)
    if not form.is_valid():
        return render(request, "ops/dead_letter_replay.html", {"dl": dl, "form": form}, status=400)
    params = form.cleaned_data["params"]
    diff = forms.params_diff(dl.instance.params, params)
    if "confirm" not in request.POST:
        return render(request, "ops/dead_letter_replay.html",
                      {"dl": dl, "form": form, "diff": diff, "preview": True, "edited": bool(diff)})
    new = engine_call(
        request, engine_control.instance_replay,
        f"Replayed {dl.instance_id} {'with edited params' if diff else 'with the same params'}.",
        instance_id=dl.instance_id, params=params if diff else None, reason=form.cleaned_data["reason"],
    )
    if new is None:
        return redirect("ops:dead_letter", dl_id=dl.id)
    return redirect(f"/instances/{getattr(new, 'id', '')}/" if getattr(new, "id", None) else reverse("ops:dead_letter", args=[dl.id]))


def _selection(request: HttpRequest, data: QueryDict) -> tuple[sel.DeadLetterFilters, list[int], list[int]]:
    """(filters, ids the user may act on, ids they may only see) for a bulk action."""
    f = live_pages.dead_letter_filters(data)
    if any(str(i).isdigit() and len(str(i)) > 18 for i in data.getlist("ids")):  # past 64 bits
        raise InputRejected("ids holds a number too long to be a dead letter id; select dead letters "
                            "from the list")
    ids = [int(i) for i in data.getlist("ids") if str(i).isdigit()]
    acting = access.acting_tenants(request.user)
    mine = sel.dead_letter_selection_ids(tenants=acting, filters=f, ids=ids)
    visible = sel.dead_letter_selection_ids(tenants=tenants(request), filters=f, ids=ids)
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
        "skipped": len(read_only), "form": forms.RedriveForm(), "query": query(request),
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
    count = engine_call(
        request, engine_dead_letters.dead_letter_redrive, "Redrive started.",
        ids=ids, signature=f.signature or None, rate_per_second=form.cleaned_data["rate_per_second"],
        reason=form.cleaned_data["reason"],
    )
    if count is not None and count is not True:
        messages.info(request, f"{count} instance(s) queued at {form.cleaned_data['rate_per_second']:g}/s.")
    return redirect(f"{reverse('ops:dead_letters')}?{urlencode({'signature': f.signature} if f.signature else {})}")
