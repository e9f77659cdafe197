from __future__ import annotations

import threading
import time
from datetime import UTC, datetime

import pytest

from ingest.sources.http import RateLimiter, retry_after_seconds, should_retry_hint

pytestmark = pytest.mark.pure


def test_the_limiter_hands_out_three_slots_per_second_with_a_fake_clock() -> None:
    now = [0.0]
    limiter = RateLimiter(3, 1.0, clock=lambda: now[0])

    waits = [limiter.reserve() for _ in range(7)]

    assert waits == [0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 2.0]


def test_the_limiter_frees_slots_as_time_passes() -> None:
    now = [0.0]
    limiter = RateLimiter(3, 1.0, clock=lambda: now[0])
    for _ in range(3):
        limiter.reserve()

    now[0] = 1.0

    assert limiter.reserve() == 0.0


def test_the_limiter_never_lets_threads_exceed_the_rate() -> None:
    limiter = RateLimiter(3, 0.2)
    stamps: list[float] = []
    lock = threading.Lock()

    def worker() -> None:
        limiter.acquire()
        with lock:
            stamps.append(time.monotonic())

    threads = [threading.Thread(target=worker) for _ in range(9)]
    started = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    stamps.sort()
    # Lower bounds only: every thread returns no earlier than its slot (slots k//3 * 0.2 s
    # after the start), and sorting keeps that order, so a slow machine cannot flake this.
    assert all(stamp - started >= (k // 3) * 0.2 - 1e-3 for k, stamp in enumerate(stamps))


def test_retry_after_ms_wins_over_retry_after() -> None:
    assert retry_after_seconds({"retry-after-ms": "1500", "Retry-After": "9"}) == 1.5


def test_retry_after_accepts_seconds_and_http_dates() -> None:
    now = datetime(2025, 3, 3, 12, 0, 0, tzinfo=UTC)
    assert retry_after_seconds({"Retry-After": "7"}) == 7.0
    assert retry_after_seconds({"Retry-After": "Mon, 03 Mar 2025 12:00:30 GMT"}, now=now) == 30.0
    assert retry_after_seconds({"Retry-After": "soon"}) is None
    assert retry_after_seconds({}) is None


def test_x_should_retry_is_read_as_a_bool() -> None:
    assert should_retry_hint({"x-should-retry": "true"}) is True
    assert should_retry_hint({"X-Should-Retry": "false"}) is False
    assert should_retry_hint({}) is None
