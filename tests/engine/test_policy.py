"""Pure rules: durations, retry delays, step config, error signatures, budget periods."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from ingest.engine.durations import parse_duration
from ingest.engine.errors import InvalidDuration, InvalidStepConfig
from ingest.engine.periods import period_end, period_start
from ingest.engine.runtime.policy import RetryPolicy, check_step_name, next_delay, resolve_config
from ingest.engine.signature import error_signature, normalize_message

pytestmark = pytest.mark.pure


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("5 seconds", 5), ("1 second", 1), ("10 minutes", 600), ("1 hour", 3600), ("2 days", 172800),
     ("250 milliseconds", 0.25), ("1 week", 604800), ("1.5 minutes", 90), (3, 3), (0.5, 0.5),
     # Abbreviations: "ms" is milliseconds (once read as minutes plus a plural s), "mins" minutes.
     ("500 ms", 0.5), ("500ms", 0.5), ("2 mins", 120), ("3 secs", 3), ("4 hours", 14400), ("30s", 30),
     (timedelta(hours=2), 7200)],
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
    assert config.timeout == timedelta(minutes=10)


def test_partial_retries_keep_the_other_defaults():
    config = resolve_config("s", retries={"limit": 3}, timeout="30 seconds")
    assert config.retries == RetryPolicy(3, timedelta(seconds=10), "exponential")
    assert config.timeout == timedelta(seconds=30)


@pytest.mark.parametrize(
    ("retries", "fragment"),
    [({"limit": 3, "max_delay": 5}, "'max_delay'"), ({"limit": -1}, "limit"), ({"limit": "3"}, "limit"),
     ({"backoff": "fibonacci"}, "fibonacci"), ("3 times", "dict")],
)
def test_it_rejects_bad_retry_config_before_the_step_runs(retries, fragment):
    with pytest.raises(InvalidStepConfig) as info:
        resolve_config("llm-extract", retries=retries, timeout=None)
    assert fragment in str(info.value) and "llm-extract" in str(info.value)


def test_step_names_are_limited_to_256_characters():
    assert check_step_name("a" * 256) == "a" * 256
    with pytest.raises(InvalidStepConfig, match="256"):
        check_step_name("a" * 257)


def test_error_signatures_ignore_ids_numbers_and_quoted_values():
    a = normalize_message("call 7782 of tenant 'acme' failed after 3.5 s (id 9f86d081884c7d659a2feaa0c55ad015)")
    b = normalize_message("call 12 of tenant 'globex' failed after 10 s (id 2c26b46b68ffc68ff99b453c1d304134)")
    assert a == b
    s1, _ = error_signature(workflow="gong-ingest", step_name="persist-facts-3", error_name="IntegrityError", message="row 5 locked")
    s2, _ = error_signature(workflow="gong-ingest", step_name="persist-facts-9", error_name="IntegrityError", message="row 77 locked")
    s3, _ = error_signature(workflow="gong-ingest", step_name="persist-facts-9", error_name="TimeoutError", message="row 77 locked")
    assert s1 == s2 != s3


def test_budget_periods_start_on_the_hour_day_and_month():
    now = datetime(2026, 12, 31, 17, 42, 9, tzinfo=UTC)
    assert period_start("hour", now) == datetime(2026, 12, 31, 17, tzinfo=UTC)
    assert period_start("day", now) == datetime(2026, 12, 31, tzinfo=UTC)
    assert period_start("month", now) == datetime(2026, 12, 1, tzinfo=UTC)
    assert period_end("month", now) == datetime(2027, 1, 1, tzinfo=UTC)
