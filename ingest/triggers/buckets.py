"""Token bucket arithmetic, pure: the services persist what these return."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True)
class BucketState:
    capacity: float
    refill_per_second: float
    tokens: float
    updated_at: datetime
    blocked_until: datetime | None = None


@dataclass(frozen=True)
class Take:
    """`wait` is 0 when the tokens were taken; otherwise how long until they would be."""

    state: BucketState
    wait: float


def refill(state: BucketState, *, now: datetime) -> BucketState:
    elapsed = max(0.0, (now - state.updated_at).total_seconds())
    tokens = min(state.capacity, state.tokens + elapsed * state.refill_per_second)
    return BucketState(state.capacity, state.refill_per_second, tokens, max(now, state.updated_at), state.blocked_until)


def take(state: BucketState, *, cost: float, now: datetime) -> Take:
    """Take `cost` tokens if the bucket has them, else leave it and say how long to wait."""
    current = refill(state, now=now)
    if current.blocked_until is not None and current.blocked_until > now:
        return Take(current, (current.blocked_until - now).total_seconds())
    if current.tokens >= cost:
        taken = BucketState(
            current.capacity, current.refill_per_second, current.tokens - cost, current.updated_at, None
        )
        return Take(taken, 0.0)
    if current.refill_per_second <= 0:
        return Take(current, math.inf)
    return Take(current, (cost - current.tokens) / current.refill_per_second)


def retry_after_header(wait: float) -> str:
    """Retry-After is whole seconds, at least 1 (0 would invite an immediate retry storm)."""
    return str(max(1, math.ceil(wait)))
