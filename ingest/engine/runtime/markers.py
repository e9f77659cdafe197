"""Start markers of steps that run for a while (PostgreSQL).

A step's first attempt writes nothing when it starts. If it finishes within `RUNLEDGER_MARKER_MS`
(most ledger and bookkeeping steps do), its completion writes the row, the attempt and both
history rows (started, completed) in one statement: one commit per step instead of two. If it is
still running after that delay, this module's thread writes its start marker (the running row and
the step.started history row) on its own connection, so the dashboard shows the step running and a
replay after a crash sees that an attempt was under way and counts it.

What a crash loses: a step that dies before its marker is written is replayed as if it had never
started; it runs again with the same idempotency key and the same attempt number. No completed
step is lost or run again: a step is complete only once its completion has committed.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.conf import settings

from ingest.engine.backoff import FailureLog
from ingest.engine.sql import steps as sql_steps
from ingest.engine.writes import notify

log = logging.getLogger("runledger.engine")
_FAILURES = FailureLog()
IDLE_CLOSE_SECONDS = 2.0

PENDING, WRITING, WRITTEN, CANCELLED = "pending", "writing", "written", "cancelled"
TICK_SECONDS = 0.01  # how late past its due time a marker may be written, to write several at once


@dataclass(eq=False)
class Marker:
    """One step's start marker, from its scheduling until it is written or no longer needed."""

    row: sql_steps.StepRow
    token: str
    started: datetime
    attempt: int
    due: float  # time.monotonic() at which the thread writes it
    state: str = PENDING
    step_id: int | None = None

    def settle(self) -> bool:
        """Called by the step's thread when the attempt ends: stop the marker if it has not been
        written. Returns True when it was written (or was being written, now finished)."""
        with _markers.cond:
            if self.state == PENDING:
                self.state = CANCELLED
                return False
            while self.state == WRITING:
                _markers.cond.wait()
            return self.state == WRITTEN


class Markers:
    """A queue of markers in due order and the thread that writes those that fall due.

    Scheduling a marker costs a push under a lock: the thread is woken only when it is idle
    (nothing queued). Otherwise it sleeps until the first marker still wanted falls due, plus
    TICK_SECONDS to write those falling due meanwhile in the same pass (`sleep_seconds`), so a
    marker is written between RUNLEDGER_MARKER_MS and RUNLEDGER_MARKER_MS + TICK_SECONDS after
    its step started, and a busy worker pays neither a thread wake-up per step nor one per tick:
    most steps settle their marker long before it falls due, and the thread sleeps past them.
    """

    def __init__(self) -> None:
        self.cond = threading.Condition(threading.Lock())
        self._queue: collections.deque[Marker] = collections.deque()  # due order: one fixed delay
        self._idle = False
        self._thread: threading.Thread | None = None
        self._connection_string = ""

    def schedule(self, *, row: sql_steps.StepRow, token: str, started: datetime, attempt: int) -> Marker:
        marker = Marker(
            row=row,
            token=token,
            started=started,
            attempt=attempt,
            due=time.monotonic() + settings.RUNLEDGER_MARKER_MS / 1000,
        )
        with self.cond:
            if self._thread is None:
                from ingest.engine.pg import connection_string

                self._connection_string = connection_string()
                self._thread = threading.Thread(target=self._loop, name="runledger-markers", daemon=True)
                self._thread.start()
            self._queue.append(marker)
            if self._idle:
                self.cond.notify_all()
        return marker

    def _due(self) -> list[Marker] | None:
        """The markers that fell due and are still wanted (now WRITING); None when idle for long."""
        with self.cond:
            while True:
                queue = self._queue
                now = time.monotonic()
                wait = sleep_seconds(queue, now)
                if wait == 0.0:
                    due = []
                    while queue and queue[0].due <= now:
                        marker = queue.popleft()
                        if marker.state == PENDING:
                            marker.state = WRITING
                            due.append(marker)
                    return due
                if wait is not None:
                    # A marker scheduled meanwhile falls due later (one fixed delay): no wake-up.
                    self.cond.wait(timeout=wait)
                    continue
                self._idle = True
                woken = self.cond.wait(timeout=IDLE_CLOSE_SECONDS)
                self._idle = False
                if not woken and not self._queue:
                    return None

    def _connect(self) -> Any:
        import psycopg

        return psycopg.connect(self._connection_string, autocommit=True)

    def _loop(self) -> None:
        conn: Any = None
        while True:
            due = self._due()
            if due is None:
                if conn is not None:
                    conn.close()  # idle: hold no connection
                    conn = None
                continue
            written = False
            for marker in due:
                ok = False
                try:
                    if conn is None or conn.closed:
                        conn = self._connect()
                    marker.step_id = sql_steps.step_mark_started(
                        conn,
                        row=marker.row,
                        token=marker.token,
                        now=sql_now(),
                        started=marker.started,
                        attempt=marker.attempt,
                    )
                    ok = marker.step_id is not None
                except Exception as exc:  # noqa: BLE001 - a marker is advisory; the completion writes the row anyway
                    # Said once, then every 30 s: a database that is away fails every marker.
                    shout, count = _FAILURES.failed(now=time.monotonic())
                    if shout:
                        log.warning(
                            "could not write the start marker of step %s of %s (%s; %d such failure(s) "
                            "in this process)",
                            marker.row.label,
                            marker.row.iid,
                            exc,
                            count,
                        )
                    if conn is not None:
                        conn.close()  # a new session next time (a restarted server, a database made writable)
                        conn = None
                with self.cond:
                    marker.state = WRITTEN if ok else CANCELLED
                    self.cond.notify_all()
                written = written or ok
            if written:
                notify.request_history()


def sleep_seconds(queue: collections.deque[Marker], now: float) -> float | None:
    """How long the markers' thread sleeps, at `now`: 0 when the first marker still wanted has
    fallen due (write it), until it falls due plus TICK_SECONDS otherwise, None when none is
    queued (until a step schedules one). Drops from the head the markers that no longer need
    writing (their step settled them first)."""
    while queue and queue[0].state != PENDING:
        queue.popleft()
    if not queue:
        return None
    if queue[0].due <= now:
        return 0.0
    return queue[0].due - now + TICK_SECONDS


def sql_now() -> datetime:
    from ingest.engine import clock

    return clock.now()


_markers = Markers()


def schedule(*, row: sql_steps.StepRow, token: str, started: datetime, attempt: int) -> Marker:
    """Write this step's start marker if it is still running after RUNLEDGER_MARKER_MS."""
    return _markers.schedule(row=row, token=token, started=started, attempt=attempt)
