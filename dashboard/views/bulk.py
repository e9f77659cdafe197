"""Bulk actions by query on the instances list: preview (freezes what it counts), confirm (starts
the durable batch), progress (the batch's items, polled while it runs). Logic in dashboard.bulk."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from dashboard import access, bulk
from dashboard.audit import Audit, Origin, audited
from dashboard.models import Role
from dashboard.query_params import QueryReader
from dashboard.submissions import once
from dashboard.views.common import HtmxHttpRequest
from ingest.engine import EngineError
from ingest.engine.models import Batch, BatchItem, BatchItemState
from ingest.engine.services import batches

TEMPLATE = "runs/bulk.html"
MAX_COUNT = 10**9


class BulkForm(forms.Form):
    rate_per_second = forms.FloatField(
        min_value=0.1,
        max_value=batches.MAX_RATE,
        initial=20,
        label="Rate (instances per second)",
        help_text=f"At most {batches.MAX_RATE:g} per second, shared between tenants.",
    )
    reason = forms.CharField(
        max_length=2000,
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text="Required. Recorded in each instance's history and the audit log.",
    )


def _refused(request: HtmxHttpRequest, exc: bulk.BulkRefused | EngineError, *, status: int = 400) -> HttpResponse:
    code = getattr(exc, "status", status)
    if code == 404:
        raise Http404(str(exc))
    if code == 403:
        raise PermissionDenied(str(exc))
    return render(request, TEMPLATE, {"error": str(exc), "back": request.GET.urlencode()}, status=code)


@require_GET
@access.require_role(Role.OPERATOR)
def bulk_preview(request: HtmxHttpRequest) -> HttpResponse:
    try:
        preview = bulk.bulk_preview(user=request.user, query=request.GET, action=request.GET.get("action", ""))
    except (bulk.BulkRefused, EngineError) as exc:
        return _refused(request, exc)
    return HttpResponseRedirect(reverse("instance-bulk", args=[preview.batch.id]) + "?" + _preview_query(preview))


def _preview_query(preview: bulk.Preview) -> str:
    from urllib.parse import urlencode

    return urlencode({"left_out": preview.not_applicable, "read_only": preview.read_only})


def _context(request: HtmxHttpRequest, batch: Batch, **extra: Any) -> dict[str, Any]:
    reader = QueryReader(request.GET)  # the counts the preview's redirect carried
    left_out = reader.integer("left_out", default=0, low=0, high=MAX_COUNT)
    read_only = reader.integer("read_only", default=0, low=0, high=MAX_COUNT)
    reader.done()
    progress = batches.batch_progress(batch_id=batch.id)
    item_tenants = sorted(set(BatchItem.objects.filter(batch=batch).values_list("tenant", flat=True)))
    context: dict[str, Any] = {
        "item_tenants": item_tenants,
        "batch": batch,
        "progress": progress,
        "back": batch.query,
        "action": batch.action,
        "instances": [batches.batch_instance_id(batch.id, t) for t in item_tenants],
        "sample": list(BatchItem.objects.filter(batch=batch).order_by("id").values_list("instance_id", flat=True)[:20]),
        "problems": list(
            BatchItem.objects.filter(batch=batch, state__in=[BatchItemState.SKIPPED, BatchItemState.FAILED])
            .order_by("id")
            .values("instance_id", "state", "detail")[:20]
        ),
        "left_out": left_out,
        "read_only": read_only,
        **extra,
    }
    if batch.state == "previewed":
        context.setdefault("form", BulkForm())
        context.setdefault("drift", bulk.bulk_drift(user=request.user, batch=batch))
        context["non_retryable"] = bulk.bulk_failed_for_good(batch=batch)
    return context


@require_GET
@access.require_role(Role.OPERATOR)
def bulk_detail(request: HtmxHttpRequest, batch_id: int) -> HttpResponse:
    try:
        batch = bulk.bulk_get(user=request.user, batch_id=batch_id)
    except bulk.BulkRefused as exc:
        return _refused(request, exc)
    reader = QueryReader(request.GET)
    fragment = reader.choice("fragment", ("progress",))
    reader.done()
    template = TEMPLATE + ("#progress" if request.htmx and fragment else "")
    return render(request, template, _context(request, batch))


@require_POST
@access.require_role(Role.OPERATOR)
@once()
def bulk_confirm(request: HtmxHttpRequest, batch_id: int) -> HttpResponse:
    """Start the batch on exactly the previewed ids; say so when the matching set moved since."""
    try:
        batch = bulk.bulk_get(user=request.user, batch_id=batch_id)
    except bulk.BulkRefused as exc:
        return _refused(request, exc)
    form = BulkForm(request.POST)
    if batch.state != "previewed" or batch.user_id != str(request.user.pk):
        return _refused(
            request,
            bulk.BulkRefused(f"bulk action {batch.id} was already confirmed; nothing more was done", status=409),
        )
    if not form.is_valid():
        return render(request, TEMPLATE, _context(request, batch, form=form), status=400)
    drift = bulk.bulk_drift(user=request.user, batch=batch)
    tenants = sorted(set(BatchItem.objects.filter(batch=batch).values_list("tenant", flat=True)))
    try:
        started = audited(
            user=request.user,
            origin=Origin.of_request(request),
            audit=Audit(
                f"instances.bulk_{batch.action}",
                tenants,
                {
                    "batch": batch.id,
                    "query": batch.query,
                    "count": batch.total,
                    "rate_per_second": form.cleaned_data["rate_per_second"],
                    "changed_since_preview": {"added": drift.added, "removed": drift.removed},
                },
                form.cleaned_data["reason"],
            ),
            run=lambda: batches.batch_confirm(
                batch_id=batch.id,
                user_id=str(request.user.pk),
                reason=form.cleaned_data["reason"],
                rate_per_second=form.cleaned_data["rate_per_second"],
            ),
            affected=lambda s: s.batch.total,
        )
    except EngineError as exc:
        return render(request, TEMPLATE, _context(request, batch, form=form, error=str(exc)), status=409)
    note = f"Bulk {batch.action} started on the {batch.total} previewed instance{'s' if batch.total != 1 else ''}"
    if drift.changed:
        note += (
            f". The matching set changed since the preview ({drift.added} more match now, {drift.removed} "
            "previewed no longer match): only the previewed instances are acted on; those the action "
            "no longer applies to are skipped"
        )
    messages.success(request, note + ".")
    return HttpResponseRedirect(reverse("instance-bulk", args=[started.batch.id]), status=303)
