"""Outbound rate limits for the clients: the shared token buckets, or an in-process limiter.

`SharedBucket` puts a provider's per-account limit on the durable token buckets of
`ingest.triggers` (one row per key, locked by every worker on every machine), so 100 domain
onboardings on 2 workers together stay under DataForSEO's 2,000 calls a minute, and every
worker's Gong steps together under Gong's 3 calls a second. A short wait is slept through
inside the step; a longer one is handed back so the client raises an error with `retry_after`
and the engine retries the step then, instead of a worker sleeping.
`InProcess` adapts `ingest.sources.http.RateLimiter` (one process, tests).

A provider's limit (`provider_limit`) is the connection's `rate_limit` option when it has one,
else `settings.RUNLEDGER_RATE_LIMITS[provider]`, else `DEFAULT_LIMITS` here.

`Circuit` puts a call behind the engine's circuit breaker for a key (one row per key, shared by
every worker): an outage of the provider opens it after a few failures, and the calls that
follow fail fast with `CircuitOpen` (retryable, with `retry_after`) instead of each waiting out
its own timeout; one probe call per cooldown finds out whether the provider is back.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol, TypeVar

from django.conf import settings

from ingest.engine import BreakerPolicy
from ingest.engine import now as engine_now
from ingest.engine.services.breakers import Ticket, breaker_admit, breaker_record
from ingest.sources.errors import SourceError
from ingest.sources.http import RateLimiter, Sleep
from ingest.triggers.services.ratelimits import rate_limit_acquire, rate_limit_penalize

__all__ = [
    "DEFAULT_LIMITS", "LIMIT_OPTION", "BucketLimit", "Circuit", "InProcess", "InvalidLimit", "OutboundLimiter",
    "SharedBucket", "limit_parse", "outage", "per_minute_bucket", "provider_limit",
]  # fmt: skip

T = TypeVar("T")


class OutboundLimiter(Protocol):
    def acquire(self) -> float:
        """Wait for a call slot; 0.0 when the call may go, else the seconds still to wait."""

    def penalize(self, retry_after: float) -> None:
        """The provider said "too many": no call goes for `retry_after` seconds."""


def per_minute_bucket(per_minute: int, *, burst: int) -> tuple[float, float]:
    """(refill per second, capacity) so that no 60-second window passes `per_minute` calls.

    A bucket lets through its capacity at once plus its refill over the window, so the refill
    is what the window has left after the burst: 2,000/min with a burst of 200 refills 30/s.
    """
    if not 0 < burst < per_minute:
        raise ValueError(f"burst must be between 1 and {per_minute - 1}, got {burst}")
    return (per_minute - burst) / 60.0, float(burst)


@dataclass(frozen=True)
class BucketLimit:
    """A provider's limit as a token bucket: `burst` calls at once, then `per_second`. Any T
    seconds pass at most `burst + per_second × T` calls: Gong's 3 a second is `(3, 1)` (calls at
    least a third of a second apart), DataForSEO's 2,000 a minute with bursts of 200 `(30, 200)`."""

    per_second: float
    burst: int

    @classmethod
    def per_minute(cls, per_minute: int, *, burst: int) -> BucketLimit:
        """The bucket under which no 60-second window passes `per_minute` calls."""
        refill, capacity = per_minute_bucket(per_minute, burst=burst)
        return cls(refill, int(capacity))

    def __str__(self) -> str:
        return f"{self.per_second:g} calls/s after a burst of {self.burst}"


DEFAULT_LIMITS: dict[str, BucketLimit] = {
    "gong": BucketLimit(3.0, 1),  # Gong: 3 calls a second per company
    "dataforseo": BucketLimit.per_minute(2000, burst=200),  # DataForSEO: 2,000 a minute per login
}
LIMIT_OPTION = "rate_limit"  # the connection option: {"per_second": 2, "burst": 1}
_MOST_PER_SECOND = 100_000.0


class InvalidLimit(ValueError):
    """A rate limit is not {"per_second": a number above 0, "burst": a whole number from 1}."""


def limit_parse(value: Any, *, what: str) -> BucketLimit:
    """`value` ({"per_second": 3, "burst": 1}) as a limit, or InvalidLimit naming `what` it is."""
    if not isinstance(value, Mapping) or set(value) != {"per_second", "burst"}:
        raise InvalidLimit(
            f'{what} is {str(value)[:80]!r}; write it as {{"per_second": 3, "burst": 1}} '
            "(calls a second, and how many may go at once)"
        )
    rate, burst = value["per_second"], value["burst"]
    if (
        isinstance(rate, bool)
        or not isinstance(rate, int | float)
        or not math.isfinite(rate)
        or not 0 < rate <= _MOST_PER_SECOND
    ):
        raise InvalidLimit(f"{what}: per_second is {rate!r}; it is a number above 0 and at most {_MOST_PER_SECOND:g}")
    if isinstance(burst, bool) or not isinstance(burst, int) or not 1 <= burst <= 1_000_000:
        raise InvalidLimit(f"{what}: burst is {burst!r}; it is a whole number from 1 to 1000000")
    return BucketLimit(float(rate), burst)


def provider_limit(provider: str, options: Mapping[str, Any] | None = None) -> BucketLimit:
    """`provider`'s limit: the connection's `rate_limit` option, else the setting
    `RUNLEDGER_RATE_LIMITS[provider]`, else `DEFAULT_LIMITS`. KeyError for a provider none names."""
    if options and LIMIT_OPTION in options:
        return limit_parse(options[LIMIT_OPTION], what=f"the connection option {LIMIT_OPTION!r}")
    configured = (getattr(settings, "RUNLEDGER_RATE_LIMITS", None) or {}).get(provider)
    if configured is not None:
        return limit_parse(configured, what=f"RUNLEDGER_RATE_LIMITS[{provider!r}]")
    return DEFAULT_LIMITS[provider]


class SharedBucket:
    """A durable token bucket shared by every worker: `key` is per provider account."""

    def __init__(
        self,
        key: str,
        *,
        limit: BucketLimit,
        max_inline_wait: float = 2.0,
        now: Callable[[], datetime] = engine_now,
        sleep: Sleep = time.sleep,
    ) -> None:
        # The engine's clock: the retry a long wait hands back is timed on it too (tests move it).
        self.key = key
        self.limit = limit
        self.per_second, self.burst = limit.per_second, float(limit.burst)
        self.max_inline_wait = max_inline_wait
        self._now = now
        self._sleep = sleep

    def acquire(self) -> float:
        while True:
            wait = rate_limit_acquire(key=self.key, now=self._now(), per_second=self.per_second, burst=self.burst)
            if wait == 0 or wait > self.max_inline_wait:
                return wait
            self._sleep(wait)

    def penalize(self, retry_after: float) -> None:
        rate_limit_penalize(key=self.key, retry_after=retry_after, now=self._now())


class InProcess:
    """`http.RateLimiter` behind the `OutboundLimiter` protocol: waits in this process only."""

    def __init__(self, limiter: RateLimiter) -> None:
        self.limiter = limiter

    def acquire(self) -> float:
        self.limiter.acquire()
        return 0.0

    def penalize(self, retry_after: float) -> None:
        # The client already waits out the provider's Retry-After before resending.
        return None


def outage(exc: BaseException) -> bool:
    """The default of what trips a breaker: the provider is down or failing (network errors, 5xx,
    a retryable answer), not that we asked wrongly (4xx) or too often (429, a rate limit)."""
    if isinstance(exc, SourceError):
        return exc.retryable and exc.status != 429 and not exc.rate_limited
    return isinstance(exc, OSError | TimeoutError)


class Circuit:
    """A circuit breaker on `key`, shared by every worker through the database.

        circuit = Circuit("dataforseo:main", threshold=5, window=60, cooldown=30)
        answer = circuit.call(lambda: client.post_task(...))

    Opens after `threshold` failures that `trips` counts (default `outage`) within `window`
    seconds; then every call raises `CircuitOpen` (retryable; the step retries after
    `retry_after`) until `cooldown` has passed and one call probes. `tenant` names whose key it
    is, for the dashboard (blank: shared by every tenant). docs/engine-contract.md.
    """

    def __init__(
        self,
        key: str,
        *,
        threshold: int = 5,
        window: float = 60.0,
        cooldown: float = 30.0,
        probe_timeout: float = 60.0,
        tenant: str = "",
        trips: Callable[[BaseException], bool] = outage,
    ) -> None:
        self.key, self.tenant, self.trips = key, tenant, trips
        self.policy = BreakerPolicy(
            threshold=threshold,
            window=timedelta(seconds=window),
            cooldown=timedelta(seconds=cooldown),
            probe_timeout=timedelta(seconds=probe_timeout),
        )

    def call(self, fn: Callable[[], T]) -> T:
        with self.guard():
            return fn()

    @contextmanager
    def guard(self) -> Iterator[Ticket]:
        """Admit the call (or raise CircuitOpen), then record how the block ended."""
        ticket = breaker_admit(key=self.key, policy=self.policy, tenant=self.tenant)
        try:
            yield ticket
        except BaseException as exc:
            if self.trips(exc):
                breaker_record(ticket, ok=False, error=f"{type(exc).__name__}: {exc}")
            elif ticket.probe:
                # The provider answered (a 4xx, a rate limit): it is up; the probe closes it.
                breaker_record(ticket, ok=True)
            raise
        breaker_record(ticket, ok=True)
