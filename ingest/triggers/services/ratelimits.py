"""Durable token buckets shared by every process (row-locked), for ingress and outbound calls.

Outbound use inside a step, so that retries honour a provider's limit:

    wait = rate_limit_acquire(key="dataforseo", now=timezone.now())
    if wait:
        raise RateLimitWait(wait)   # any exception with `retry_after`: the engine waits that long

and when the provider answers 429 anyway, `rate_limit_penalize(key=..., retry_after=...)` stops
every instance from taking a token until then.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.db import IntegrityError, transaction

from ingest.triggers import buckets
from ingest.triggers import sql as trigger_sql
from ingest.triggers.errors import UnknownRateLimit
from ingest.triggers.models import TokenBucket


class RateLimitWait(Exception):
    """Raised in a step when the bucket is empty; `retry_after` tells the engine how long to wait."""

    def __init__(self, retry_after: float, key: str = "") -> None:
        self.retry_after = retry_after
        super().__init__(f"rate limit {key!r} has no token for {retry_after:.1f} s; the step retries after that")


def _state(row: TokenBucket) -> buckets.BucketState:
    return buckets.BucketState(row.capacity, row.refill_per_second, row.tokens, row.updated_at, row.blocked_until)


def _save(row: TokenBucket, state: buckets.BucketState) -> None:
    row.tokens = state.tokens
    row.updated_at = state.updated_at
    row.blocked_until = state.blocked_until
    row.save(update_fields=["tokens", "updated_at", "blocked_until"])


def _locked(key: str, *, now: datetime, capacity: float | None, refill: float | None) -> TokenBucket:
    """The bucket row, locked for this transaction; created full on first use when rates are given."""
    row = TokenBucket.objects.select_for_update().filter(key=key).first()
    if row is not None:
        if (
            capacity is not None
            and refill is not None
            and (row.capacity != capacity or row.refill_per_second != refill)
        ):
            row.capacity, row.refill_per_second = capacity, refill
            row.tokens = min(row.tokens, capacity)
            row.save(update_fields=["capacity", "refill_per_second", "tokens"])
        return row
    if capacity is None or refill is None:
        raise UnknownRateLimit(
            f"no rate limit is configured for {key!r}; call rate_limit_configure(key={key!r}, "
            "per_second=..., burst=...) first or pass the rate"
        )
    try:
        with transaction.atomic():
            TokenBucket.objects.create(
                key=key, capacity=capacity, refill_per_second=refill, tokens=capacity, updated_at=now
            )
    except IntegrityError:
        pass  # another process created it first; lock theirs
    return TokenBucket.objects.select_for_update().get(key=key)


def rate_limit_configure(*, key: str, per_second: float, burst: float | None = None, now: datetime) -> TokenBucket:
    """Create or change the bucket `key`: `per_second` refill, `burst` capacity (default 1 s)."""
    capacity = float(burst if burst is not None else max(1.0, per_second))
    with transaction.atomic():
        return _locked(key, now=now, capacity=capacity, refill=float(per_second))


def rate_limit_acquire(
    *, key: str, cost: float = 1, now: datetime, per_second: float | None = None, burst: float | None = None
) -> float:
    """Take `cost` tokens from bucket `key`: 0.0 when taken, else seconds to wait (nothing taken).

    The row is locked (`select_for_update`) so concurrent workers on any machine share it. With
    the rate given, one token on PostgreSQL is one statement (`bucket_take_one`); only a refusal
    takes the locked path, for the wait.
    """
    capacity = None if per_second is None else float(burst if burst is not None else max(1.0, per_second))
    if (
        capacity is not None
        and per_second is not None
        and cost == 1
        and trigger_sql.bucket_take_one(key=key, capacity=capacity, refill=float(per_second), now=now)
    ):
        return 0.0
    with transaction.atomic():
        row = _locked(key, now=now, capacity=capacity, refill=None if per_second is None else float(per_second))
        result = buckets.take(_state(row), cost=cost, now=now)
        _save(row, result.state)
        return result.wait


def rate_limit_penalize(*, key: str, retry_after: float, now: datetime) -> None:
    """A provider said 429: nobody takes a token from `key` for `retry_after` seconds."""
    with transaction.atomic():
        row = _locked(key, now=now, capacity=None, refill=None)
        until = now + timedelta(seconds=retry_after)
        if row.blocked_until is None or row.blocked_until < until:
            row.blocked_until = until
        row.tokens = 0.0
        row.updated_at = max(now, row.updated_at)
        row.save(update_fields=["blocked_until", "tokens", "updated_at"])


def rate_limits_take(*, limits: list[tuple[str, int]], now: datetime) -> float:
    """Take one request from every `(key, per_minute)` bucket, or from none: the longest wait.

    Rows are locked in key order so two requests that need the same buckets cannot deadlock.
    One bucket on PostgreSQL (a route's or a credential's limit): one statement takes the token;
    only a refusal asks the locked path below for the wait (which takes the token if one came
    in between).
    """
    if not limits:
        return 0.0
    if len(limits) == 1:
        key, per_minute = limits[0]
        if trigger_sql.bucket_take_one(key=key, capacity=float(per_minute), refill=per_minute / 60.0, now=now):
            return 0.0
    with transaction.atomic():
        takes = []
        for key, per_minute in sorted(limits):
            row = _locked(key, now=now, capacity=float(per_minute), refill=per_minute / 60.0)
            takes.append((row, buckets.take(_state(row), cost=1, now=now)))
        wait = max(t.wait for _, t in takes)
        if wait == 0:
            for row, t in takes:
                _save(row, t.state)
        return wait
