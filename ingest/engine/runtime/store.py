"""What a worker writes while it runs an instance. Every write is guarded by the lease.

`InstanceStore` holds a turn's write state (the lease, the barrier, the writes deferred to the
next transaction) and the writes of `step.do`; store_waits.py writes the waits, store_end.py
the end of the turn, through the same guard.

One durable transaction per step outcome: the step row, its attempt, its history, and the lease
check. A step's start marker commits without waiting for the WAL flush (sql/lease.py's async_commit).

A step run with `checkpoint="deferred"` queues its completion on the group commit and returns;
the queued completions are collected (`settle`) before any other write of the instance and
before a step that is not deferred starts (execution.py): that is the instance's barrier.
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db import DatabaseError, transaction

from ingest.engine.models import Attempt, AttemptWait, History, HistoryKind, Step, StepStatus
from ingest.engine.runtime.records import (
    EngineFault,
    Failure,
    LeaseLost,
    SleepWrite,
    StepRecord,
    ledger_io,
    step_label,
)
from ingest.engine.runtime.step_writes import StepStart, attempt_logs, step_writes
from ingest.engine.sql import lease as sql_lease
from ingest.engine.writes import notify

log = logging.getLogger("runledger.engine")


@dataclass
class InstanceStore:
    instance_id: str
    token: str
    worker: str
    workflow: str
    tenant: str
    lease: timedelta
    control: str = ""
    deferred: list[Callable[[], None]] = field(default_factory=list)
    _sleep_write: SleepWrite | None = None
    _histories: list[History] = field(default_factory=list)
    # Deferred completions not collected yet, oldest first, with the step they complete.
    _pending: list[tuple[StepRecord, Any]] = field(default_factory=list)
    _pending_lock: threading.Lock = field(default_factory=threading.Lock)

    # ---- reads -----------------------------------------------------------------------

    @ledger_io
    def load_steps(self) -> list[StepRecord]:
        return step_writes().load(self.instance_id)

    @ledger_io
    def step_traceback(self, rec: StepRecord) -> str:
        """The stored traceback of a step (where a sensitive step keeps its sealed failure)."""
        return Step.objects.filter(id=rec.id).values_list("error_traceback", flat=True).first() or ""

    # ---- the barrier -------------------------------------------------------------------

    @ledger_io
    def settle(self) -> None:
        """Wait until every deferred completion of this turn has committed. Raises LeaseLost
        when one found the lease gone, EngineFault when one could not be written; either way
        after collecting all of them, so none is left in flight behind the turn."""
        with self._pending_lock:
            pending, self._pending = self._pending, []
        if not pending:
            return
        lost = False
        error: DatabaseError | None = None
        for rec, handle in pending:
            try:
                got = handle.wait()
            except DatabaseError as exc:
                error = error or exc
                continue
            if got is None:
                lost = True
            else:
                self.control, rec.id = got
        notify.history()
        if error is not None:
            raise error
        if lost:
            raise LeaseLost(self.instance_id)

    def settle_quietly(self) -> None:
        """Collect what is still in flight at the end of an abandoned turn, raising nothing."""
        with contextlib.suppress(LeaseLost, EngineFault):
            self.settle()

    # ---- the guard ---------------------------------------------------------------------

    def _guard(self, now: datetime) -> None:
        """Check the lease (and extend it), then apply writes deferred to this transaction."""
        control = sql_lease.guard(instance_id=self.instance_id, token=self.token, now=now, lease_until=now + self.lease)
        if control is None:
            raise LeaseLost(self.instance_id)
        self.control = control
        deferred, self.deferred = self.deferred, []
        for write in deferred:
            write()

    def defer(self, write: Callable[[], None], *, sleep: SleepWrite | None = None) -> None:
        """Run `write` inside the next transaction this turn opens.

        For writes whose loss in a crash is harmless because replay makes them again (a sleep
        found due, say): they ride along with the next write instead of costing a commit.
        `sleep` says the same write as data, for the one-statement paths of a sleep's start
        (suspend) and of its end (finish) on PostgreSQL.
        """
        self.deferred.append(write)
        self._sleep_write = sleep if len(self.deferred) == 1 else None

    def only_sleep_write(self, kind: str) -> SleepWrite | None:
        """The deferred write, when it is the only one and a sleep's `kind` ("start" or "end")."""
        if len(self.deferred) == 1 and self._sleep_write is not None and self._sleep_write.kind == kind:
            return self._sleep_write
        return None

    def clear_deferred(self) -> None:
        """Forget the deferred writes: a one-statement path has written them."""
        self.deferred, self._sleep_write = [], None

    @contextmanager
    def txn(self, now: datetime) -> Iterator[None]:
        """A transaction that first checks the lease and ends by writing its history rows at once."""
        self.settle()
        with transaction.atomic():
            self._guard(now)
            yield
            if self._histories:
                rows, self._histories = self._histories, []
                History.objects.bulk_create(rows)
                notify.history()

    def history(self, kind: str, now: datetime, *, step_name: str = "", status: str = "", **data: Any) -> History:
        row = History(
            instance_id=self.instance_id,
            workflow=self.workflow,
            tenant=self.tenant,
            kind=kind,
            step_name=step_name,
            status=status,
            data=data,
            created_at=now,
        )
        self._histories.append(row)
        return row

    # ---- step.do ---------------------------------------------------------------------

    @ledger_io
    def step_started(self, rec: StepRecord | None, start: StepStart) -> StepRecord:
        if rec is None and not self.deferred:
            unwritten = step_writes().first_attempt(self, start)
            if unwritten is not None:
                return unwritten
        with self.txn(start.now):
            sql_lease.async_commit()
            if rec is None:
                step = Step.objects.create(
                    instance_id=self.instance_id,
                    name=start.name,
                    seq=start.seq,
                    position=start.position,
                    kind=start.kind,
                    status=StepStatus.RUNNING,
                    config=start.config.as_json(),
                    attempts=start.attempt,
                    sensitive=start.sensitive,
                    has_rollback=start.has_rollback,
                    started_at=start.now,
                )
                rec = start.running(step.id)
            else:
                Step.objects.filter(id=rec.id).update(status=StepStatus.RUNNING, attempts=start.attempt, wake_at=None)
                rec.status, rec.attempts, rec.wake_at = StepStatus.RUNNING, start.attempt, None
            self.history(
                HistoryKind.STEP_STARTED, start.now, step_name=step_label(start.name, start.seq), attempt=start.attempt
            )
        return rec

    def queue_completion(self, rec: StepRecord, handle: Any) -> None:
        """A completion handed to the group commit, collected by the next `settle`."""
        with self._pending_lock:
            self._pending.append((rec, handle))

    def settle_marker(self, rec: StepRecord) -> bool:
        """End the attempt's start marker; True when the step's row was not written (so the
        caller writes it, with its step.started history)."""
        marker, rec.marker = rec.marker, None
        if marker is None:
            return False
        if marker.settle():
            assert marker.step_id is not None
            rec.id = marker.step_id
            return False
        return True

    def _materialize(self, rec: StepRecord) -> None:
        """Make sure a first attempt's row exists before writing anything that refers to it."""
        if not self.settle_marker(rec):
            return
        assert rec.started_at is not None and rec.row is not None
        row = rec.row
        with self.txn(rec.started_at):
            step = Step.objects.create(
                instance_id=self.instance_id,
                name=rec.name,
                seq=rec.seq,
                position=rec.position,
                kind=rec.kind,
                status=StepStatus.RUNNING,
                config=json.loads(row.config),
                attempts=rec.attempts,
                sensitive=row.sensitive,
                has_rollback=row.has_rollback,
                started_at=rec.started_at,
            )
            self.history(HistoryKind.STEP_STARTED, rec.started_at, step_name=row.label, attempt=rec.attempts)
        rec.id = step.id

    @ledger_io
    def step_completed(
        self,
        rec: StepRecord,
        *,
        attempt: int,
        started: datetime,
        now: datetime,
        result: Any,
        encoded: str | None = None,
        deferred: bool = False,
        logs: str | None = None,
    ) -> None:
        """Store a successful attempt's result (`encoded`: its JSON, when the caller has it) and
        what it logged (`logs`: JSON, runtime/steplog.py; None when it logged nothing).

        `deferred`: queue the write and return before it commits (collected by `settle`); on
        SQLite, or with writes deferred to this transaction, it is written at once."""
        step_writes().completed(
            self,
            rec,
            attempt=attempt,
            started=started,
            now=now,
            result=result,
            encoded=encoded,
            deferred=deferred,
            logs=logs,
        )

    @ledger_io
    def step_attempt_failed(
        self,
        rec: StepRecord,
        *,
        attempt: int,
        started: datetime,
        now: datetime,
        failure: Failure,
        retry_at: datetime | None,
        logs: str | None = None,
    ) -> None:
        """Record a failed attempt, with what it logged: a retry at `retry_at`, or the step's
        final failure."""
        self._materialize(rec)
        delay = None if retry_at is None else (retry_at - now).total_seconds()
        with self.txn(now):
            Attempt.objects.create(
                step_id=rec.id,
                number=attempt,
                started_at=started,
                ended_at=now,
                ok=False,
                error_name=failure.name,
                error_message=failure.message,
                error_traceback=failure.traceback,
                retry_delay_seconds=delay,
                worker=self.worker,
                logs=attempt_logs(logs),
            )
            if retry_at is None:
                Step.objects.filter(id=rec.id).update(
                    status=StepStatus.ERRORED,
                    ended_at=now,
                    attempts=attempt,
                    error_name=failure.name,
                    error_message=failure.message,
                    error_traceback=failure.traceback,
                    error_state=failure.state,
                    wake_at=None,
                    live_log=None,
                )
                self.history(
                    HistoryKind.STEP_FAILED,
                    now,
                    step_name=step_label(rec.name, rec.seq),
                    attempt=attempt,
                    error=failure.name,
                    message=failure.message[:500],
                )
            else:
                Step.objects.filter(id=rec.id).update(
                    attempts=attempt,
                    wake_at=retry_at,
                    live_log=None,
                    error_name=failure.name,
                    error_message=failure.message,
                )
                self.history(
                    HistoryKind.STEP_RETRY,
                    now,
                    step_name=step_label(rec.name, rec.seq),
                    attempt=attempt,
                    error=failure.name,
                    message=failure.message[:500],
                    delay=delay,
                )
        rec.attempts, rec.wake_at = attempt, retry_at
        if retry_at is None:
            rec.status, rec.error_name, rec.error_message = StepStatus.ERRORED, failure.name, failure.message
            rec.error_state = failure.state

    @ledger_io
    def live_lines(self, rec: StepRecord) -> str | None:
        """The lines a running attempt's live writes kept (JSON, runtime/steplog.py), when the
        step's current attempt made them: what an attempt whose worker was lost had logged."""
        if rec.id == 0:
            return None
        live = Step.objects.filter(id=rec.id).values_list("live_log", flat=True).first()
        if not isinstance(live, dict) or live.get("attempt") != rec.attempts:
            return None
        return json.dumps({"lines": live.get("lines", []), "dropped": live.get("dropped", 0)})

    @ledger_io
    def uncounted_attempts(self, rec: StepRecord) -> int:
        """Attempts that do not count against the retry limit (paused for a budget approval,
        waiting for other steps' budget holds, or for an open circuit breaker)."""
        if rec.id == 0:  # a first attempt whose row is not written: no attempt recorded yet
            return 0
        return Attempt.objects.filter(step_id=rec.id, error_name__in=AttemptWait.values).count()

    @ledger_io
    def held_waits(self, rec: StepRecord) -> int:
        """How many times the step has waited for other steps' budget holds."""
        if rec.id == 0:
            return 0
        return Attempt.objects.filter(step_id=rec.id, error_name=AttemptWait.BUDGET_HELD).count()
