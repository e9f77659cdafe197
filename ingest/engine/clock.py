"""The engine's clock. Every decision takes `now` from here, so tests can move time."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta


class Clock:
    def __init__(self) -> None:
        self._offset = timedelta(0)
        self._frozen: datetime | None = None
        self._lock = threading.Lock()

    def now(self) -> datetime:
        with self._lock:
            if self._frozen is not None:
                return self._frozen
            return datetime.now(UTC) + self._offset

    def advance(self, delta: timedelta) -> None:
        with self._lock:
            if self._frozen is not None:
                self._frozen += delta
            else:
                self._offset += delta

    def freeze(self, at: datetime | None = None) -> None:
        with self._lock:
            self._frozen = at or (datetime.now(UTC) + self._offset)

    def reset(self) -> None:
        with self._lock:
            self._offset = timedelta(0)
            self._frozen = None


clock = Clock()


def now() -> datetime:
    return clock.now()
