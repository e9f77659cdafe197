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
from ingest.engine.runtime.fan_out_packs import ITEMS_KEY, carrier_id, carrier_params, item_step_name
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
    pack: int = 1  # items per carrier instance (runtime/fan_out_packs.py); 1: an instance per item


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
                "pack": plan.pack,
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
    if plan.pack > 1:
        return _fill_packed(store, fan_out, parent=parent, items=items, plan=plan, now=now)
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


def _fill_packed(
    store: InstanceStore, fan_out: FanOut, *, parent: Instance, items: list[Any], plan: Plan, now: datetime
) -> None:
    """Insert carriers of `plan.pack` items each, as many whole carriers per transaction as
    `batch_size` items fill (one at least); an item's row names no instance of its own."""
    per_txn = plan.pack * max(1, plan.batch_size // plan.pack)
    for start in range(fan_out.created, fan_out.expected, per_txn):
        end = min(start + per_txn, fan_out.expected)
        carriers = [
            _carrier(fan_out, parent=parent, first=first, items=items[first : min(first + plan.pack, end)], plan=plan,
                     now=now)
            for first in range(start, end, plan.pack)
        ]  # fmt: skip
        with store.txn(now):
            Instance.objects.bulk_create(carriers)
            FanOutItem.objects.bulk_create(
                [
                    FanOutItem(instance_id=item_id(fan_out.id, i), fan_out_id=fan_out.id, index=i)
                    for i in range(start, end)
                ]
            )
            History.objects.bulk_create(
                [
                    History(
                        instance_id=c.id,
                        workflow=c.workflow,
                        tenant=c.tenant,
                        kind=HistoryKind.INSTANCE_CREATED,
                        status=Status.QUEUED,
                        data={"parent": parent.id, "fan_out": fan_out.id, "items": len(c.params[ITEMS_KEY])},
                        created_at=now,
                    )
                    for c in carriers
                ]
            )
            FanOut.objects.filter(id=fan_out.id).update(created=end, updated_at=now)
            notify.ready()
        fan_out.created = end


def _carrier(fan_out: FanOut, *, parent: Instance, first: int, items: list[Any], plan: Plan, now: datetime) -> Instance:
    """A carrier of `items` (from index `first`): an instance of the items' own workflow."""
    inst = _item_instance(fan_out, parent=parent, index=first, item=items[0], plan=plan, now=now)
    inst.id = carrier_id(fan_out.id, first, first + len(items) - 1)
    inst.params = carrier_params(fan_out_id=fan_out.id, first=first, items=items, options=plan.options)
    return inst


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
    """At the timeout: the items still out become missing (a packed item whose step completed
    counts first), and the aggregate stops counting.

    Its own transaction, holding no instance row: it locks the aggregate first, as an item's
    landing does, so the two take turns (the order above)."""
    with transaction.atomic():
        fan_out = FanOut.objects.select_for_update().get(id=fan_out_id)
        if fan_out.state == FanOutState.OPEN:
            fan_out.received += _salvage_packed(fan_out, now=now)
            FanOutItem.objects.filter(fan_out_id=fan_out_id, state=FanOutItemState.PENDING).update(
                state=FanOutItemState.MISSING, finished_at=now
            )
            fan_out.state, fan_out.closed_at, fan_out.updated_at = FanOutState.TIMED_OUT, now, now
            fan_out.save(update_fields=["state", "closed_at", "updated_at", "received"])
    return fan_out


def _salvage_packed(fan_out: FanOut, *, now: datetime) -> int:
    """At the timeout, a packed function item whose step completed counts as complete, though its
    carrier is still out (waiting on a sibling's retry): its result is durable in that step.
    Returns how many items it counted."""
    if fan_out.handler_kind != "function":
        return 0
    done = {
        name: result
        for name, result in Step.objects.filter(
            instance_id__in=Instance.objects.filter(
                parent_id=fan_out.instance_id, id__startswith=f"_fo{fan_out.id}-"
            ).values("id"),
            name__startswith="item-",
            status=StepStatus.COMPLETE,
        ).values_list("name", "result")
    }
    if not done:
        return 0
    rows = [
        row
        for row in FanOutItem.objects.filter(fan_out_id=fan_out.id, state=FanOutItemState.PENDING)
        if item_step_name(row.index, fan_out.handler) in done
    ]
    for row in rows:
        row.state, row.result, row.finished_at = (
            FanOutItemState.COMPLETE,
            done[item_step_name(row.index, fan_out.handler)],
            now,
        )
    FanOutItem.objects.bulk_update(rows, ["state", "result", "finished_at"], batch_size=500)
    return len(rows)


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
