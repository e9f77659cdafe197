"""/api/bulk-actions: bulk actions by query over instances, as on the instances page.

POST /preview {action, query} freezes what the query matches (in the token's acting tenants, in
a status the action applies to) and answers its count; POST /{batch}/confirm {reason,
rate_per_second} starts the durable batch on exactly that set and says how the matching set moved
since; GET /{batch} answers its progress. docs/bulk-actions.md."""

from __future__ import annotations

from typing import Any, Literal

from django.http import HttpRequest, QueryDict
from ninja import Field, Router, Status

from dashboard import bulk
from dashboard.api import schemas as s
from dashboard.api.audit import acted
from dashboard.api.errors import ApiProblem
from dashboard.api.openapi import NONBLANK_PATTERN
from dashboard.bulk import BULK_ACTIONS
from ingest.engine.models import BatchItem
from ingest.engine.models import Status as InstanceStatus
from ingest.engine.services import batches

router = Router(tags=["bulk actions"])


_STATUSES = "(?:" + "|".join(InstanceStatus.values) + ")"
_FILTER = rf"(?:(?:workflow|tenant|id)=[A-Za-z0-9_.-]{{1,100}}|status={_STATUSES})"
# At least one filter (an empty query never means every instance), each one that parses.
QUERY_PATTERN = rf"^{_FILTER}(?:&{_FILTER})*$"


class PreviewIn(s.InputSchema):
    action: Literal[BULK_ACTIONS]  # type: ignore[valid-type]
    # The instances list's filters, as in its URL: "workflow=gong-ingest&status=errored".
    query: str = Field(..., max_length=4000, json_schema_extra={"pattern": QUERY_PATTERN})


class ConfirmIn(s.InputSchema):
    # Declared, not enforced here: the service's refusal (400) names what is missing.
    reason: str = Field(..., max_length=2000, json_schema_extra={"minLength": 1, "pattern": NONBLANK_PATTERN})
    rate_per_second: float = Field(20.0, json_schema_extra={"exclusiveMinimum": 0, "maximum": batches.MAX_RATE})


def _refused(exc: bulk.BulkRefused) -> ApiProblem:
    code = {404: "not_found", 403: "forbidden", 409: "conflict"}.get(exc.status, "bulk_refused")
    return ApiProblem(exc.status, code, str(exc))


def _batch_dict(batch: Any) -> dict[str, Any]:
    p = batches.batch_progress(batch_id=batch.id)
    tenants = sorted(set(BatchItem.objects.filter(batch=batch).values_list("tenant", flat=True)))
    return {
        "batch": batch.id,
        "action": batch.action,
        "state": batch.state,
        "query": batch.query,
        "count": batch.total,
        "rate_per_second": batch.rate_per_second,
        "instances": [batches.batch_instance_id(batch.id, t) for t in tenants] if batch.state != "previewed" else [],
        "progress": {"total": p.total, "done": p.done, "skipped": p.skipped, "failed": p.failed, "pending": p.pending},
    }


@router.post(
    "/preview",
    response={201: dict, **s.ERRORS},
    summary="Freeze and count what a query matches",
    description="Answers the frozen `count`, a `sample` of its ids, and for a retry `non_retryable`: "
    "how many of them failed for good (NonRetryableError: retried, they fail the same "
    "way; replay them with edited params), with a `non_retryable_sample` of their ids.",
)
def bulk_preview(request: HttpRequest, body: PreviewIn) -> Status[dict[str, Any]]:
    try:
        preview = bulk.bulk_preview(user=request.user, query=QueryDict(body.query[:4000]), action=body.action)
    except bulk.BulkRefused as exc:
        raise _refused(exc) from None
    for_good = bulk.bulk_failed_for_good(batch=preview.batch)
    return Status(
        201,
        {
            **_batch_dict(preview.batch),
            "not_applicable": preview.not_applicable,
            "read_only": preview.read_only,
            "sample": preview.sample,
            "non_retryable": len(for_good),
            "non_retryable_sample": for_good[:20],
        },
    )


@router.post("/{batch_id}/confirm", response={202: dict, **s.ERRORS}, summary="Start a previewed bulk action")
def bulk_confirm(request: HttpRequest, batch_id: int, body: ConfirmIn) -> Status[dict[str, Any]]:
    try:
        batch = bulk.bulk_get(user=request.user, batch_id=batch_id)
    except bulk.BulkRefused as exc:
        raise _refused(exc) from None
    drift = bulk.bulk_drift(user=request.user, batch=batch)
    tenants = sorted(set(BatchItem.objects.filter(batch=batch).values_list("tenant", flat=True)))
    started = acted(
        request,
        action=f"instances.bulk_{batch.action}",
        tenants=tenants,
        reason=body.reason,
        selection={
            "batch": batch.id,
            "query": batch.query,
            "count": batch.total,
            "rate_per_second": body.rate_per_second,
            "changed_since_preview": {"added": drift.added, "removed": drift.removed},
        },
        run=lambda: batches.batch_confirm(
            batch_id=batch.id, user_id=str(request.user.pk), reason=body.reason, rate_per_second=body.rate_per_second
        ),
        affected=lambda st: st.batch.total,
    )
    return Status(
        202, {**_batch_dict(started.batch), "changed_since_preview": {"added": drift.added, "removed": drift.removed}}
    )


@router.get("/{batch_id}", response={200: dict, **s.ERRORS}, summary="A bulk action and its progress")
def bulk_get(request: HttpRequest, batch_id: int) -> dict[str, Any]:
    try:
        return _batch_dict(bulk.bulk_get(user=request.user, batch_id=batch_id))
    except bulk.BulkRefused as exc:
        raise _refused(exc) from None
