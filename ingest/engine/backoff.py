"""How the engine's threads wait after a database error, and how often they say so.

A worker whose database is gone, read-only, full or timing out must neither spin on the error
(each try costs the server a connection attempt or a failed statement, and the log a line) nor
wait long once the database is back: every runnable instance should move within two seconds of
that. So the wait doubles from 50 ms up to a cap of one second, and a failure that repeats is
logged when it starts, when its cause changes (a restart that leaves the database read-only is
two pieces of news), then once every 30 s with how many times it has happened, and once more
when it stops. Pure: the callers pass the time.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass


@dataclass(frozen=True)
class Backoff:
    first: float = 0.05
    cap: float = 1.0

    def delay(self, failures: int) -> float:
        """Seconds to wait after the `failures`-th failure in a row (1 for the first)."""
        if failures <= 1:
            return min(self.first, self.cap)
        return min(self.cap, self.first * 2.0 ** min(failures - 1, 32))


class FailureLog:
    """Decides which failures of a repeating kind are worth a log line (thread-safe)."""

    def __init__(self, *, every: float = 30.0) -> None:
        self.every = every
        self._count = 0
        self._logged_at: float | None = None
        self._reason: str | None = None
        self._lock = threading.Lock()

    def failed(self, *, now: float, reason: str | None = None) -> tuple[bool, int]:
        """Count a failure at `now` (monotonic seconds): (whether to log it, failures so far).

        A `reason` (the error's first line) other than the last one logged is logged at once."""
        with self._lock:
            self._count += 1
            new_reason = reason is not None and reason != self._reason
            if self._logged_at is None or new_reason or now - self._logged_at >= self.every:
                self._logged_at = now
                if reason is not None:
                    self._reason = reason
                return True, self._count
            return False, self._count

    def recovered(self) -> int:
        """The failures counted since the last success (0: nothing to report); starts afresh."""
        with self._lock:
            count, self._count, self._logged_at, self._reason = self._count, 0, None, None
            return count
