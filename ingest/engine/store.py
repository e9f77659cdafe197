"""What a worker writes while it runs an instance. Every write is guarded by the lease.

One durable transaction per step outcome: the step row, its attempt, its history, and the lease
check. A step's start marker commits without waiting for the WAL flush (sql.async_commit).

A step run with `checkpoint="deferred"` queues its completion on the group commit and returns;
the queued completions are collected (`settle`) before any other write of the instance and
before a step that is not deferred starts (runtime.py): that is the instance's barrier.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, ParamSpec, TypeVar

from django.db import DatabaseError, transaction

from ingest.engine import markers, notify, sql
from ingest.engine.models import (
    Attempt,
    Control,
    DeadLetter,
    History,
    HistoryKind,
    Instance,
    PendingEvent,
    Status,
    Step,
    StepKind,
    StepStatus,
)
from ingest.engine.signature import error_signature

log = logging.getLogger("runledger.engine")
P = ParamSpec("P")
R = TypeVar("R")


class LeaseLost(BaseException):
    """The worker no longer holds the instance (terminated, restarted, or lease expired)."""


class EngineFault(BaseException):
    """The ledger could not be written; the turn is abandoned and retried when the lease expires.

    A BaseException so that neither user code nor the step's retry logic mistakes a failure of
    the engine's own writes for a failure of the step.
    """


def _io(method: Callable[P, R]) -> Callable[P, R]:
    @functools.wraps(method)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return method(*args, **kwargs)
        except DatabaseError as exc:
            raise EngineFault(f"{method.__name__}: {exc}") from exc

    return wrapper


@dataclass
class StepRecord:
    id: int
    name: str
    seq: int
    position: int
    kind: str
    status: str
    result: Any = None
    error_name: str = ""
    error_message: str = ""
    attempts: int = 0
    wake_at: datetime | None = None
    event_type: str = ""
    child_id: str | None = None
    started_at: datetime | None = None
    # A first attempt on PostgreSQL whose row is not written yet (id 0): what to insert, and its
    # start marker (markers.py).
    row: sql.StepRow | None = None
    marker: markers.Marker | None = None


@dataclass(frozen=True)
class SleepWrite:
    """A deferred write of a sleep step: its start ("start": the sleeping row and its history)
    or its end ("end": the row completed)."""

    kind: str
    name: str
    seq: int
    position: int
    at: datetime
    wake_at: datetime | None = None
    step_id: int = 0


@dataclass(frozen=True)
class Failure:
    name: str
    message: str
    traceback: str = ""


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

    @_io
    def load_steps(self) -> list[StepRecord]:
        if sql.is_postgres():
            # Prepared, without the ORM: this runs at every turn. jsonb arrives as text here.
            return [StepRecord(id=r[0], name=r[1], seq=r[2], position=r[3], kind=r[4], status=r[5],
                               result=None if r[6] is None else json.loads(r[6]), error_name=r[7],
                               error_message=r[8], attempts=r[9], wake_at=r[10], event_type=r[11],
                               child_id=r[12], started_at=r[13])
                    for r in sql.step_rows(self.instance_id)]
        rows = Step.objects.filter(instance_id=self.instance_id).order_by("position").values_list(
            "id", "name", "seq", "position", "kind", "status", "result", "error_name",
            "error_message", "attempts", "wake_at", "event_type", "child_id", "started_at",
        )
        return [StepRecord(*row) for row in rows]

    # ---- the barrier -------------------------------------------------------------------

    @_io
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
        control = sql.guard(
            instance_id=self.instance_id, token=self.token, now=now, lease_until=now + self.lease
        )
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

    def _only_sleep_write(self, kind: str) -> SleepWrite | None:
        """The deferred write, when it is the only one and a sleep's `kind` ("start" or "end")."""
        if len(self.deferred) == 1 and self._sleep_write is not None and self._sleep_write.kind == kind:
            return self._sleep_write
        return None

    @contextmanager
    def _txn(self, now: datetime) -> Iterator[None]:
        """A transaction that first checks the lease and ends by writing its history rows at once."""
        self.settle()
        with transaction.atomic():
            self._guard(now)
            yield
            if self._histories:
                rows, self._histories = self._histories, []
                History.objects.bulk_create(rows)
                notify.history()

    def _history(self, kind: str, now: datetime, *, step_name: str = "", status: str = "", **data: Any) -> History:
        row = History(
            instance_id=self.instance_id, workflow=self.workflow, tenant=self.tenant, kind=kind,
            step_name=step_name, status=status, data=data, created_at=now,
        )
        self._histories.append(row)
        return row

    # ---- step.do ---------------------------------------------------------------------

    @_io
    def step_started(self, *, rec: StepRecord | None, name: str, seq: int, position: int,
                     kind: str, config: dict[str, Any], attempt: int, now: datetime,
                     sensitive: bool, has_rollback: bool) -> StepRecord:
        if rec is None and sql.is_postgres() and not self.deferred:
            # The first attempt writes nothing yet: its completion inserts the row, unless it
            # runs long enough for its start marker to be written first (markers.py).
            row = sql.StepRow(iid=self.instance_id, name=name, seq=seq, position=position, kind=kind,
                              config=json.dumps(config), sensitive=sensitive, has_rollback=has_rollback,
                              label=step_label(name, seq))
            return StepRecord(id=0, name=name, seq=seq, position=position, kind=kind,
                              status=StepStatus.RUNNING, attempts=attempt, started_at=now, row=row,
                              marker=markers.schedule(row=row, token=self.token, started=now, attempt=attempt))
        with self._txn(now):
            sql.async_commit()
            if rec is None:
                step = Step.objects.create(
                    instance_id=self.instance_id, name=name, seq=seq, position=position, kind=kind,
                    status=StepStatus.RUNNING, config=config, attempts=attempt, sensitive=sensitive,
                    has_rollback=has_rollback, started_at=now,
                )
                rec = StepRecord(id=step.id, name=name, seq=seq, position=position, kind=kind,
                                 status=StepStatus.RUNNING, attempts=attempt, started_at=now)
            else:
                Step.objects.filter(id=rec.id).update(status=StepStatus.RUNNING, attempts=attempt, wake_at=None)
                rec.status, rec.attempts, rec.wake_at = StepStatus.RUNNING, attempt, None
            self._history(HistoryKind.STEP_STARTED, now, step_name=step_label(name, seq), attempt=attempt)
        return rec

    def _settle_marker(self, rec: StepRecord) -> bool:
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
        if not self._settle_marker(rec):
            return
        assert rec.started_at is not None and rec.row is not None
        row = rec.row
        with self._txn(rec.started_at):
            step = Step.objects.create(
                instance_id=self.instance_id, name=rec.name, seq=rec.seq, position=rec.position,
                kind=rec.kind, status=StepStatus.RUNNING, config=json.loads(row.config),
                attempts=rec.attempts, sensitive=row.sensitive, has_rollback=row.has_rollback,
                started_at=rec.started_at,
            )
            self._history(HistoryKind.STEP_STARTED, rec.started_at, step_name=row.label, attempt=rec.attempts)
        rec.id = step.id

    @_io
    def step_completed(self, rec: StepRecord, *, attempt: int, started: datetime, now: datetime,
                       result: Any, encoded: str | None = None, deferred: bool = False) -> None:
        """Store a successful attempt's result (`encoded`: its JSON, when the caller has it).

        `deferred`: queue the write and return before it commits (collected by `settle`); on
        SQLite, or with writes deferred to this transaction, it is written at once."""
        if sql.is_postgres():
            if not deferred:
                self.settle()
            with_start = self._settle_marker(rec)
            row = rec.row or sql.StepRow(
                iid=self.instance_id, name=rec.name, seq=rec.seq, position=rec.position, kind=rec.kind,
                config="{}", sensitive=False, has_rollback=False, label=step_label(rec.name, rec.seq))
            finish = functools.partial(
                sql.step_finish, row=row, token=self.token, now=now, started=started, attempt=attempt,
                result=None if result is None else (encoded if encoded is not None else json.dumps(result)),
                worker=self.worker,
                with_start=with_start)
            handle = sql.step_finish_deferred(**finish.keywords) if deferred and not self.deferred else None
            if handle is not None:
                with self._pending_lock:
                    self._pending.append((rec, handle))
                rec.status, rec.result, rec.row = StepStatus.COMPLETE, result, None
                return
            if self.deferred:
                # The guard, the deferred writes and their history rows, then this statement: one
                # transaction.
                with self._txn(now):
                    got = finish()
                    if got is None:
                        raise LeaseLost(self.instance_id)
            else:
                got = finish()
            if got is None:
                raise LeaseLost(self.instance_id)
            self.control, rec.id = got
            notify.history()
            rec.status, rec.result, rec.row = StepStatus.COMPLETE, result, None
            return
        with self._txn(now):
            Step.objects.filter(id=rec.id).update(
                status=StepStatus.COMPLETE, result=result, ended_at=now, attempts=attempt,
                error_name="", error_message="", error_traceback="",
            )
            Attempt.objects.create(step_id=rec.id, number=attempt, started_at=started, ended_at=now,
                                   ok=True, worker=self.worker)
            self._history(HistoryKind.STEP_COMPLETED, now, step_name=step_label(rec.name, rec.seq),
                          attempt=attempt, ms=round((now - started).total_seconds() * 1000, 3))
        rec.status, rec.result = StepStatus.COMPLETE, result

    @_io
    def step_attempt_failed(self, rec: StepRecord, *, attempt: int, started: datetime, now: datetime,
                            failure: Failure, retry_at: datetime | None) -> None:
        """Record a failed attempt: a retry at `retry_at`, or the step's final failure."""
        self._materialize(rec)
        delay = None if retry_at is None else (retry_at - now).total_seconds()
        with self._txn(now):
            Attempt.objects.create(
                step_id=rec.id, number=attempt, started_at=started, ended_at=now, ok=False,
                error_name=failure.name, error_message=failure.message,
                error_traceback=failure.traceback, retry_delay_seconds=delay, worker=self.worker,
            )
            if retry_at is None:
                Step.objects.filter(id=rec.id).update(
                    status=StepStatus.ERRORED, ended_at=now, attempts=attempt,
                    error_name=failure.name, error_message=failure.message,
                    error_traceback=failure.traceback, wake_at=None,
                )
                self._history(HistoryKind.STEP_FAILED, now, step_name=step_label(rec.name, rec.seq),
                              attempt=attempt, error=failure.name, message=failure.message[:500])
            else:
                Step.objects.filter(id=rec.id).update(attempts=attempt, wake_at=retry_at,
                                                      error_name=failure.name, error_message=failure.message)
                self._history(HistoryKind.STEP_RETRY, now, step_name=step_label(rec.name, rec.seq),
                              attempt=attempt, error=failure.name, message=failure.message[:500],
                              delay=delay)
        rec.attempts, rec.wake_at = attempt, retry_at
        if retry_at is None:
            rec.status, rec.error_name, rec.error_message = StepStatus.ERRORED, failure.name, failure.message

    @_io
    def uncounted_attempts(self, rec: StepRecord) -> int:
        """Attempts that do not count against the retry limit (paused for a budget approval)."""
        if rec.id == 0:  # a first attempt whose row is not written: no attempt recorded yet
            return 0
        return Attempt.objects.filter(step_id=rec.id, error_name="AwaitingApproval").count()

    @_io
    def rollback_recorded(self, *, name: str, position: int, now: datetime, started: datetime,
                          failure: Failure | None) -> None:
        with self._txn(now):
            Step.objects.update_or_create(
                instance_id=self.instance_id, name=name, seq=1,
                defaults={
                    "position": position, "kind": StepKind.ROLLBACK, "started_at": started,
                    "ended_at": now, "attempts": 1,
                    "status": StepStatus.ERRORED if failure else StepStatus.COMPLETE,
                    "error_name": failure.name if failure else "",
                    "error_message": failure.message if failure else "",
                    "error_traceback": failure.traceback if failure else "",
                },
            )
            kind = HistoryKind.STEP_FAILED if failure else HistoryKind.STEP_COMPLETED
            extra = {"error": failure.name, "message": failure.message[:500]} if failure else {}
            self._history(kind, now, step_name=name, rollback=True, **extra)

    # ---- sleeps, events, children --------------------------------------------------------

    @_io
    def wait_started(self, *, name: str, seq: int, position: int, kind: str, now: datetime,
                     wake_at: datetime | None, event_type: str = "", child_id: str | None = None,
                     child: Instance | None = None) -> StepRecord:
        status = StepStatus.SLEEPING if kind == StepKind.SLEEP else StepStatus.WAITING
        with self._txn(now):
            if child is not None:
                child.save(force_insert=True)
                self._history_for_child(child, now)
            step = Step.objects.create(
                instance_id=self.instance_id, name=name, seq=seq, position=position, kind=kind,
                status=status, started_at=now, wake_at=wake_at, event_type=event_type,
                child_id=child_id,
            )
            hk = HistoryKind.STEP_SLEEP if kind == StepKind.SLEEP else HistoryKind.STEP_WAIT
            self._history(hk, now, step_name=step_label(name, seq), until=wake_at.isoformat() if wake_at else None,
                          event_type=event_type, child=child_id)
            if child is not None:
                notify.ready()
        return StepRecord(id=step.id, name=name, seq=seq, position=position, kind=kind,
                          status=status, wake_at=wake_at, event_type=event_type, child_id=child_id,
                          started_at=now)

    def _history_for_child(self, child: Instance, now: datetime) -> None:
        History(instance_id=child.id, workflow=child.workflow, tenant=child.tenant,
                kind=HistoryKind.INSTANCE_CREATED, status=Status.QUEUED,
                data={"parent": self.instance_id}, created_at=now).save()

    @_io
    def wait_resolved(self, rec: StepRecord, *, now: datetime, result: Any = None,
                      failure: Failure | None = None, deferred: bool = False) -> None:
        if deferred:
            sleep = None
            if rec.kind == StepKind.SLEEP and failure is None and result is None and rec.id:
                sleep = SleepWrite(kind="end", name=rec.name, seq=rec.seq, position=rec.position, at=now,
                                   step_id=rec.id)
            self.defer(lambda: self._resolve(rec, now=now, result=result, failure=failure), sleep=sleep)
            rec.status = StepStatus.ERRORED if failure else StepStatus.COMPLETE
            return
        with self._txn(now):
            self._resolve(rec, now=now, result=result, failure=failure)

    def waiting_step(self, *, name: str, seq: int, position: int, kind: str, now: datetime,
                     wake_at: datetime | None, event_type: str = "") -> None:
        """Record a sleep or an event wait in the same transaction as the suspension that follows."""
        status = StepStatus.SLEEPING if kind == StepKind.SLEEP else StepStatus.WAITING
        hk = HistoryKind.STEP_SLEEP if kind == StepKind.SLEEP else HistoryKind.STEP_WAIT

        def write() -> None:
            Step.objects.create(instance_id=self.instance_id, name=name, seq=seq, position=position, kind=kind,
                                status=status, started_at=now, wake_at=wake_at, event_type=event_type)
            self._history(hk, now, step_name=step_label(name, seq), until=wake_at.isoformat() if wake_at else None,
                          event_type=event_type)

        sleep = None
        if kind == StepKind.SLEEP and not event_type:
            sleep = SleepWrite(kind="start", name=name, seq=seq, position=position, at=now, wake_at=wake_at)
        self.defer(write, sleep=sleep)

    @_io
    def has_event(self, event_type: str) -> bool:
        return PendingEvent.objects.filter(instance_id=self.instance_id, type=event_type,
                                           consumed_at__isnull=True).exists()

    def _resolve(self, rec: StepRecord, *, now: datetime, result: Any, failure: Failure | None) -> None:
        if failure is None:
            Step.objects.filter(id=rec.id).update(status=StepStatus.COMPLETE, result=result, ended_at=now)
            self._history(HistoryKind.STEP_COMPLETED, now, step_name=step_label(rec.name, rec.seq))
            rec.status, rec.result = StepStatus.COMPLETE, result
        else:
            Step.objects.filter(id=rec.id).update(
                status=StepStatus.ERRORED, ended_at=now, error_name=failure.name,
                error_message=failure.message,
            )
            self._history(HistoryKind.STEP_FAILED, now, step_name=step_label(rec.name, rec.seq),
                          error=failure.name, message=failure.message)
            rec.status, rec.error_name, rec.error_message = StepStatus.ERRORED, failure.name, failure.message

    @_io
    def consume_event(self, rec: StepRecord, *, now: datetime) -> dict[str, Any] | None:
        """Take the oldest buffered event of the step's type, atomically with the step's result."""
        with self._txn(now):
            event = (
                PendingEvent.objects.select_for_update()
                .filter(instance_id=self.instance_id, type=rec.event_type, consumed_at__isnull=True)
                .order_by("id")
                .first()
            )
            if event is None:
                return None
            result = {"type": event.type, "payload": event.payload,
                      "timestamp": event.created_at.isoformat(), "id": event.id}
            PendingEvent.objects.filter(id=event.id).update(consumed_at=now, consumed_by_id=rec.id)
            self._resolve(rec, now=now, result=result, failure=None)
            return result

    # ---- the end of a turn -----------------------------------------------------------

    @_io
    def suspend(self, *, now: datetime, ready_at: datetime | None, status: str = Status.WAITING,
                event_type: str = "", child_id: str = "", pause: bool = False) -> str:
        """Release the instance until `ready_at` (None: until something outside wakes it).

        The guard locks the instance row first, so an event or a child's completion that
        committed before this transaction is seen by the checks below, and one that commits
        after it finds the instance waiting and wakes it: no wake-up is lost.
        """
        self.settle()
        sleep = self._only_sleep_write("start")
        plain = (sleep is not None and status == Status.WAITING and not pause and not event_type
                 and not child_id and not self.control and sql.is_postgres())
        # A plain sleep: the step, the suspension and their history in one statement. It matches
        # nothing if an operator's control flag appeared meanwhile (or the lease is gone); the
        # full path below then deals with that.
        if plain and sleep is not None and sql.sleep_suspend(
            iid=self.instance_id, token=self.token, now=now, ready_at=ready_at, name=sleep.name,
            seq=sleep.seq, position=sleep.position, started=sleep.at, wake_at=sleep.wake_at,
            label=step_label(sleep.name, sleep.seq),
        ):
            self.deferred, self._sleep_write = [], None
            notify.history()
            return status
        with self._txn(now):
            control = Control.PAUSE if pause else self.control
            if event_type and PendingEvent.objects.filter(
                instance_id=self.instance_id, type=event_type, consumed_at__isnull=True
            ).exists():
                ready_at = now
            if child_id and Instance.objects.filter(
                id=child_id, status__in=[Status.COMPLETE, Status.ERRORED, Status.TERMINATED]
            ).exists():
                ready_at = now
            fields: dict[str, Any] = {"lease_owner": "", "lease_token": "", "lease_expires_at": None,
                                      "updated_at": now}
            if control == Control.PAUSE:
                fields.update(status=Status.PAUSED, paused_at=now, paused_from=status,
                              paused_ready_at=ready_at, ready_at=None, control="")
                status = Status.PAUSED
            else:
                fields.update(status=status, ready_at=ready_at)
            Instance.objects.filter(id=self.instance_id).update(**fields)
            self._history(HistoryKind.INSTANCE_STATUS, now, status=status,
                          until=ready_at.isoformat() if ready_at else None)
        return status

    @_io
    def finish(self, *, now: datetime, status: str, output: Any = None, failure: Failure | None = None,
               failed_step: str = "", parent_id: str | None = None) -> None:
        if status == Status.COMPLETE and not parent_id and sql.is_postgres():
            def complete(woke: SleepWrite | None = None) -> None:
                if not sql.instance_complete(
                    iid=self.instance_id, token=self.token, now=now,
                    output=None if output is None else json.dumps(output),
                    woke=None if woke is None else (woke.step_id, step_label(woke.name, woke.seq), woke.at),
                ):
                    raise LeaseLost(self.instance_id)

            woke = self._only_sleep_write("end")
            if woke is not None:
                self.settle()
                complete(woke)  # the sleep's end rides in the same statement
                self.deferred, self._sleep_write = [], None
            elif self.deferred:
                with self._txn(now):  # the guard, then the writes deferred to this transaction
                    complete()
            else:
                # Through the group commit this is queued behind the turn's deferred completions
                # and refused if one of them failed (commits.py): they are collected afterwards.
                if not sql.grouped():
                    self.settle()
                complete()
                self.settle()
            notify.history()
            return
        with self._txn(now):
            Instance.objects.filter(id=self.instance_id).update(
                status=status, output=output, ended_at=now, updated_at=now, ready_at=None,
                lease_owner="", lease_token="", lease_expires_at=None, control="",
                error_name=failure.name if failure else "",
                error_message=failure.message if failure else "",
            )
            data: dict[str, Any] = {}
            if failure:
                data = {"error": failure.name, "message": failure.message[:2000], "step": failed_step}
            self._history(HistoryKind.INSTANCE_STATUS, now, status=status, **data)
            if status == Status.ERRORED and failure is not None:
                self._dead_letter(now=now, failure=failure, failed_step=failed_step)
            if parent_id:
                wake_parent(parent_id, now=now)
                notify.ready()

    def _dead_letter(self, *, now: datetime, failure: Failure, failed_step: str) -> None:
        signature, normalized = error_signature(
            workflow=self.workflow, step_name=failed_step, error_name=failure.name, message=failure.message
        )
        DeadLetter.objects.update_or_create(
            instance_id=self.instance_id,
            defaults={
                "workflow": self.workflow, "tenant": self.tenant, "step_name": failed_step,
                "error_name": failure.name, "error_message": failure.message,
                "error_traceback": failure.traceback, "signature": signature,
                "normalized_message": normalized, "state": "open", "created_at": now,
                "resolved_at": None, "resolved_by": "", "resolution": "",
            },
        )


def wake_parent(parent_id: str, *, now: datetime) -> None:
    """A child finished: make its waiting parent runnable now (paused parents wake on resume)."""
    Instance.objects.filter(id=parent_id, status__in=[Status.WAITING, Status.RUNNING]).update(ready_at=now)
    Instance.objects.filter(id=parent_id, status=Status.PAUSED).update(paused_ready_at=now)


def step_label(name: str, seq: int) -> str:
    """How a step is named in the history and on the dashboard: `name`, or `name#2` for its 2nd call."""
    return name if seq == 1 else f"{name}#{seq}"
