"""The cron scheduler: one leader across every process fires what is due, tick by tick.

Leadership is a PostgreSQL session advisory lock (`pg_try_advisory_lock`) held on the scheduler
thread's own connection: it is released when the process exits or its connection drops, and
another process takes over at its next tick. On SQLite there is one process, so it leads. Even
a split brain cannot double a fire: each schedule row is locked while it fires, and a fire's
instance id is deterministic (`{schedule}-{scheduled time}`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime, timedelta

from ingest.engine import Periodic, session_lock_held, session_lock_try, session_unlock
from ingest.triggers import selectors
from ingest.triggers.services import (
    coalesce_windows_sweep,
    idempotency_keys_purge,
    ingress_secrets_expire,
    schedule_fire_due,
)

log = logging.getLogger("runledger.scheduler")
PURGE_EVERY = timedelta(minutes=5)
# Arbitrary but fixed: every scheduler process must ask for the same number.
SCHEDULER_LOCK_KEY = 0x52554E4C_53434844  # "RUNLSCHD"
Upkeep = Callable[[datetime], object]
# What the leader also does every PURGE_EVERY (and at its first tick), registered by the modules
# above this one (a callable passed down): keeping the shipped schedules in line with the settings.
_UPKEEP: list[Upkeep] = []


def upkeep_register(work: Upkeep) -> None:
    """Have the leading scheduler call `work(now)` every few minutes; registering twice is once."""
    if work not in _UPKEEP:
        _UPKEEP.append(work)


class Scheduler(Periodic):
    """`tick(now)` fires what is due if this process leads; `run()` ticks until `stop()`."""

    thread_name = "runledger-scheduler"
    round_name = "scheduler tick"
    log = log

    def __init__(self, *, interval: float = 1.0, lock_key: int = SCHEDULER_LOCK_KEY) -> None:
        super().__init__(interval=interval)
        self.lock_key = lock_key
        self._leading = False
        self._purged_at: datetime | None = None

    def is_leader(self) -> bool:
        """Take or confirm leadership; a reconnect loses the lock, so it is checked every tick."""
        if self._leading and session_lock_held(self.lock_key):
            return True
        self._leading = session_lock_try(self.lock_key)
        if self._leading:
            log.info("scheduler: this process leads")
        return self._leading

    def tick(self, now: datetime) -> list[str]:
        """Fire every due schedule if this process leads; the instance ids fired."""
        if not self.is_leader():
            return []
        fired: list[str] = []
        for schedule_id in selectors.schedule_due_ids(now=now):
            fired.extend(schedule_fire_due(schedule_id=schedule_id, now=now))
        if self._purged_at is None or now - self._purged_at >= PURGE_EVERY:
            idempotency_keys_purge(now=now)
            ingress_secrets_expire(now=now)
            coalesce_windows_sweep(now=now)
            for work in list(_UPKEEP):
                try:
                    work(now)
                except Exception:  # one failing upkeep must not stop the fires or the others
                    log.exception("scheduler upkeep %s failed; it runs again in %s", work.__qualname__, PURGE_EVERY)
            self._purged_at = now
        return fired

    def resign(self) -> None:
        if self._leading:
            session_unlock(self.lock_key)
        self._leading = False

    def run_once(self, clock: Callable[[], datetime]) -> list[str]:
        return self.tick(clock())

    def after_error(self) -> None:
        # The failed tick may have lost the connection, and with it the session lock.
        self._leading = False

    def at_exit(self) -> None:
        self.resign()
