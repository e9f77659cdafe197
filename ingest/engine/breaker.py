"""Circuit breaker decisions, pure: what a call may do and what a failure or success changes.

A breaker guards one outbound key (a provider account). Closed, calls go; `threshold` failures
within `window` open it. Open, calls fail fast until `cooldown` has passed; then it is half-open
and exactly one caller probes (the others still fail fast); the probe's success closes it, its
failure opens it for another cooldown. A probe that never reports (its worker died) is given up
after `probe_timeout`, and the next caller probes instead; until then the callers it turned away
come back after `recheck` (when set), so they find a closed breaker soon after the probe's
success instead of a whole probe timeout later. The database row holds the state
(services/breakers.py, under a row lock); these functions only say what the next state is.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timedelta

CLOSED, OPEN, HALF_OPEN = "closed", "open", "half_open"


@dataclass(frozen=True)
class BreakerPolicy:
    threshold: int = 5
    window: timedelta = timedelta(minutes=1)
    cooldown: timedelta = timedelta(seconds=30)
    probe_timeout: timedelta = timedelta(minutes=1)
    recheck: timedelta | None = None  # how soon a caller turned away by a probe in flight asks again

    def __post_init__(self) -> None:
        if isinstance(self.threshold, bool) or not isinstance(self.threshold, int) or self.threshold < 1:
            raise ValueError(f"a breaker's threshold must be a whole number of at least 1; got {self.threshold!r}")
        for label, value in (
            ("window", self.window),
            ("cooldown", self.cooldown),
            ("probe_timeout", self.probe_timeout),
        ):
            if value <= timedelta(0):
                raise ValueError(f"a breaker's {label} must be longer than zero; got {value}")
        if self.recheck is not None and self.recheck <= timedelta(0):
            raise ValueError(f"a breaker's recheck must be longer than zero; got {self.recheck}")


@dataclass(frozen=True)
class BreakerState:
    state: str = CLOSED
    failures: int = 0
    window_started_at: datetime | None = None
    opened_at: datetime | None = None
    next_probe_at: datetime | None = None
    probe_started_at: datetime | None = None


@dataclass(frozen=True)
class Admission:
    """The answer to "may this call go?": go (as the probe or not), or wait `retry_after` s."""

    go: bool
    probe: bool = False
    retry_after: float = 0.0
    state: BreakerState | None = None  # the state to store, when admitting changed it


def admit(s: BreakerState, policy: BreakerPolicy, *, now: datetime) -> Admission:
    if s.state == CLOSED:
        return Admission(go=True)
    if s.state == OPEN:
        assert s.next_probe_at is not None
        if now < s.next_probe_at:
            return Admission(go=False, retry_after=_seconds(s.next_probe_at - now))
        return Admission(go=True, probe=True, state=replace(s, state=HALF_OPEN, probe_started_at=now))
    # Half-open: one probe is out. Its lease lapses after probe_timeout (a crashed prober).
    assert s.probe_started_at is not None
    lapse = s.probe_started_at + policy.probe_timeout
    if now < lapse:
        wait = lapse - now if policy.recheck is None else min(lapse - now, policy.recheck)
        return Admission(go=False, retry_after=_seconds(wait))
    return Admission(go=True, probe=True, state=replace(s, probe_started_at=now))


def failed(s: BreakerState, policy: BreakerPolicy, *, now: datetime, probe: bool) -> BreakerState:
    """The state after a call failed. A failed probe, or the threshold reached, opens it."""
    if s.state == HALF_OPEN and probe:
        return _opened(s, now=now, policy=policy, failures=s.failures + 1)
    if s.state != CLOSED:
        return s  # a straggler that went before the breaker opened: already counted as open
    in_window = s.window_started_at is not None and now - s.window_started_at < policy.window
    failures = s.failures + 1 if in_window else 1
    started = s.window_started_at if in_window else now
    if failures >= policy.threshold:
        return _opened(s, now=now, policy=policy, failures=failures)
    return replace(s, failures=failures, window_started_at=started)


def succeeded(s: BreakerState, *, probe: bool) -> BreakerState | None:
    """The state after a call succeeded, or None when nothing changes (the common, closed case)."""
    if s.state == HALF_OPEN and probe:
        return BreakerState()
    return None


def _opened(s: BreakerState, *, now: datetime, policy: BreakerPolicy, failures: int) -> BreakerState:
    return BreakerState(
        state=OPEN,
        failures=failures,
        window_started_at=s.window_started_at,
        opened_at=now,
        next_probe_at=now + policy.cooldown,
        probe_started_at=None,
    )


def _seconds(delta: timedelta) -> float:
    return max(0.001, delta.total_seconds())
