"""Every provider's limit goes through the token buckets every worker shares, at the rate the
connection's `rate_limit` option names, else the setting, else the provider's own default."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.core.exceptions import ImproperlyConfigured

from dashboard.config import env_divisor_of_hour, env_rate_limits
from ingest.pipelines.selectors import config_cache_clear
from ingest.pipelines.services import connection_upsert
from ingest.sources.dataforseo import DataForSEOClient, login_bucket_key
from ingest.sources.gong import GongRateLimited
from ingest.sources.outbound import (
    DEFAULT_LIMITS,
    BucketLimit,
    InvalidLimit,
    SharedBucket,
    provider_limit,
)
from ingest.triggers.models import TokenBucket
from ingest.workflows.gong import gong_bucket_key, gong_client
from tests.fakes import FakeGong, Planned


@pytest.fixture
def fake() -> Iterator[FakeGong]:
    config_cache_clear()
    with FakeGong() as server:
        yield server
    config_cache_clear()


@pytest.mark.pure
def test_a_connections_option_wins_over_the_setting_which_wins_over_the_default(settings) -> None:
    settings.RUNLEDGER_RATE_LIMITS = {}
    assert provider_limit("gong") == DEFAULT_LIMITS["gong"] == BucketLimit(3.0, 1)
    assert provider_limit("dataforseo") == BucketLimit(30.0, 200)  # 2,000 a minute, bursts of 200
    settings.RUNLEDGER_RATE_LIMITS = {"gong": {"per_second": 5, "burst": 2}}
    assert provider_limit("gong") == BucketLimit(5.0, 2)
    assert provider_limit("gong", {"rate_limit": {"per_second": 0.5, "burst": 1}}) == BucketLimit(0.5, 1)
    assert provider_limit("gong", {"model": "unrelated"}) == BucketLimit(5.0, 2)


@pytest.mark.pure
@pytest.mark.parametrize(
    ("value", "says"),
    [
        ({"per_second": 3}, "write it as"),
        ("3/s", "write it as"),
        ({"per_second": 0, "burst": 1}, "per_second is 0"),
        ({"per_second": float("inf"), "burst": 1}, "per_second is inf"),
        ({"per_second": 3, "burst": 0}, "burst is 0"),
        ({"per_second": 3, "burst": 1.5}, "burst is 1.5"),
        ({"per_second": True, "burst": 1}, "per_second is True"),
    ],
)
def test_a_bad_limit_is_refused_saying_what_is_wrong(value: object, says: str) -> None:
    with pytest.raises(InvalidLimit, match="the connection option 'rate_limit'") as raised:
        provider_limit("gong", {"rate_limit": value})
    assert says in str(raised.value)


@pytest.mark.pure
def test_the_settings_read_limits_and_intervals_naming_the_variable() -> None:
    name = "RUNLEDGER_RATE_LIMITS"
    assert env_rate_limits({name: "gong=3:1, dataforseo=30:200"}, name) == {
        "gong": {"per_second": 3.0, "burst": 1},
        "dataforseo": {"per_second": 30.0, "burst": 200},
    }
    assert env_rate_limits({}, name) == {}
    for bad in ("gong=3", "gong=0:1", "gong=3:0", "=3:1", "gong=fast:1"):
        with pytest.raises(ImproperlyConfigured, match=f"{name}: '{bad}'"):
            env_rate_limits({name: bad}, name)
    assert env_divisor_of_hour({"M": "15"}, "M", 5) == 15 and env_divisor_of_hour({}, "M", 5) == 5
    with pytest.raises(ImproperlyConfigured, match="M=7 does not divide an hour"):
        env_divisor_of_hour({"M": "7"}, "M", 5)


@pytest.mark.django_db
def test_the_gong_client_takes_its_calls_from_the_access_keys_shared_bucket_at_the_connections_rate(
    fake: FakeGong,
) -> None:
    connection_upsert(
        tenant="acme",
        kind="gong",
        base_url=fake.url,
        key="gong-key",
        secret="gong-secret",
        options={"rate_limit": {"per_second": 2, "burst": 4}},
    )

    gong_client("acme").transcript(fake.calls[0].id)

    row = TokenBucket.objects.get(key=gong_bucket_key("gong-key"))
    assert (row.capacity, row.refill_per_second) == (4.0, 2.0)
    assert row.tokens == pytest.approx(3.0, abs=0.1)
    assert "gong-key" not in row.key  # the access key is named by a digest only


@pytest.mark.django_db
def test_a_gong_429_stops_every_worker_sharing_the_key_before_its_next_request(fake: FakeGong) -> None:
    connection_upsert(tenant="acme", kind="gong", base_url=fake.url, key="gong-key", secret="gong-secret")
    connection_upsert(tenant="globex", kind="gong", base_url=fake.url, key="gong-key", secret="gong-secret")
    fake.plan("POST /v2/calls/transcript", Planned(429, {"errors": ["slow down"]}, {"Retry-After": "90"}))

    with pytest.raises(GongRateLimited):
        gong_client("acme").transcript(fake.calls[0].id)  # a 90 s wait is not slept through in a step
    with pytest.raises(GongRateLimited) as raised:
        gong_client("globex").transcript(fake.calls[0].id)  # another tenant, same company key

    assert raised.value.retry_after == pytest.approx(90.0, abs=1.0)
    assert fake.count("POST /v2/calls/transcript") == 1


@pytest.mark.django_db
def test_dataforseo_takes_its_rate_from_the_setting(settings) -> None:
    settings.RUNLEDGER_RATE_LIMITS = {"dataforseo": {"per_second": 10, "burst": 50}}

    client = DataForSEOClient(login="dfs-login", password="p")

    assert isinstance(client.limiter, SharedBucket)
    assert client.limiter.limit == BucketLimit(10.0, 50) and client.limiter.key == login_bucket_key("dfs-login")
    assert "dfs-login" not in client.limiter.key
