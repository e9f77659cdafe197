"""Money held for an attempt that can no longer finish is given back: its lease is gone (its
worker died, stalled or was fenced off) or its instance has ended. Held money of a living
attempt stays held."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest

from ingest.engine import Workflow, create
from ingest.engine.clock import now
from ingest.engine.costs.budgets import budget_reserve, reservations_release_orphaned
from ingest.engine.models import Budget, BudgetReservation, Instance, Status
from ingest.engine.periods import period_start
from ingest.engine.runtime.context import StepContext

pytestmark = [pytest.mark.db, pytest.mark.django_db(transaction=True)]


class Idle(Workflow):
    name = "t-fault-idle"

    def run(self, event, step):
        return None


@pytest.fixture
def budget() -> Budget:
    t = now()
    return Budget.objects.create(
        scope="service",
        key="t-llm",
        period="day",
        limit=Decimal("100"),
        period_start=period_start("day", t),
        updated_at=t,
    )


def held_by(instance_id: str, *, lease: timedelta | None, status: str = Status.RUNNING) -> list[int]:
    """An instance in `status` whose worker holds a lease for `lease` more (None: no lease, a
    negative one: expired), with 2.5 held for an attempt of its step 'call'."""
    create("t-fault-idle", id=instance_id)
    t = now()
    Instance.objects.filter(id=instance_id).update(
        status=status,
        lease_owner="" if lease is None else "host:1:abc",
        lease_token="" if lease is None else "t0",
        lease_expires_at=None if lease is None else t + lease,
    )
    ctx = StepContext(
        name="call",
        count=1,
        attempt=1,
        config={},
        idempotency_key=f"{instance_id}:call:1",
        instance_id=instance_id,
        workflow="t-fault-idle",
        tenant="default",
        step_label="call",
    )
    return budget_reserve(ctx=ctx, service="t-llm", amount=Decimal("2.5"))


def states(ids: list[int]) -> list[str]:
    return list(BudgetReservation.objects.filter(id__in=ids).order_by("id").values_list("state", flat=True))


def test_money_held_under_an_expired_lease_is_released(budget):
    ids = held_by("res-expired", lease=timedelta(seconds=-1))
    assert states(ids) == ["held"]
    assert reservations_release_orphaned(now=now()) == 1
    assert states(ids) == ["released"]
    budget.refresh_from_db()
    assert budget.reserved == 0 and budget.spent == 0


def test_money_held_for_an_ended_instance_is_released(budget):
    ids = held_by("res-ended", lease=None, status=Status.TERMINATED)
    assert reservations_release_orphaned(now=now()) == 1
    assert states(ids) == ["released"]


def test_money_held_by_a_living_attempt_stays_held(budget):
    ids = held_by("res-live", lease=timedelta(seconds=30))
    expired = held_by("res-gone", lease=timedelta(seconds=-1))
    assert reservations_release_orphaned(now=now()) == 1
    assert states(ids) == ["held"] and states(expired) == ["released"]
    budget.refresh_from_db()
    assert budget.reserved == Decimal("2.5")


def test_settled_money_is_left_alone(budget):
    ids = held_by("res-settled", lease=timedelta(seconds=-1))
    BudgetReservation.objects.filter(id__in=ids).update(state="settled", actual=Decimal("1"))
    assert reservations_release_orphaned(now=now()) == 0
    assert states(ids) == ["settled"]
    budget.refresh_from_db()
    assert budget.reserved == Decimal("2.5")  # settling's own bookkeeping, untouched here
