"""The dead letters pages: the groups by error signature, one dead letter, and the operator's
retry, discard, replay (with edited params) and bulk redrive of a selection."""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any
from urllib.parse import urlencode

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, QueryDict
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from dashboard import access, forms, selection
from dashboard import selectors as sel
from dashboard.actions import ActionRefused, StaleState
from dashboard.audit import Origin
from dashboard.dead_letter_actions import (
    LetterAction,
    LetterDone,
    dead_letter_act,
    dead_letters_redrive,
)
from dashboard.live import ops_pages as live_pages
from dashboard.staleness import dead_letter_version
from dashboard.submissions import once
from dashboard.views.common import HtmxHttpRequest, page, require_act, tenants
from ingest.engine import EngineError, public_value
from ingest.engine.models import DeadLetter
from ingest.engine.services.dead_letters import DeadLetterFilter
from ingest.triggers.errors import InputRejected


@require_GET
@access.require_role()
def dead_letters(request: HtmxHttpRequest) -> HttpResponse:
    return page(
        request, "ops/dead_letters.html", live_pages.dead_letters_context(request.user, request.GET), fragment="results"
    )


def _detail_context(request: HttpRequest, dl: DeadLetter, **extra: Any) -> dict[str, Any]:
    for_good = sel.dead_letters_failed_for_good(letters=[(dl.id, dl.instance_id, dl.error_name)])
    return {
        "dl": dl,
        "can_act": access.can_act(request.user, dl.tenant),
        "reason_form": forms.ReasonForm(),
        "version": dead_letter_version(dl),
        "non_retryable": dl.id in for_good,
        **extra,
    }


@require_GET
@access.require_role()
def dead_letter_detail(request: HtmxHttpRequest, dl_id: int) -> HttpResponse:
    dl = sel.dead_letter_get(tenants=tenants(request), dead_letter_id=dl_id)
    return page(request, "ops/dead_letter_detail.html", _detail_context(request, dl))


def _letter_act(
    request: HttpRequest,
    dl_id: int,
    action: LetterAction,
    *,
    reason: str,
    ok: str,
    params: dict[str, Any] | None = None,
) -> HttpResponse | LetterDone:
    """The action through the dead letters' service. A refusal for who acts is the 403/404 page;
    a letter that moved since the page was loaded is that page again, as it is now, saying what
    moved it (409); the engine's refusal is a message on the letter's page."""
    try:
        done = dead_letter_act(
            user=request.user,
            origin=Origin.of_request(request),
            dead_letter_id=dl_id,
            action=action,
            reason=reason,
            params=params,
            expected_version=request.POST.get("expected_version") or None,
        )
    except StaleState as exc:
        dl = sel.dead_letter_get(tenants=tenants(request), dead_letter_id=dl_id)
        return render(
            request, "ops/dead_letter_detail.html", _detail_context(request, dl, stale=exc.message), status=409
        )
    except ActionRefused as exc:
        if exc.status in (403, 404):
            raise (PermissionDenied(exc.message) if exc.status == 403 else Http404(exc.message)) from None
        messages.error(request, exc.message)
    except (EngineError, InputRejected) as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, ok)
        return done
    return redirect("ops:dead_letter", dl_id=dl_id)


def _with_reason(request: HttpRequest, dl_id: int, action: LetterAction, *, missing: str, ok: str) -> HttpResponse:
    """Retry and discard: the operator's check, a reason, the act, back to the letter."""
    dl = sel.dead_letter_get(tenants=tenants(request), dead_letter_id=dl_id)
    require_act(request, dl.tenant)
    form = forms.ReasonForm(request.POST)
    if not form.is_valid():
        messages.error(request, missing)
        return redirect("ops:dead_letter", dl_id=dl.id)
    answer = _letter_act(request, dl.id, action, reason=form.cleaned_data["reason"], ok=ok.format(dl=dl))
    return answer if isinstance(answer, HttpResponse) else redirect("ops:dead_letter", dl_id=dl.id)


@require_POST
@access.require_role()
@once()
def dead_letter_retry(request: HtmxHttpRequest, dl_id: int) -> HttpResponse:
    return _with_reason(
        request,
        dl_id,
        "retry",
        missing="Retry needs a reason.",
        ok="Instance {dl.instance_id} retried from step {dl.step_name}.",
    )


@require_POST
@access.require_role()
@once()
def dead_letter_discard(request: HtmxHttpRequest, dl_id: int) -> HttpResponse:
    return _with_reason(
        request, dl_id, "discard", missing="Discarding needs a reason.", ok="Dead letter of {dl.instance_id} discarded."
    )


def _replay_page(
    request: HttpRequest, dl: DeadLetter, form: forms.ReplayForm, *, status: int = 200, **extra: Any
) -> HttpResponse:
    version = request.POST.get("expected_version") or dead_letter_version(dl)
    return render(
        request, "ops/dead_letter_replay.html", {"dl": dl, "form": form, "version": version, **extra}, status=status
    )


@require_GET
@access.require_role()
def dead_letter_replay_form(request: HtmxHttpRequest, dl_id: int) -> HttpResponse:
    dl = sel.dead_letter_get(tenants=tenants(request), dead_letter_id=dl_id)
    require_act(request, dl.tenant)
    form = forms.ReplayForm(initial={"params": json.dumps(public_value(dl.instance.params), indent=2, sort_keys=True)})
    return _replay_page(request, dl, form)


@require_POST
@access.require_role()
@once()
def dead_letter_replay(request: HtmxHttpRequest, dl_id: int) -> HttpResponse:
    """Two steps: without `confirm` show the diff of the edit; with it, replay as a new instance."""
    dl = sel.dead_letter_get(tenants=tenants(request), dead_letter_id=dl_id)
    require_act(request, dl.tenant)
    form = forms.ReplayForm(request.POST, original=dl.instance.params)
    if not form.is_valid():
        return _replay_page(request, dl, form, status=400)
    params = form.cleaned_data["params"]
    diff = forms.params_diff(public_value(dl.instance.params), params)
    if "confirm" not in request.POST:
        return _replay_page(request, dl, form, diff=diff, preview=True, edited=bool(diff))
    answer = _letter_act(
        request,
        dl.id,
        "replay",
        reason=form.cleaned_data["reason"],
        params=params if diff else None,
        ok=f"Replayed {dl.instance_id} {'with edited params' if diff else 'with the same params'}.",
    )
    if isinstance(answer, HttpResponse):
        return answer
    return redirect(f"/instances/{answer.instance_id}/")


_REDRIVE = "dead_letters.redrive"  # the action's name in the audit log and in its preview token


def _refuse(request: HttpRequest, message: str, *, status: int = 400) -> HttpResponse:
    return render(
        request, "ops/dead_letter_redrive.html", {"error": message, "f": sel.DeadLetterFilters()}, status=status
    )


def _requested(data: QueryDict) -> tuple[sel.DeadLetterFilters, list[int] | None]:
    """The filters and the explicit ids (None: every open dead letter the filters match). Sending
    `ids` at all, or mode=ids (the items list's form), asks for ids: empty or unparsable ones
    raise SelectionError rather than fall back to the filtered set."""
    f = live_pages.dead_letter_filters(data)
    if "ids" in data or data.get("mode") == "ids":
        return f, selection.ids_parse(data.getlist("ids"))
    return f, None


def _scoped(request: HttpRequest, f: sel.DeadLetterFilters, ids: list[int] | None) -> tuple[list[int], int]:
    """(ids the user may act on, how many more match in tenants they only read). Explicit ids, or
    a tenant filter, outside the user's tenants are 404: never a silent no-op."""
    if f.tenant and not access.can_read(request.user, f.tenant):
        raise Http404(f"no tenant {f.tenant[:100]!r} among yours")
    if ids is not None:
        missing = set(ids) - sel.dead_letter_ids_visible(tenants=tenants(request), ids=ids)
        if missing:
            raise Http404(f"no dead letter {', '.join(map(str, sorted(missing)[:5]))} in your tenants")
    mine = sel.dead_letter_selection_ids(tenants=access.acting_tenants(request.user), filters=f, ids=ids)
    visible = sel.dead_letter_selection_ids(tenants=tenants(request), filters=f, ids=ids)
    return mine, len(visible) - len(mine)


def _preview(
    request: HttpRequest,
    f: sel.DeadLetterFilters,
    ids: list[int] | None,
    mine: list[int],
    read_only: int,
    *,
    form: forms.RedriveForm | None = None,
    change: selection.Change | None = None,
    status: int = 200,
) -> HttpResponse:
    snapshot = selection.Snapshot(_REDRIVE, asdict(f), ids, mine)
    context = {
        "f": f,
        "ids": mine,
        "estimate": sel.redrive_estimate(dead_letter_ids=mine),
        "skipped": read_only,
        "non_retryable": sel.redrive_failed_for_good(dead_letter_ids=mine),
        "form": form or forms.RedriveForm(),
        "change": change,
        "token": selection.token_issue(user_id=request.user.pk, snapshot=snapshot),
        "back": urlencode({k: v for k, v in asdict(f).items() if v}),
    }
    return render(request, "ops/dead_letter_redrive.html", context, status=status)


@require_GET
@access.require_role()
def dead_letter_redrive_preview(request: HtmxHttpRequest) -> HttpResponse:
    try:
        f, ids = _requested(request.GET)
    except selection.SelectionError as exc:
        return _refuse(request, str(exc))
    mine, read_only = _scoped(request, f, ids)
    if not mine and read_only:
        raise PermissionDenied("redriving needs the operator role in these tenants")
    return _preview(request, f, ids, mine, read_only)


@require_POST
@access.require_role()
@once()
def dead_letter_redrive(request: HtmxHttpRequest) -> HttpResponse:
    """Acts on exactly the set the preview counted, recomputed from the preview's token."""
    if not access.acting_tenants(request.user):
        raise PermissionDenied("redriving needs the operator role in a tenant")
    try:
        if "ids" in request.POST:  # said so it can be named; the token's ids are the ones used
            selection.ids_parse(request.POST.getlist("ids"))
        snap = selection.token_read(request.POST.get("token", ""), user_id=request.user.pk, action=_REDRIVE)
    except selection.SelectionError as exc:
        return _refuse(request, str(exc))
    f, ids = sel.DeadLetterFilters(**snap.filters), snap.ids
    mine, read_only = _scoped(request, f, ids)
    if not mine and read_only:
        raise PermissionDenied("redriving needs the operator role in these tenants")
    form = forms.RedriveForm(request.POST)
    if not form.is_valid():
        return _preview(request, f, ids, mine, read_only, form=form, status=400)
    change = selection.selection_change(snap.selected, mine)
    if change is not None:
        return _preview(request, f, ids, mine, read_only, form=form, change=change, status=409)
    if not mine:
        return _refuse(request, "the selection has no open dead letters; nothing was done")
    rate, reason = form.cleaned_data["rate_per_second"], form.cleaned_data["reason"]
    scope = DeadLetterFilter(
        tenants=tuple(access.acting_tenants(request.user)),
        workflow=f.workflow or None,
        step_name=f.step or None,
        signature=f.signature or None,
    )
    chosen = {"ids": mine} if ids is not None else {"filter": {k: v for k, v in snap.filters.items() if v}}
    try:
        count = dead_letters_redrive(
            user=request.user,
            origin=Origin.of_request(request),
            ids=mine,
            scope=scope,
            rate_per_second=rate,
            reason=reason,
            selection=chosen,
            tenants=sel.dead_letter_tenants(ids=mine),
        )
    except (ActionRefused, EngineError) as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"Redrive started: {count} instance(s) queued at {rate:g}/s.")
    return redirect(f"{reverse('ops:dead_letters')}?{urlencode({k: v for k, v in asdict(f).items() if v})}")
