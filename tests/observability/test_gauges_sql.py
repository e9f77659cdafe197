"""The scrape's one-statement read of the gauges (PostgreSQL) gives exactly the figures the
query-by-query read gives, on a ledger holding every kind of state a gauge counts."""

from __future__ import annotations

import pytest
from django.utils import timezone

from dashboard.observability import gauges

pytestmark = [pytest.mark.db, pytest.mark.usefixtures("require_postgres")]


def test_the_one_statement_read_equals_the_query_by_query_read(busy: None) -> None:
    now = timezone.now()
    one, each = gauges.ledger_read_one_statement(now=now), gauges.ledger_read_by_query(now=now)
    assert one == each
    # And it holds what the fixture made, so the comparison compared something.
    assert one.active[("obs-napper", "waiting")] == 9 and one.sleeping == {"obs-napper": 9}
    assert one.active[("obs-napper", "paused")] == 1 and one.active[("obs-napper", "running")] == 2
    assert one.waiting_event == {"obs-waiter": 10} and one.backing_off == {"obs-backing-off": 5}
    assert one.backlog == {"obs-flaky": 2, "obs-napper": 1} and one.oldest_ready_at is not None
    assert one.dead_letters == {"obs-broken": 4} and one.slots == {"host-a:1": 2}
    assert one.last_claim_at is not None
    assert one.budgets == {("tenant", "acme", "month"): 0.25, ("service", "openai", "hour"): 0.0}
    assert one.ingress == {("signup", "202"): 7, ("unknown", "401"): 2, ("hooks/gong", "404"): 1}


def test_past_the_exact_limit_both_reads_probe_the_same_sample(busy: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gauges, "PARKED_EXACT", 7)  # 24 waiting: every 4th is probed
    now = timezone.now()
    one, each = gauges.ledger_read_one_statement(now=now), gauges.ledger_read_by_query(now=now)
    assert (one.sleeping, one.waiting_event, one.backing_off) == (each.sleeping, each.waiting_event, each.backing_off)
    assert one == each


def test_an_empty_ledger_reads_as_nothing(db: object) -> None:
    now = timezone.now()
    one = gauges.ledger_read_one_statement(now=now)
    assert one == gauges.ledger_read_by_query(now=now) == gauges.Ledger()
