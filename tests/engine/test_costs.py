"""Costs per attempt, budget reservations, breaches and their approvals, human approvals."""

from __future__ import annotations

import threading
import time
from decimal import Decimal

import pytest

from ingest.engine import BudgetExceeded, Workflow, create
from ingest.engine.costs.budgets import BudgetHeld
from ingest.engine.errors import ApprovalError
from ingest.engine.models import ApiCost, ApprovalRequest, Budget, BudgetReservation, History
from ingest.engine.services import approvals, budgets

pytestmark = pytest.mark.db
PLAN: dict[str, list[str]] = {}


class Spender(Workflow):
    name = "t-spender"

    def run(self, event, step):
        def call_llm(ctx):
            ctx.check_budget("openai", Decimal(event.payload.get("estimate", "0.01")))
            outcome = PLAN.get(event.instance_id, ["ok"]).pop(0) if PLAN.get(event.instance_id) else "ok"
            ctx.track_cost(
                "openai",
                cost=event.payload.get("cost", "0.01"),
                model="gpt-4o-mini",
                tokens_in=1000,
                tokens_out=200,
                success=outcome == "ok",
            )
            if outcome != "ok":
                raise ConnectionError("llm answered 503 after charging")
            return "facts"

        return step.do("llm-extract", call_llm, retries={"limit": 3, "delay": "5 seconds"})


@pytest.fixture(autouse=True)
def _plan():
    PLAN.clear()


@pytest.mark.django_db
def test_every_attempt_records_its_cost_even_when_it_fails_after_spending(drain):
    PLAN["c-1"] = ["fail", "fail", "ok"]
    h = create("t-spender", id="c-1", tenant="acme")
    drain(advance_clock=True)
    assert h.status()["status"] == "complete"
    rows = list(
        ApiCost.objects.filter(instance_id="c-1")
        .order_by("attempt")
        .values_list("attempt", "success", "cost", "tenant")
    )
    assert rows == [
        (1, False, Decimal("0.01"), "acme"),
        (2, False, Decimal("0.01"), "acme"),
        (3, True, Decimal("0.01"), "acme"),
    ]
    assert History.objects.filter(instance_id="c-1", kind="cost.recorded").count() == 3


@pytest.mark.django_db
def test_a_reservation_is_settled_with_the_real_cost(drain):
    budgets.budget_upsert(scope="tenant", key="acme", period="day", limit="1.00", actor="ana")
    create("t-spender", id="c-2", tenant="acme", params={"estimate": "0.05", "cost": "0.02"})
    drain()
    budget = Budget.objects.get(key="acme")
    assert (budget.spent, budget.reserved) == (Decimal("0.02"), Decimal("0"))
    assert list(BudgetReservation.objects.values_list("amount", "actual", "state")) == [
        (Decimal("0.05"), Decimal("0.02"), "settled")
    ]


@pytest.mark.django_db
def test_a_breach_with_the_fail_policy_fails_the_step_without_retrying(drain):
    budgets.budget_upsert(scope="service", key="openai", period="hour", limit="0.015", actor="ana")
    create("t-spender", id="c-3")
    create("t-spender", id="c-4")
    drain(advance_clock=True)
    statuses = dict(Budget.objects.values_list("key", "spent"))
    assert statuses == {"openai": Decimal("0.01")}
    from ingest.engine.models import Instance

    errored = Instance.objects.get(status="errored")
    assert errored.error_name == "BudgetExceeded"
    assert "budget service:openai (hour) has 0.015000" in errored.error_message
    assert ApiCost.objects.filter(instance_id=errored.id).count() == 0  # refused before spending


@pytest.mark.django_db
def test_a_breach_with_the_approval_policy_pauses_until_an_operator_grants_it(drain):
    budgets.budget_upsert(scope="tenant", key="globex", period="day", limit="0.01", policy="approval", actor="ana")
    create("t-spender", id="c-5", tenant="globex")
    create("t-spender", id="c-6", tenant="globex")
    drain()
    from ingest.engine.models import Instance

    paused = Instance.objects.get(status="paused")
    request = ApprovalRequest.objects.get(instance_id=paused.id)
    assert (request.kind, request.state, request.requested_amount) == ("budget", "pending", Decimal("0.01"))
    approvals.approval_answer(approval_id=request.id, approved=True, values={"amount": "0.01"}, actor="ana")
    drain(advance_clock=True)
    assert Instance.objects.get(id=paused.id).status == "complete"
    budget = Budget.objects.get(key="globex")
    assert (budget.spent, budget.limit) == (Decimal("0.02"), Decimal("0.02"))  # raised once, by the grant
    with pytest.raises(ApprovalError, match="already approved by ana"):
        approvals.approval_answer(approval_id=request.id, approved=False, actor="bo")


@pytest.mark.django_db
def test_a_denied_budget_approval_errors_the_instance(drain):
    budgets.budget_upsert(scope="instance", key="c-7", period="month", limit="0", policy="approval", actor="ana")
    create("t-spender", id="c-7")
    drain()
    request = ApprovalRequest.objects.get(instance_id="c-7")
    approvals.approval_answer(approval_id=request.id, approved=False, comment="not worth it", actor="ana")
    drain(advance_clock=True)
    from ingest.engine.models import Instance

    inst = Instance.objects.get(id="c-7")
    assert inst.status == "errored" and inst.error_name == "BudgetExceeded" and "denied" in inst.error_message


@pytest.mark.django_db(transaction=True)
def test_fifty_concurrent_steps_cannot_overspend_a_budget_together():
    from ingest.engine.runtime.context import StepContext

    budgets.budget_upsert(scope="service", key="dataforseo", period="day", limit="0.25", actor="ana")
    from ingest.engine import create_batch

    create_batch("t-spender", [{"id": f"i{i}", "tenant": "acme"} for i in range(50)])
    outcomes: list[str] = []

    def spend(i: int) -> None:
        from django.db import connection

        ctx = StepContext(
            name="fetch",
            count=1,
            attempt=1,
            config={},
            idempotency_key=f"k{i}",
            instance_id=f"i{i}",
            workflow="t-spender",
            tenant="acme",
            step_label="fetch",
        )
        try:
            while True:
                try:
                    ctx.check_budget("dataforseo", Decimal("0.01"))
                except BudgetHeld:  # refused for the others' holds: tried again, as the engine does
                    time.sleep(0.01)
                    continue
                ctx.track_cost("dataforseo", cost=Decimal("0.01"))
                outcomes.append("spent")
                break
        except BudgetExceeded:
            outcomes.append("refused")
        finally:
            connection.close()

    threads = [threading.Thread(target=spend, args=(i,)) for i in range(50)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    budget = Budget.objects.get(key="dataforseo")
    assert outcomes.count("spent") == 25 and outcomes.count("refused") == 25
    assert budget.spent == Decimal("0.25") and budget.reserved == Decimal("0")
    assert sum(ApiCost.objects.values_list("cost", flat=True)) == Decimal("0.25")


class Approve(Workflow):
    name = "t-approve"

    def run(self, event, step):
        answer = step.wait_for_approval(
            "manager-approval",
            title="Spend $500 on ads?",
            timeout="2 hours",
            fields=[{"name": "amount", "type": "number", "required": True}],
        )
        return answer


@pytest.mark.django_db
def test_a_human_approval_sends_the_answer_to_the_waiting_instance_once(drain):
    h = create("t-approve", id="a-1")
    drain()
    request = ApprovalRequest.objects.get(instance_id="a-1")
    assert (request.kind, request.state, request.title) == ("human", "pending", "Spend $500 on ads?")
    approvals.approval_answer(approval_id=request.id, approved=True, values={"amount": 450}, comment="ok", actor="ana")
    drain()
    assert h.status()["output"] == {"approved": True, "values": {"amount": 450}, "comment": "ok", "by": "ana"}
    with pytest.raises(ApprovalError, match="already approved"):
        approvals.approval_answer(approval_id=request.id, approved=False, actor="bo")


@pytest.mark.django_db
def test_an_expired_approval_refuses_its_answer_and_stays_expired(drain):
    from datetime import timedelta

    from ingest.engine.clock import clock

    h = create("t-approve", id="a-2")
    drain()
    request = ApprovalRequest.objects.get(instance_id="a-2")
    clock.advance(timedelta(hours=3))
    with pytest.raises(ApprovalError, match="expired"):
        approvals.approval_answer(approval_id=request.id, approved=True, actor="ana")
    request.refresh_from_db()
    assert request.state == "expired"
    drain()
    assert h.status()["error"]["name"] == "WaitForEventTimeout"


def _ctx(instance_id: str, *, tenant: str = "acme", label: str = "llm-extract"):
    from ingest.engine.runtime.context import StepContext

    return StepContext(
        name=label,
        count=1,
        attempt=1,
        config={},
        idempotency_key=f"{instance_id}:{label}",
        instance_id=instance_id,
        workflow="t-spender",
        tenant=tenant,
        step_label=label,
    )


@pytest.mark.django_db
def test_every_covering_budget_holds_the_estimate_and_is_settled_with_the_real_cost():
    budgets.budget_upsert(scope="tenant", key="acme", period="day", limit="1.00", actor="ana")
    budgets.budget_upsert(scope="service", key="openai", period="month", limit="5.00", actor="ana")
    budgets.budget_upsert(scope="tenant", key="globex", period="day", limit="1.00", actor="ana")  # not covering
    create("t-spender", id="c-8", tenant="acme")
    ctx = _ctx("c-8")
    ctx.check_budget("openai", Decimal("0.30"))
    held = dict(Budget.objects.values_list("key", "reserved"))
    assert held == {"acme": Decimal("0.30"), "openai": Decimal("0.30"), "globex": Decimal("0")}
    assert BudgetReservation.objects.filter(state="held").count() == 2
    ctx.track_cost("openai", cost="0.12")
    rows = {b.key: (b.spent, b.reserved) for b in Budget.objects.all()}
    assert rows == {
        "acme": (Decimal("0.12"), Decimal("0")),
        "openai": (Decimal("0.12"), Decimal("0")),
        "globex": (Decimal("0"), Decimal("0")),
    }
    assert sorted(BudgetReservation.objects.values_list("state", "actual")) == [
        ("settled", Decimal("0.12")),
        ("settled", Decimal("0.12")),
    ]
    assert ctx._reservations == []


@pytest.mark.django_db
def test_a_spend_without_a_covering_budget_holds_nothing_but_a_budget_created_before_the_cost_is_charged():
    create("t-spender", id="c-9", tenant="acme")
    ctx = _ctx("c-9")
    ctx.check_budget("openai", Decimal("0.30"))
    assert ctx._reservations == [] and not BudgetReservation.objects.exists()
    budgets.budget_upsert(scope="tenant", key="acme", period="day", limit="1.00", actor="ana")
    ctx.track_cost("openai", cost="0.07")
    budget = Budget.objects.get(key="acme")
    assert (budget.spent, budget.reserved) == (Decimal("0.07"), Decimal("0"))


@pytest.mark.django_db
def test_a_new_period_starts_from_nothing_spent_while_held_money_stays_held():
    from datetime import UTC, datetime, timedelta

    from ingest.engine.clock import clock

    clock.freeze(datetime(2026, 3, 9, 22, 0, tzinfo=UTC))
    budgets.budget_upsert(scope="tenant", key="acme", period="day", limit="1.00", actor="ana")
    for i in ("c-10", "c-11", "c-12"):
        create("t-spender", id=i, tenant="acme")
    first, waiting, next_day = _ctx("c-10"), _ctx("c-11"), _ctx("c-12")
    first.check_budget("openai", Decimal("0.30"))
    first.track_cost("openai", cost="0.25")
    waiting.check_budget("openai", Decimal("0.50"))
    with pytest.raises(BudgetHeld):  # 0.25 spent + 0.50 held + 0.40 is over today's 1.00: it waits for the hold
        _ctx("c-12", label="early").check_budget("openai", Decimal("0.40"))
    with pytest.raises(BudgetExceeded):  # 0.25 spent + 0.80 is over, whatever is held
        _ctx("c-12", label="early").check_budget("openai", Decimal("0.80"))
    clock.advance(timedelta(hours=3))
    next_day.check_budget("openai", Decimal("0.40"))  # a new day: nothing spent, 0.50 still held
    budget = Budget.objects.get(key="acme")
    assert (budget.period_start, budget.spent, budget.reserved) == (
        datetime(2026, 3, 10, tzinfo=UTC),
        Decimal("0"),
        Decimal("0.90"),
    )
    waiting.track_cost("openai", cost="0.45")
    next_day.track_cost("openai", cost="0.10")
    budget.refresh_from_db()
    assert (budget.spent, budget.reserved) == (Decimal("0.55"), Decimal("0"))


@pytest.mark.django_db
def test_an_attempt_that_fails_before_spending_gives_its_holds_back():
    from ingest.engine.costs.budgets import reservations_release

    budgets.budget_upsert(scope="tenant", key="acme", period="day", limit="1.00", actor="ana")
    budgets.budget_upsert(scope="service", key="openai", period="day", limit="1.00", actor="ana")
    create("t-spender", id="c-13", tenant="acme")
    ctx = _ctx("c-13")
    ctx.check_budget("openai", Decimal("0.30"))
    ctx.check_budget("openai", Decimal("0.20"))
    assert set(Budget.objects.values_list("reserved", flat=True)) == {Decimal("0.50")}
    reservations_release(ids=ctx._reservations)
    assert set(Budget.objects.values_list("reserved", flat=True)) == {Decimal("0")}
    assert set(BudgetReservation.objects.values_list("state", flat=True)) == {"released"}


@pytest.mark.django_db
def test_a_hold_on_a_budget_disabled_before_the_cost_is_recorded_is_given_back():
    budgets.budget_upsert(scope="tenant", key="acme", period="day", limit="1.00", actor="ana")
    create("t-spender", id="c-14", tenant="acme")
    ctx = _ctx("c-14")
    ctx.check_budget("openai", Decimal("0.30"))
    budgets.budget_upsert(scope="tenant", key="acme", period="day", limit="1.00", enabled=False, actor="ana")
    ctx.track_cost("openai", cost="0.25")
    budget = Budget.objects.get(key="acme")
    assert (budget.spent, budget.reserved) == (Decimal("0"), Decimal("0"))  # not charged, nothing left held
    assert ctx._reservations == []
