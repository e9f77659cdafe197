"""Cron decisions, pure: next fires by policy, time zones and DST, ids, validation."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from ingest.triggers import cron
from ingest.triggers.errors import InvalidCron, InvalidTimezone

pytestmark = pytest.mark.pure


def at(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)


def test_it_fires_the_scheduled_time_that_just_passed() -> None:
    spec = cron.Spec("0 3 * * *")
    fires = cron.next_fires(spec, after=at(2026, 11, 21, 3, 0), now=at(2026, 11, 22, 3, 0, 1))
    assert fires == [at(2026, 11, 22, 3, 0)]


def test_it_fires_nothing_before_the_time_and_nothing_twice() -> None:
    spec = cron.Spec("*/15 * * * *")
    assert cron.next_fires(spec, after=at(2026, 1, 1, 0, 0), now=at(2026, 1, 1, 0, 14, 59)) == []
    assert cron.next_fires(spec, after=at(2026, 1, 1, 0, 15), now=at(2026, 1, 1, 0, 15, 30)) == []


def test_a_fire_exactly_at_now_is_due() -> None:
    spec = cron.Spec("0 * * * *")
    assert cron.next_fires(spec, after=at(2026, 1, 1, 0, 30), now=at(2026, 1, 1, 1, 0)) == [
        at(2026, 1, 1, 1, 0)
    ]


def test_skip_drops_fires_missed_while_no_scheduler_ran() -> None:
    spec = cron.Spec("0 * * * *", missed_fire_policy="skip")
    fires = cron.next_fires(spec, after=at(2026, 1, 1, 0, 0), now=at(2026, 1, 1, 5, 0, 10))
    assert fires == [at(2026, 1, 1, 5, 0)]  # 01..04 missed and dropped; 05:00 is on time


def test_catch_up_runs_the_latest_n_missed_fires() -> None:
    spec = cron.Spec("0 * * * *", missed_fire_policy="catch_up", catch_up_limit=2)
    fires = cron.next_fires(spec, after=at(2026, 1, 1, 0, 0), now=at(2026, 1, 1, 5, 30))
    assert fires == [at(2026, 1, 1, 4, 0), at(2026, 1, 1, 5, 0)]


def test_catch_up_over_years_stays_cheap() -> None:
    spec = cron.Spec("* * * * *", missed_fire_policy="catch_up", catch_up_limit=3)
    fires = cron.next_fires(spec, after=at(2020, 1, 1), now=at(2026, 1, 1, 0, 0, 30))
    assert fires == [at(2025, 12, 31, 23, 57), at(2025, 12, 31, 23, 58), at(2025, 12, 31, 23, 59),
                     at(2026, 1, 1, 0, 0)]


def test_it_fires_in_the_schedule_time_zone_across_dst() -> None:
    spec = cron.Spec("30 2 * * *", timezone="Europe/Paris")
    # 2026-03-29: clocks jump 02:00 → 03:00 in Paris; 02:30 does not exist that day.
    winter = cron.next_fires(spec, after=at(2026, 3, 27, 12), now=at(2026, 3, 28, 1, 30))
    assert winter == [at(2026, 3, 28, 1, 30)]  # 02:30 CET = 01:30 UTC
    summer = cron.upcoming(spec, now=at(2026, 3, 30, 12), count=1)
    assert summer == [at(2026, 3, 31, 0, 30)]  # 02:30 CEST = 00:30 UTC


def test_upcoming_lists_the_next_fire_times() -> None:
    assert cron.upcoming(cron.Spec("0 0 * * 1"), now=at(2026, 11, 22), count=2) == [
        at(2026, 11, 23), at(2026, 11, 30)
    ]


def test_fire_ids_are_deterministic_and_valid_instance_ids() -> None:
    when = at(2026, 11, 22, 3, 0)
    assert cron.fire_instance_id("nightly-sync", when) == "nightly-sync-20261122T0300Z"
    paris = when.astimezone(cron.zone("Europe/Paris"))
    assert cron.fire_instance_id("nightly-sync", paris) == "nightly-sync-20261122T0300Z"


def test_the_schedule_payload_carries_cron_and_scheduled_time() -> None:
    payload = cron.schedule_payload(params={"a": 1}, cron="0 3 * * *", timezone="UTC",
                                    scheduled=at(2026, 11, 22, 3))
    assert payload == {"a": 1, "_schedule": {"cron": "0 3 * * *", "timezone": "UTC",
                                             "scheduled_time": "2026-11-22T03:00:00Z",
                                             "manual": False}}


@pytest.mark.parametrize(
    ("expression", "fragment"),
    [("61 * * * *", "out of range"), ("* * *", "has 3 fields"), ("", "has 0 fields"),
     ("* * * * * *", "has 6 fields"), ("0 3 * * funday", "invalid")],
)
def test_invalid_cron_is_refused_with_a_clear_message(expression: str, fragment: str) -> None:
    with pytest.raises(InvalidCron) as info:
        cron.validate_cron(expression)
    assert fragment in str(info.value)
    assert "five fields" in str(info.value)


def test_unknown_time_zone_is_refused() -> None:
    with pytest.raises(InvalidTimezone, match="IANA"):
        cron.zone("Mars/Olympus")


def test_next_fires_never_returns_a_time_after_now_or_before_after() -> None:
    spec = cron.Spec("*/7 * * * *", missed_fire_policy="catch_up", catch_up_limit=50)
    after, now = at(2026, 1, 1, 0, 0), at(2026, 1, 1, 3, 0)
    fires = cron.next_fires(spec, after=after, now=now)
    assert fires == sorted(fires) and all(after < f <= now for f in fires)
    assert len(fires) <= 50 + int(cron.GRACE / timedelta(minutes=7)) + 1
