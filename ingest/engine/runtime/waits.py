"""Sleeps, event waits and children, as a step object runs them against its turn's `Execution`.

A wait records its step row (or rides on the suspension that follows), and suspends the turn
until it is due; replay finds the row and resolves it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from ingest.engine.errors import (
    ChildWorkflowFailed,
    InvalidDuration,
    InvalidInstanceId,
    WaitForEventTimeout,
)
from ingest.engine.models import Instance, Status, StepKind, StepStatus
from ingest.engine.models.instances import ID_PATTERN
from ingest.engine.runtime.execution import Execution
from ingest.engine.runtime.failures import rebuild_error
from ingest.engine.runtime.outcomes import Suspend
from ingest.engine.runtime.records import Failure
from ingest.engine.runtime.store_waits import (
    WaitStart,
    consume_event,
    has_event,
    wait_resolved,
    wait_started,
    waiting_step,
)
from ingest.engine.secrets import seal_keys
from ingest.engine.workflow import get_workflow

MAX_WAIT = timedelta(days=365)


def sleep(x: Execution, name: str, until: Callable[[datetime], datetime]) -> None:
    """`step.sleep` and `step.sleep_until`: `until(now)` is when the sleep started now ends."""
    seq, position, rec = x.reserve(name, StepKind.SLEEP)
    if rec is not None and rec.status == StepStatus.COMPLETE:
        return
    now = x.now()
    if rec is None:
        x.checkpoint()
        wake = until(now)
        if x.overrides is not None and x.overrides.skip_sleeps:
            wake = now
        start = WaitStart(name=name, seq=seq, position=position, kind=StepKind.SLEEP, now=now, wake_at=wake)
        if wake > now:
            # The step row and the suspension commit together: one write per sleep.
            waiting_step(x.store, start)
            raise Suspend(wake)
        rec = wait_started(x.store, start)
        x.by_key[(name, seq)] = x.by_pos[position] = rec
    assert rec.wake_at is not None
    if rec.wake_at <= now:
        # Replay re-creates this resolution if it is lost, so it rides on the next write.
        wait_resolved(x.store, rec, now=now, result=None, deferred=True)
        return
    raise Suspend(rec.wake_at)


def wait_for_event(x: Execution, name: str, *, type: str, delta: timedelta) -> dict[str, Any]:
    """`step.wait_for_event`, its type and timeout checked already."""
    seq, position, rec = x.reserve(name, StepKind.WAIT_EVENT)
    if rec is not None and rec.status == StepStatus.COMPLETE:
        return rec.result  # type: ignore[no-any-return]
    if rec is not None and rec.status == StepStatus.ERRORED:
        raise rebuild_error(rec.error_name, rec.error_message)
    now = x.now()
    if rec is None:
        x.checkpoint()
        start = WaitStart(
            name=name,
            seq=seq,
            position=position,
            kind=StepKind.WAIT_EVENT,
            now=now,
            wake_at=now + delta,
            event_type=type,
        )
        if x.overrides is None and delta > timedelta(0) and not has_event(x.store, type):
            waiting_step(x.store, start)
            raise Suspend(now + delta, event_type=type)
        rec = wait_started(x.store, start)
        x.by_key[(name, seq)] = x.by_pos[position] = rec
    forced_timeout = x.overrides is not None and name in x.overrides.event_timeouts
    if x.overrides is not None and not forced_timeout:
        mocked, payload = x.overrides.take_event(type)
        if mocked:
            result = {"type": type, "payload": payload, "timestamp": now.isoformat(), "id": None}
            wait_resolved(x.store, rec, now=now, result=result)
            return result
    got = None if forced_timeout else consume_event(x.store, rec, now=now)
    if got is not None:
        return got
    assert rec.wake_at is not None
    if forced_timeout or rec.wake_at <= now:
        error = WaitForEventTimeout(
            f"wait_for_event {name!r} of instance {x.instance.id} timed out after "
            f"{delta.total_seconds():g} s with no event of type {type!r}"
        )
        wait_resolved(x.store, rec, now=now, failure=Failure("WaitForEventTimeout", str(error)))
        raise error
    raise Suspend(rec.wake_at, event_type=type)


def child(x: Execution, name: str, *, workflow: str, params: dict[str, Any] | None, id: str | None) -> Any:
    """Start another workflow as a child and wait for its output (raises if it fails)."""
    seq, position, rec = x.reserve(name, StepKind.CHILD)
    if rec is not None and rec.status == StepStatus.COMPLETE:
        return rec.result
    if rec is not None and rec.status == StepStatus.ERRORED:
        raise rebuild_error(rec.error_name, rec.error_message)
    now = x.now()
    if rec is None:
        x.checkpoint()
        child = child_instance(x, name=name, seq=seq, workflow=workflow, params=params, id=id, now=now)
        start = WaitStart(name=name, seq=seq, position=position, kind=StepKind.CHILD, now=now, wake_at=None)
        rec = wait_started(x.store, start, child=child)
        x.by_key[(name, seq)] = x.by_pos[position] = rec
    assert rec.child_id is not None
    row = Instance.objects.filter(id=rec.child_id).values("status", "output", "error_name", "error_message").first()
    if row is None or row["status"] in (Status.ERRORED, Status.TERMINATED):
        why = (
            "was deleted"
            if row is None
            else f"ended {row['status']}: {row['error_name']} {row['error_message']}".strip()
        )
        error = ChildWorkflowFailed(f"child workflow {rec.child_id} of step {name!r} {why}")
        wait_resolved(x.store, rec, now=now, failure=Failure("ChildWorkflowFailed", str(error)))
        raise error
    if row["status"] in (Status.COMPLETE, Status.COMPLETED_WITH_ERRORS):
        wait_resolved(x.store, rec, now=now, result=row["output"])
        return row["output"]
    raise Suspend(None, child_id=rec.child_id)


def checked_wait(delta: timedelta, name: str) -> timedelta:
    if delta > MAX_WAIT:
        raise InvalidDuration(f"step {name!r} waits {delta}; sleeps and waits are limited to 365 days")
    return delta


def checked_until(at: datetime, now: datetime, name: str) -> datetime:
    if at - now > MAX_WAIT:
        raise InvalidDuration(f"sleep_until {name!r} is {at.isoformat()}, more than 365 days away")
    return at


def as_datetime(when: datetime | str | float | int, name: str) -> datetime:
    if isinstance(when, datetime):
        return when if when.tzinfo else when.replace(tzinfo=UTC)
    if isinstance(when, int | float) and not isinstance(when, bool):
        return datetime.fromtimestamp(when, tz=UTC)
    if isinstance(when, str):
        try:
            parsed = datetime.fromisoformat(when.replace("Z", "+00:00"))
        except ValueError:
            pass
        else:
            return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
    raise InvalidDuration(f"sleep_until {name!r} needs a datetime, an ISO-8601 string or a Unix time; got {when!r}")


def child_instance(
    x: Execution, *, name: str, seq: int, workflow: str, params: dict[str, Any] | None, id: str | None, now: datetime
) -> Instance:
    cls = get_workflow(workflow)
    slug = re.sub(r"[^A-Za-z0-9_-]+", "-", name).strip("-") or "child"
    child_id = id or f"{x.instance.id}-{slug}-{seq}"
    if x.instance.generation and id is None:
        child_id += f"-g{x.instance.generation}"
    if len(child_id) > 100 or not ID_PATTERN.match(child_id):
        raise InvalidInstanceId(
            f"child id {child_id[:60]!r} for step {name!r} is not a valid instance id; pass id= "
            "(letters, digits, '_' and '-', at most 100 characters)"
        )
    return Instance(
        id=child_id,
        workflow=workflow,
        tenant=x.instance.tenant,
        status=Status.QUEUED,
        params=seal_keys(params or {}, cls.sensitive_params),
        created_at=now,
        updated_at=now,
        ready_at=now,
        priority=cls.priority,
        workflow_version=cls.version,
        parent_id=x.instance.id,
        parent_step=name,
    )
