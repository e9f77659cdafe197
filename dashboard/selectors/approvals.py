"""The approvals inbox: requests waiting, recently answered, one request."""

from __future__ import annotations

from collections.abc import Collection

from django.db.models import (
    F,
)
from django.http import Http404

from ingest.engine.models import (
    ApprovalRequest,
    ApprovalState,
)

# ---- approvals -------------------------------------------------------------------------


def approvals_pending(*, tenants: Collection[str]) -> list[ApprovalRequest]:
    return list(
        ApprovalRequest.objects.filter(tenant__in=tenants, state=ApprovalState.PENDING)
        .select_related("budget")
        .order_by(F("due_at").asc(nulls_last=True), "created_at")
    )


def approvals_recent(*, tenants: Collection[str], limit: int = 15) -> list[ApprovalRequest]:
    return list(
        ApprovalRequest.objects.filter(tenant__in=tenants)
        .exclude(state=ApprovalState.PENDING)
        .order_by(F("answered_at").desc(nulls_last=True), "-created_at")[:limit]
    )


def approval_get(*, tenants: Collection[str], approval_id: int) -> ApprovalRequest:
    req = (
        ApprovalRequest.objects.select_related("budget", "instance").filter(tenant__in=tenants, id=approval_id).first()
    )
    if req is None:
        raise Http404("no such approval request")
    return req
