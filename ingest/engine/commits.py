"""Group commit: the writes of a worker's concurrent instances share one transaction.

Every completed step must be durable before its instance runs on (a crash must never re-run a
completed step), so each completion waits for a commit and its WAL flush. One transaction per
step costs PostgreSQL a statement, a transaction and a commit record, and the worker a round
trip; with a process running many instances at once these are shared. The first thread to
arrive with no batch in flight leads: it sends every write queued by then as one statement
(sql.group_write: step completions and instance completions, one transaction), while the
threads that arrive meanwhile queue for the next batch, which the first of them leads. A thread
returns only once the transaction holding its write has committed, so each step is exactly as
durable as with a commit of its own; a batch of one costs what one statement did before.

Each write keeps its own guard (the lease check) inside the statement: a batch holding the
write of an instance whose lease was lost writes nothing for that instance, and the others
commit. Should the batch fail as a whole (a broken connection, a deadlock with an operator's
transaction), each write of it is run again alone, so one bad write does not fail its
neighbours, and an error reaches only the thread whose write caused it.

PostgreSQL only. The process has one connection for this, beside each turn thread's Django
connection, opened on first use and closed when idle.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from django.db.utils import DatabaseError, OperationalError

from ingest.engine.sql import Completion, InstanceDone

log = logging.getLogger("runledger.engine")

IDLE_CLOSE_SECONDS = 2.0


class _Write:
    """One write waiting for its group transaction. `done` is held until that has committed (or
    until this thread is to lead the next batch)."""

    __slots__ = ("write", "done", "lead", "result", "error")

    def __init__(self, write: Completion | InstanceDone) -> None:
        self.write = write
        self.done = threading.Lock()
        self.done.acquire()
        self.lead = False
        self.result: Any = None
        self.error: BaseException | None = None


class GroupCommit:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._queue: list[_Write] = []
        self._leading = False
        self._conn: Any = None
        self._used_at = 0.0
        self._closer: threading.Thread | None = None
        self.batches = 0
        self.writes = 0

    def finish(self, completion: Completion) -> tuple[str, int] | None:
        """Store a step's successful attempt; once committed, return (control, step id), or None
        when the lease is lost. Raises Django's DatabaseError when the write fails."""
        return self._submit(completion)  # type: ignore[no-any-return]

    def complete(self, done: InstanceDone) -> bool:
        """Complete an instance with its output, releasing its lease; False when the lease is lost."""
        return bool(self._submit(done))

    def close(self) -> None:
        """Close the connection now, unless a batch is being written (tests, before dropping a database)."""
        with self._lock:
            if not self._leading and self._conn is not None:
                conn, self._conn = self._conn, None
                conn.close()

    def _submit(self, write: Completion | InstanceDone) -> Any:
        item = _Write(write)
        with self._lock:
            self._queue.append(item)
            lead = not self._leading
            self._leading = True
        if not lead:
            item.done.acquire()  # released once its batch has committed, or to lead the next one
            if not item.lead:
                return _outcome(item)
        self._lead()
        return _outcome(item)

    def _lead(self) -> None:
        """Write what is queued as one transaction; then hand the lead to the first thread that
        queued meanwhile, or give it up when nobody did."""
        with self._lock:
            batch, self._queue = self._queue, []
        try:
            self._write(batch)
        except Exception as exc:  # noqa: BLE001 - not the database's: every write of the batch fails with it
            for item in batch:
                item.error = item.error or _django_error(exc)
        finally:
            for item in batch:
                if item.lead:
                    item.lead = False  # this thread: it is not waiting
                else:
                    item.done.release()
            with self._lock:
                if self._queue:
                    nxt = self._queue[0]
                    nxt.lead = True
                    nxt.done.release()
                else:
                    self._leading = False

    def _write(self, batch: list[_Write]) -> None:
        import psycopg

        self.batches += 1
        self.writes += len(batch)
        try:
            conn = self._connection()
            try:
                _apply(conn, batch)
            except psycopg.OperationalError:
                if not conn.broken:
                    raise
                # The connection had died while idle (a restarted server, an administrator's
                # terminate): the statement never ran there. Once more on a new connection.
                _apply(self._connection(), batch)
        except psycopg.Error as exc:
            if len(batch) == 1:
                batch[0].error = _django_error(exc)
                return
            log.info("group commit of %d writes failed (%s); writing each alone", len(batch), exc)
            for item in batch:
                try:
                    _apply(self._connection(), [item])
                except psycopg.Error as alone:
                    item.error = _django_error(alone)

    def _connection(self) -> Any:
        from ingest.engine import sql

        if self._conn is None or self._conn.closed or self._conn.broken:
            self._conn = sql.engine_connection()
            if self._closer is None:
                self._closer = threading.Thread(target=self._close_when_idle, name="runledger-commits", daemon=True)
                self._closer.start()
        self._used_at = time.monotonic()
        return self._conn

    def _close_when_idle(self) -> None:
        while True:
            time.sleep(IDLE_CLOSE_SECONDS / 2)
            if time.monotonic() - self._used_at > IDLE_CLOSE_SECONDS:
                self.close()  # idle: hold no connection (it would block dropping a database)


def _apply(conn: Any, batch: list[_Write]) -> None:
    from ingest.engine import sql

    if len(batch) == 1:
        item = batch[0]
        item.result = item.write.write_alone(conn)
        return
    steps = [item.write for item in batch if isinstance(item.write, Completion)]
    done = [item.write for item in batch if isinstance(item.write, InstanceDone)]
    written, completed = sql.group_write(conn, steps, done)
    for item in batch:
        w = item.write
        if isinstance(w, Completion):
            item.result = written.get((w.row.iid, w.row.name, w.row.seq))
        else:
            item.result = w.iid in completed


def _outcome(item: _Write) -> Any:
    if item.error is not None:
        raise item.error
    return item.result


def _django_error(exc: BaseException) -> DatabaseError:
    import psycopg

    cls = OperationalError if isinstance(exc, psycopg.OperationalError) else DatabaseError
    error = cls(str(exc))
    error.__cause__ = exc
    return error


group = GroupCommit()
