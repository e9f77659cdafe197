"""50 steps racing one budget on PostgreSQL, in worker threads: the overspend is exactly 0."""

from __future__ import annotations

import time
from decimal import Decimal

import pytest
from django.db.models import Sum

from ingest.engine import Workflow, create
from ingest.engine.models import ApiCost, Budget, BudgetReservation, Instance
from ingest.engine.services.budgets import budget_upsert
from ingest.engine.worker.loop import Worker

pytestmark = [pytest.mark.postgres, pytest.mark.db]
STEPS = 50
PRICE = Decimal("1.000000")
LIMIT = Decimal("10.000000")


class BudgetRace(Workflow):
    name = "t-ingest-budget-race"

    def run(self, event, step):
        return step.do("llm-extract", spend, retries={"limit": 0})


def spend(ctx) -> str:
    ctx.check_budget("openai", PRICE)
    time.sleep(0.3)  # every admitted step holds its reservation while the others check
    ctx.track_cost("openai", cost=PRICE, tokens_in=1000)
    return "spent"


@pytest.mark.django_db(transaction=True)
def test_fifty_concurrent_steps_cannot_overspend_one_budget(require_postgres: None) -> None:
    budget_upsert(scope="tenant", key="race", period="day", limit=LIMIT, policy="fail")
    for n in range(STEPS):
        create("t-ingest-budget-race", id=f"race-{n}", tenant="race")
    worker = Worker(concurrency=STEPS, poll_seconds=0.05).start()
    try:
        deadline = time.monotonic() + 120
        while Instance.objects.filter(tenant="race", status__in=["complete", "errored"]).count() < STEPS:
            assert time.monotonic() < deadline, "the race did not finish in 2 minutes"
            time.sleep(0.1)
    finally:
        # The worker's pool threads keep their connections; the suite's teardown drops the test
        # database with its sessions, so no test ends sessions that later tests' engine uses.
        worker.stop(timeout=30)
    budget = Budget.objects.get(scope="tenant", key="race")
    spent = ApiCost.objects.filter(tenant="race").aggregate(total=Sum("cost"))["total"]
    statuses = list(Instance.objects.filter(tenant="race").values_list("status", "error_name"))
    assert statuses.count(("complete", "")) == int(LIMIT / PRICE)
    assert statuses.count(("errored", "BudgetExceeded")) == STEPS - int(LIMIT / PRICE)
    assert budget.spent == spent == LIMIT  # overspend: exactly 0
    assert budget.reserved == 0
    assert not BudgetReservation.objects.filter(state="held").exists()


RECORDERS = 24


@pytest.mark.django_db(transaction=True)
def test_costs_recorded_at_once_on_three_shared_budgets_add_up_without_deadlock(require_postgres: None) -> None:
    """Each recording locks every budget it charges; 24 threads charging the same three budgets
    (tenant, workflow, service), each after its own reservation, must neither deadlock nor
    lose an update, and each settles exactly its own holds."""
    import threading

    from django.db import connections

    from ingest.engine.models import History
    from ingest.engine.runtime.context import StepContext

    for scope, key in (("tenant", "race"), ("workflow", "t-ingest-budget-race"), ("service", "openai")):
        budget_upsert(scope=scope, key=key, period="day", limit="1000", policy="fail")
    for n in range(RECORDERS):
        create("t-ingest-budget-race", id=f"rec-{n}", tenant="race")
    start, errors = threading.Barrier(RECORDERS), []

    def record(n: int) -> None:
        try:
            ctx = StepContext(
                name="llm-extract",
                count=1,
                attempt=1,
                config={},
                idempotency_key=f"rec-{n}",
                instance_id=f"rec-{n}",
                workflow="t-ingest-budget-race",
                tenant="race",
                step_label="llm-extract",
            )
            ctx.check_budget("openai", Decimal("2.5"))
            start.wait(timeout=30)
            ctx.track_cost("openai", cost=Decimal(n) / 100, tokens_in=1000 + n)
            assert ctx._reservations == []
        except Exception as error:  # noqa: BLE001 - reported below
            errors.append(error)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=record, args=(n,)) for n in range(RECORDERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert errors == []
    total = sum(Decimal(n) / 100 for n in range(RECORDERS))
    assert {b.key: (b.spent, b.reserved) for b in Budget.objects.all()} == {
        key: (total, Decimal(0)) for key in ("race", "t-ingest-budget-race", "openai")
    }
    assert set(BudgetReservation.objects.values_list("state", flat=True)) == {"settled"}
    assert BudgetReservation.objects.filter(actual=Decimal("0.23"), instance_id="rec-23").count() == 3
    costs = {c.instance_id: c for c in ApiCost.objects.filter(tenant="race")}
    assert (costs["rec-7"].cost, costs["rec-7"].tokens_in, costs["rec-7"].step_name) == (
        Decimal("0.07"),
        1007,
        "llm-extract",
    )
    recorded = {h.instance_id: h.data for h in History.objects.filter(tenant="race", kind="cost.recorded")}
    assert recorded["rec-7"] == {
        "service": "openai",
        "cost": "0.070000",
        "model": "",
        "attempt": 1,
        "success": True,
        "cost_id": costs["rec-7"].id,
    }
