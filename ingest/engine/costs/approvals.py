"""Human approval requests a step opens (`step.wait_for_approval`) and lets expire."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db import transaction

from ingest.engine import clock
from ingest.engine.models import ApprovalKind, ApprovalRequest, ApprovalState, History, HistoryKind
from ingest.engine.writes import notify


def approval_request_create(
    *,
    instance_id: str,
    tenant: str,
    workflow: str,
    step_name: str,
    title: str,
    description: str,
    fields: list[dict[str, Any]],
    context: dict[str, Any],
    due_at: datetime,
    escalation: str,
    idempotency_key: str,
) -> dict[str, Any]:
    now = clock.now()
    with transaction.atomic():
        existing = ApprovalRequest.objects.filter(
            instance_id=instance_id,
            step_name=step_name,
            kind=ApprovalKind.HUMAN,
            context__idempotency_key=idempotency_key,
        ).first()
        if existing is None:
            existing = ApprovalRequest.objects.create(
                instance_id=instance_id,
                tenant=tenant,
                workflow=workflow,
                kind=ApprovalKind.HUMAN,
                step_name=step_name,
                title=title,
                description=description,
                fields=fields,
                context={**context, "idempotency_key": idempotency_key},
                due_at=due_at,
                escalation=escalation,
                created_at=now,
            )
            existing.event_type = f"approval:{existing.id}"
            existing.save(update_fields=["event_type"])
            notify.history()
            History.objects.create(
                instance_id=instance_id,
                workflow=workflow,
                tenant=tenant,
                kind=HistoryKind.APPROVAL,
                step_name=step_name,
                data={"approval": existing.id, "state": "pending", "title": title},
                created_at=now,
            )
    return {"id": existing.id, "event_type": existing.event_type}


def approval_expire(*, approval_id: int) -> dict[str, Any]:
    ApprovalRequest.objects.filter(id=approval_id, state=ApprovalState.PENDING).update(
        state=ApprovalState.EXPIRED, answered_at=clock.now()
    )
    return {"id": approval_id, "state": "expired"}
