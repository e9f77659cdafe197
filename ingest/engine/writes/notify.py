"""Wake-ups across processes on PostgreSQL: `runledger_ready` for workers, `runledger_history`
for the dashboard's live feed.

NOTIFY is sent after commit, from one thread per process with its own connection, at most once
per 50 ms per channel. Sending it inside the writing transaction (a trigger, say) would make
PostgreSQL hold its global notification lock through each commit's WAL flush, serialising every
worker's commits; here the notifying transaction writes nothing and flushes nothing.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from django.db import transaction

from ingest.engine import pg
from ingest.engine.backoff import Backoff, FailureLog
from ingest.engine.sql import channels as sql_channels
from ingest.engine.sql.base import ByVendor

log = logging.getLogger("runledger.engine")
COALESCE_SECONDS = 0.05
IDLE_CLOSE_SECONDS = 2.0
BACKOFF = Backoff(first=0.05, cap=1.0)


class Notifier:
    def __init__(self) -> None:
        self._pending: set[str] = set()
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._failures = FailureLog()

    def request(self, channel: str) -> None:
        if channel in self._pending:
            return  # already due to be sent: a busy worker asks once per step, the thread sends once
        with self._cond:
            self._pending.add(channel)
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name="runledger-notify", daemon=True)
                self._thread.start()
            self._cond.notify()

    def _loop(self) -> None:
        conn: Any = None
        failures = 0
        while True:
            with self._cond:
                while not self._pending:
                    if not self._cond.wait(timeout=IDLE_CLOSE_SECONDS) and conn is not None:
                        conn.close()  # idle: hold no connection (it would block dropping a database)
                        conn = None
                channels, self._pending = self._pending, set()
            try:
                conn = _send(conn, channels)
            except Exception as exc:  # noqa: BLE001 - listeners also poll; a lost notification costs latency only
                failures += 1
                shout, count = self._failures.failed(now=time.monotonic())
                if shout:
                    log.warning(
                        "could not NOTIFY %s (%s); trying again, listeners poll meanwhile (%d failure(s))",
                        ", ".join(sorted(channels)),
                        str(exc).strip().split("\n")[0],
                        count,
                    )
                conn = None
                with self._cond:
                    self._pending |= channels  # sent once the database answers again
                time.sleep(BACKOFF.delay(failures))
                continue
            if failures:
                self._failures.recovered()
                failures = 0
            time.sleep(COALESCE_SECONDS)


def _send(conn: Any, channels: set[str]) -> Any:
    """NOTIFY each channel on `conn` (a new connection when it is None, closed or presumed dead),
    once more on a new one when it turns out to have died while idle (a restarted server)."""
    import psycopg

    for attempt in (1, 2):
        if conn is None or conn.closed or conn.broken or getattr(conn, "_runledger_epoch", 0) != pg.connections_epoch():
            conn = psycopg.connect(pg.connection_string(), autocommit=True)
            conn._runledger_epoch = pg.connections_epoch()
        try:
            sql_channels.notify_all(conn, sorted(channels))
            return conn
        except psycopg.OperationalError:
            if attempt == 2 or not conn.broken:
                raise
            conn = None
    return conn


_notifier = Notifier()


def _notify_after_commit(channel: str) -> None:
    conn = transaction.get_connection()
    if conn.in_atomic_block:
        conn.on_commit(lambda: _notifier.request(channel))
    else:  # autocommit: the statement that asked has committed already
        _notifier.request(channel)


def _nobody_listens(channel: str) -> None:
    """SQLite: one process; the live feed polls and the worker's idle wait is short."""


_after_commit = ByVendor[Callable[[str], None]](postgresql=_notify_after_commit, sqlite=_nobody_listens)


def ready() -> None:
    """Instances became runnable: wake idle workers (after this transaction commits)."""
    _after_commit()(sql_channels.READY_CHANNEL)


def request_history() -> None:
    """History rows were committed by this thread's own connection: wake the followers now."""
    _notifier.request(sql_channels.HISTORY_CHANNEL)


def history() -> None:
    """History rows were written: wake the dashboards' followers (after this transaction commits)."""
    _after_commit()(sql_channels.HISTORY_CHANNEL)
