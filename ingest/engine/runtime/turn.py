"""A turn of an instance: replay `run` once, then end the turn as `run` left it (complete,
suspended, failed with its rollbacks run, or terminated)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from ingest.engine import flow
from ingest.engine.backoff import FailureLog
from ingest.engine.errors import EngineError
from ingest.engine.handlers import ItemWorkflow, handler_function
from ingest.engine.models import Control, History, HistoryKind, Instance, Status
from ingest.engine.results import WorkflowResult
from ingest.engine.runtime import store_end
from ingest.engine.runtime.context import StepContext
from ingest.engine.runtime.execution import ROLLBACK_POSITION, Execution
from ingest.engine.runtime.failures import failure_of
from ingest.engine.runtime.fan_out_packs import PackOutcome, is_carrier, run_pack
from ingest.engine.runtime.invoke import arity
from ingest.engine.runtime.outcomes import FailInstance, Suspend, TurnEnd, Unwind, check_result
from ingest.engine.runtime.records import EngineFault, Failure, LeaseLost
from ingest.engine.secrets import unseal_keys
from ingest.engine.workflow import WorkflowEvent, get_workflow

log = logging.getLogger("runledger.engine")
_FAULTS = FailureLog()
NEWER_VERSION_RETRY = timedelta(seconds=30)


def run_turn(x: Execution, make_step: Callable[[Execution, bool], Any]) -> str:
    """Replay `run` once. Returns the status the instance is left in, or a `TurnEnd` when the
    turn left it to its lease (lost) or to a retry (fault)."""
    inst = x.instance
    try:
        workflow = get_workflow(inst.workflow)()
        if inst.workflow_version > workflow.version:
            # A rolling deploy: this worker runs older code than the instance started on. It must
            # not replay a path it does not have; a worker with the newer code will take it.
            log.warning(
                "instance %s started on version %d of workflow %r but this worker runs version %d; "
                "leaving it for a worker with the newer code (retried in %d s)",
                inst.id,
                inst.workflow_version,
                inst.workflow,
                workflow.version,
                NEWER_VERSION_RETRY.seconds,
            )
            raise Suspend(x.now() + NEWER_VERSION_RETRY)
        # Checked at the first new step and at suspension, after replay has registered the
        # completed steps' rollbacks, so a timed-out instance unwinds like any failure.
        x.deadline = deadline_of(inst, workflow.__class__._timeout)
        event = WorkflowEvent(
            payload=unseal_keys(inst.params),
            instance_id=inst.id,
            timestamp=inst.created_at,
            tenant=inst.tenant,
            workflow=inst.workflow,
            schedule=inst.params.get("_schedule") if isinstance(inst.params, dict) else None,
            version=inst.workflow_version,
        )
        if is_carrier(inst.params):  # a packed fan-out's items (runtime/fan_out_packs.py)
            output = run_pack(
                workflow,
                event,
                make_step(x, False),
                handler=handler_function(workflow.handler) if isinstance(workflow, ItemWorkflow) else None,
                handler_name=workflow.handler if isinstance(workflow, ItemWorkflow) else "",
            )
        elif workflow.is_async():
            output = asyncio.run(workflow.run(event, make_step(x, True)))
        else:
            output = workflow.run(event, make_step(x, False))
    except Suspend as suspend:
        return _suspend(x, suspend)
    except Unwind as unwind:
        return _terminate(x, rollback=unwind.rollback)
    except LeaseLost:
        x.store.settle_quietly()
        log.info("instance %s: lease lost (terminated, restarted or expired); dropping the turn", inst.id)
        return TurnEnd.LOST
    except EngineFault as fault:
        x.store.settle_quietly()
        # A database that is away fails every turn of the process at once: say it once, then
        # every 30 s (backoff.py). The worker retries the turn (worker/loop.py).
        cause = str(fault).partition(": ")[2].partition("\n")[0]  # the database's words, not the write's
        shout, count = _FAULTS.failed(now=time.monotonic(), reason=cause)
        (log.warning if shout else log.debug)(
            "instance %s: the ledger write failed (%s); the turn is retried (%d such failure(s) in this process)",
            inst.id,
            fault,
            count,
        )
        return TurnEnd.FAULT
    except FailInstance as fail:
        x.failed_step = fail.step
        return _fail(x, Failure(type(fail.error).__name__, str(fail.error)))
    except Exception as exc:  # noqa: BLE001 - any failure of user code errors the instance
        return _fail(x, failure_of(exc))
    if x.store.control == Control.TERMINATE_ROLLBACK:
        return _terminate(x, rollback=True)
    if isinstance(output, PackOutcome):
        return _end_pack(x, output)
    status = Status.COMPLETE
    if isinstance(output, WorkflowResult):  # degraded gracefully: completed_with_errors (results.py)
        status = Status.COMPLETED_WITH_ERRORS if output.degraded else Status.COMPLETE
        output = output.as_output(duration_ms=_duration_ms(inst, x.now()))
    try:
        output = check_result("output", inst.id, output)
    except EngineError as error:
        return _fail(x, Failure(type(error).__name__, str(error)))
    x.ending()
    store_end.finish(x.store, now=x.now(), status=status, output=output, parent_id=inst.parent_id)
    return status


def _end_pack(x: Execution, pack: PackOutcome) -> str:
    """A carrier's end: its items counted into their fan-out in the same transaction. Errored
    (with a dead letter naming the first failed item's step) when an item failed for good; no
    rollbacks run, they would undo the items that completed."""
    x.ending()
    inst = x.instance
    if pack.failed:
        status, failure, output = Status.ERRORED, failure_of(pack.error()), None
    else:
        status, failure, output = (Status.TERMINATED if pack.stopped else Status.COMPLETE), None, pack.summary()
    store_end.finish(
        x.store,
        now=x.now(),
        status=status,
        output=output,
        failure=failure,
        failed_step=pack.failed_step,
        parent_id=inst.parent_id,
        generation=inst.generation,
        items=pack.items,
    )
    return status


def _duration_ms(inst: Instance, now: datetime) -> int:
    return max(0, round((now - (inst.started_at or inst.created_at)).total_seconds() * 1000))


def _suspend(x: Execution, suspend: Suspend) -> str:
    if x.store.control == Control.TERMINATE_ROLLBACK:
        return _terminate(x, rollback=True)
    timed_out = x.timed_out()  # a sleeper woken by its deadline replays to here
    if timed_out is not None:
        return _fail(x, Failure(type(timed_out).__name__, str(timed_out)))
    # A sleeper must wake by its deadline to fail, not sleep past it.
    suspend.until = flow.cap_wake(suspend.until, deadline=x.deadline)
    x.ending()
    return store_end.suspend(
        x.store,
        now=x.now(),
        ready_at=suspend.until,
        status=suspend.status,
        event_type=suspend.event_type,
        child_id=suspend.child_id,
        pause=suspend.pause,
        fan_out=suspend.fan_out,
    )


def _fail(x: Execution, failure: Failure) -> str:
    _run_rollbacks(x)
    x.ending()
    store_end.finish(
        x.store,
        now=x.now(),
        status=Status.ERRORED,
        failure=failure,
        failed_step=x.failed_step,
        parent_id=x.instance.parent_id,
        generation=x.instance.generation,
    )
    return Status.ERRORED


def _terminate(x: Execution, *, rollback: bool) -> str:
    if rollback:
        _run_rollbacks(x)
    x.ending()
    store_end.finish(
        x.store, now=x.now(), status=Status.TERMINATED, parent_id=x.instance.parent_id, generation=x.instance.generation
    )
    return Status.TERMINATED


def _run_rollbacks(x: Execution) -> None:
    """Run registered rollback handlers in reverse order of their steps' start, once each."""
    for position, label, handler, result in sorted(x.rollbacks, key=lambda r: r[0], reverse=True):
        name = f"rollback:{label}"
        if name in x.rollback_done:
            continue
        now = x.now()
        ctx = StepContext(
            name=name,
            count=1,
            attempt=1,
            config={},
            step_label=name,
            idempotency_key=f"{x.instance.id}:{name}",
            instance_id=x.instance.id,
            workflow=x.instance.workflow,
            tenant=x.instance.tenant,
        )
        try:
            handler(ctx, result) if arity(handler) >= 2 else handler(ctx)
            failure = None
        except Exception as exc:  # noqa: BLE001 - a failing rollback must not stop the others
            failure = failure_of(exc)
        store_end.rollback_recorded(
            x.store, name=name, position=ROLLBACK_POSITION + position, now=now, started=now, failure=failure
        )


def deadline_of(inst: Instance, timeout: timedelta | None) -> datetime | None:
    """The instance's deadline: its timeout from its start, or from the operator's last restart
    or retry, which run it again and so start its clock again."""
    if timeout is None or inst.started_at is None:
        return None
    rerun = (
        History.objects.filter(instance_id=inst.id, kind=HistoryKind.OPERATOR, data__action__in=["restart", "retry"])
        .order_by("-id")
        .values_list("created_at", flat=True)
        .first()
    )
    return flow.deadline(started_at=max(inst.started_at, rerun or inst.started_at), timeout=timeout)
