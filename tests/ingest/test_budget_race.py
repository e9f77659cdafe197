"""50 steps racing one budget on PostgreSQL, in worker threads: the overspend is exactly 0."""

from __future__ import annotations

import time
from decimal import Decimal

import pytest
from django.db import connection
from django.db.models import Sum

from ingest.engine import Workflow, create
from ingest.engine.models import ApiCost, Budget, BudgetReservation, Instance
from ingest.engine.services import budget_upsert
from ingest.engine.worker import Worker

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


def _close_worker_connections() -> None:
    """The worker's pool threads keep their connections to the test database; end them (only
    sessions of this test database) so it can be dropped at teardown."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                       "WHERE datname = current_database() AND pid <> pg_backend_pid()")


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
        worker.stop(timeout=30)
        _close_worker_connections()
    budget = Budget.objects.get(scope="tenant", key="race")
    spent = ApiCost.objects.filter(tenant="race").aggregate(total=Sum("cost"))["total"]
    statuses = list(Instance.objects.filter(tenant="race").values_list("status", "error_name"))
    assert statuses.count(("complete", "")) == int(LIMIT / PRICE)
    assert statuses.count(("errored", "BudgetExceeded")) == STEPS - int(LIMIT / PRICE)
    assert budget.spent == spent == LIMIT  # overspend: exactly 0
    assert budget.reserved == 0
    assert not BudgetReservation.objects.filter(state="held").exists()
