"""Event fan-out with filters and idempotency; durable token buckets."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from ingest.engine.models import Instance, PendingEvent
from ingest.engine.services import instances as engine_services
from ingest.triggers.errors import InvalidEvent, UnknownRateLimit
from ingest.triggers.models import PublishedEvent
from ingest.triggers.services import (
    event_publish,
    rate_limit_acquire,
    rate_limit_configure,
    rate_limit_penalize,
    subscription_create,
)

pytestmark = [pytest.mark.db, pytest.mark.django_db]
NOW = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)


def test_publish_starts_every_matching_subscription() -> None:
    subscription_create(workflow="test-echo", pattern="user.*")
    subscription_create(workflow="test-echo", pattern="user.created", filters={"plan": "pro"})
    subscription_create(workflow="test-echo", pattern="gong.call.*")
    subscription_create(workflow="test-echo", pattern="user.*", tenant="globex")
    published = event_publish(type="user.created", data={"plan": "pro"}, tenant="acme", now=NOW)
    assert len(published.started) == 2 and not published.duplicate
    instance = Instance.objects.get(pk=published.started[0])
    assert instance.tenant == "acme"
    assert instance.params == {
        "plan": "pro",
        "_event": {"id": published.event_id, "type": "user.created", "tenant": "acme"},
    }
    free = event_publish(type="user.created", data={"plan": "free"}, tenant="acme", now=NOW)
    assert len(free.started) == 1


def test_publishing_the_same_id_twice_starts_nothing_new() -> None:
    subscription_create(workflow="test-echo", pattern="order.*")
    first = event_publish(type="order.paid", data={}, id="evt-1", now=NOW)
    again = event_publish(type="order.paid", data={}, id="evt-1", now=NOW)
    assert again.duplicate and again.started == first.started
    assert Instance.objects.count() == 1 and PublishedEvent.objects.count() == 1


def test_an_addressed_event_is_delivered_to_the_instance() -> None:
    engine_services.instance_create(workflow="test-waiter", id="w-1", tenant="acme")
    published = event_publish(type="go", data={"ok": 1}, tenant="acme", instance_id="w-1", now=NOW)
    assert published.delivered == ["w-1"]
    assert PendingEvent.objects.get(instance_id="w-1").payload == {"ok": 1}


def test_invalid_events_are_refused_with_nothing_written() -> None:
    with pytest.raises(InvalidEvent, match="event type"):
        event_publish(type="bad type!", data={}, now=NOW)
    with pytest.raises(InvalidEvent, match="JSON object"):
        event_publish(type="x", data=[1], now=NOW)  # type: ignore[arg-type]
    assert PublishedEvent.objects.count() == 0


def test_the_token_bucket_limits_and_refills() -> None:
    rate_limit_configure(key="dataforseo", per_second=2, burst=2, now=NOW)
    waits = [rate_limit_acquire(key="dataforseo", now=NOW) for _ in range(3)]
    assert waits[:2] == [0, 0] and waits[2] == pytest.approx(0.5)
    assert rate_limit_acquire(key="dataforseo", now=NOW + timedelta(seconds=0.5)) == 0


def test_a_provider_429_blocks_every_taker_until_retry_after() -> None:
    rate_limit_configure(key="llm", per_second=100, now=NOW)
    rate_limit_penalize(key="llm", retry_after=30, now=NOW)
    assert rate_limit_acquire(key="llm", now=NOW + timedelta(seconds=10)) == pytest.approx(20)
    assert rate_limit_acquire(key="llm", now=NOW + timedelta(seconds=31)) == 0


def test_an_unknown_bucket_needs_a_rate() -> None:
    with pytest.raises(UnknownRateLimit, match="rate_limit_configure"):
        rate_limit_acquire(key="nobody", now=NOW)
    assert rate_limit_acquire(key="nobody", per_second=1, now=NOW) == 0
