"""A step refused only because other steps hold money waits for those holds and tries again;
it fails (policy "fail") only when what is spent, and what it holds itself, leave no room."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest

from ingest.engine import BudgetExceeded, Workflow, create
from ingest.engine.clock import clock
from ingest.engine.costs.budgets import (
    HOLD_WAIT,
    BudgetHeld,
    refusal,
    reservations_release_orphaned,
)
from ingest.engine.models import Attempt, Budget, History, Instance, Step
from ingest.engine.runtime.context import StepContext
from ingest.engine.services.budgets import budget_upsert

D = Decimal


class Spend(Workflow):
    """One paid call, with no retry to spare: a wait that spent a retry would fail it."""

    name = "t-hold-spend"

    def run(self, event, step):
        def call(ctx):
            ctx.check_budget("openai", D(event.payload["estimate"]))
            ctx.track_cost("openai", cost=event.payload["cost"])
            return "spent"

        return step.do("llm-extract", call, retries={"limit": 0})


class Idle(Workflow):
    name = "t-hold-idle"

    def run(self, event, step):
        return None


def in_flight(instance_id: str, amount: str) -> StepContext:
    """A step of another instance, in flight under a live lease: it holds `amount` and has not
    recorded its cost."""
    create("t-hold-idle", id=instance_id, tenant="acme")
    Instance.objects.filter(id=instance_id).update(
        status="running",
        lease_owner="host:1:abc",
        lease_token="t0",
        lease_expires_at=clock.now() + timedelta(seconds=30),
    )
    ctx = StepContext(
        name="llm-extract",
        count=1,
        attempt=1,
        config={},
        idempotency_key=f"{instance_id}:x",
        instance_id=instance_id,
        workflow="t-hold-idle",
        tenant="acme",
        step_label="llm-extract",
    )
    ctx.check_budget("openai", D(amount))
    return ctx


def budget() -> tuple[Decimal, Decimal]:
    b = Budget.objects.get(key="acme")
    return b.spent, b.reserved


@pytest.mark.pure
@pytest.mark.parametrize(
    ("spent", "reserved", "own", "amount", "answer"),
    [
        ("2", "3", "0", "5", None),  # exactly at the limit: fits
        ("2", "5", "0", "5", "held"),  # 2 + 5 fits 10 once the others' 5 settle
        ("2", "5", "2", "5", "held"),  # its own 2 held: 2 + 2 + 5 still fits
        ("2", "5", "4", "5", "over"),  # its own 4 held: 2 + 4 + 5 does not, whatever the others do
        ("6", "0", "0", "5", "over"),  # what is spent leaves no room
        ("6", "4", "0", "5", "over"),
    ],
)
def test_a_refusal_is_held_only_when_settling_the_others_holds_would_make_room(spent, reserved, own, amount, answer):
    assert refusal(spent=D(spent), reserved=D(reserved), own_held=D(own), amount=D(amount), limit=D("10")) == answer


@pytest.mark.pure
def test_the_wait_for_holds_starts_short_and_is_capped():
    assert [HOLD_WAIT.delay(n) for n in (1, 2, 3, 4, 5, 9)] == [0.5, 1.0, 2.0, 4.0, 5.0, 5.0]


@pytest.mark.db
@pytest.mark.django_db
def test_a_step_refused_only_for_holds_waits_without_spending_a_retry_and_runs_once_they_settle(
    drain,
):
    budget_upsert(scope="tenant", key="acme", period="day", limit="1.00", policy="fail", actor="ana")
    clock.freeze()
    holder = in_flight("hold-1", "0.70")
    create("t-hold-spend", id="wait-1", tenant="acme", params={"estimate": "0.50", "cost": "0.40"})
    drain()  # due now only: the step tries, is refused for the 0.70 held, and waits
    step = Step.objects.get(instance_id="wait-1", name="llm-extract")
    assert Instance.objects.get(id="wait-1").status == "waiting"  # as for a retry's delay
    assert (step.status, step.attempts, step.error_name) == ("running", 1, "BudgetHeld")
    assert step.wake_at == clock.now() + timedelta(seconds=0.5)
    assert "0.700000 held by steps in flight" in step.error_message
    assert budget() == (D("0"), D("0.70"))  # the waiting step holds nothing
    clock.advance(timedelta(seconds=0.5))
    drain()  # still held: it waits again, a little longer
    step.refresh_from_db()
    assert (step.attempts, step.wake_at) == (2, clock.now() + timedelta(seconds=1))
    holder.track_cost("openai", cost="0.45")  # settles for less than it held: 0.45 + 0.50 fits
    drain(advance_clock=True)
    assert Instance.objects.get(id="wait-1").status == "complete"
    assert budget() == (D("0.85"), D("0"))
    assert list(
        Attempt.objects.filter(step__instance_id="wait-1").order_by("number").values_list("error_name", flat=True)
    ) == ["BudgetHeld", "BudgetHeld", ""]
    assert History.objects.filter(instance_id="wait-1", kind="budget").count() == 0  # no breach was recorded


@pytest.mark.db
@pytest.mark.django_db
def test_a_waiting_step_fails_once_what_is_spent_leaves_no_room(drain):
    budget_upsert(scope="tenant", key="acme", period="day", limit="1.00", policy="fail", actor="ana")
    clock.freeze()
    holder = in_flight("hold-2", "0.70")
    create("t-hold-spend", id="wait-2", tenant="acme", params={"estimate": "0.50", "cost": "0.40"})
    drain()
    assert Step.objects.get(instance_id="wait-2").error_name == "BudgetHeld"
    holder.track_cost("openai", cost="0.70")  # spent in full: 0.70 + 0.50 is over 1.00
    drain(advance_clock=True)
    inst = Instance.objects.get(id="wait-2")
    assert (inst.status, inst.error_name) == ("errored", "BudgetExceeded")
    assert "0.700000 spent and 0 held" in inst.error_message.replace("0.000000 held", "0 held")
    assert budget() == (D("0.70"), D("0"))


@pytest.mark.db
@pytest.mark.django_db
def test_holds_of_a_worker_that_died_are_waited_for_and_then_given_back(drain):
    budget_upsert(scope="tenant", key="acme", period="day", limit="1.00", policy="fail", actor="ana")
    clock.freeze()
    in_flight("hold-3", "0.90")  # its worker dies: the lease is not renewed
    create("t-hold-spend", id="wait-3", tenant="acme", params={"estimate": "0.50", "cost": "0.40"})
    drain()
    assert Step.objects.get(instance_id="wait-3").error_name == "BudgetHeld"
    clock.advance(timedelta(seconds=31))  # past the dead worker's lease: the sweep gives its hold back
    assert reservations_release_orphaned(now=clock.now()) == 1
    drain(advance_clock=True)
    assert Instance.objects.get(id="wait-3").status == "complete"
    assert budget() == (D("0.40"), D("0"))


@pytest.mark.db
@pytest.mark.django_db
def test_an_attempts_own_holds_count_as_spent_so_it_fails_instead_of_waiting_on_itself():
    budget_upsert(scope="tenant", key="acme", period="day", limit="1.00", policy="fail", actor="ana")
    create("t-hold-spend", id="self-1", tenant="acme", params={"estimate": "0", "cost": "0"})
    create("t-hold-spend", id="other-1", tenant="acme", params={"estimate": "0", "cost": "0"})
    ctx = StepContext(
        name="llm-extract",
        count=1,
        attempt=1,
        config={},
        idempotency_key="self-1:x",
        instance_id="self-1",
        workflow="t-hold-spend",
        tenant="acme",
        step_label="llm-extract",
    )
    other = StepContext(
        name="llm-extract",
        count=1,
        attempt=1,
        config={},
        idempotency_key="other-1:x",
        instance_id="other-1",
        workflow="t-hold-spend",
        tenant="acme",
        step_label="llm-extract",
    )
    ctx.check_budget("openai", D("0.60"))
    other.check_budget("openai", D("0.30"))
    with pytest.raises(BudgetHeld):  # 0.60 own + 0.30 fits; the other's 0.30 is in the way
        ctx.check_budget("openai", D("0.30"))
    with pytest.raises(BudgetExceeded):  # 0.60 own + 0.50 does not fit, whatever the other does
        ctx.check_budget("openai", D("0.50"))
    assert budget() == (D("0"), D("0.90"))


@pytest.mark.db
@pytest.mark.django_db
def test_an_approval_budget_refused_only_for_holds_waits_instead_of_asking_an_operator(drain):
    from ingest.engine.models import ApprovalRequest

    budget_upsert(scope="tenant", key="acme", period="day", limit="1.00", policy="approval", actor="ana")
    clock.freeze()
    holder = in_flight("hold-4", "0.70")
    create("t-hold-spend", id="wait-4", tenant="acme", params={"estimate": "0.50", "cost": "0.40"})
    drain()
    assert not ApprovalRequest.objects.exists()
    assert Instance.objects.get(id="wait-4").status == "waiting"  # a retry's wait
    holder.track_cost("openai", cost="0.10")
    drain(advance_clock=True)
    assert Instance.objects.get(id="wait-4").status == "complete"
