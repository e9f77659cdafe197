"""A fan-out item's end, counted into its aggregate inside the transaction that ends the item's
instance (store_end.finish, services' instance_terminate); a packed carrier's end counts all its
items at once. runtime/fan_out.py tells the whole story, runtime/fan_out_packs.py the carriers'."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db.models import F

from ingest.engine.models import FanOut, FanOutItem, FanOutItemState, FanOutState, Status
from ingest.engine.runtime.fan_out_packs import ItemOutcome, carrier_span
from ingest.engine.runtime.records import Failure, wake_parent
from ingest.engine.sql.lease import async_commit
from ingest.engine.writes import notify


def child_finished(
    *,
    instance_id: str,
    parent_id: str,
    status: str,
    output: Any = None,
    failure: Failure | None = None,
    now: datetime,
    items: list[ItemOutcome] | None = None,
) -> None:
    """A child instance ended (inside its ending transaction): count it into its fan-out, and
    wake the parent when it was the last item, or when it is a plain child."""
    span = carrier_span(instance_id)
    if span is not None:
        landed: bool | None = pack_landed(
            span, parent_id=parent_id, status=status, items=items or [], failure=failure, now=now
        )
    else:
        landed = item_landed(instance_id=instance_id, status=status, output=output, failure=failure, now=now)
    if landed is None or landed:
        wake_parent(parent_id, now=now)
        notify.ready()


def item_landed(*, instance_id: str, status: str, output: Any, failure: Failure | None, now: datetime) -> bool | None:
    """None: not a fan-out item. Else whether it was the aggregate's last item. Counted once:
    an item that landed already (or was marked missing) changes nothing."""
    row = FanOutItem.objects.filter(instance_id=instance_id).values_list("fan_out_id", "state").first()
    if row is None:
        return None
    fan_out_id, state = row
    if state != FanOutItemState.PENDING:
        return False
    # Every item's end locks the aggregate row until its commit, so the items' ends take turns
    # there; waiting for the WAL flush inside that turn would cap a fan-out at one flush per
    # item. Losing this commit in a database crash loses the item's end and its count together
    # (its step's result committed durably before), and the item's instance, still leased,
    # is replayed and ends again; a later durable commit (the parent's) flushes it first.
    async_commit()
    counts = (
        FanOut.objects.select_for_update()
        .filter(id=fan_out_id, state=FanOutState.OPEN)
        .values_list("expected", "received")
        .first()
    )
    if counts is None:
        return False
    outcome = _outcome(status)
    changed = FanOutItem.objects.filter(instance_id=instance_id, state=FanOutItemState.PENDING).update(
        state=outcome,
        result=output if outcome == FanOutItemState.COMPLETE else None,
        error_name=failure.name if failure else "",
        error_message=failure.message if failure else "",
        error_state=failure.state if failure else None,
        finished_at=now,
    )
    if not changed:
        return False
    expected, received = counts
    last = received + 1 >= expected
    FanOut.objects.filter(id=fan_out_id).update(
        received=F("received") + 1,
        failed=F("failed") + int(outcome != FanOutItemState.COMPLETE),
        updated_at=now,
        state=FanOutState.COMPLETE if last else FanOutState.OPEN,
    )
    return last


def pack_landed(
    span: tuple[int, int, int],
    *,
    parent_id: str,
    status: str,
    items: list[ItemOutcome],
    failure: Failure | None,
    now: datetime,
) -> bool:
    """A carrier ended: each of its items still pending takes its outcome from `items` (an item
    the carrier did not report — it was terminated, or failed as a whole — ends as the carrier
    did), all counted at once under one lock of the aggregate. Whether these were the aggregate's
    last items (False too when the span names no open fan-out of this parent: restarted past it)."""
    fan_out_id, first, last_index = span
    async_commit()  # as item_landed: the items' steps committed durably before
    counts = (
        FanOut.objects.select_for_update()
        .filter(id=fan_out_id, instance_id=parent_id)
        .values_list("expected", "received", "state")
        .first()
    )
    if counts is None:
        return False
    expected, received, state = counts
    if state != FanOutState.OPEN:
        return False
    rows = list(
        FanOutItem.objects.filter(
            fan_out_id=fan_out_id, index__gte=first, index__lte=last_index, state=FanOutItemState.PENDING
        )
    )
    if not rows:
        return False
    reported = {o.index: o for o in items}
    failed = 0
    for row in rows:
        o = reported.get(row.index)
        row.state = o.state if o else _outcome(status)
        ended = o.failure if o else failure
        row.result = o.result if o and o.state == FanOutItemState.COMPLETE else None
        row.error_name = ended.name if ended and row.state == FanOutItemState.ERRORED else ""
        row.error_message = ended.message if ended and row.state == FanOutItemState.ERRORED else ""
        row.error_state = ended.state if ended and row.state == FanOutItemState.ERRORED else None
        row.finished_at = now
        failed += row.state != FanOutItemState.COMPLETE
    FanOutItem.objects.bulk_update(
        rows, ["state", "result", "error_name", "error_message", "error_state", "finished_at"], batch_size=500
    )
    last = received + len(rows) >= expected
    FanOut.objects.filter(id=fan_out_id).update(
        received=F("received") + len(rows),
        failed=F("failed") + failed,
        updated_at=now,
        state=FanOutState.COMPLETE if last else FanOutState.OPEN,
    )
    return last


def _outcome(status: str) -> str:
    if status in (Status.COMPLETE, Status.COMPLETED_WITH_ERRORS):
        return FanOutItemState.COMPLETE
    if status == Status.ERRORED:
        return FanOutItemState.ERRORED
    return FanOutItemState.TERMINATED


def all_landed(fan_out_id: int) -> bool:
    """For the parent's suspension: did every item land meanwhile (so it must not sleep)?"""
    return FanOut.objects.filter(id=fan_out_id).exclude(state=FanOutState.OPEN).exists()
