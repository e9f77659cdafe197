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

from django.db import transaction

from ingest.engine.sql import channels as sql_channels
from ingest.engine.sql.base import is_postgres

log = logging.getLogger("runledger.engine")
COALESCE_SECONDS = 0.05
IDLE_CLOSE_SECONDS = 2.0


class Notifier:
    def __init__(self) -> None:
        self._pending: set[str] = set()
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None

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
        import psycopg

        from ingest.engine.pg import connection_string

        conn: psycopg.Connection[tuple[object, ...]] | None = None
        while True:
            with self._cond:
                while not self._pending:
                    if not self._cond.wait(timeout=IDLE_CLOSE_SECONDS) and conn is not None:
                        conn.close()  # idle: hold no connection (it would block dropping a database)
                        conn = None
                channels, self._pending = self._pending, set()
            try:
                if conn is None or conn.closed:
                    conn = psycopg.connect(connection_string(), autocommit=True)
                for channel in sorted(channels):
                    sql_channels.notify(conn, channel)
            except Exception:  # noqa: BLE001 - listeners also poll; a lost notification costs latency only
                log.warning("could not NOTIFY %s; listeners will find the change by polling", ", ".join(channels))
                conn = None
            time.sleep(COALESCE_SECONDS)


_notifier = Notifier()


def _after_commit(channel: str) -> None:
    if is_postgres():
        conn = transaction.get_connection()
        if conn.in_atomic_block:
            conn.on_commit(lambda: _notifier.request(channel))
        else:  # autocommit: the statement that asked has committed already
            _notifier.request(channel)


def ready() -> None:
    """Instances became runnable: wake idle workers (after this transaction commits)."""
    _after_commit(sql_channels.READY_CHANNEL)


def request_history() -> None:
    """History rows were committed by this thread's own connection: wake the followers now."""
    _notifier.request(sql_channels.HISTORY_CHANNEL)


def history() -> None:
    """History rows were written: wake the dashboards' followers (after this transaction commits)."""
    _after_commit(sql_channels.HISTORY_CHANNEL)
