"""Who runs retention: `RetentionRunner`, a loop that purges due instances once an interval.

`manage.py retention` runs it as a process of its own; `manage.py up` runs it in a thread beside
the embedded worker. On PostgreSQL one runner at a time holds a session advisory lock for a round
(the others skip it); the batches inside a round commit one by one, so workers never wait on it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

from django.conf import settings

from ingest.engine.periodic import Periodic
from ingest.engine.services.retention import RetentionResult, retention_run
from ingest.engine.sql.advisory import session_lock_try, session_unlock

log = logging.getLogger("runledger.retention")
LOCK_KEY = 0x726574656E74  # "retent"
INTERVAL_SECONDS = 3600.0


def archive_dir() -> Path:
    return Path(getattr(settings, "RUNLEDGER_ARCHIVE_DIR", Path(settings.BASE_DIR) / "var" / "archive"))


def retention_round(*, now: datetime, stopping: Callable[[], bool] = lambda: False) -> RetentionResult | None:
    """One round, unless another runner holds the lock (then None)."""
    if not session_lock_try(LOCK_KEY):
        return None
    try:
        result = retention_run(now=now, archive_dir=archive_dir(), stopping=stopping)
    finally:
        session_unlock(LOCK_KEY)
    if result.purged:
        log.info("retention archived and purged %s in %d batch(es)", result.purged, result.batches)
    if result.journal_pruned:
        log.info("retention dropped %d call journal row(s) of finished instances", result.journal_pruned)
    return result


class RetentionRunner(Periodic):
    thread_name = "runledger-retention"
    round_name = "retention round"
    log = log

    def __init__(self, *, interval: float = INTERVAL_SECONDS) -> None:
        super().__init__(interval=interval)

    def run_once(self, clock: Callable[[], datetime]) -> RetentionResult | None:
        return retention_round(now=clock(), stopping=lambda: self.stopping)
