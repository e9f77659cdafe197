"""`ctx.progress(done, total, message)`: how far a long step has got, throttled, in the history.

Each report that passes the throttle is a `step.progress` history row (the step's label, done,
total, message, attempt): the dashboard's follower already pushes history rows live to the
instance page, and the API reads a step's latest report from them. The throttle keeps a step
that reports per item to at most one row per RUNLEDGER_PROGRESS_SECONDS (default 1 s); the
first report and the last one (done == total) always pass.
"""

from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import connection

from ingest.engine import clock
from ingest.engine.models import History, HistoryKind
from ingest.engine.writes import notify

MAX_MESSAGE = 500
DEFAULT_SECONDS = 1.0


@dataclass
class Throttle:
    """When the last report of one attempt was written (monotonic seconds), -inf before any."""

    last: float = float("-inf")

    def passes(self, *, done: float, total: float | None, now: float, every: float) -> bool:
        if (total is not None and done >= total) or now - self.last >= every:
            self.last = now
            return True
        return False


def checked(done: Any, total: Any, message: Any) -> tuple[float, float | None, str]:
    """The report's values, or ValueError saying which one is wrong."""
    for label, value in (("done", done), ("total", total)):
        if value is None and label == "total":
            continue
        if isinstance(value, bool) or not isinstance(value, int | float) or value < 0 or value != value:
            raise ValueError(f"ctx.progress({label}=...) must be a number ≥ 0; got {value!r}")
    if not isinstance(message, str):
        raise ValueError(f"ctx.progress(message=...) must be a string; got {type(message).__name__}")
    return done, total, message[:MAX_MESSAGE]


def report(
    *,
    throttle: Throttle,
    instance_id: str,
    workflow: str,
    tenant: str,
    label: str,
    attempt: int,
    done: Any,
    total: Any = None,
    message: str = "",
) -> bool:
    """Write the report if the throttle lets it pass; True when it was written."""
    value, whole, text = checked(done, total, message)
    every = float(getattr(settings, "RUNLEDGER_PROGRESS_SECONDS", DEFAULT_SECONDS))
    if not throttle.passes(done=value, total=whole, now=time.monotonic(), every=every):
        return False
    row = History(
        instance_id=instance_id,
        workflow=workflow,
        tenant=tenant,
        kind=HistoryKind.STEP_PROGRESS,
        step_name=label,
        data={"done": value, "total": whole, "message": text, "attempt": attempt},
        created_at=clock.now(),
    )
    if _in_event_loop():
        # An async step's body runs on an event loop, where Django refuses blocking queries.
        worker = threading.Thread(target=_write, args=(row,), name="runledger-progress")
        worker.start()
        worker.join()
    else:
        _write(row)
    return True


def _write(row: History) -> None:
    try:
        row.save(force_insert=True)
        notify.history()
    finally:
        if threading.current_thread().name == "runledger-progress":
            connection.close()


def _in_event_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True
