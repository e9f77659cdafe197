"""Pure rules: durations, retry delays, step config, error signatures, budget periods."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from ingest.engine.durations import parse_duration
from ingest.engine.errors import InvalidDuration, InvalidStepConfig
from ingest.engine.periods import period_end, period_start
from ingest.engine.runtime.policy import (
    RetryPolicy,
    StepConfig,
    check_step_name,
    next_delay,
    resolve_config,
)
from ingest.engine.signature import error_signature, normalize_message

pytestmark = pytest.mark.pure


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("5 seconds", 5),
        ("1 second", 1),
        ("10 minutes", 600),
        ("1 hour", 3600),
        ("2 days", 172800),
        ("250 milliseconds", 0.25),
        ("1 week", 604800),
        ("1.5 minutes", 90),
        (3, 3),
        (0.5, 0.5),
        # Abbreviations: "ms" is milliseconds (once read as minutes plus a plural s), "mins" minutes.
        ("500 ms", 0.5),
        ("500ms", 0.5),
        ("2 mins", 120),
        ("3 secs", 3),
        ("4 hours", 14400),
        ("30s", 30),
        (timedelta(hours=2), 7200),
    ],
)
def test_it_reads_durations_as_cloudflare_writes_them(text, seconds):
    assert parse_duration(text) == timedelta(seconds=seconds)


@pytest.mark.parametrize("bad", ["soon", "5 fortnights", "-3 seconds", "", None, True, [5], -1])
def test_it_refuses_durations_it_cannot_read_naming_the_value(bad):
    with pytest.raises(InvalidDuration) as info:
        parse_duration(bad, what="timeout of step 'x'")
    assert "timeout of step 'x'" in str(info.value)


def test_it_computes_constant_linear_and_exponential_delays_before_each_retry():
    d = timedelta(seconds=15)
    assert [next_delay(RetryPolicy(4, d, "constant"), attempt=n) for n in (1, 2, 3, 4)] == [d, d, d, d]
    assert [next_delay(RetryPolicy(4, d, "linear"), attempt=n).seconds for n in (1, 2, 3, 4)] == [15, 30, 45, 60]
    assert [next_delay(RetryPolicy(4, d, "exponential"), attempt=n).seconds for n in (1, 2, 3, 4)] == [15, 30, 60, 120]


def test_limit_counts_retries_after_the_first_attempt():
    policy = RetryPolicy(5, timedelta(seconds=10), "exponential")
    assert next_delay(policy, attempt=5) is not None  # the 6th attempt still comes
    assert next_delay(policy, attempt=6) is None
    assert next_delay(RetryPolicy(0, timedelta(seconds=1), "constant"), attempt=1) is None


def test_defaults_are_five_retries_ten_seconds_exponential_and_ten_minutes():
    config = resolve_config("s", retries=None, timeout=None)
    assert config.retries == RetryPolicy(5, timedelta(seconds=10), "exponential")
    assert (config.retries.max_delay, config.retries.backoff_coefficient) == (timedelta(minutes=10), 2.0)
    assert config.timeout == timedelta(minutes=10)


def test_no_delay_between_retries_passes_max_delay_which_is_ten_minutes_by_default():
    twelve = resolve_config("s", retries={"limit": 12}, timeout=None).retries
    delays = [next_delay(twelve, attempt=n).total_seconds() for n in range(1, 13)]
    assert delays[:6] == [10, 20, 40, 80, 160, 320]
    assert delays[6:] == [600] * 6  # 640 s and on, up to 20,480 s, are capped at 10 minutes
    capped = resolve_config("s", retries={"limit": 12, "max_delay": "1 minute"}, timeout=None).retries
    assert [next_delay(capped, attempt=n).total_seconds() for n in (1, 2, 3, 4, 12)] == [10, 20, 40, 60, 60]


@pytest.mark.parametrize(
    ("backoff", "expected"),
    [("constant", [45, 45, 45, 45]), ("linear", [45, 90, 100, 100]), ("exponential", [45, 90, 100, 100])],
)
def test_max_delay_caps_every_backoff_mode(backoff, expected):
    policy = RetryPolicy(4, timedelta(seconds=45), backoff, max_delay=timedelta(seconds=100))
    assert [next_delay(policy, attempt=n).total_seconds() for n in (1, 2, 3, 4)] == expected


def test_backoff_coefficient_sets_how_fast_exponential_delays_grow():
    three = RetryPolicy(5, timedelta(seconds=2), "exponential", max_delay=timedelta(hours=1), backoff_coefficient=3)
    assert [next_delay(three, attempt=n).total_seconds() for n in (1, 2, 3, 4, 5)] == [2, 6, 18, 54, 162]
    gentle = resolve_config("s", retries={"delay": "10 seconds", "backoff_coefficient": 1.5}, timeout=None).retries
    assert [next_delay(gentle, attempt=n).total_seconds() for n in (1, 2, 3)] == [10, 15, 22.5]
    flat = RetryPolicy(3, timedelta(seconds=7), "exponential", backoff_coefficient=1)
    assert [next_delay(flat, attempt=n).total_seconds() for n in (1, 2, 3)] == [7, 7, 7]
    # The coefficient shapes only the exponential backoff.
    linear = RetryPolicy(3, timedelta(seconds=7), "linear", backoff_coefficient=5)
    assert [next_delay(linear, attempt=n).total_seconds() for n in (1, 2, 3)] == [7, 14, 21]


def test_a_long_run_of_retries_stays_at_the_cap_instead_of_overflowing():
    policy = RetryPolicy(
        5000, timedelta(seconds=10), "exponential", max_delay=timedelta(days=7), backoff_coefficient=10
    )
    assert next_delay(policy, attempt=5000) == timedelta(days=7)
    assert next_delay(RetryPolicy(5000, timedelta(0), "exponential"), attempt=5000) == timedelta(0)


def test_a_delay_longer_than_ten_minutes_is_its_own_cap_unless_max_delay_says_otherwise():
    hourly = resolve_config("s", retries={"delay": "1 hour", "backoff": "constant"}, timeout=None).retries
    assert hourly.max_delay == timedelta(hours=1) and next_delay(hourly, attempt=3) == timedelta(hours=1)
    slow = resolve_config("s", retries={"delay": "1 hour", "max_delay": "4 hours"}, timeout=None).retries
    assert [next_delay(slow, attempt=n).total_seconds() / 3600 for n in (1, 2, 3, 4)] == [1, 2, 4, 4]


def test_a_config_stored_before_max_delay_and_backoff_coefficient_resolves_to_their_defaults():
    """Fan-outs store their items' retries as JSON; one written before the two keys existed
    still resolves, and today's JSON resolves back to the same policy."""
    old = resolve_config("s", retries={"limit": 12, "delay": 10.0, "backoff": "exponential"}, timeout=600.0)
    assert old.retries == RetryPolicy(12, timedelta(seconds=10), "exponential", timedelta(minutes=10), 2.0)
    assert old.as_json()["retries"] == {
        "limit": 12,
        "delay": 10.0,
        "backoff": "exponential",
        "max_delay": 600.0,
        "backoff_coefficient": 2.0,
    }
    custom = resolve_config(
        "s", retries={"delay": "3 seconds", "max_delay": "90 seconds", "backoff_coefficient": 4}, timeout=None
    )
    again = resolve_config("s", retries=custom.as_json()["retries"], timeout=custom.as_json()["timeout"])
    assert again == StepConfig(retries=custom.retries, timeout=custom.timeout)


def test_partial_retries_keep_the_other_defaults():
    config = resolve_config("s", retries={"limit": 3}, timeout="30 seconds")
    assert config.retries == RetryPolicy(3, timedelta(seconds=10), "exponential")
    assert config.timeout == timedelta(seconds=30)


@pytest.mark.parametrize(
    ("retries", "fragment"),
    [
        ({"limit": 3, "jitter": 5}, "'jitter'"),
        ({"limit": -1}, "limit"),
        ({"limit": "3"}, "limit"),
        ({"backoff": "fibonacci"}, "fibonacci"),
        ("3 times", "dict"),
        ({"delay": "10 seconds", "max_delay": "5 seconds"}, "retries.max_delay"),
        ({"backoff_coefficient": 0.5}, "retries.backoff_coefficient"),
        ({"backoff_coefficient": "2"}, "retries.backoff_coefficient"),
        ({"backoff_coefficient": True}, "retries.backoff_coefficient"),
        ({"backoff_coefficient": float("inf")}, "retries.backoff_coefficient"),
    ],
)
def test_it_rejects_bad_retry_config_before_the_step_runs(retries, fragment):
    with pytest.raises(InvalidStepConfig) as info:
        resolve_config("llm-extract", retries=retries, timeout=None)
    assert fragment in str(info.value) and "llm-extract" in str(info.value)


@pytest.mark.parametrize("bad", ["soon", -1, [60]])
def test_a_max_delay_that_is_not_a_duration_is_refused_naming_the_step_and_the_key(bad):
    with pytest.raises(InvalidDuration) as info:
        resolve_config("llm-extract", retries={"max_delay": bad}, timeout=None)
    assert "retries.max_delay of step 'llm-extract'" in str(info.value)


def test_step_names_are_limited_to_256_characters():
    assert check_step_name("a" * 256) == "a" * 256
    with pytest.raises(InvalidStepConfig, match="256"):
        check_step_name("a" * 257)


def test_error_signatures_ignore_ids_numbers_and_quoted_values():
    a = normalize_message("call 7782 of tenant 'acme' failed after 3.5 s (id 9f86d081884c7d659a2feaa0c55ad015)")
    b = normalize_message("call 12 of tenant 'globex' failed after 10 s (id 2c26b46b68ffc68ff99b453c1d304134)")
    assert a == b
    s1, _ = error_signature(
        workflow="gong-ingest", step_name="persist-facts-3", error_name="IntegrityError", message="row 5 locked"
    )
    s2, _ = error_signature(
        workflow="gong-ingest", step_name="persist-facts-9", error_name="IntegrityError", message="row 77 locked"
    )
    s3, _ = error_signature(
        workflow="gong-ingest", step_name="persist-facts-9", error_name="TimeoutError", message="row 77 locked"
    )
    assert s1 == s2 != s3


def test_budget_periods_start_on_the_hour_day_and_month():
    now = datetime(2026, 12, 31, 17, 42, 9, tzinfo=UTC)
    assert period_start("hour", now) == datetime(2026, 12, 31, 17, tzinfo=UTC)
    assert period_start("day", now) == datetime(2026, 12, 31, tzinfo=UTC)
    assert period_start("month", now) == datetime(2026, 12, 1, tzinfo=UTC)
    assert period_end("month", now) == datetime(2027, 1, 1, tzinfo=UTC)
