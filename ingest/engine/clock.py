"""The engine's clock. Every decision takes `now` from here, so tests can move time."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta


class Clock:
    """Real time, optionally shifted or frozen (tests). `now` takes no lock: every thread of a
    busy worker asks it several times per step, so writers swap in a new (frozen, offset) pair
    under a lock and readers read the pair once."""

    _ZERO = timedelta(0)

    def __init__(self) -> None:
        self._state: tuple[datetime | None, timedelta] = (None, self._ZERO)
        self._lock = threading.Lock()

    def now(self) -> datetime:
        frozen, offset = self._state
        if frozen is not None:
            return frozen
        return datetime.now(UTC) + offset if offset else datetime.now(UTC)

    def advance(self, delta: timedelta) -> None:
        with self._lock:
            frozen, offset = self._state
            self._state = (frozen + delta, offset) if frozen is not None else (None, offset + delta)

    def freeze(self, at: datetime | None = None) -> None:
        with self._lock:
            self._state = (at or datetime.now(UTC) + self._state[1], self._state[1])

    def reset(self) -> None:
        with self._lock:
            self._state = (None, self._ZERO)


clock = Clock()


def now() -> datetime:
    return clock.now()
