"""A fan-out item's end, counted into its aggregate inside the transaction that ends the item's
instance (store_end.finish, services' instance_terminate). runtime/fan_out.py tells the whole story."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db.models import F

from ingest.engine.models import FanOut, FanOutItem, FanOutItemState, FanOutState, Status
from ingest.engine.runtime.records import Failure, wake_parent
from ingest.engine.sql.lease import async_commit
from ingest.engine.writes import notify


def child_finished(
    *, instance_id: str, parent_id: str, status: str, output: Any = None, failure: Failure | None = None, now: datetime
) -> None:
    """A child instance ended (inside its ending transaction): count it into its fan-out, and
    wake the parent when it was the last item, or when it is a plain child."""
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


def _outcome(status: str) -> str:
    if status in (Status.COMPLETE, Status.COMPLETED_WITH_ERRORS):
        return FanOutItemState.COMPLETE
    if status == Status.ERRORED:
        return FanOutItemState.ERRORED
    return FanOutItemState.TERMINATED


def all_landed(fan_out_id: int) -> bool:
    """For the parent's suspension: did every item land meanwhile (so it must not sleep)?"""
    return FanOut.objects.filter(id=fan_out_id).exclude(state=FanOutState.OPEN).exists()
