"""Who runs the roller: `RollupRunner`, a loop of passes every few seconds.

`manage.py rollup` runs it as a process of its own (production: start it beside the workers, on
any number of machines); `manage.py up` runs it in a thread beside the embedded worker. Passes of
several runners never overlap: each pass first takes a transaction-level PostgreSQL advisory lock
and skips when another runner holds it (SQLite has one process). A crash in the middle of a pass
rolls it back whole; the next pass does it again.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime

from django.utils import timezone

from dashboard.rollups.services import PassResult, rollup_catch_up
from ingest.engine import Periodic, as_leader

log = logging.getLogger("runledger.rollups")
LOCK_KEY = 0x726F6C6C7570  # "rollup"
INTERVAL_SECONDS = 5.0


def rollup_pass_if_leader(*, now: datetime, max_hours: int = 24) -> PassResult | None:
    """One pass, unless another runner is in the middle of one (then None)."""
    return as_leader(LOCK_KEY, lambda: rollup_catch_up(now=now, max_hours=max_hours))


class RollupRunner(Periodic):
    """`run()` passes until caught up, sleeps `interval`, and again, until `stop()`."""

    thread_name = "runledger-rollups"
    round_name = "rollup pass"
    log = log

    def __init__(self, *, interval: float = INTERVAL_SECONDS) -> None:
        super().__init__(interval=interval)

    def catch_up(self, *, clock: Callable[[], datetime] = timezone.now) -> int:
        """Passes until nothing is left to do (or another runner leads); how many ran."""
        passes = 0
        while not self.stopping:
            result = rollup_pass_if_leader(now=clock())
            if result is None:
                break
            passes += 1
            if result.caught_up:
                break
        return passes

    def run_once(self, clock: Callable[[], datetime]) -> int:
        return self.catch_up(clock=clock)
