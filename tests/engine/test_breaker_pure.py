"""The circuit breaker's decisions, pure: closed → open → half-open → closed or open again."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from ingest.engine import breaker
from ingest.engine.breaker import BreakerPolicy, BreakerState

T0 = datetime(2026, 1, 1, tzinfo=UTC)
POLICY = BreakerPolicy(
    threshold=3, window=timedelta(seconds=60), cooldown=timedelta(seconds=30), probe_timeout=timedelta(seconds=10)
)


def fail_times(*seconds: float) -> BreakerState:
    s = BreakerState()
    for sec in seconds:
        s = breaker.failed(s, POLICY, now=T0 + timedelta(seconds=sec), probe=False)
    return s


def test_it_opens_at_the_threshold_within_the_window() -> None:
    assert fail_times(0, 1).state == breaker.CLOSED
    s = fail_times(0, 1, 2)
    assert (s.state, s.failures, s.opened_at, s.next_probe_at) == (
        breaker.OPEN,
        3,
        T0 + timedelta(seconds=2),
        T0 + timedelta(seconds=32),
    )


def test_failures_outside_the_window_start_a_new_count() -> None:
    s = fail_times(0, 1, 61)
    assert (s.state, s.failures, s.window_started_at) == (breaker.CLOSED, 1, T0 + timedelta(seconds=61))


def test_an_open_breaker_fails_fast_until_its_cooldown_with_the_time_left() -> None:
    s = fail_times(0, 1, 2)
    answer = breaker.admit(s, POLICY, now=T0 + timedelta(seconds=12))
    assert not answer.go and answer.retry_after == pytest.approx(20.0)


def test_after_the_cooldown_one_caller_probes_and_the_next_fails_fast() -> None:
    s = fail_times(0, 1, 2)
    first = breaker.admit(s, POLICY, now=T0 + timedelta(seconds=40))
    assert first.go and first.probe and first.state is not None and first.state.state == breaker.HALF_OPEN
    second = breaker.admit(first.state, POLICY, now=T0 + timedelta(seconds=41))
    assert not second.go and second.retry_after == pytest.approx(9.0)


def test_a_probe_that_never_reports_is_given_up_after_its_timeout() -> None:
    s = breaker.admit(fail_times(0, 1, 2), POLICY, now=T0 + timedelta(seconds=40)).state
    assert s is not None
    again = breaker.admit(s, POLICY, now=T0 + timedelta(seconds=51))
    assert again.go and again.probe


def test_the_probes_success_closes_it_and_its_failure_reopens_it() -> None:
    half = breaker.admit(fail_times(0, 1, 2), POLICY, now=T0 + timedelta(seconds=40)).state
    assert half is not None
    assert breaker.succeeded(half, probe=True) == BreakerState()
    reopened = breaker.failed(half, POLICY, now=T0 + timedelta(seconds=42), probe=True)
    assert (reopened.state, reopened.next_probe_at) == (breaker.OPEN, T0 + timedelta(seconds=72))


def test_a_closed_breakers_success_changes_nothing_and_a_stragglers_failure_neither() -> None:
    assert breaker.succeeded(fail_times(0), probe=False) is None
    half = breaker.admit(fail_times(0, 1, 2), POLICY, now=T0 + timedelta(seconds=40)).state
    assert half is not None
    assert breaker.failed(half, POLICY, now=T0 + timedelta(seconds=41), probe=False) == half


@pytest.mark.parametrize(
    "kwargs", [{"threshold": 0}, {"threshold": True}, {"window": timedelta(0)}, {"cooldown": timedelta(seconds=-1)}]
)
def test_a_bad_policy_is_refused(kwargs: dict) -> None:
    with pytest.raises(ValueError, match="breaker"):
        BreakerPolicy(**kwargs)


def test_with_a_recheck_callers_turned_away_by_the_probe_ask_again_sooner() -> None:
    policy = BreakerPolicy(
        threshold=3, cooldown=timedelta(seconds=30), probe_timeout=timedelta(seconds=120), recheck=timedelta(seconds=3)
    )
    s = breaker.admit(fail_times(0, 1, 2), policy, now=T0 + timedelta(seconds=40)).state
    assert s is not None and s.state == breaker.HALF_OPEN
    assert breaker.admit(s, policy, now=T0 + timedelta(seconds=41)).retry_after == pytest.approx(3.0)
    assert breaker.admit(s, policy, now=T0 + timedelta(seconds=159)).retry_after == pytest.approx(1.0)
    with pytest.raises(ValueError, match="recheck"):
        BreakerPolicy(recheck=timedelta(0))
