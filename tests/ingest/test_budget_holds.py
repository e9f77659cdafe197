"""Reserving and settling budget holds, step by step, on both databases: PostgreSQL runs each
in one statement (ingest/engine/sql/budgets.py), SQLite through the ORM; the ledger must not differ."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest

from ingest.engine import BudgetExceeded, Workflow, create
from ingest.engine.clock import clock
from ingest.engine.models import ApiCost, Budget, BudgetGrant, BudgetReservation, History
from ingest.engine.runtime.context import StepContext
from ingest.engine.services.budgets import budget_upsert

pytestmark = [pytest.mark.db, pytest.mark.django_db]


class Holder(Workflow):
    name = "t-ingest-holder"

    def run(self, event, step):
        return None


def ctx_for(instance_id: str, *, attempt: int = 1) -> StepContext:
    return StepContext(
        name="llm-extract",
        count=1,
        attempt=attempt,
        config={},
        idempotency_key=f"{instance_id}:x",
        instance_id=instance_id,
        workflow="t-ingest-holder",
        tenant="acme",
        step_label="llm-extract",
    )


def state(key: str) -> tuple[Decimal, Decimal, Decimal, datetime]:
    b = Budget.objects.get(key=key)
    return b.limit, b.spent, b.reserved, b.period_start


def test_a_spend_without_budgets_holds_nothing_and_records_its_cost_and_history() -> None:
    create("t-ingest-holder", id="h-1", tenant="acme")
    ctx = ctx_for("h-1", attempt=2)
    ctx.check_budget("openai", Decimal("5"))
    assert ctx.track_cost(
        "openai",
        cost="0.123456",
        model="gpt-4o-mini",
        tokens_in=40_000,
        tokens_cached=1000,
        tokens_out=70_000,
        items=3,
        metadata={"key": "call-1", "facts": 4},
        success=False,
    ) == Decimal("0.123456")
    assert not BudgetReservation.objects.exists() and ctx._reservations == []
    cost = ApiCost.objects.get()
    assert (
        cost.service,
        cost.cost,
        cost.instance_id,
        cost.workflow_type,
        cost.step_name,
        cost.attempt,
        cost.success,
        cost.model,
        cost.tokens_in,
        cost.tokens_cached,
        cost.tokens_out,
        cost.items,
        cost.metadata,
        cost.tenant,
    ) == (
        "openai",
        Decimal("0.123456"),
        "h-1",
        "t-ingest-holder",
        "llm-extract",
        2,
        False,
        "gpt-4o-mini",
        40_000,
        1000,
        70_000,
        3,
        {"key": "call-1", "facts": 4},
        "acme",
    )
    history = History.objects.get(kind="cost.recorded")
    assert (history.instance_id, history.workflow, history.tenant, history.step_name, history.data) == (
        "h-1",
        "t-ingest-holder",
        "acme",
        "llm-extract",
        {
            "service": "openai",
            "cost": "0.123456",
            "model": "gpt-4o-mini",
            "attempt": 2,
            "success": False,
            "cost_id": cost.id,
        },
    )


def test_a_breach_in_a_new_period_writes_the_roll_and_holds_nothing() -> None:
    clock.freeze(datetime(2026, 3, 9, 23, 0, tzinfo=UTC))
    budget_upsert(scope="tenant", key="acme", period="day", limit="1.00")
    budget_upsert(scope="workflow", key="t-ingest-holder", period="month", limit="100")
    create("t-ingest-holder", id="h-2", tenant="acme")
    first = ctx_for("h-2")
    first.check_budget("openai", Decimal("0.40"))
    first.track_cost("openai", cost="0.90")
    clock.advance(timedelta(hours=2))  # the next day: the day budget has 0 spent again
    with pytest.raises(BudgetExceeded):
        ctx_for("h-2", attempt=2).check_budget("openai", Decimal("1.50"))
    assert state("acme") == (Decimal("1"), Decimal("0"), Decimal("0"), datetime(2026, 3, 10, tzinfo=UTC))
    assert state("t-ingest-holder")[1:3] == (Decimal("0.90"), Decimal("0"))  # same month: nothing rolled
    assert BudgetReservation.objects.filter(state="held").count() == 0
    breach = History.objects.get(kind="budget", step_name="llm-extract")
    assert (breach.data["budget"], breach.data["amount"], breach.data["spent"], breach.data["limit"]) == (
        Budget.objects.get(key="acme").id,
        "1.500000",
        "0",
        "1.000000",
    )


def test_a_grant_raises_the_limit_once_and_only_when_the_hold_needs_it() -> None:
    budget_upsert(scope="tenant", key="acme", period="day", limit="1.00")
    create("t-ingest-holder", id="h-3", tenant="acme")
    budget = Budget.objects.get(key="acme")
    BudgetGrant.objects.create(
        budget=budget, instance_id="h-3", amount=Decimal("0.50"), granted_by="ana", created_at=clock.now()
    )
    ctx = ctx_for("h-3")
    ctx.check_budget("openai", Decimal("0.30"))  # fits without the grant: the grant stays unused
    assert state("acme")[:3] == (Decimal("1"), Decimal("0"), Decimal("0.30"))
    assert not BudgetGrant.objects.get().used
    ctx.check_budget("openai", Decimal("1.10"))  # 0.30 + 1.10 > 1.00, but within 1.00 + 0.50
    assert state("acme")[:3] == (Decimal("1"), Decimal("0"), Decimal("1.40"))
    assert not BudgetGrant.objects.get().used  # 0.30 held is still within 1.00 - 0.50 (the ORM rule)
    ctx.check_budget("openai", Decimal("0.05"))  # now the grant is claimed: the limit grows once
    assert state("acme")[:3] == (Decimal("1.50"), Decimal("0"), Decimal("1.45"))
    assert BudgetGrant.objects.get().used
    with pytest.raises(BudgetExceeded):
        ctx.check_budget("openai", Decimal("0.10"))
    assert len(ctx._reservations) == 3


def test_recording_settles_this_attempts_holds_for_the_service_and_charges_every_covering_budget() -> None:
    budget_upsert(scope="tenant", key="acme", period="day", limit="10")
    budget_upsert(scope="service", key="openai", period="month", limit="10")
    budget_upsert(scope="service", key="anthropic", period="month", limit="10")
    create("t-ingest-holder", id="h-4", tenant="acme")
    ctx = ctx_for("h-4")
    ctx.check_budget("openai", Decimal("2"))
    ctx.check_budget("anthropic", Decimal("3"))
    ctx.track_cost("openai", cost="0.5")
    assert {k: state(k)[1:3] for k in ("acme", "openai", "anthropic")} == {
        "acme": (Decimal("0.5"), Decimal("3")),
        "openai": (Decimal("0.5"), Decimal("0")),
        "anthropic": (Decimal("0"), Decimal("3")),
    }
    assert sorted(BudgetReservation.objects.values_list("service", "state", "actual")) == [
        ("anthropic", "held", None),
        ("anthropic", "held", None),
        ("openai", "settled", Decimal("0.5")),
        ("openai", "settled", Decimal("0.5")),
    ]
    assert len(ctx._reservations) == 2  # the anthropic holds, settled by its own cost or released
