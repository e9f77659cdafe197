"""Group commit: the writes of a worker's concurrent instances share one transaction.

Every completed step must be durable before its instance runs on (a crash must never re-run a
completed step), so each completion waits for a commit and its WAL flush. One transaction per
step costs PostgreSQL a statement, a transaction and a commit record, and the worker a round
trip; with a process running many instances at once these are shared. The first thread to
arrive with no batch in flight leads: it sends every write queued by then as one statement
(sql/group.py's group_write: step completions and instance completions, one transaction), while the
threads that arrive meanwhile queue for the next batch, which the first of them leads. A thread
returns only once the transaction holding its write has committed, so each step is exactly as
durable as with a commit of its own; a batch of one costs what one statement did before.

Each write keeps its own guard (the lease check) inside the statement: a batch holding the
write of an instance whose lease was lost writes nothing for that instance, and the others
commit. Should the batch fail as a whole (a broken connection, a deadlock with an operator's
transaction), each write of it is run again alone, so one bad write does not fail its
neighbours, and an error reaches only the thread whose write caused it.

A step run with `checkpoint="deferred"` does not wait: its completion is queued (`submit`) and
its thread runs on, collecting the outcome later (`Pending.wait`, at the instance's next
barrier, runtime/store.py). A batch whose first write nobody waits for is led by the process's
committer thread instead, which lets it gather for GATHER_SECONDS first, so the deferred writes
of those milliseconds share its transaction, unless a thread comes to wait on it (a barrier, a
waited write queued behind it): fewer transactions per call, and less of PostgreSQL's CPU
(docs/pipelines.md has the figures). Writes commit in the order they were queued, and once a write of a turn has failed,
every later write of that turn (its instance and lease token) is refused unwritten: an
instance's history is always a prefix of what its turn did, and its completion can be queued
behind its deferred steps without waiting for them first.

Two group commits, each with its own connection: `group` takes deferred completions and
instances' completions, `express` the completions a thread waits for. A waited completion is
never queued behind a batch of other instances' deferred writes (a batch holds several), and
it needs no order with them: its own
instance's deferred completions were all collected before its step started (the barrier).

PostgreSQL only. The process has two connections for this, beside each turn thread's Django
connection, opened on first use and closed when idle.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from typing import Any

from django.db.utils import DatabaseError, OperationalError

from ingest.engine import pg
from ingest.engine.sql.base import engine_connection
from ingest.engine.sql.group import group_write
from ingest.engine.sql.instances import InstanceDone
from ingest.engine.sql.steps import Completion

log = logging.getLogger("runledger.engine")

IDLE_CLOSE_SECONDS = 2.0
# How long the committer lets a batch of deferred writes gather before it writes it, unless a
# thread comes to wait on the batch (a waited write queued behind it, a barrier).
GATHER_SECONDS = 0.003
POISON_SECONDS = 3600.0  # far longer than any lease: a turn's token is dead long before


class EarlierWriteFailed(DatabaseError):
    """A write refused because an earlier write of the same turn failed."""


class _Write:
    """One write waiting for its group transaction. `done` is held until that has committed (or
    until this thread is to lead the next batch). A detached write's thread does not wait to
    lead: the committer thread leads its batch."""

    __slots__ = ("write", "done", "lead", "detached", "result", "error")

    def __init__(self, write: Completion | InstanceDone, *, detached: bool = False) -> None:
        self.write = write
        self.done = threading.Lock()
        self.done.acquire()
        self.lead = False
        self.detached = detached
        self.result: Any = None
        self.error: BaseException | None = None


class Pending:
    """A queued completion (`GroupCommit.submit`); `wait` returns what `finish` would have."""

    __slots__ = ("_item", "_hurry", "_settled")

    def __init__(self, item: _Write, hurry: threading.Event) -> None:
        self._item = item
        self._hurry = hurry
        self._settled = False

    def wait(self) -> tuple[str, int] | None:
        if not self._settled:
            if not self._item.done.acquire(blocking=False):
                self._hurry.set()  # someone waits now: the committer stops gathering
                self._item.done.acquire()
            self._settled = True
        return _outcome(self._item)  # type: ignore[no-any-return]


class GroupCommit:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._queue: list[_Write] = []
        self._leading = False
        self._conn: Any = None
        self._used_at = 0.0
        self._epoch = 0  # pg.connections_epoch() when the connection was opened
        self._closer: threading.Thread | None = None
        self._committer: threading.Thread | None = None
        self._kick = threading.Event()
        self._hurry = threading.Event()
        self._committer_lock = threading.Lock()
        # (instance id, lease token) -> when one of that turn's writes failed
        self._failed_turns: dict[tuple[str, str], float] = {}
        self.batches = 0
        self.writes = 0

    def finish(self, completion: Completion) -> tuple[str, int] | None:
        """Store a step's successful attempt; once committed, return (control, step id), or None
        when the lease is lost. Raises Django's DatabaseError when the write fails."""
        return self._submit(completion)  # type: ignore[no-any-return]

    def submit(self, completion: Completion) -> Pending:
        """Queue a step's successful attempt and return at once; the committer thread leads its
        batch when no batch is being written."""
        item = _Write(completion, detached=True)
        with self._lock:
            self._queue.append(item)
            if self._leading:
                return Pending(item, self._hurry)
            self._leading = True
        self._wake_committer()
        return Pending(item, self._hurry)

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
            # Queued behind a write nobody waits for: the committer leads that batch, and may be
            # gathering it now.
            hurry = not lead and self._queue[0].detached
        if hurry:
            self._hurry.set()
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
                if not self._queue:
                    self._leading = False
                elif self._queue[0].detached:
                    self._wake_committer()
                else:
                    nxt = self._queue[0]
                    nxt.lead = True
                    nxt.done.release()

    def _write(self, batch: list[_Write]) -> None:
        import psycopg

        if self._failed_turns:
            batch = self._refuse_after_failures(batch)
            if not batch:
                return
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
            if not isinstance(exc, psycopg.DataError | psycopg.IntegrityError):
                # Not a write's own fault: the session's (a server gone, a read-only or full
                # database, a timeout). The next write starts a new one.
                self._drop_connection()
            if len(batch) == 1:
                self._failed(batch[0], _django_error(exc))
                return
            log.info("group commit of %d writes failed (%s); writing each alone", len(batch), exc)
            for item in batch:
                if not self._refuse_after_failures([item]):
                    continue
                try:
                    _apply(self._connection(), [item])
                except psycopg.Error as alone:
                    self._failed(item, _django_error(alone))

    def _failed(self, item: _Write, error: DatabaseError) -> None:
        item.error = error
        now = time.monotonic()
        if len(self._failed_turns) > 1000:
            self._failed_turns = {t: at for t, at in self._failed_turns.items() if now - at < POISON_SECONDS}
        self._failed_turns[(item.write.iid, item.write.token)] = now

    def _refuse_after_failures(self, batch: list[_Write]) -> list[_Write]:
        """The writes of `batch` whose turn has had no failed write; the others get an error."""
        kept = []
        for item in batch:
            if (item.write.iid, item.write.token) in self._failed_turns:
                item.error = EarlierWriteFailed(
                    f"not written: an earlier write of the same turn of instance {item.write.iid} failed"
                )
            else:
                kept.append(item)
        return kept

    def _wake_committer(self) -> None:
        if self._committer is None:
            with self._committer_lock:  # not self._lock: the lead is handed over holding it
                if self._committer is None:
                    self._committer = threading.Thread(
                        target=self._commit_forever, name="runledger-committer", daemon=True
                    )
                    self._committer.start()
        self._kick.set()

    def _commit_forever(self) -> None:
        while True:
            self._kick.wait()
            self._kick.clear()
            # The batch starts with a write nobody waits for: let the deferred writes of the
            # next few milliseconds join it (one transaction and WAL flush for all), unless a
            # thread comes to wait on it.
            self._hurry.wait(GATHER_SECONDS)
            self._hurry.clear()
            self._lead()

    def _drop_connection(self) -> None:
        """Close the connection at once (the leader only, which holds the lead: close() waits)."""
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.close()

    def _connection(self) -> Any:
        conn = self._conn
        if conn is None or conn.closed or conn.broken or self._epoch != pg.connections_epoch():
            # Opened before the process counted its connections lost (a restart): presumed dead.
            self._drop_connection()
            self._epoch = pg.connections_epoch()
            self._conn = engine_connection()
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
    if len(batch) == 1:
        item = batch[0]
        item.result = item.write.write_alone(conn)
        return
    steps = [item.write for item in batch if isinstance(item.write, Completion)]
    done = [item.write for item in batch if isinstance(item.write, InstanceDone)]
    written, completed = group_write(conn, steps, done)
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


group = GroupCommit()  # deferred step completions, instances' completions
express = GroupCommit()  # step completions a thread waits for
