"""The ledger writes that end a turn: the instance suspended until its wake-up (or paused), or
finished (complete, errored with its dead letter, terminated), its parent woken. Each is
guarded by the lease; on PostgreSQL the common endings are one statement."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from ingest.engine import hooks
from ingest.engine.models import (
    FINISHED_STATUSES,
    Control,
    DeadLetter,
    HistoryKind,
    Instance,
    PendingEvent,
    Status,
    Step,
    StepKind,
    StepStatus,
)
from ingest.engine.runtime import fan_out_items
from ingest.engine.runtime.fan_out_packs import ItemOutcome
from ingest.engine.runtime.records import (
    Failure,
    LeaseLost,
    SleepWrite,
    ledger_io,
    step_label,
)
from ingest.engine.runtime.store import InstanceStore
from ingest.engine.signature import error_signature
from ingest.engine.sql import instances as sql_instances
from ingest.engine.sql.base import ByVendor
from ingest.engine.writes import notify, route


@ledger_io
def suspend(
    store: InstanceStore,
    *,
    now: datetime,
    ready_at: datetime | None,
    status: str = Status.WAITING,
    event_type: str = "",
    child_id: str = "",
    pause: bool = False,
    fan_out: int = 0,
) -> str:
    """Release the instance until `ready_at` (None: until something outside wakes it).

    The guard locks the instance row first, so an event or a child's completion that
    committed before this transaction is seen by the checks below, and one that commits
    after it finds the instance waiting and wakes it: no wake-up is lost.
    """
    store.settle()
    sleep = store.only_sleep_write("start")
    plain = (
        sleep is not None
        and status == Status.WAITING
        and not pause
        and not event_type
        and not child_id
        and not fan_out
        and not store.control
    )
    if plain and sleep is not None and _endings().sleep(store, sleep, now=now, ready_at=ready_at):
        return status
    with store.txn(now):
        control = Control.PAUSE if pause else store.control
        if (
            event_type
            and PendingEvent.objects.filter(
                instance_id=store.instance_id, type=event_type, consumed_at__isnull=True
            ).exists()
        ):
            ready_at = now
        if child_id and Instance.objects.filter(id=child_id, status__in=FINISHED_STATUSES).exists():
            ready_at = now
        if fan_out and fan_out_items.all_landed(fan_out):  # the last item landed meanwhile
            ready_at = now
        fields: dict[str, Any] = {"lease_owner": "", "lease_token": "", "lease_expires_at": None, "updated_at": now}
        if control == Control.PAUSE:
            fields.update(
                status=Status.PAUSED,
                paused_at=now,
                paused_from=status,
                paused_ready_at=ready_at,
                ready_at=None,
                control="",
            )
            status = Status.PAUSED
        else:
            fields.update(status=status, ready_at=ready_at)
        Instance.objects.filter(id=store.instance_id).update(**fields)
        store.history(HistoryKind.INSTANCE_STATUS, now, status=status, until=ready_at.isoformat() if ready_at else None)
    return status


@ledger_io
def finish(
    store: InstanceStore,
    *,
    now: datetime,
    status: str,
    output: Any = None,
    failure: Failure | None = None,
    failed_step: str = "",
    parent_id: str | None = None,
    generation: int = 0,
    items: list[ItemOutcome] | None = None,
) -> None:
    """End the instance; a fan-out item (or a packed carrier's `items`) counts into its fan-out."""
    if status == Status.COMPLETE and not parent_id and _endings().complete(store, now=now, output=output):
        return
    with store.txn(now):
        Instance.objects.filter(id=store.instance_id).update(
            status=status,
            output=output,
            ended_at=now,
            updated_at=now,
            ready_at=None,
            lease_owner="",
            lease_token="",
            lease_expires_at=None,
            control="",
            error_name=failure.name if failure else "",
            error_message=failure.message if failure else "",
        )
        data: dict[str, Any] = {}
        if failure:
            data = {"error": failure.name, "message": failure.message[:2000], "step": failed_step}
        elif status == Status.COMPLETED_WITH_ERRORS and isinstance(output, dict):
            data = {"errors": len(output.get("errors") or [])}
        store.history(HistoryKind.INSTANCE_STATUS, now, status=status, **data)
        if status == Status.ERRORED and failure is not None:
            _dead_letter(store, now=now, failure=failure, failed_step=failed_step)
        if status in (Status.ERRORED, Status.TERMINATED):  # scheduled in the ending's own transaction
            hooks.hook_schedule(
                instance_id=store.instance_id,
                workflow=store.workflow,
                tenant=store.tenant,
                generation=generation,
                status=status,
                error_name=failure.name if failure else "",
                error_message=failure.message if failure else "",
                failed_step=failed_step,
                now=now,
                note=lambda **data: store.history(HistoryKind.HOOK, now, **data),
            )
        if parent_id:  # a fan-out's item counts itself in; the last one, or a child, wakes the parent
            fan_out_items.child_finished(
                instance_id=store.instance_id,
                parent_id=parent_id,
                status=status,
                output=output,
                failure=failure,
                now=now,
                items=items,
            )


def _dead_letter(store: InstanceStore, *, now: datetime, failure: Failure, failed_step: str) -> None:
    signature, normalized = error_signature(
        workflow=store.workflow, step_name=failed_step, error_name=failure.name, message=failure.message
    )
    DeadLetter.objects.update_or_create(
        instance_id=store.instance_id,
        defaults={
            "workflow": store.workflow,
            "tenant": store.tenant,
            "step_name": failed_step,
            "error_name": failure.name,
            "error_message": failure.message,
            "error_traceback": failure.traceback,
            "signature": signature,
            "normalized_message": normalized,
            "state": "open",
            "created_at": now,
            "resolved_at": None,
            "resolved_by": "",
            "resolution": "",
        },
    )


@ledger_io
def rollback_recorded(
    store: InstanceStore, *, name: str, position: int, now: datetime, started: datetime, failure: Failure | None
) -> None:
    """A rollback handler's run, as a step row of its own (kind rollback) and its history."""
    with store.txn(now):
        Step.objects.update_or_create(
            instance_id=store.instance_id,
            name=name,
            seq=1,
            defaults={
                "position": position,
                "kind": StepKind.ROLLBACK,
                "started_at": started,
                "ended_at": now,
                "attempts": 1,
                "status": StepStatus.ERRORED if failure else StepStatus.COMPLETE,
                "error_name": failure.name if failure else "",
                "error_message": failure.message if failure else "",
                "error_traceback": failure.traceback if failure else "",
            },
        )
        kind = HistoryKind.STEP_FAILED if failure else HistoryKind.STEP_COMPLETED
        extra = {"error": failure.name, "message": failure.message[:500]} if failure else {}
        store.history(kind, now, step_name=name, rollback=True, **extra)


class _OrmEndings:
    """SQLite: every ending takes the full path (the ORM, in the store's guarded transaction)."""

    def sleep(self, store: InstanceStore, sleep: SleepWrite, *, now: datetime, ready_at: datetime | None) -> bool:
        """Suspend for a plain sleep in one statement; False when the full path must do it."""
        return False

    def complete(self, store: InstanceStore, *, now: datetime, output: Any) -> bool:
        """End a top-level instance as complete in one statement; False when the full path must."""
        return False


class _StatementEndings(_OrmEndings):
    """PostgreSQL: the common endings are one statement each."""

    def sleep(self, store: InstanceStore, sleep: SleepWrite, *, now: datetime, ready_at: datetime | None) -> bool:
        # The step, the suspension and their history in one statement. It matches nothing if an
        # operator's control flag appeared meanwhile (or the lease is gone); the full path then
        # deals with that.
        if not sql_instances.sleep_suspend(
            iid=store.instance_id,
            token=store.token,
            now=now,
            ready_at=ready_at,
            name=sleep.name,
            seq=sleep.seq,
            position=sleep.position,
            started=sleep.at,
            wake_at=sleep.wake_at,
            label=step_label(sleep.name, sleep.seq),
        ):
            return False
        store.clear_deferred()
        notify.history()
        return True

    def complete(self, store: InstanceStore, *, now: datetime, output: Any) -> bool:
        def complete(woke: SleepWrite | None = None) -> None:
            if not route.instance_complete(
                iid=store.instance_id,
                token=store.token,
                now=now,
                output=None if output is None else json.dumps(output),
                woke=None if woke is None else (woke.step_id, step_label(woke.name, woke.seq), woke.at),
            ):
                raise LeaseLost(store.instance_id)

        woke = store.only_sleep_write("end")
        if woke is not None:
            store.settle()
            complete(woke)  # the sleep's end rides in the same statement
            store.clear_deferred()
        elif store.deferred:
            with store.txn(now):  # the guard, then the writes deferred to this transaction
                complete()
        else:
            # Through the group commit this is queued behind the turn's deferred completions
            # and refused if one of them failed (writes/commits.py): they are collected afterwards.
            if not route.grouped():
                store.settle()
            complete()
            store.settle()
        notify.history()
        return True


_endings = ByVendor[_OrmEndings](postgresql=_StatementEndings(), sqlite=_OrmEndings())
