"""The `step` object a workflow's `run` receives: `do`, `sleep`, `wait_for_event` and friends.

`Step` serves sync workflows; `AsyncStep` serves `async def run` with the same methods as
coroutines. Both drive the same `Execution`; only the waiting differs.
"""

from __future__ import annotations

import asyncio
import re
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from ingest.engine.durations import parse_duration
from ingest.engine.errors import (
    ChildWorkflowFailed,
    InvalidDuration,
    InvalidInstanceId,
    InvalidStepConfig,
    WaitForEventTimeout,
)
from ingest.engine.models import Instance, Status, StepKind, StepStatus
from ingest.engine.runtime import CONTROL_FLOW, Execution, Prepared, Suspend, rebuild_error
from ingest.engine.store import Failure
from ingest.engine.workflow import get_workflow

MAX_WAIT = timedelta(days=365)
_pool: tuple[int, ThreadPoolExecutor] | None = None  # (size, pool): RUNLEDGER_PARALLEL_THREADS helpers
_pool_lock = threading.Lock()


def _helpers() -> tuple[int, ThreadPoolExecutor]:
    """The process's pool of helper threads for parallel groups, made at first use (and again
    when RUNLEDGER_PARALLEL_THREADS changed)."""
    global _pool
    from django.conf import settings

    size = int(getattr(settings, "RUNLEDGER_PARALLEL_THREADS", 8))
    with _pool_lock:
        if _pool is None or _pool[0] != size:
            if _pool is not None:
                _pool[1].shutdown(wait=False)
            _pool = (size, ThreadPoolExecutor(max_workers=size, thread_name_prefix="runledger-parallel"))
        return _pool


@dataclass(frozen=True)
class StepCall:
    """One step of a parallel group: `step.call(name, fn, **options)`."""

    name: str
    fn: Callable[..., Any]
    options: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Settled:
    """The outcome of one parallel step, as `Promise.allSettled` reports it."""

    ok: bool
    value: Any = None
    error: BaseException | None = None

    @property
    def status(self) -> str:
        return "fulfilled" if self.ok else "rejected"


class Step:
    """The step API for synchronous workflows."""

    def __init__(self, execution: Execution) -> None:
        self._x = execution

    def do(self, name: str, fn: Callable[..., Any], **options: Any) -> Any:
        """Run `fn(ctx)` once, durably: its result is stored and returned on every replay.

        Options: `retries={"limit", "delay", "backoff"}`, `timeout`, `rollback(ctx, result)`,
        `sensitive`, `checkpoint` ("immediate", the default, or "deferred": the workflow runs on
        before this step's completion has committed; see docs/engine-contract.md). A failure
        after the last retry is raised here (and re-raised on replay).
        """
        return self._run(self._x.prepare_do(name, options), fn)

    def _run(self, p: Prepared, fn: Callable[..., Any]) -> Any:
        x = self._x
        done, value = x.memo(p)
        if done:
            return value
        while True:
            ctx, started = x.start_attempt(p)
            try:
                result = x.invoke(fn, ctx, p)
            except CONTROL_FLOW:
                raise
            except BaseException as exc:  # noqa: BLE001 - KeyboardInterrupt inside a step is its failure too
                if isinstance(exc, KeyboardInterrupt | SystemExit):
                    raise
                x.failed(p, ctx, started, exc)  # raises, or returns to retry at once
                continue
            return x.succeeded(p, ctx, started, result)

    def call(self, name: str, fn: Callable[..., Any], **options: Any) -> StepCall:
        return StepCall(name, fn, options)

    def all_settled(self, calls: Sequence[StepCall], *, concurrency: int | None = None) -> list[Settled]:
        """Run steps concurrently; each is memoised on its own, one failing loses no other's result.

        The calling thread runs the group's steps itself, helped by the threads of the process's
        parallel pool (RUNLEDGER_PARALLEL_THREADS, default 8) that are free: a group never waits
        for a pool thread to make progress, and a busy pool makes it run narrower, not later.
        `concurrency` caps how many of the group's steps run at once (default: the pool's size
        plus the calling thread), for steps that share a rate limit or a connection budget.
        """
        if concurrency is not None and (isinstance(concurrency, bool) or not isinstance(concurrency, int)
                                        or concurrency < 1):
            raise InvalidStepConfig(f"concurrency of a parallel group must be a whole number of at least 1; "
                                    f"got {concurrency!r}")
        prepared = [self._x.prepare_do(c.name, c.options) for c in calls]
        return _settle(_run_group(self._run, [(p, c.fn) for p, c in zip(prepared, calls, strict=True)],
                                  width=len(calls) if concurrency is None else min(concurrency, len(calls))))

    def all(self, calls: Sequence[StepCall], *, concurrency: int | None = None) -> list[Any]:
        """Like `all_settled`, but raise the first failure (after every step has settled)."""
        results = self.all_settled(calls, concurrency=concurrency)
        for r in results:
            if not r.ok:
                assert r.error is not None
                raise r.error
        return [r.value for r in results]

    def sleep(self, name: str, duration: Any) -> None:
        delta = _checked_wait(parse_duration(duration, what=f"duration of sleep {name!r}"), name)
        self._sleep(name, lambda now: now + delta)

    def sleep_until(self, name: str, when: datetime | str | float | int) -> None:
        at = _as_datetime(when, name)
        self._sleep(name, lambda now: _checked_until(at, now, name))

    def _sleep(self, name: str, until: Callable[[datetime], datetime]) -> None:
        x = self._x
        seq, position, rec = x.reserve(name, StepKind.SLEEP)
        if rec is not None and rec.status == StepStatus.COMPLETE:
            return
        now = x.now()
        if rec is None:
            x.checkpoint()
            wake = until(now)
            if x.overrides is not None and x.overrides.skip_sleeps:
                wake = now
            if wake > now:
                # The step row and the suspension commit together: one write per sleep.
                x.store.waiting_step(name=name, seq=seq, position=position, kind=StepKind.SLEEP,
                                     now=now, wake_at=wake)
                raise Suspend(wake)
            rec = x.store.wait_started(name=name, seq=seq, position=position, kind=StepKind.SLEEP,
                                       now=now, wake_at=wake)
            x.by_key[(name, seq)] = x.by_pos[position] = rec
        assert rec.wake_at is not None
        if rec.wake_at <= now:
            # Replay re-creates this resolution if it is lost, so it rides on the next write.
            x.store.wait_resolved(rec, now=now, result=None, deferred=True)
            return
        raise Suspend(rec.wake_at)

    def wait_for_event(self, name: str, *, type: str, timeout: Any = "24 hours") -> dict[str, Any]:
        """Wait for an event of `type` sent to this instance; returns {type, payload, timestamp, id}.

        Events sent before the wait are buffered per type and delivered first in, first out.
        Raises WaitForEventTimeout after `timeout` (catch it to escalate).
        """
        if not isinstance(type, str) or not type.strip():
            raise InvalidStepConfig(f"wait_for_event {name!r} needs a non-empty event type")
        delta = _checked_wait(parse_duration(timeout, what=f"timeout of wait_for_event {name!r}"), name)
        x = self._x
        seq, position, rec = x.reserve(name, StepKind.WAIT_EVENT)
        if rec is not None and rec.status == StepStatus.COMPLETE:
            return rec.result  # type: ignore[no-any-return]
        if rec is not None and rec.status == StepStatus.ERRORED:
            raise rebuild_error(rec.error_name, rec.error_message)
        now = x.now()
        if rec is None:
            x.checkpoint()
            if x.overrides is None and delta > timedelta(0) and not x.store.has_event(type):
                x.store.waiting_step(name=name, seq=seq, position=position, kind=StepKind.WAIT_EVENT,
                                     now=now, wake_at=now + delta, event_type=type)
                raise Suspend(now + delta, event_type=type)
            rec = x.store.wait_started(name=name, seq=seq, position=position, kind=StepKind.WAIT_EVENT,
                                       now=now, wake_at=now + delta, event_type=type)
            x.by_key[(name, seq)] = x.by_pos[position] = rec
        forced_timeout = x.overrides is not None and name in x.overrides.event_timeouts
        if x.overrides is not None and not forced_timeout:
            mocked, payload = x.overrides.take_event(type)
            if mocked:
                result = {"type": type, "payload": payload, "timestamp": now.isoformat(), "id": None}
                x.store.wait_resolved(rec, now=now, result=result)
                return result
        got = None if forced_timeout else x.store.consume_event(rec, now=now)
        if got is not None:
            return got
        assert rec.wake_at is not None
        if forced_timeout or rec.wake_at <= now:
            error = WaitForEventTimeout(
                f"wait_for_event {name!r} of instance {x.instance.id} timed out after "
                f"{delta.total_seconds():g} s with no event of type {type!r}"
            )
            x.store.wait_resolved(rec, now=now, failure=Failure("WaitForEventTimeout", str(error)))
            raise error
        raise Suspend(rec.wake_at, event_type=type)

    def wait_for_approval(self, name: str, *, title: str, fields: list[dict[str, Any]] | None = None,
                          timeout: Any = "24 hours", description: str = "",
                          context: dict[str, Any] | None = None, escalation: str = "") -> dict[str, Any]:
        """Ask a person: an approval request on the dashboard, answered through its form.

        Returns {"approved": bool, "values": {...}, "comment": str, "by": str}; raises
        WaitForEventTimeout when nobody answers in time (the request is marked expired).
        """
        delta = parse_duration(timeout, what=f"timeout of approval {name!r}")
        x = self._x
        inst = x.instance

        def create_request(ctx: Any) -> dict[str, Any]:
            from ingest.engine import costs

            return costs.approval_request_create(
                instance_id=inst.id, tenant=inst.tenant, workflow=inst.workflow, step_name=name,
                title=title, description=description, fields=fields or [], context=context or {},
                due_at=x.now() + delta, escalation=escalation, idempotency_key=ctx.idempotency_key,
            )

        request = self.do(f"{name}-request", create_request, retries={"limit": 3, "delay": "1 second"})
        try:
            event = self.wait_for_event(name, type=request["event_type"], timeout=delta)
        except WaitForEventTimeout:
            from ingest.engine import costs

            self.do(f"{name}-expired", lambda: costs.approval_expire(approval_id=request["id"]))
            raise
        return event["payload"]  # type: ignore[no-any-return]

    def child(self, name: str, *, workflow: str, params: dict[str, Any] | None = None,
              id: str | None = None) -> Any:
        """Start another workflow as a child and wait for its output (raises if it fails)."""
        x = self._x
        seq, position, rec = x.reserve(name, StepKind.CHILD)
        if rec is not None and rec.status == StepStatus.COMPLETE:
            return rec.result
        if rec is not None and rec.status == StepStatus.ERRORED:
            raise rebuild_error(rec.error_name, rec.error_message)
        now = x.now()
        if rec is None:
            x.checkpoint()
            child = _child_instance(x, name=name, seq=seq, workflow=workflow, params=params, id=id, now=now)
            rec = x.store.wait_started(name=name, seq=seq, position=position, kind=StepKind.CHILD,
                                       now=now, wake_at=None, child_id=child.id, child=child)
            x.by_key[(name, seq)] = x.by_pos[position] = rec
        assert rec.child_id is not None
        row = Instance.objects.filter(id=rec.child_id).values("status", "output", "error_name", "error_message").first()
        if row is None or row["status"] in (Status.ERRORED, Status.TERMINATED):
            why = "was deleted" if row is None else f"ended {row['status']}: {row['error_name']} {row['error_message']}".strip()
            error = ChildWorkflowFailed(f"child workflow {rec.child_id} of step {name!r} {why}")
            x.store.wait_resolved(rec, now=now, failure=Failure("ChildWorkflowFailed", str(error)))
            raise error
        if row["status"] == Status.COMPLETE:
            x.store.wait_resolved(rec, now=now, result=row["output"])
            return row["output"]
        raise Suspend(None, child_id=rec.child_id)


class AsyncStep(Step):
    """The step API for `async def run`: the same methods, awaited."""

    async def do(self, name: str, fn: Callable[..., Any], **options: Any) -> Any:
        p = self._x.prepare_do(name, options)  # before any await: positions follow call order
        return await self._run_async(p, fn)

    async def _run_async(self, p: Prepared, fn: Callable[..., Any]) -> Any:
        x = self._x
        done, value = x.memo(p)
        if done:
            return value
        while True:
            ctx, started = await asyncio.to_thread(x.start_attempt, p)
            try:
                result = await x.invoke_async(fn, ctx, p)
            except CONTROL_FLOW:
                raise
            except BaseException as exc:  # noqa: BLE001 - includes a budget's AwaitApproval
                if isinstance(exc, KeyboardInterrupt | SystemExit | asyncio.CancelledError):
                    raise
                await asyncio.to_thread(x.failed, p, ctx, started, exc)
                continue
            return await asyncio.to_thread(x.succeeded, p, ctx, started, result)

    async def all_settled(self, calls: Sequence[StepCall]) -> list[Settled]:  # type: ignore[override]
        prepared = [self._x.prepare_do(c.name, c.options) for c in calls]
        outcomes = await asyncio.gather(
            *(self._run_async(p, c.fn) for p, c in zip(prepared, calls, strict=True)), return_exceptions=True
        )
        return _settle([(not isinstance(o, BaseException), o) for o in outcomes])

    async def all(self, calls: Sequence[StepCall]) -> list[Any]:  # type: ignore[override]
        results = await self.all_settled(calls)
        for r in results:
            if not r.ok:
                assert r.error is not None
                raise r.error
        return [r.value for r in results]

    async def sleep(self, name: str, duration: Any) -> None:  # type: ignore[override]
        await asyncio.to_thread(super().sleep, name, duration)

    async def sleep_until(self, name: str, when: Any) -> None:  # type: ignore[override]
        await asyncio.to_thread(super().sleep_until, name, when)

    async def wait_for_event(self, name: str, *, type: str, timeout: Any = "24 hours") -> dict[str, Any]:  # type: ignore[override]
        return await asyncio.to_thread(super().wait_for_event, name, type=type, timeout=timeout)

    async def wait_for_approval(self, name: str, **kwargs: Any) -> dict[str, Any]:  # type: ignore[override]
        sync = Step(self._x)
        return await asyncio.to_thread(sync.wait_for_approval, name, **kwargs)

    async def child(self, name: str, **kwargs: Any) -> Any:
        return await asyncio.to_thread(super().child, name, **kwargs)


def _run_group(run: Callable[[Prepared, Callable[..., Any]], Any],
               work: list[tuple[Prepared, Callable[..., Any]]], *, width: int) -> list[tuple[bool, Any]]:
    """Run every (prepared, fn) of a parallel group; their outcomes in the group's order.

    The steps are taken in order from one shared queue by the calling thread and by up to
    `width - 1` helpers submitted to the pool (no more than it has threads). A helper the pool
    has not started by the time the caller finds the queue empty is cancelled, not waited for."""
    outcomes: list[tuple[bool, Any]] = [(False, None)] * len(work)
    taken = iter(range(len(work)))
    lock = threading.Lock()

    def drain() -> None:
        while True:
            with lock:
                i = next(taken, None)
            if i is None:
                return
            p, fn = work[i]
            try:
                outcomes[i] = (True, run(p, fn))
            except BaseException as exc:  # noqa: BLE001 - carried back to the caller's thread
                outcomes[i] = (False, exc)

    size, pool = _helpers()
    helpers = [pool.submit(_helper, drain) for _ in range(min(width - 1, size))]
    drain()
    for helper in helpers:
        if not helper.cancel():
            helper.result()
    return outcomes


def _helper(drain: Callable[[], None]) -> None:
    from ingest.engine.worker import drop_broken_connection

    try:
        drain()
    finally:
        drop_broken_connection()


def _settle(outcomes: list[tuple[bool, Any]]) -> list[Settled]:
    """Control flow wins over results: the first engine signal is re-raised after all settled."""
    control = [o for ok, o in outcomes if not ok and isinstance(o, CONTROL_FLOW) and not isinstance(o, Suspend)]
    if control:
        raise control[0]
    suspends = [o for ok, o in outcomes if not ok and isinstance(o, Suspend)]
    if suspends:
        raise _earliest(suspends)
    for ok, o in outcomes:
        if not ok and isinstance(o, KeyboardInterrupt | SystemExit):
            raise o
    return [Settled(ok=True, value=o) if ok else Settled(ok=False, error=o) for ok, o in outcomes]


def _earliest(suspends: list[Suspend]) -> Suspend:
    for s in suspends:
        if s.pause:
            return s
    timed = [s for s in suspends if s.until is not None]
    return min(timed, key=lambda s: s.until) if timed else suspends[0]  # type: ignore[arg-type, return-value]


def _checked_wait(delta: timedelta, name: str) -> timedelta:
    if delta > MAX_WAIT:
        raise InvalidDuration(f"step {name!r} waits {delta}; sleeps and waits are limited to 365 days")
    return delta


def _checked_until(at: datetime, now: datetime, name: str) -> datetime:
    if at - now > MAX_WAIT:
        raise InvalidDuration(f"sleep_until {name!r} is {at.isoformat()}, more than 365 days away")
    return at


def _as_datetime(when: datetime | str | float | int, name: str) -> datetime:
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


def _child_instance(x: Execution, *, name: str, seq: int, workflow: str, params: dict[str, Any] | None,
                    id: str | None, now: datetime) -> Instance:
    cls = get_workflow(workflow)
    slug = re.sub(r"[^A-Za-z0-9_-]+", "-", name).strip("-") or "child"
    child_id = id or f"{x.instance.id}-{slug}-{seq}"
    if x.instance.generation and id is None:
        child_id += f"-g{x.instance.generation}"
    from ingest.engine.services import ID_PATTERN

    if len(child_id) > 100 or not ID_PATTERN.match(child_id):
        raise InvalidInstanceId(
            f"child id {child_id[:60]!r} for step {name!r} is not a valid instance id; pass id= "
            "(letters, digits, '_' and '-', at most 100 characters)"
        )
    return Instance(
        id=child_id, workflow=workflow, tenant=x.instance.tenant, status=Status.QUEUED,
        params=params or {}, created_at=now, updated_at=now, ready_at=now, priority=cls.priority,
        parent_id=x.instance.id, parent_step=name,
    )
