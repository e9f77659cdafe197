"""A ledger as the engine leaves it, for the rollup tests: instances over the last two days in four
tenants and two workflows, steps in every status, costs per step and outside any instance."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

from dashboard.rollups.services import rollup_catch_up
from ingest.engine.models import ApiCost, History, Instance, Step
from tests.dashboard.ledger_factories import make_instance

MINE = ["acme", "default", "globex"]  # the operator persona's tenants
WORKFLOWS = ["gong-ingest", "crm-enrich"]
STEPS = [
    ("fetch-calls", "gong", ""),
    ("llm-extract", "openai", "gpt-4o-mini"),
    ("persist-facts-1", "postgres", ""),
    ("persist-facts-2", "postgres", ""),
    ("embed", "openai-embeddings", "text-embedding-3-small"),
]


def hour_of(at: datetime) -> datetime:
    return at.astimezone(UTC).replace(minute=0, second=0, microsecond=0)


def history(instance: Instance, kind: str, at: datetime, **data: Any) -> History:
    return History.objects.create(
        instance=instance, workflow=instance.workflow, tenant=instance.tenant, kind=kind, data=data, created_at=at
    )


def add_step(
    inst: Instance,
    name: str,
    *,
    started: datetime,
    status: str = "complete",
    ms: float = 800,
    attempts: int = 1,
    seq: int = 1,
    position: int = 1,
    logged: bool = False,
    batch: list[Step] | None = None,
) -> Step:
    """The step, saved (or appended to `batch`, to be saved with it)."""
    ended = started + timedelta(milliseconds=ms) if status in ("complete", "errored") else None
    step = Step(
        instance=inst,
        name=name,
        seq=seq,
        position=position,
        status=status,
        attempts=attempts,
        started_at=started,
        ended_at=ended,
    )
    if batch is not None:
        assert not logged
        batch.append(step)
        return step
    step.save()
    if logged:
        history(inst, "step.completed" if status == "complete" else "step.started", ended or started)
    return step


def add_cost(
    inst: Instance | None,
    *,
    at: datetime,
    amount: str,
    service: str = "openai",
    step: str = "llm-extract",
    model: str = "",
    tenant: str = "acme",
    workflow: str = "gong-ingest",
    success: bool = True,
    logged: bool = False,
    batch: list[ApiCost] | None = None,
) -> ApiCost:
    """The cost row, saved (or appended to `batch`, to be saved with it)."""
    row = ApiCost(
        service=service,
        cost=Decimal(amount),
        instance=inst,
        workflow_type=inst.workflow if inst else workflow,
        step_name=step,
        model=model,
        success=success,
        tokens_in=100,
        tokens_out=10,
        tenant=inst.tenant if inst else tenant,
        created_at=at,
    )
    if batch is not None:
        assert not logged
        batch.append(row)
        return row
    row.save()
    if logged and inst is not None:
        history(inst, "cost.recorded", at, cost_id=row.id)
    return row


def ledger(now: datetime, *, seed: int = 7, n: int = 70) -> None:
    """Instances over the last ~50 hours (the newest in the hour not closed yet), four tenants, two
    workflows; steps in every status with retries and spread durations; costs per step, a few
    without an instance; one instance whose spend spans two days. Steps and costs are inserted
    together at the end, in the order they were made."""
    rng = random.Random(seed)
    steps: list[Step] = []
    costs: list[ApiCost] = []
    for k in range(n):
        tenant = rng.choice(["acme", "acme", "globex", "default", "initech"])
        created = now - timedelta(minutes=rng.randint(2, 50 * 60))
        inst = make_instance(f"rl-{seed}-{k}", tenant=tenant, workflow=rng.choice(WORKFLOWS), created_at=created)
        at = created
        for p, (name, service, model) in enumerate(STEPS, start=1):
            at += timedelta(minutes=rng.choice([0, 1, 7, 25]))
            if at >= now:
                break
            status = rng.choices(["complete", "errored", "running", "sleeping", "waiting"], [70, 8, 10, 6, 6])[0]
            add_step(
                inst,
                name,
                started=at,
                status=status,
                ms=rng.lognormvariate(6, 1.5),
                attempts=rng.choice([1, 1, 1, 2, 3]),
                position=p,
                batch=steps,
            )
            if rng.random() < 0.85:
                add_cost(
                    inst,
                    at=at + timedelta(seconds=rng.randint(0, 90)),
                    service=service,
                    step=name,
                    model=model,
                    amount=f"{rng.randint(1, 90000) / 1e6:.6f}",
                    success=rng.random() > 0.1,
                    batch=costs,
                )
    for _ in range(6):  # spend recorded outside any instance
        add_cost(
            None,
            at=now - timedelta(hours=rng.randint(0, 40), minutes=5),
            amount="0.250000",
            tenant=rng.choice(MINE),
            service="slack",
            step="",
            batch=costs,
        )
    tail = make_instance(f"rl-{seed}-tail", tenant="acme", created_at=now - timedelta(seconds=40))
    add_step(tail, "fetch-calls", started=now - timedelta(seconds=30), ms=1500, position=1, batch=steps)
    add_step(
        tail, "llm-extract", started=now - timedelta(seconds=20), status="running", attempts=2, position=2, batch=steps
    )
    add_cost(tail, at=now - timedelta(seconds=25), amount="0.033000", service="gong", step="fetch-calls", batch=costs)
    long = make_instance("rl-long", tenant="acme", created_at=now - timedelta(hours=45))
    add_cost(long, at=now - timedelta(hours=45), amount="1.000000", step="fetch-calls", service="gong", batch=costs)
    add_cost(long, at=now - timedelta(hours=3), amount="2.000000", step="fetch-calls", service="gong", batch=costs)
    Step.objects.bulk_create(steps)
    ApiCost.objects.bulk_create(costs)


def catch_up(now: datetime) -> None:
    while not rollup_catch_up(now=now, max_hours=20).caught_up:
        pass
