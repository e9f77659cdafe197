from __future__ import annotations

import base64
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from ingest.sources.dataforseo import DataForSEOClient
from ingest.sources.dataforseo_errors import DataForSEORateLimited
from ingest.sources.outbound import BucketLimit, SharedBucket, per_minute_bucket
from ingest.triggers.models import TokenBucket
from tests.fakes.dataforseo import ROUTE_BACKLINKS, FakeDataForSEO
from tests.fakes.server import Planned

NOW = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)


class Clock:
    def __init__(self) -> None:
        self.now = NOW
        self.sleeps: list[float] = []

    def __call__(self) -> datetime:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += timedelta(seconds=seconds)


@pytest.fixture
def fake() -> Iterator[FakeDataForSEO]:
    with FakeDataForSEO() as server:
        yield server


@pytest.mark.pure
def test_a_bucket_never_lets_a_minute_pass_its_limit() -> None:
    refill, burst = per_minute_bucket(2000, burst=200)

    assert (refill, burst) == (30.0, 200.0)
    assert burst + refill * 60 == 2000
    with pytest.raises(ValueError, match="burst must be between 1 and 1999"):
        per_minute_bucket(2000, burst=2000)


@pytest.mark.django_db
def test_the_client_takes_its_calls_from_the_accounts_shared_bucket(fake: FakeDataForSEO) -> None:
    clock = Clock()
    limiter = SharedBucket("dataforseo:dfs-login", limit=BucketLimit.per_minute(2000, burst=200), now=clock,
                           sleep=clock.sleep)  # fmt: skip
    client = DataForSEOClient(login="dfs-login", password="dfs-password", base_url=fake.url,
                              limiter=limiter, sleep=clock.sleep)  # fmt: skip

    for _ in range(3):
        client.backlinks("acme.example", limit=1)

    row = TokenBucket.objects.get(key="dataforseo:dfs-login")
    assert (row.capacity, row.refill_per_second, row.tokens) == (200.0, 30.0, 197.0)


@pytest.mark.django_db
def test_an_empty_bucket_waits_short_gaps_and_hands_long_ones_to_the_engine(
    fake: FakeDataForSEO,
) -> None:
    clock = Clock()
    limiter = SharedBucket("dataforseo:tiny", limit=BucketLimit.per_minute(3, burst=1), max_inline_wait=5.0,
                           now=clock, sleep=clock.sleep)  # fmt: skip
    client = DataForSEOClient(login="tiny", password="dfs-password", base_url=fake.url,
                              limiter=limiter, sleep=clock.sleep)  # fmt: skip
    fake.expected_auth = _auth("tiny", "dfs-password")

    client.backlinks("acme.example", limit=1)  # the burst of one
    with pytest.raises(DataForSEORateLimited) as raised:
        client.backlinks("acme.example", limit=1)  # refills 2 a minute: 30 s away

    assert raised.value.retry_after == pytest.approx(30.0) and raised.value.retryable
    assert fake.count(ROUTE_BACKLINKS) == 1 and clock.sleeps == []


@pytest.mark.django_db
def test_a_429_blocks_every_worker_sharing_the_bucket(fake: FakeDataForSEO) -> None:
    clock = Clock()

    def client() -> DataForSEOClient:
        limiter = SharedBucket("dataforseo:dfs-login", limit=BucketLimit.per_minute(2000, burst=200), now=clock,
                               sleep=clock.sleep)  # fmt: skip
        return DataForSEOClient(login="dfs-login", password="dfs-password", base_url=fake.url,
                                limiter=limiter, sleep=clock.sleep)  # fmt: skip

    fake.plan(ROUTE_BACKLINKS, Planned(429, "slow down", {"Retry-After": "90"}))
    with pytest.raises(DataForSEORateLimited):
        client().backlinks("acme.example")
    with pytest.raises(DataForSEORateLimited) as raised:
        client().backlinks("acme.example")  # another worker: refused before any request

    assert raised.value.retry_after == pytest.approx(90.0)
    assert fake.count(ROUTE_BACKLINKS) == 1


def _auth(login: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{login}:{password}".encode()).decode()


@pytest.mark.pure
def test_a_rate_limit_is_not_an_outage_whatever_its_class_is_called() -> None:
    from ingest.sources import errors
    from ingest.sources.gong import GongRateLimited
    from ingest.sources.outbound import outage

    class Throttled(errors.RateLimited):  # a source's own name for it, without "RateLimit" in it
        pass

    for limited in (Throttled("slow down"), GongRateLimited("slow down"), DataForSEORateLimited("slow down")):
        assert limited.rate_limited and limited.retryable
        assert not outage(limited)
    assert outage(errors.ServerError("HTTP 503", status=503))
    assert not outage(errors.SourceError("HTTP 429", retryable=True, status=429))
    assert not errors.ServerError("HTTP 503").rate_limited
