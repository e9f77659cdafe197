"""The approvals pages: the inbox, one request with its context, and the operator's answer."""

from __future__ import annotations

from typing import Any

from django import forms as django_forms
from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from dashboard import access, forms
from dashboard import selectors as sel
from dashboard.audit import Audit, Origin, audited
from dashboard.live import ops_pages as live_pages
from dashboard.submissions import once
from dashboard.views.common import HtmxHttpRequest, page, require_act, tenants
from ingest.engine import EngineError
from ingest.engine import now as engine_now
from ingest.engine.models import ApprovalRequest, ApprovalState
from ingest.engine.services import approvals as engine_approvals


@require_GET
@access.require_role()
def approvals(request: HtmxHttpRequest) -> HttpResponse:
    return page(request, "ops/approvals.html", live_pages.approvals_context(request.user), fragment="inbox")


def _approval_context(
    request: HttpRequest, req: ApprovalRequest, form: django_forms.Form | None = None
) -> dict[str, Any]:
    form_class = forms.approval_form_class(req.fields or [], grants_budget=req.budget_id is not None)
    return {
        "req": req,
        "form": form or form_class(prefix=None),
        "can_act": access.can_act(request.user, req.tenant),
        "answerable": req.state == ApprovalState.PENDING,
        "now": engine_now(),
        "context_items": sorted((req.context or {}).items()),
    }


@require_GET
@access.require_role()
def approval_detail(request: HtmxHttpRequest, approval_id: int) -> HttpResponse:
    req = sel.approval_get(tenants=tenants(request), approval_id=approval_id)
    return render(request, "ops/approval_detail.html", _approval_context(request, req))


@require_POST
@access.require_role()
@once()
def approval_answer(request: HtmxHttpRequest, approval_id: int) -> HttpResponse:
    req = sel.approval_get(tenants=tenants(request), approval_id=approval_id)
    require_act(request, req.tenant)
    if req.state != ApprovalState.PENDING:
        who = f" by {req.answered_by}" if req.answered_by else ""
        ctx = _approval_context(request, req)
        ctx["refusal"] = f"This request was already {req.state}{who}; it takes no second answer."
        return render(request, "ops/approval_detail.html", ctx, status=409)
    form = forms.approval_form_class(req.fields or [], grants_budget=req.budget_id is not None)(request.POST)
    if not form.is_valid():
        return render(request, "ops/approval_detail.html", _approval_context(request, req, form), status=400)
    try:
        decision = form.cleaned_data["decision"]
        audited(
            user=request.user,
            origin=Origin.of_request(request),
            audit=Audit(
                f"approval.{decision}",
                [req.tenant],
                {"approval_id": req.id, "instance_id": req.instance_id},
                form.cleaned_data.get("comment", ""),
            ),
            run=lambda: engine_approvals.approval_answer(
                approval_id=req.id,
                approved=decision == "approve",
                values=form.values(),
                comment=form.cleaned_data.get("comment", ""),
                actor=request.user.username,
            ),
        )
    except EngineError as exc:
        req.refresh_from_db()
        ctx = _approval_context(request, req, form)
        ctx["refusal"] = str(exc)
        return render(request, "ops/approval_detail.html", ctx, status=409)
    verb = "Approved" if form.cleaned_data["decision"] == "approve" else "Rejected"
    messages.success(request, f"{verb}: {req.title}. Instance {req.instance_id} continues.")
    return redirect("ops:approvals")
