"""/metrics against a ledger the real engine wrote: every figure checked by value."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from django.test import Client
from django.utils import timezone

from dashboard.observability import ingress, tally
from dashboard.observability.models import MetricTally
from ingest.engine import create
from ingest.engine.models import Budget, Instance
from ingest.engine.worker.turns import run_until_idle
from ingest.triggers.models import Route
from tests.observability.conftest import scrape, value

pytestmark = pytest.mark.db


@pytest.fixture
def ledger(db: object) -> None:
    create("obs-flaky", id="flaky-1", tenant="acme")
    create("obs-flaky", id="flaky-2", tenant="initech")
    create("obs-broken", id="broken-1", tenant="acme")
    create("obs-napper", id="napper-1", tenant="acme")
    create("obs-waiter", id="waiter-1", tenant="acme")
    create("obs-backing-off", id="backoff-1", tenant="acme")
    run_until_idle()


def test_it_counts_instances_started_and_finished_by_workflow_and_outcome(ledger: None, web: Client) -> None:
    s = scrape(web)
    assert value(s, "runledger_instances_started_total", workflow="obs-flaky") == 2
    assert value(s, "runledger_instances_started_total", workflow="obs-broken") == 1
    assert value(s, "runledger_instances_started_total", workflow="obs-napper") == 1
    assert value(s, "runledger_instances_finished_total", workflow="obs-flaky", outcome="complete") == 2
    assert value(s, "runledger_instances_finished_total", workflow="obs-broken", outcome="errored") == 1
    assert value(s, "runledger_instances_finished_total", workflow="obs-napper", outcome="complete") is None
    assert value(s, "runledger_instance_duration_seconds_count", workflow="obs-flaky", outcome="complete") == 2
    assert (
        value(s, "runledger_instance_duration_seconds_bucket", workflow="obs-flaky", outcome="complete", le="+Inf") == 2
    )


def test_it_counts_step_attempts_retries_and_failures_with_numbered_steps_sharing_a_label(
    ledger: None, web: Client
) -> None:
    s = scrape(web)
    # Per flaky instance: fetch-page-1 twice (a retry, then ok), fetch-page-2 once.
    assert value(s, "runledger_step_attempts_total", workflow="obs-flaky", step="fetch-page-N") == 6
    assert value(s, "runledger_step_retries_total", workflow="obs-flaky", step="fetch-page-N") == 2
    assert value(s, "runledger_step_failures_total", workflow="obs-flaky", step="fetch-page-N") is None
    assert value(s, "runledger_step_attempts_total", workflow="obs-broken", step="explode") == 1
    assert value(s, "runledger_step_failures_total", workflow="obs-broken", step="explode") == 1
    assert value(s, "runledger_step_duration_seconds_count", workflow="obs-flaky", step="fetch-page-N") == 4
    assert value(s, "runledger_step_duration_seconds_bucket", workflow="obs-flaky", step="fetch-page-N", le="600") == 4


def test_it_sums_cost_by_service_workflow_and_tenant(ledger: None, web: Client) -> None:
    s = scrape(web)
    assert value(s, "runledger_cost_usd_total", service="openai", workflow="obs-flaky", tenant="acme") == 0.25
    assert value(s, "runledger_cost_usd_total", service="openai", workflow="obs-flaky", tenant="initech") == 0.25


def test_it_reports_sleeping_dead_letters_and_active_instances(ledger: None, web: Client) -> None:
    s = scrape(web)
    assert value(s, "runledger_instances_sleeping", workflow="obs-napper") == 1
    assert value(s, "runledger_instances_waiting_event", workflow="obs-waiter") == 1
    assert value(s, "runledger_instances_retry_backoff", workflow="obs-backing-off") == 1
    assert value(s, "runledger_instances_sleeping", workflow="obs-waiter") is None
    assert value(s, "runledger_instances_waiting_event", workflow="obs-napper") is None
    assert value(s, "runledger_instances_active", workflow="obs-napper", status="waiting") == 1
    assert value(s, "runledger_dead_letters_open", workflow="obs-broken") == 1
    assert value(s, "runledger_runnable_backlog", workflow="obs-napper") is None
    assert value(s, "runledger_runnable_oldest_age_seconds") == 0


def test_it_reports_the_backlog_and_its_oldest_item_age(db: object, web: Client) -> None:
    create("obs-flaky", id="due-1", tenant="acme")
    Instance.objects.filter(id="due-1").update(ready_at=timezone.now() - timedelta(seconds=120))
    s = scrape(web)
    assert value(s, "runledger_runnable_backlog", workflow="obs-flaky") == 1
    assert 120 <= value(s, "runledger_runnable_oldest_age_seconds") < 180  # type: ignore[operator]


def test_it_reports_live_workers_and_their_slots(db: object, web: Client) -> None:
    create("obs-flaky", id="held-1", tenant="acme")
    create("obs-flaky", id="held-2", tenant="acme")
    Instance.objects.filter(id__startswith="held-").update(
        lease_owner="host-a:41", lease_token="t", lease_expires_at=timezone.now() + timedelta(seconds=30)
    )
    s = scrape(web)
    assert value(s, "runledger_workers_live") == 1
    assert value(s, "runledger_worker_slots_in_use", worker="host-a:41") == 2


def test_it_reports_the_used_ratio_of_each_budget_in_its_current_period(db: object, web: Client) -> None:
    now = timezone.now()
    Budget.objects.create(
        scope="tenant",
        key="acme",
        period="month",
        limit=Decimal("10"),
        spent=Decimal("2.5"),
        period_start=now.replace(day=1, hour=0, minute=0, second=0, microsecond=0),
        updated_at=now,
    )
    Budget.objects.create(
        scope="service",
        key="openai",
        period="hour",
        limit=Decimal("1"),
        spent=Decimal("0.9"),
        period_start=now - timedelta(hours=3),
        updated_at=now,
    )
    Budget.objects.create(
        scope="instance",
        key="some-instance",
        period="day",
        limit=Decimal("1"),
        spent=Decimal("0.5"),
        period_start=now,
        updated_at=now,
    )
    s = scrape(web)
    assert value(s, "runledger_budget_used_ratio", scope="tenant", key="acme", period="month") == 0.25
    # Its hour rolled over with nothing spent since: 0, not last period's 90 %.
    assert value(s, "runledger_budget_used_ratio", scope="service", key="openai", period="hour") == 0
    assert not [k for k in s if k[0] == "runledger_budget_used_ratio" and ("scope", "instance") in k[1]]


def test_it_counts_ingress_requests_by_route_and_status(db: object, web: Client) -> None:
    Route.objects.create(name="signup", workflow="obs-flaky", tenant="acme")
    web.post("/api/routes/signup", data=b"{}", content_type="application/json")  # no token: 401
    web.post("/api/routes/signup", data=b"{}", content_type="application/json")
    web.post("/api/routes/no-such-route-xyz", data=b"{}", content_type="application/json")
    web.get("/healthz")  # not ingress
    s = scrape(web)
    assert value(s, "runledger_ingress_requests_total", route="signup", status="401") == 2
    unknown = {
        dict(k[1])["status"]: v
        for k, v in s.items()
        if k[0] == "runledger_ingress_requests_total" and dict(k[1])["route"] == "unknown"
    }
    assert sum(unknown.values()) == 1
    assert not [k for k in s if "no-such-route-xyz" in str(k)]


def test_stored_tally_and_live_fold_give_the_same_figures_and_keep_counting(ledger: None, web: Client) -> None:
    live = scrape(web)
    folded = tally.tally_advance(now=timezone.now() + timedelta(hours=1))
    assert folded > 0
    assert MetricTally.objects.filter(metric=MetricTally.CURSOR).get().value > 0
    stored = scrape(web)
    counters = {
        k: v
        for k, v in live.items()
        if k[0].endswith(("_total", "_count", "_bucket", "_sum")) and not k[0].startswith("runledger_ingress")
    }
    assert counters == {k: stored[k] for k in counters}
    create("obs-flaky", id="flaky-3", tenant="acme")
    run_until_idle()
    after = scrape(web)
    assert value(after, "runledger_instances_started_total", workflow="obs-flaky") == 3
    assert value(after, "runledger_instances_finished_total", workflow="obs-flaky", outcome="complete") == 3
    assert value(after, "runledger_cost_usd_total", service="openai", workflow="obs-flaky", tenant="acme") == 0.5


def test_no_label_carries_an_instance_id(ledger: None, web: Client) -> None:
    s = scrape(web)
    ids = set(Instance.objects.values_list("id", flat=True))
    assert ids
    assert not [k for k in s for _, v in k[1] if v in ids]


@pytest.fixture(autouse=True)
def _fresh_ingress_counts() -> None:
    ingress.counts.discard()


def test_past_the_exact_limit_the_reasons_are_estimated_from_a_stable_sample(
    db: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dashboard.observability import gauges

    for i in range(40):
        create("obs-napper", id=f"nap-{i}", tenant="acme")
        create("obs-waiter", id=f"wait-{i}", tenant="acme")
    run_until_idle()
    monkeypatch.setattr(gauges, "PARKED_EXACT", 20)  # PostgreSQL samples every 4th; SQLite stays exact
    first = gauges.instance_gauges(now=timezone.now())
    assert first.sleeping == {"obs-napper": 40}
    assert first.waiting == {"obs-waiter": 40}
    assert gauges.instance_gauges(now=timezone.now()) == first
