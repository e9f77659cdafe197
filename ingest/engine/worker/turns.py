"""A worker's turns: claim runnable instances under a lease (recording their move to running),
load each claimed instance, and run one turn of it; `run_until_idle` does all of it inline."""

from __future__ import annotations

import secrets
import threading
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from django.db import DatabaseError, connection

from ingest.engine import clock, logcontext, tracing
from ingest.engine.models import History, HistoryKind, Instance
from ingest.engine.runtime import turn
from ingest.engine.runtime.execution import Execution
from ingest.engine.runtime.outcomes import TurnEnd
from ingest.engine.runtime.records import EngineFault
from ingest.engine.runtime.steps import AsyncStep, Step
from ingest.engine.runtime.store import InstanceStore
from ingest.engine.sql import lease as sql_lease
from ingest.engine.sql import liveness as sql_liveness
from ingest.engine.sql.claim import Claimed
from ingest.engine.worker.database import instance_from_row, worker_db


def _make_step(execution: Execution, is_async: bool) -> Step | AsyncStep:
    return AsyncStep(execution) if is_async else Step(execution)


def run_turn(
    instance_id: str,
    *,
    token: str,
    worker_id: str,
    lease: timedelta,
    draining: threading.Event,
    claimed: Claimed | None = None,
    ending: Callable[[], None] | None = None,
) -> str:
    """Run one turn of a claimed instance. Returns the status it was left in. `claimed`: what the
    claim returned of it; when that holds its row, the turn does not read the row again, nor its
    steps when it has none. `ending`: called when only the turn's last write is left."""
    if claimed is not None and claimed.row is not None:
        inst = instance_from_row(claimed.row)
    else:
        inst = load_instance(instance_id)
    store = InstanceStore(
        instance_id=inst.id,
        token=token,
        worker=worker_id,
        workflow=inst.workflow,
        tenant=inst.tenant,
        lease=lease,
        control=inst.control,
    )
    has_steps = claimed is None or claimed.row is None or claimed.has_steps
    execution = Execution(instance=inst, store=store, draining=draining, has_steps=has_steps, ending=ending)
    # Every line logged during the turn (engine, workflow, source clients) names the instance.
    with logcontext.bind(
        instance=inst.id,
        workflow=inst.workflow,
        tenant=inst.tenant,
        worker=worker_id,
        trace_id=tracing.trace_id_hex(inst.id),
    ):
        if tracing.ENABLED:
            return _traced(inst, worker_id, lambda: turn.run_turn(execution, _make_step))
        return turn.run_turn(execution, _make_step)


def _traced(inst: Instance, worker_id: str, run: Callable[[], str]) -> str:
    """The turn as a span (tracing on only): the ingress traceparent its creation kept, linked or
    continued (RUNLEDGER_TRACE_INGRESS); log lines carry the trace id the spans have."""
    created = (
        History.objects.filter(instance_id=inst.id, kind=HistoryKind.INSTANCE_CREATED)
        .values_list("data", flat=True)
        .first()
    ) or {}
    ingress = created.get("traceparent")
    with logcontext.bind(trace_id=tracing.trace_id_hex(inst.id, ingress) if tracing.CONTINUE_INGRESS else None):
        return tracing.traced_turn(inst, worker=worker_id, ingress=ingress, run=run)


def load_instance(instance_id: str) -> Instance:
    """The claimed instance's row (on PostgreSQL a prepared statement: every turn starts here)."""
    return worker_db().load_instance(instance_id)


def claim_batch(*, worker_id: str, limit: int, lease: timedelta, now: datetime | None = None) -> tuple[str, list[str]]:
    """Lease up to `limit` runnable instances; record their move to running in the history."""
    token, claimed = claim(worker_id=worker_id, limit=limit, lease=lease, now=now)
    return token, [c.id for c in claimed]


def claim(
    *, worker_id: str, limit: int, lease: timedelta, now: datetime | None = None, raw: Any = None, tied: bool = False
) -> tuple[str, list[Claimed]]:
    """claim_batch, returning what the claim knows of each instance (on PostgreSQL without flow
    limits: its row, so the turn starts without reading it). `raw`: the claiming thread's own
    sql/base.py's engine_connection(), for that claim. `tied`: the worker holds its liveness
    lock, so these leases end with its session (sql/liveness.py)."""
    now = now or clock.now()
    token = lease_token(tied=tied)
    return token, worker_db().claim(
        worker_id=worker_id, token=token, limit=limit, now=now, lease_until=now + lease, raw=raw
    )


def lease_token(*, tied: bool) -> str:
    """A new lease token; a session-tied lease's says so (sql/liveness.py)."""
    return (sql_liveness.LIVE_TOKEN if tied else "") + secrets.token_hex(8)


def run_until_idle(
    *, max_turns: int = 10_000, advance_clock: bool = False, worker_id: str = "inline", lease_seconds: float = 86_400.0
) -> int:
    """Run every runnable instance in this thread until none is due (tests and scripts).

    With `advance_clock`, jump the engine's clock to the next wake-up whenever nothing is due,
    so sleeps and retry delays pass instantly. Returns the number of turns run. The lease is a
    day long: no heartbeat runs here, and tests move the clock inside steps.
    """
    lease = timedelta(seconds=lease_seconds)
    draining = threading.Event()
    turns = 0
    while turns < max_turns:
        claimed_at = clock.now()
        token, claimed = claim(worker_id=worker_id, limit=1, lease=lease, now=claimed_at)
        if not claimed:
            # Looked up after the claim's own instant, so one that fell due since is not missed.
            due = sql_lease.next_due(now=claimed_at)
            if due is None:
                return turns
            if due > clock.now():
                if not advance_clock:
                    return turns
                clock.clock.advance(due - clock.now() + timedelta(microseconds=1))
            continue
        try:
            status = run_turn(
                claimed[0].id, token=token, worker_id=worker_id, lease=lease, draining=draining, claimed=claimed[0]
            )
        except (EngineFault, DatabaseError):  # a write outside the replay: the ending, say
            status = TurnEnd.FAULT
        turns += 1
        if status == TurnEnd.FAULT:
            _retry_after_fault(claimed[0].id, token=token, worker_id=worker_id)
    return turns


def _retry_after_fault(instance_id: str, *, token: str, worker_id: str) -> None:
    """A write of the turn failed on the database (a lost connection, say): as a worker does,
    retry the turn at once rather than when its day-long lease ends. A new session, and the
    lease given a new token (fencing off the failed turn's writes) that has already expired, so
    the next claim takes the instance again."""
    if not connection.in_atomic_block:  # a caller's transaction (a test's) stays the caller's
        connection.close()
    sql_liveness.renew(
        instance_id=instance_id,
        owner=worker_id,
        token=token,
        new_token=lease_token(tied=False),
        lease_until=clock.now() - timedelta(microseconds=1),
    )
