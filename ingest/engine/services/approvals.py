"""Answering an approval request: a person's answer to `step.wait_for_approval`, or a budget
breach's request (a grant that raises the limit once, or a denial)."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal, InvalidOperation
from typing import Any

from django.db import transaction

from ingest.engine import clock
from ingest.engine.errors import (
    ApprovalError,
)
from ingest.engine.models import (
    ApprovalKind,
    ApprovalRequest,
    ApprovalState,
    BudgetGrant,
    Instance,
    Status,
)
from ingest.engine.services.base import operator_history
from ingest.engine.services.control import instance_resume
from ingest.engine.services.instances import instance_send_event


def approval_answer(
    *, approval_id: int, approved: bool, values: dict[str, Any] | None = None, comment: str = "", actor: str
) -> ApprovalRequest:
    """Answer a request once; sends the event its instance waits for (or grants/denies a budget)."""
    now = clock.now()
    with transaction.atomic():
        try:
            req = ApprovalRequest.objects.select_for_update().get(id=approval_id)
        except ApprovalRequest.DoesNotExist:
            raise ApprovalError(f"no approval request has the id {approval_id}") from None
        if req.state != ApprovalState.PENDING:
            when = f" at {req.answered_at:%Y-%m-%d %H:%M} UTC" if req.answered_at else ""
            by = f" by {req.answered_by}" if req.answered_by else ""
            raise ApprovalError(f"approval request {req.id} was already {req.state}{by}{when}; it takes one answer")
        expired = req.due_at is not None and req.due_at <= now
        if not expired:
            answer = {"approved": bool(approved), "values": values or {}, "comment": comment, "by": actor}
            req.state = ApprovalState.APPROVED if approved else ApprovalState.REJECTED
            req.answer, req.answered_by, req.answered_at = answer, actor, now
            req.save()
            inst = Instance.objects.get(id=req.instance_id)
            operator_history(
                inst,
                action="approve" if approved else "reject",
                actor=actor,
                reason=comment,
                now=now,
                approval=req.id,
                values=values or {},
            )
            # In the same transaction: an answer is recorded only if its instance gets it.
            if req.kind == ApprovalKind.HUMAN:
                instance_send_event(instance_id=req.instance_id, type=req.event_type, payload=answer, actor=actor)
            else:
                _answer_budget(req, approved=approved, values=values or {}, actor=actor, now=now)
                if inst.status in (Status.PAUSED, Status.WAITING_FOR_PAUSE):
                    instance_resume(instance_id=inst.id, actor=actor, reason=f"approval {req.id} answered")
    if expired:
        # Recorded outside the refused transaction, so the request shows as expired.
        ApprovalRequest.objects.filter(id=req.id, state=ApprovalState.PENDING).update(
            state=ApprovalState.EXPIRED, answered_at=now
        )
        raise ApprovalError(
            f"approval request {req.id} expired at {req.due_at:%Y-%m-%d %H:%M} UTC; it can no longer be answered"
        )
    return req


def _answer_budget(req: ApprovalRequest, *, approved: bool, values: dict[str, Any], actor: str, now: datetime) -> None:
    if not approved or req.budget_id is None:
        return
    raw = values.get("amount", req.requested_amount)
    try:
        amount = Decimal(str(raw)).quantize(Decimal("0.000001"))
    except (InvalidOperation, ValueError):
        raise ApprovalError(f"amount {raw!r} is not a number") from None
    if amount <= 0:
        raise ApprovalError(f"amount {amount} must be positive")
    BudgetGrant.objects.create(
        budget_id=req.budget_id, instance_id=req.instance_id, amount=amount, granted_by=actor, created_at=now
    )
