"""Ledger rows for the dashboard tests, written directly (tests stand in for the engine's worker)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from itertools import count
from typing import Any

from django.utils import timezone

from ingest.engine.models import ApiCost, Attempt, History, Instance, Step

T0 = datetime(2025, 1, 6, 12, 0, 0, tzinfo=UTC)
_seq = count(1)


def make_instance(
    id: str | None = None,
    *,
    tenant: str = "acme",
    workflow: str = "gong-ingest",
    status: str = "running",
    created_at: datetime | None = None,
    params: dict[str, Any] | None = None,
    **extra: Any,
) -> Instance:
    n = next(_seq)
    created = created_at or T0 + timedelta(seconds=n)
    return Instance.objects.create(
        id=id or f"{workflow}-{tenant}-{n}",
        workflow=workflow,
        tenant=tenant,
        status=status,
        params=params if params is not None else {"account": tenant, "n": n},
        created_at=created,
        updated_at=created,
        started_at=created,
        **extra,
    )


def add_history(
    instance: Instance | None,
    kind: str = "step.completed",
    *,
    status: str = "",
    step_name: str = "",
    actor: str = "",
    reason: str = "",
    tenant: str | None = None,
    data: dict[str, Any] | None = None,
) -> History:
    return History.objects.create(
        instance=instance,
        workflow=instance.workflow if instance else "",
        tenant=tenant if tenant is not None else (instance.tenant if instance else ""),
        kind=kind,
        status=status,
        step_name=step_name,
        actor=actor,
        reason=reason,
        data=data or {},
        created_at=timezone.now(),
    )


def make_run(instance: Instance) -> dict[str, Any]:
    """A realistic run: a step retried twice then ok, two parallel steps, a sensitive one."""
    t = instance.started_at or T0
    fetch = Step.objects.create(
        instance=instance,
        name="fetch-calls",
        seq=1,
        position=1,
        status="complete",
        result={"calls": 3},
        attempts=3,
        started_at=t,
        ended_at=t + timedelta(seconds=32),
    )
    Attempt.objects.create(
        step=fetch,
        number=1,
        started_at=t,
        ended_at=t + timedelta(seconds=1),
        error_name="TimeoutError",
        error_message="read timed out",
        retry_delay_seconds=10,
    )
    Attempt.objects.create(
        step=fetch,
        number=2,
        started_at=t + timedelta(seconds=11),
        ended_at=t + timedelta(seconds=12),
        error_name="TimeoutError",
        error_message="read timed out",
        retry_delay_seconds=20,
        error_traceback="Traceback (most recent call last):\n  ...\nTimeoutError: read timed out",
    )
    Attempt.objects.create(
        step=fetch, number=3, started_at=t + timedelta(seconds=31), ended_at=t + timedelta(seconds=32), ok=True
    )
    par = []
    for k in (1, 2):
        s = Step.objects.create(
            instance=instance,
            name=f"llm-extract-{k}",
            seq=1,
            position=1 + k,
            status="complete",
            result={"facts": [k]},
            attempts=1,
            started_at=t + timedelta(seconds=33),
            ended_at=t + timedelta(seconds=40 + k),
        )
        Attempt.objects.create(step=s, number=1, started_at=s.started_at, ended_at=s.ended_at, ok=True)
        ApiCost.objects.create(
            service="openai",
            cost=Decimal("0.0125") * k,
            instance=instance,
            workflow_type=instance.workflow,
            step_name=s.name,
            attempt=1,
            model="gpt-4o-mini",
            tokens_in=1000,
            tokens_out=200,
            tenant=instance.tenant,
            created_at=s.ended_at,
        )
        par.append(s)
    secret = Step.objects.create(
        instance=instance,
        name="load-credentials",
        seq=1,
        position=4,
        status="complete",
        result={"token": "sk-SECRET-VALUE"},
        sensitive=True,
        attempts=1,
        started_at=t + timedelta(seconds=43),
        ended_at=t + timedelta(seconds=44),
    )
    return {"fetch": fetch, "parallel": par, "secret": secret}
