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
    assert cron.next_fires(spec, after=at(2026, 1, 1, 0, 30), now=at(2026, 1, 1, 1, 0)) == [at(2026, 1, 1, 1, 0)]


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
    assert fires == [at(2025, 12, 31, 23, 57), at(2025, 12, 31, 23, 58), at(2025, 12, 31, 23, 59), at(2026, 1, 1, 0, 0)]


def test_it_fires_in_the_schedule_time_zone_across_dst() -> None:
    spec = cron.Spec("30 2 * * *", timezone="Europe/Paris")
    # 2026-03-29: clocks jump 02:00 → 03:00 in Paris; 02:30 does not exist that day.
    winter = cron.next_fires(spec, after=at(2026, 3, 27, 12), now=at(2026, 3, 28, 1, 30))
    assert winter == [at(2026, 3, 28, 1, 30)]  # 02:30 CET = 01:30 UTC
    summer = cron.upcoming(spec, now=at(2026, 3, 30, 12), count=1)
    assert summer == [at(2026, 3, 31, 0, 30)]  # 02:30 CEST = 00:30 UTC


def test_upcoming_lists_the_next_fire_times() -> None:
    assert cron.upcoming(cron.Spec("0 0 * * 1"), now=at(2026, 11, 22), count=2) == [at(2026, 11, 23), at(2026, 11, 30)]


def test_fire_ids_are_deterministic_and_valid_instance_ids() -> None:
    when = at(2026, 11, 22, 3, 0)
    assert cron.fire_instance_id("nightly-sync", when) == "nightly-sync-20261122T0300Z"
    paris = when.astimezone(cron.zone("Europe/Paris"))
    assert cron.fire_instance_id("nightly-sync", paris) == "nightly-sync-20261122T0300Z"


def test_the_schedule_payload_carries_cron_and_scheduled_time() -> None:
    payload = cron.schedule_payload(params={"a": 1}, cron="0 3 * * *", timezone="UTC", scheduled=at(2026, 11, 22, 3))
    assert payload == {
        "a": 1,
        "_schedule": {
            "cron": "0 3 * * *",
            "timezone": "UTC",
            "scheduled_time": "2026-11-22T03:00:00Z",
            "manual": False,
        },
    }


@pytest.mark.parametrize(
    ("expression", "fragment"),
    [
        ("61 * * * *", "out of range"),
        ("* * *", "has 3 fields"),
        ("", "has 0 fields"),
        ("* * * * * *", "has 6 fields"),
        ("0 3 * * funday", "invalid"),
    ],
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


# Cloudflare's Quartz extensions, as the seeds write them (seed 001: `59 23 LW * *`).


def test_it_accepts_every_expression_the_seeds_write() -> None:
    for expression in ("* * * * *", "*/30 * * * *", "0 17 * * sun", "59 23 LW * *"):
        assert cron.validate_cron(expression) == expression


def test_lw_fires_on_the_last_weekday_of_each_month() -> None:
    # 2026: January ends on a Saturday, May on a Sunday, March on a Tuesday, February on a Saturday.
    fires = cron.upcoming(cron.Spec("59 23 LW * *"), now=at(2026, 1, 1), count=5)
    assert fires == [
        at(2026, 1, 30, 23, 59),
        at(2026, 2, 27, 23, 59),
        at(2026, 3, 31, 23, 59),
        at(2026, 4, 30, 23, 59),
        at(2026, 5, 29, 23, 59),
    ]


def test_lw_fires_the_missed_last_weekday_when_catching_up() -> None:
    # The on-time fire of 31 March, plus the one missed fire the limit keeps (27 Feb, not 30 Jan).
    spec = cron.Spec("59 23 LW * *", missed_fire_policy="catch_up", catch_up_limit=1)
    fires = cron.next_fires(spec, after=at(2026, 1, 1), now=at(2026, 3, 31, 23, 59, 30))
    assert fires == [at(2026, 2, 27, 23, 59), at(2026, 3, 31, 23, 59)]


def test_lw_in_a_time_zone_uses_the_local_calendar() -> None:
    # 23:59 in Tokyo on Friday 30 January 2026 is 14:59 UTC the same day.
    fires = cron.upcoming(cron.Spec("59 23 LW * *", timezone="Asia/Tokyo"), now=at(2026, 1, 1), count=1)
    assert fires == [at(2026, 1, 30, 14, 59)]


def test_l_fires_on_the_last_day_of_the_month() -> None:
    fires = cron.upcoming(cron.Spec("0 9 L * *"), now=at(2026, 1, 1), count=3)
    assert fires == [at(2026, 1, 31, 9), at(2026, 2, 28, 9), at(2026, 3, 31, 9)]


def test_w_fires_on_the_weekday_nearest_the_day_without_leaving_the_month() -> None:
    # 15 Feb 2026 is a Sunday -> Monday 16th; 1 Aug 2026 is a Saturday -> Monday 3rd, not July.
    assert cron.upcoming(cron.Spec("0 9 15W * *"), now=at(2026, 2, 1), count=1) == [at(2026, 2, 16, 9)]
    assert cron.upcoming(cron.Spec("0 9 1W * *"), now=at(2026, 7, 31), count=1) == [at(2026, 8, 3, 9)]


def test_hash_fires_on_the_nth_weekday_of_the_month() -> None:
    fires = cron.upcoming(cron.Spec("0 9 * * 5#3"), now=at(2026, 1, 1), count=2)
    assert fires == [at(2026, 1, 16, 9), at(2026, 2, 20, 9)]
    assert cron.upcoming(cron.Spec("0 9 * * FRI#3"), now=at(2026, 1, 1), count=2) == fires


def test_quartz_nl_fires_on_the_last_given_weekday_of_the_month() -> None:
    fires = cron.upcoming(cron.Spec("0 9 * * 5L"), now=at(2026, 1, 1), count=2)
    assert fires == [at(2026, 1, 30, 9), at(2026, 2, 27, 9)]
    assert cron.upcoming(cron.Spec("0 9 * * friL"), now=at(2026, 1, 1), count=2) == fires
    assert cron.validate_cron("0 9 * * 5L") == "0 9 * * 5L"


@pytest.mark.parametrize(
    "expression, says",
    [
        ("59 23 LW * 1", "combines LW with a day of week"),
        ("59 23 1,LW * *", "LW stands alone"),
        ("59 23 XW * *", "is invalid"),
        ("0 9 * * 9#1", "is invalid"),
    ],
)
def test_it_refuses_malformed_quartz_extensions_with_a_message(expression: str, says: str) -> None:
    with pytest.raises(InvalidCron, match=says):
        cron.validate_cron(expression)


def test_last_weekday_is_pure_calendar_arithmetic() -> None:
    from datetime import date

    assert cron.last_weekday(date(2026, 5, 29)) and not cron.last_weekday(date(2026, 5, 31))
    assert cron.last_weekday(date(2026, 2, 27)) and not cron.last_weekday(date(2026, 2, 28))
    assert cron.last_weekday(date(2026, 3, 31))


@pytest.mark.parametrize("expression", ["0 0 31 2 *", "0 0 30-31 2 *", "0 0 31 4,6,9,11 *", "0 0 1 2 1#5"])
def test_an_expression_that_matches_no_date_is_valid_and_never_fires(expression: str) -> None:
    """February 31st is a valid expression with no date: it is kept, as Kubernetes and Temporal
    keep it, and has neither a next fire nor a due one (croniter raises on it)."""
    assert cron.validate_cron(expression) == expression
    spec = cron.Spec(expression)
    assert cron.upcoming(spec, now=at(2026, 11, 28), count=5) == []
    assert cron.next_fires(spec, after=at(2020, 1, 1), now=at(2026, 11, 28)) == []


def test_an_expression_with_few_dates_lists_what_it_has() -> None:
    assert cron.upcoming(cron.Spec("0 0 29 2 *"), now=at(2026, 11, 28), count=2) == [at(2028, 2, 29), at(2032, 2, 29)]
