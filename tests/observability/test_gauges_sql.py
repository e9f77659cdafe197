"""The scrape's one-statement read of the gauges (PostgreSQL) gives exactly the figures the
query-by-query read gives, on a ledger holding every kind of state a gauge counts."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

from dashboard.observability import gauges
from dashboard.observability.models import IngressTally
from ingest.engine import create
from ingest.engine.models import Budget, History, Instance
from ingest.engine.worker.turns import run_until_idle
from ingest.triggers.models import Route

pytestmark = [pytest.mark.db, pytest.mark.usefixtures("require_postgres")]


@pytest.fixture
def busy(db: object) -> None:
    now = timezone.now()
    for i in range(12):
        create("obs-napper", id=f"nap-{i}", tenant="acme")
        create("obs-waiter", id=f"wait-{i}", tenant="globex")
    for i in range(5):
        create("obs-backing-off", id=f"back-{i}", tenant="acme")
        create("obs-broken", id=f"broken-{i}", tenant="initech")
    create("obs-flaky", id="flaky-done", tenant="acme")
    run_until_idle()
    for i in range(3):
        create("obs-flaky", id=f"due-{i}", tenant="acme")
    Instance.objects.filter(id="due-0").update(ready_at=now - timedelta(seconds=90))
    Instance.objects.filter(id="due-1").update(lease_owner="host-a:1", lease_token="t",
                                               lease_expires_at=now + timedelta(seconds=30))
    Instance.objects.filter(id="due-2").update(lease_owner="host-b:2", lease_token="t",
                                               lease_expires_at=now - timedelta(seconds=5))  # expired: runnable
    History.objects.create(instance_id="due-1", workflow="obs-flaky", tenant="acme", kind="instance.status",
                           status="running", created_at=now - timedelta(minutes=3))
    Budget.objects.create(scope="tenant", key="acme", period="month", limit=Decimal("10"), spent=Decimal("2.5"),
                          period_start=now.replace(day=1, hour=0, minute=0, second=0, microsecond=0), updated_at=now)
    Budget.objects.create(scope="service", key="openai", period="hour", limit=Decimal("1"), spent=Decimal("0.9"),
                          period_start=now - timedelta(hours=3), updated_at=now)
    Budget.objects.create(scope="instance", key="nap-1", period="day", limit=Decimal("1"), spent=Decimal("0.5"),
                          period_start=now, updated_at=now)
    Budget.objects.create(scope="workflow", key="obs-flaky", period="day", limit=Decimal("0"), spent=Decimal("0"),
                          period_start=now, updated_at=now, enabled=False)
    Route.objects.create(name="signup", workflow="obs-flaky", tenant="acme")
    IngressTally.objects.create(route="signup", status=202, n=7)
    IngressTally.objects.create(route="gone-route", status=401, n=2)
    IngressTally.objects.create(route="hooks/gong", status=404, n=1)


def test_the_one_statement_read_equals_the_query_by_query_read(busy: None) -> None:
    now = timezone.now()
    one, each = gauges.ledger_read_one_statement(now=now), gauges.ledger_read_by_query(now=now)
    assert one == each
    # And it holds what the fixture made, so the comparison compared something.
    assert one.active[("obs-napper", "waiting")] == 12 and one.sleeping == {"obs-napper": 12}
    assert one.waiting_event == {"obs-waiter": 12} and one.backing_off == {"obs-backing-off": 5}
    assert one.backlog == {"obs-flaky": 2} and one.oldest_ready_at is not None
    assert one.dead_letters == {"obs-broken": 5} and one.slots == {"host-a:1": 1}
    assert one.last_claim_at is not None
    assert one.budgets == {("tenant", "acme", "month"): 0.25, ("service", "openai", "hour"): 0.0}
    assert one.ingress == {("signup", "202"): 7, ("unknown", "401"): 2, ("hooks/gong", "404"): 1}


def test_past_the_exact_limit_both_reads_probe_the_same_sample(busy: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gauges, "PARKED_EXACT", 7)  # 29 waiting: every 5th is probed
    now = timezone.now()
    one, each = gauges.ledger_read_one_statement(now=now), gauges.ledger_read_by_query(now=now)
    assert (one.sleeping, one.waiting_event, one.backing_off) == (each.sleeping, each.waiting_event, each.backing_off)
    assert one == each


def test_an_empty_ledger_reads_as_nothing(db: object) -> None:
    now = timezone.now()
    one = gauges.ledger_read_one_statement(now=now)
    assert one == gauges.ledger_read_by_query(now=now) == gauges.Ledger()
