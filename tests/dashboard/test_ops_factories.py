"""Ledger rows for the operations pages' tests (written directly: the tests stand in for the
worker). Imported by the other test_ops_* modules; holds no tests itself."""

from __future__ import annotations

from datetime import datetime, timedelta
from decimal import Decimal
from itertools import count
from typing import Any

from django.utils import timezone
from ledger_factories import make_instance

from ingest.engine.models import (
    ApiCost,
    ApprovalRequest,
    Budget,
    BudgetReservation,
    DeadLetter,
    History,
    Instance,
    Step,
)
from ingest.engine.signature import error_signature

_n = count(1)


def now() -> datetime:
    return timezone.now()


def failed_instance(
    *,
    tenant: str = "acme",
    workflow: str = "gong-ingest",
    step: str = "llm-extract",
    error: str = "RateLimited",
    message: str = "429 from provider after 3.2 s for call 123",
    params: dict[str, Any] | None = None,
    at: datetime | None = None,
) -> DeadLetter:
    """An errored instance with its failed step and the dead letter the engine would have left."""
    at = at or now() - timedelta(minutes=next(_n))
    inst = make_instance(
        tenant=tenant,
        workflow=workflow,
        status="errored",
        created_at=at,
        params=params or {"call_id": f"c{next(_n)}", "tenant": tenant},
        error_name=error,
        error_message=message,
        ended_at=at,
    )
    Step.objects.create(
        instance=inst,
        name="keyword-prefilter",
        seq=1,
        position=1,
        status="complete",
        attempts=1,
        started_at=at,
        ended_at=at + timedelta(seconds=1),
    )
    Step.objects.create(
        instance=inst,
        name=step,
        seq=1,
        position=2,
        status="errored",
        attempts=4,
        error_name=error,
        error_message=message,
        started_at=at + timedelta(seconds=1),
        ended_at=at + timedelta(seconds=5),
    )
    sig, normalized = error_signature(workflow=workflow, step_name=step, error_name=error, message=message)
    return DeadLetter.objects.create(
        instance=inst,
        workflow=workflow,
        tenant=tenant,
        step_name=step,
        error_name=error,
        error_message=message,
        signature=sig,
        normalized_message=normalized,
        created_at=at,
    )


def cost(
    *,
    instance: Instance | None = None,
    service: str = "openai",
    amount: str = "0.010000",
    step: str = "llm-extract",
    attempt: int = 1,
    tenant: str | None = None,
    model: str = "gpt-4o-mini",
    workflow: str | None = None,
    at: datetime | None = None,
    success: bool = True,
) -> ApiCost:
    return ApiCost.objects.create(
        service=service,
        cost=Decimal(amount),
        instance=instance,
        workflow_type=workflow or (instance.workflow if instance else "gong-ingest"),
        step_name=step,
        attempt=attempt,
        success=success,
        model=model,
        tokens_in=1000,
        tokens_out=100,
        tenant=tenant or (instance.tenant if instance else "acme"),
        created_at=at or now() - timedelta(minutes=5),
    )


def budget(
    *,
    scope: str = "tenant",
    key: str = "acme",
    period: str = "day",
    limit: str = "10",
    spent: str = "0",
    policy: str = "fail",
    start: datetime | None = None,
) -> Budget:
    start = start or now().replace(hour=0, minute=0, second=0, microsecond=0)
    return Budget.objects.create(
        scope=scope,
        key=key,
        period=period,
        limit=Decimal(limit),
        spent=Decimal(spent),
        period_start=start,
        policy=policy,
        updated_at=now(),
    )


def reservation(b: Budget, *, instance: Instance | None = None, amount: str = "0.5") -> BudgetReservation:
    return BudgetReservation.objects.create(
        budget=b, instance=instance, step_name="llm-extract", service="openai", amount=Decimal(amount), created_at=now()
    )


def approval(
    *,
    tenant: str = "acme",
    fields: list[dict[str, Any]] | None = None,
    state: str = "pending",
    due_in: timedelta | None = timedelta(hours=4),
    kind: str = "human",
    title: str = "Publish facts?",
    **extra: Any,
) -> ApprovalRequest:
    inst = make_instance(tenant=tenant, workflow="gong-ingest", status="waiting", created_at=now())
    Step.objects.create(
        instance=inst,
        name="wait-approval",
        seq=1,
        position=1,
        kind="wait_event",
        status="waiting",
        event_type="approval",
        started_at=now(),
    )
    return ApprovalRequest.objects.create(
        instance=inst,
        tenant=tenant,
        workflow=inst.workflow,
        kind=kind,
        step_name="wait-approval",
        event_type="approval",
        title=title,
        fields=fields if fields is not None else [],
        context={"call": "Q3 renewal", "facts": 4},
        state=state,
        due_at=(now() + due_in) if due_in is not None else None,
        escalation="senior-manager after 48 h",
        created_at=now(),
        **extra,
    )


def step(
    instance: Instance,
    name: str,
    *,
    position: int,
    start: float,
    end: float | None,
    status: str = "complete",
    attempts: int = 1,
    seq: int = 1,
) -> Step:
    base = instance.started_at or now()
    return Step.objects.create(
        instance=instance,
        name=name,
        seq=seq,
        position=position,
        status=status,
        attempts=attempts,
        started_at=base + timedelta(seconds=start),
        ended_at=None if end is None else base + timedelta(seconds=end),
    )


def history_count(**filters: Any) -> int:
    return History.objects.filter(**filters).count()


__all__ = [
    "approval",
    "budget",
    "cost",
    "failed_instance",
    "history_count",
    "make_instance",
    "now",
    "reservation",
    "step",
]
