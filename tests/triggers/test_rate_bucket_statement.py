"""An ingress request's token in one statement on PostgreSQL (the locked transaction elsewhere):
the same arithmetic as `buckets.take`, never more tokens than the bucket holds however many
requests race for it, a refusal writes nothing and says how long to wait."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from ingest.triggers import buckets
from ingest.triggers.models import TokenBucket
from ingest.triggers.services.ratelimits import rate_limit_penalize, rate_limits_take

pytestmark = [pytest.mark.db, pytest.mark.django_db]

T0 = datetime(2026, 11, 26, 6, 0, tzinfo=UTC)


def _state(key: str) -> buckets.BucketState:
    row = TokenBucket.objects.get(key=key)
    return buckets.BucketState(row.capacity, row.refill_per_second, row.tokens, row.updated_at, row.blocked_until)


def test_a_take_is_one_statement_on_postgresql() -> None:
    rate_limits_take(limits=[("ingress:route:a", 3)], now=T0)  # creates the bucket
    with CaptureQueriesContext(connection) as queries:
        assert rate_limits_take(limits=[("ingress:route:a", 3)], now=T0) == 0.0
    if connection.vendor == "postgresql":
        assert len(queries.captured_queries) == 1, [q["sql"] for q in queries.captured_queries]
    assert TokenBucket.objects.get(key="ingress:route:a").tokens == 1.0


def test_the_bucket_refills_and_refuses_as_the_pure_arithmetic_says() -> None:
    key = "ingress:route:b"
    # 3 per minute: capacity 3, 0.05 tokens a second. Each step: when, then the pure answer
    # from the row as it was, which the row afterwards must equal.
    steps = [
        T0,
        T0,
        T0,
        T0 + timedelta(seconds=2),
        T0 + timedelta(seconds=10),
        T0 + timedelta(seconds=20),
        T0 + timedelta(seconds=21.5),
        T0 + timedelta(seconds=200),
        T0 + timedelta(seconds=199),
    ]
    waits = []
    for now in steps:
        before = (
            _state(key) if TokenBucket.objects.filter(key=key).exists() else buckets.BucketState(3.0, 0.05, 3.0, now)
        )
        expected = buckets.take(before, cost=1, now=now)
        wait = rate_limits_take(limits=[(key, 3)], now=now)
        waits.append(round(wait, 6))
        assert wait == pytest.approx(expected.wait, abs=1e-9)
        after = _state(key)
        if wait == 0:
            assert after.tokens == pytest.approx(expected.state.tokens, abs=1e-9)
            assert after.updated_at == expected.state.updated_at and after.blocked_until is None
    assert waits == [0.0, 0.0, 0.0, 18.0, 10.0, 0.0, 18.5, 0.0, 0.0]


def test_a_changed_rate_applies_from_now_on() -> None:
    key = "ingress:route:c"
    for _ in range(3):
        rate_limits_take(limits=[(key, 3)], now=T0)
    # 60 per minute now: one token a second since the bucket was last written, capped at 60.
    assert rate_limits_take(limits=[(key, 60)], now=T0 + timedelta(seconds=5)) == 0.0
    row = TokenBucket.objects.get(key=key)
    assert (row.capacity, row.refill_per_second, row.tokens) == (60.0, 1.0, pytest.approx(4.0))


def test_a_blocked_bucket_gives_no_token_until_its_time() -> None:
    key = "ingress:route:d"
    rate_limits_take(limits=[(key, 60)], now=T0)
    rate_limit_penalize(key=key, retry_after=30, now=T0)
    assert rate_limits_take(limits=[(key, 60)], now=T0 + timedelta(seconds=10)) == pytest.approx(20.0)
    assert rate_limits_take(limits=[(key, 60)], now=T0 + timedelta(seconds=31)) == 0.0
    assert TokenBucket.objects.get(key=key).blocked_until is None


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_threads_racing_for_one_bucket_never_take_more_than_it_holds(require_postgres: None) -> None:
    key = "ingress:route:e"
    rate_limits_take(limits=[(key, 25)], now=T0)  # capacity 25, one taken
    later = T0 + timedelta(seconds=12)  # 0.4167 tokens a second: 5 more by then
    taken: list[float] = []
    start = threading.Barrier(8)

    def hammer() -> None:
        try:
            start.wait(10)
            for _ in range(10):
                taken.append(rate_limits_take(limits=[(key, 25)], now=later))
        finally:
            connection.close()

    threads = [threading.Thread(target=hammer) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    # 24 left plus 5 refilled = 29 tokens (capacity 25 caps the refill: 25); every other request waits.
    assert len(taken) == 80 and taken.count(0.0) == 25
    row: Any = TokenBucket.objects.get(key=key)
    assert row.tokens == pytest.approx(0.0, abs=1e-9)
