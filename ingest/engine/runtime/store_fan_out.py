"""The ledger writes of a fan-out (runtime/fan_out.py): its start, its items inserted batch by
batch, its close at the timeout, and every item's outcome read back as `Settled`."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction

from ingest.engine.errors import ChildWorkflowFailed, FanOutItemMissing
from ingest.engine.handlers import Target
from ingest.engine.models.fan_out import FanOut, FanOutItem, FanOutItemState, FanOutState
from ingest.engine.models.history import History, HistoryKind
from ingest.engine.models.instances import Instance, Status, Step, StepKind, StepStatus
from ingest.engine.runtime.failures import rebuild_error
from ingest.engine.runtime.parallel import Settled
from ingest.engine.runtime.records import StepRecord, step_label
from ingest.engine.runtime.store import InstanceStore
from ingest.engine.workflow import get_workflow
from ingest.engine.writes import notify


@dataclass(frozen=True)
class Plan:
    """A fan-out call, checked: what runs the items, their options, batch size and timeout."""

    target: Target
    options: dict[str, Any]  # retries and timeout of a function handler's step (JSON)
    batch_size: int
    timeout: timedelta


def start(
    store: InstanceStore, *, name: str, seq: int, position: int, plan: Plan, expected: int, now: datetime
) -> tuple[StepRecord, FanOut]:
    """Record the fan-out step (waiting until the timeout) and its aggregate, in one transaction."""
    label = step_label(name, seq)
    deadline = now + plan.timeout
    with store.txn(now):
        step = Step.objects.create(
            instance_id=store.instance_id,
            name=name,
            seq=seq,
            position=position,
            kind=StepKind.FAN_OUT,
            status=StepStatus.WAITING,
            started_at=now,
            wake_at=deadline,
            config={
                "handler": plan.target.name,
                "kind": plan.target.kind,
                "items": expected,
                "batch_size": plan.batch_size,
                "timeout": plan.timeout.total_seconds(),
                **plan.options,
            },
        )
        fan_out = FanOut.objects.create(
            instance_id=store.instance_id,
            step_id=step.id,
            step_name=label,
            handler=plan.target.name,
            handler_kind=plan.target.kind,
            item_workflow=plan.target.workflow,
            expected=expected,
            state=FanOutState.OPEN if expected else FanOutState.COMPLETE,
            started_at=now,
            updated_at=now,
            deadline=deadline,
        )
        store.history(
            HistoryKind.STEP_WAIT,
            now,
            step_name=label,
            fan_out=fan_out.id,
            expected=expected,
            handler=plan.target.name,
            until=deadline.isoformat(),
        )
    rec = StepRecord(
        id=step.id,
        name=name,
        seq=seq,
        position=position,
        kind=StepKind.FAN_OUT,
        status=StepStatus.WAITING,
        wake_at=deadline,
        started_at=now,
    )
    return rec, fan_out


def item_id(fan_out_id: int, index: int) -> str:
    return f"_fo{fan_out_id}-{index}"


def fill(
    store: InstanceStore, fan_out: FanOut, *, parent: Instance, items: list[Any], plan: Plan, now: datetime
) -> None:
    """Insert the items not inserted yet, a batch per transaction; workers start on each batch
    as soon as it commits."""
    for first in range(fan_out.created, fan_out.expected, plan.batch_size):
        chunk = items[first : first + plan.batch_size]
        rows = [
            _item_instance(fan_out, parent=parent, index=first + i, item=item, plan=plan, now=now)
            for i, item in enumerate(chunk)
        ]
        with store.txn(now):
            Instance.objects.bulk_create(rows)
            FanOutItem.objects.bulk_create(
                [FanOutItem(instance_id=r.id, fan_out_id=fan_out.id, index=first + i) for i, r in enumerate(rows)]
            )
            History.objects.bulk_create(
                [
                    History(
                        instance_id=r.id,
                        workflow=r.workflow,
                        tenant=r.tenant,
                        kind=HistoryKind.INSTANCE_CREATED,
                        status=Status.QUEUED,
                        data={"parent": parent.id, "fan_out": fan_out.id, "index": first + i},
                        created_at=now,
                    )
                    for i, r in enumerate(rows)
                ]
            )
            FanOut.objects.filter(id=fan_out.id).update(created=first + len(chunk), updated_at=now)
            notify.ready()
        fan_out.created = first + len(chunk)


def _item_instance(fan_out: FanOut, *, parent: Instance, index: int, item: Any, plan: Plan, now: datetime) -> Instance:
    params = {"item": item, **plan.options} if plan.target.is_function else item
    key = ""
    cls = get_workflow(plan.target.workflow)
    if cls.concurrency_key:
        key = str(params.get(cls.concurrency_key, parent.tenant if cls.concurrency_key == "tenant" else ""))[:200]
    return Instance(
        id=item_id(fan_out.id, index),
        workflow=plan.target.workflow,
        tenant=parent.tenant,
        status=Status.QUEUED,
        params=params,
        created_at=now,
        updated_at=now,
        ready_at=now,
        priority=parent.priority,
        concurrency_key=key,
        parent_id=parent.id,
        workflow_version=cls.version,
        parent_step=fan_out.step_name,
    )


def close(fan_out_id: int, *, now: datetime) -> FanOut:
    """At the timeout: the items still out become missing, and the aggregate stops counting.

    Its own transaction, holding no instance row: it locks the aggregate first, as an item's
    landing does, so the two take turns (the order above)."""
    with transaction.atomic():
        fan_out = FanOut.objects.select_for_update().get(id=fan_out_id)
        if fan_out.state == FanOutState.OPEN:
            FanOutItem.objects.filter(fan_out_id=fan_out_id, state=FanOutItemState.PENDING).update(
                state=FanOutItemState.MISSING, finished_at=now
            )
            fan_out.state, fan_out.closed_at, fan_out.updated_at = FanOutState.TIMED_OUT, now, now
            fan_out.save(update_fields=["state", "closed_at", "updated_at"])
    return fan_out


def summary(fan_out: FanOut) -> dict[str, Any]:
    """What the fan-out step's row stores: the counts (the results stay in the items' rows)."""
    return {
        "fan_out": fan_out.id,
        "state": fan_out.state,
        "expected": fan_out.expected,
        "received": fan_out.received,
        "failed": fan_out.failed,
        "missing": fan_out.expected - fan_out.received if fan_out.state == FanOutState.TIMED_OUT else 0,
    }


def settled(fan_out_id: int) -> list[Settled]:
    """Every item's outcome in input order, as `Settled` (ok, value, error)."""
    out: list[Settled] = []
    rows = (
        FanOutItem.objects.filter(fan_out_id=fan_out_id)
        .order_by("index")
        .values_list("index", "instance_id", "state", "result", "error_name", "error_message", "error_state")
    )
    for index, iid, state, result, error_name, message, error_state in rows:
        if state == FanOutItemState.COMPLETE:
            out.append(Settled(ok=True, value=result))
        elif state == FanOutItemState.ERRORED:
            out.append(Settled(ok=False, error=rebuild_error(error_name, message, error_state)))
        elif state == FanOutItemState.TERMINATED:
            out.append(Settled(ok=False, error=ChildWorkflowFailed(f"item {index} ({iid}) was terminated")))
        else:
            out.append(
                Settled(
                    ok=False,
                    error=FanOutItemMissing(f"item {index} ({iid}) had not finished when the fan-out timed out"),
                )
            )
    return out
