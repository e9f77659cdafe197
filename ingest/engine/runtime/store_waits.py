"""The ledger writes of sleeps, event waits and children (waits.py runs them): their step rows,
their resolution, and the buffered events they consume. Each is guarded by the lease."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ingest.engine.models.history import History, HistoryKind, PendingEvent
from ingest.engine.models.instances import Instance, Status, Step, StepKind, StepStatus
from ingest.engine.runtime.records import Failure, SleepWrite, StepRecord, ledger_io, step_label
from ingest.engine.runtime.store import InstanceStore
from ingest.engine.writes import notify


@dataclass(frozen=True)
class WaitStart:
    """A sleep's, an event wait's or a child's step as it starts: where it stands in the run, when
    it started, and when it wakes (a sleep's end, a wait's deadline; None for a child)."""

    name: str
    seq: int
    position: int
    kind: str
    now: datetime
    wake_at: datetime | None
    event_type: str = ""

    @property
    def status(self) -> str:
        return StepStatus.SLEEPING if self.kind == StepKind.SLEEP else StepStatus.WAITING


def _wait_rows(store: InstanceStore, w: WaitStart, **child: Any) -> Step:
    """The wait's step row and its history row; `child` (a child's wait only) names the child."""
    step = Step.objects.create(
        instance_id=store.instance_id,
        name=w.name,
        seq=w.seq,
        position=w.position,
        kind=w.kind,
        status=w.status,
        started_at=w.now,
        wake_at=w.wake_at,
        event_type=w.event_type,
        child_id=child.get("child"),
    )
    store.history(
        HistoryKind.STEP_SLEEP if w.kind == StepKind.SLEEP else HistoryKind.STEP_WAIT,
        w.now,
        step_name=step_label(w.name, w.seq),
        until=w.wake_at.isoformat() if w.wake_at else None,
        event_type=w.event_type,
        **child,
    )
    return step


@ledger_io
def wait_started(store: InstanceStore, w: WaitStart, *, child: Instance | None = None) -> StepRecord:
    child_id = child.id if child is not None else None
    with store.txn(w.now):
        if child is not None:
            child.save(force_insert=True)
            _history_for_child(store, child, w.now)
        step = _wait_rows(store, w, child=child_id)
        if child is not None:
            notify.ready()
    return StepRecord(
        id=step.id,
        name=w.name,
        seq=w.seq,
        position=w.position,
        kind=w.kind,
        status=w.status,
        wake_at=w.wake_at,
        event_type=w.event_type,
        child_id=child_id,
        started_at=w.now,
    )


def _history_for_child(store: InstanceStore, child: Instance, now: datetime) -> None:
    History(
        instance_id=child.id,
        workflow=child.workflow,
        tenant=child.tenant,
        kind=HistoryKind.INSTANCE_CREATED,
        status=Status.QUEUED,
        data={"parent": store.instance_id},
        created_at=now,
    ).save()


@ledger_io
def wait_resolved(
    store: InstanceStore,
    rec: StepRecord,
    *,
    now: datetime,
    result: Any = None,
    failure: Failure | None = None,
    deferred: bool = False,
) -> None:
    if deferred:
        sleep = None
        if rec.kind == StepKind.SLEEP and failure is None and result is None and rec.id:
            sleep = SleepWrite(kind="end", name=rec.name, seq=rec.seq, position=rec.position, at=now, step_id=rec.id)
        store.defer(lambda: resolve(store, rec, now=now, result=result, failure=failure), sleep=sleep)
        rec.status = StepStatus.ERRORED if failure else StepStatus.COMPLETE
        return
    with store.txn(now):
        resolve(store, rec, now=now, result=result, failure=failure)


def waiting_step(store: InstanceStore, w: WaitStart) -> None:
    """Record a sleep or an event wait in the same transaction as the suspension that follows."""
    sleep = None
    if w.kind == StepKind.SLEEP and not w.event_type:
        sleep = SleepWrite(kind="start", name=w.name, seq=w.seq, position=w.position, at=w.now, wake_at=w.wake_at)

    def write() -> None:
        _wait_rows(store, w)

    store.defer(write, sleep=sleep)


@ledger_io
def has_event(store: InstanceStore, event_type: str) -> bool:
    return PendingEvent.objects.filter(
        instance_id=store.instance_id, type=event_type, consumed_at__isnull=True
    ).exists()


def resolve(store: InstanceStore, rec: StepRecord, *, now: datetime, result: Any, failure: Failure | None) -> None:
    if failure is None:
        Step.objects.filter(id=rec.id).update(status=StepStatus.COMPLETE, result=result, ended_at=now)
        store.history(HistoryKind.STEP_COMPLETED, now, step_name=step_label(rec.name, rec.seq))
        rec.status, rec.result = StepStatus.COMPLETE, result
    else:
        Step.objects.filter(id=rec.id).update(
            status=StepStatus.ERRORED,
            ended_at=now,
            error_name=failure.name,
            error_message=failure.message,
        )
        store.history(
            HistoryKind.STEP_FAILED,
            now,
            step_name=step_label(rec.name, rec.seq),
            error=failure.name,
            message=failure.message,
        )
        rec.status, rec.error_name, rec.error_message = StepStatus.ERRORED, failure.name, failure.message


@ledger_io
def consume_event(store: InstanceStore, rec: StepRecord, *, now: datetime) -> dict[str, Any] | None:
    """Take the oldest buffered event of the step's type, atomically with the step's result."""
    with store.txn(now):
        event = (
            PendingEvent.objects.select_for_update()
            .filter(instance_id=store.instance_id, type=rec.event_type, consumed_at__isnull=True)
            .order_by("id")
            .first()
        )
        if event is None:
            return None
        result = {
            "type": event.type,
            "payload": event.payload,
            "timestamp": event.created_at.isoformat(),
            "id": event.id,
        }
        PendingEvent.objects.filter(id=event.id).update(consumed_at=now, consumed_by_id=rec.id)
        resolve(store, rec, now=now, result=result, failure=None)
        return result
