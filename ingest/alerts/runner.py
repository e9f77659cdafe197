"""Who evaluates alerts: `AlertRunner`, a loop of rounds every second (the periodic loop the
scheduler and the rollup runner use). A round follows the history (instances ended, dead letters,
approvals) and then, every `check_every` rounds, checks the time-based conditions.

`manage.py alerts` runs it as a process of its own (any number of them: rounds of two runners
never overlap, the follower's state row is locked for a round and the checks take a
transaction-level advisory lock on PostgreSQL); `manage.py up` runs it in a thread.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime

from ingest.alerts.checks import checks_round
from ingest.alerts.follow import follow_round
from ingest.engine import Periodic, as_leader

log = logging.getLogger("runledger.alerts")
LOCK_KEY = 0x616C65727473  # "alerts"
INTERVAL_SECONDS = 1.0
MAX_BATCHES = 200  # per round, so the checks still run under a flood
CHECK_EVERY = 10  # rounds: time-based conditions are minutes long, history events seconds


def checks_if_leader(*, now: datetime) -> int | None:
    return as_leader(LOCK_KEY, lambda: checks_round(now=now))


class AlertRunner(Periodic):
    thread_name = "runledger-alerts"
    round_name = "alerts round"
    log = log

    def __init__(self, *, interval: float = INTERVAL_SECONDS, check_every: int = CHECK_EVERY) -> None:
        super().__init__(interval=interval)
        self.check_every = check_every
        self.rounds = 0

    def run_once(self, clock: Callable[[], datetime]) -> int:
        read = 0
        for _ in range(MAX_BATCHES):  # catch up on a burst, a small committed batch at a time
            count = follow_round(now=clock())
            read += count
            if count == 0 or self.stopping:
                break
        if self.rounds % self.check_every == 0:
            checks_if_leader(now=clock())
        self.rounds += 1
        return read
