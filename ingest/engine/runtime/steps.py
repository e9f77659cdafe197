"""The `step` object a workflow's `run` receives: `do`, `sleep`, `wait_for_event` and friends.

`Step` serves sync workflows; `AsyncStep` serves `async def run` with the same methods as
coroutines. Both drive the same `Execution`; only the waiting differs.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Coroutine, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, TypeVar

from ingest.engine import logcontext
from ingest.engine.costs import approvals
from ingest.engine.durations import parse_duration
from ingest.engine.errors import InvalidStepConfig, WaitForEventTimeout
from ingest.engine.runtime import fan_out, poll, waits
from ingest.engine.runtime.execution import Execution, Prepared
from ingest.engine.runtime.invoke import invoke, invoke_async
from ingest.engine.runtime.outcomes import CONTROL_FLOW
from ingest.engine.runtime.parallel import Settled, StepCall, run_group, settle
from ingest.engine.runtime.waits import as_datetime, checked_until, checked_wait

P = ParamSpec("P")
R = TypeVar("R")

if TYPE_CHECKING:
    from ingest.engine.step_api import AsyncStepApi, StepApi

# The `search-attributes` step's options, sync and async alike.
ATTRIBUTES_STEP: dict[str, Any] = {"retries": {"limit": 3, "delay": "1 second"}, "checkpoint": "deferred"}


class _StepCore:
    """What the sync and the async step share: the instance's version and `call`."""

    def __init__(self, execution: Execution) -> None:
        self._x = execution

    @property
    def version(self) -> int:
        """The workflow version this instance started on (its class's `version` then)."""
        return self._x.instance.workflow_version

    def version_at_least(self, version: int) -> bool:
        """Guard a changed code path: True for instances started on `version` or later, False for
        older ones, on every replay, so an in-flight instance keeps the path it started on. Not a
        step: it records nothing and takes no position. `version` may not exceed the class's own
        `version` (docs/engine-contract.md, "Versions")."""
        return self._x.version_at_least(version)

    def call(self, name: str, fn: Callable[..., Any], **options: Any) -> StepCall:
        """A step to run in a group (`all`, `all_settled`): `name`, `fn(ctx)` and `do`'s options."""
        return StepCall(name, fn, options)


def _concurrency_checked(concurrency: int | None) -> None:
    if concurrency is not None and (
        isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1
    ):
        raise InvalidStepConfig(
            f"concurrency of a parallel group must be a whole number of at least 1; got {concurrency!r}"
        )


class Step(_StepCore):
    """The step API for synchronous workflows (its shape: `ingest.engine.StepApi`)."""

    def do(self, name: str, fn: Callable[..., Any], **options: Any) -> Any:
        """Run `fn(ctx)` once, durably: its result is stored and returned on every replay.

        Options: `retries={"limit", "delay", "backoff", "max_delay", "backoff_coefficient"}`,
        `timeout`, `rollback(ctx, result)`,
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
            with logcontext.bind(step=p.label, attempt=ctx.attempt), x.log_capture(p, ctx) as logs:
                try:
                    result = invoke(fn, ctx, p, x.overrides)
                except CONTROL_FLOW:
                    raise
                except BaseException as exc:  # noqa: BLE001 - KeyboardInterrupt inside a step is its failure too
                    if isinstance(exc, KeyboardInterrupt | SystemExit):
                        raise
                    x.failed(p, ctx, started, exc, logs.kept())  # raises, or returns to retry at once
                    continue
                return x.succeeded(p, ctx, started, result, logs.kept())

    def all_settled(self, calls: Sequence[StepCall], *, concurrency: int | None = None) -> list[Settled]:
        """Run steps concurrently; each is memoised on its own, one failing loses no other's result.

        The calling thread runs the group's steps itself, helped by the threads of the process's
        parallel pool (RUNLEDGER_PARALLEL_THREADS, default 8) that are free: a group never waits
        for a pool thread to make progress, and a busy pool makes it run narrower, not later.
        `concurrency` caps how many of the group's steps run at once (default: the pool's size
        plus the calling thread), for steps that share a rate limit or a connection budget.
        """
        _concurrency_checked(concurrency)
        prepared = [self._x.prepare_do(c.name, c.options) for c in calls]
        return settle(
            run_group(
                self._run,
                [(p, c.fn) for p, c in zip(prepared, calls, strict=True)],
                width=len(calls) if concurrency is None else min(concurrency, len(calls)),
            )
        )

    def all(self, calls: Sequence[StepCall], *, concurrency: int | None = None) -> list[Any]:
        """Like `all_settled`, but raise the first failure (after every step has settled)."""
        results = self.all_settled(calls, concurrency=concurrency)
        for r in results:
            if not r.ok:
                assert r.error is not None
                raise r.error
        return [r.value for r in results]

    def sleep(self, name: str, duration: Any) -> None:
        delta = checked_wait(parse_duration(duration, what=f"duration of sleep {name!r}"), name)
        waits.sleep(self._x, name, lambda now: now + delta)

    def sleep_until(self, name: str, when: datetime | str | float | int) -> None:
        at = as_datetime(when, name)
        waits.sleep(self._x, name, lambda now: checked_until(at, now, name))

    def wait_for_event(self, name: str, *, type: str, timeout: Any = "24 hours") -> dict[str, Any]:
        """Wait for an event of `type` sent to this instance; returns {type, payload, timestamp, id}.

        Events sent before the wait are buffered per type and delivered first in, first out.
        Raises WaitForEventTimeout after `timeout` (catch it to escalate).
        """
        if not isinstance(type, str) or not type.strip():
            raise InvalidStepConfig(f"wait_for_event {name!r} needs a non-empty event type")
        delta = checked_wait(parse_duration(timeout, what=f"timeout of wait_for_event {name!r}"), name)
        return waits.wait_for_event(self._x, name, type=type, delta=delta)

    def wait_for_approval(
        self,
        name: str,
        *,
        title: str,
        fields: list[dict[str, Any]] | None = None,
        timeout: Any = "24 hours",
        description: str = "",
        context: dict[str, Any] | None = None,
        escalation: str = "",
    ) -> dict[str, Any]:
        """Ask a person: an approval request on the dashboard, answered through its form.

        Returns {"approved": bool, "values": {...}, "comment": str, "by": str}; raises
        WaitForEventTimeout when nobody answers in time (the request is marked expired).
        """
        delta = parse_duration(timeout, what=f"timeout of approval {name!r}")
        x = self._x
        inst = x.instance

        def create_request(ctx: Any) -> dict[str, Any]:
            return approvals.approval_request_create(
                instance_id=inst.id,
                tenant=inst.tenant,
                workflow=inst.workflow,
                step_name=name,
                title=title,
                description=description,
                fields=fields or [],
                context=context or {},
                due_at=x.now() + delta,
                escalation=escalation,
                idempotency_key=ctx.idempotency_key,
            )

        request = self.do(f"{name}-request", create_request, retries={"limit": 3, "delay": "1 second"})
        try:
            event = self.wait_for_event(name, type=request["event_type"], timeout=delta)
        except WaitForEventTimeout:
            self.do(f"{name}-expired", lambda: approvals.approval_expire(approval_id=request["id"]))
            raise
        return event["payload"]  # type: ignore[no-any-return]

    def set_search_attributes(self, **values: Any) -> dict[str, str]:
        """Tag this instance for the operators' search: `step.set_search_attributes(customer="acme",
        domain="acme.com")`. Values are stored as text (numbers and booleans too); None removes a
        key. Durable and replay-safe: it is a step of its own (`search-attributes`, memoised like
        any `do`), so a replay does not write again; checked before it is recorded. The step is
        `checkpoint="deferred"`: it writes only this database, and setting the same values again
        changes nothing, so the workflow runs on while its completion commits (the next step that
        acts outside waits for it). Returns the instance's attributes after the merge."""
        from ingest.engine.services.attributes import attributes_check, attributes_set

        attributes_check(values)  # a bad key fails the run here, before anything is stored
        instance_id = self._x.instance.id
        merged: dict[str, str] = self.do(
            "search-attributes", lambda: attributes_set(instance_id=instance_id, values=values), **ATTRIBUTES_STEP
        )
        return merged

    def child(self, name: str, *, workflow: str, params: dict[str, Any] | None = None, id: str | None = None) -> Any:
        """Start another workflow as a child and wait for its output (raises if it fails)."""
        return waits.child(self._x, name, workflow=workflow, params=params, id=id)

    def fan_out(
        self,
        name: str,
        handler: Any,
        items: Sequence[Any],
        *,
        batch_size: int = 100,
        timeout: Any = "10 minutes",
        retries: dict[str, Any] | None = None,
        item_timeout: Any = None,
        pack: int = 1,
    ) -> list[Settled]:
        """Run `handler` once per item on any worker; return one `Settled` per item, in input
        order, once the last has landed or `timeout` passed (the items still out are then
        `FanOutItemMissing`). `handler`: a function registered with `@fan_out_handler(name)`
        (called as `handler(ctx, item)` in a step with `retries` and `item_timeout`), a Workflow
        subclass (each item, a dict, the params of a run of it), or the name of either. Each item
        is an instance of its own, or with `pack=K` (2 to 1,000) steps of a carrier instance
        that runs K items. docs/engine-contract.md, "Fan-out"."""
        return fan_out.run(
            self._x,
            name,
            handler,
            items,
            batch_size=batch_size,
            timeout=timeout,
            retries=retries,
            item_timeout=item_timeout,
            pack=pack,
        )

    def poll(
        self,
        name: str,
        check: Callable[..., Any],
        *,
        until: Callable[[Any], Any] | None = None,
        initial: Any = "10 seconds",
        factor: float = 2,
        max_interval: Any = "5 minutes",
        deadline: Any = "1 hour",
        retries: dict[str, Any] | None = None,
        timeout: Any = None,
    ) -> Any:
        """Call `check(ctx)` as a step until `until(value)` (default: the value is truthy) and
        return that value; between checks the instance sleeps `initial`, then `factor` times
        longer each time, at most `max_interval`. Past `deadline` (from the first check) it
        raises PollDeadlineExceeded (its `last` is the last value). Checks are steps named
        `name`, pauses sleeps named `name-wait`. docs/engine-contract.md, "Polling"."""
        return poll.run(
            self._x,
            self.do,
            name,
            check,
            until=until,
            initial=initial,
            factor=factor,
            max_interval=max_interval,
            deadline=deadline,
            retries=retries,
            timeout=timeout,
        )


def _threaded(method: Callable[Concatenate[Step, P], R]) -> Callable[Concatenate[AsyncStep, P], Coroutine[Any, Any, R]]:
    """The async twin of a Step method: the same parameters and docstring, awaited, running the
    sync step's code in a thread (its ledger IO is synchronous)."""

    @functools.wraps(method)
    async def twin(self: AsyncStep, /, *args: P.args, **kwargs: P.kwargs) -> R:
        return await asyncio.to_thread(method, self._sync, *args, **kwargs)

    return twin


class AsyncStep(_StepCore):
    """The step API for `async def run`: the same methods, awaited (its shape:
    `ingest.engine.AsyncStepApi`). The waits run the sync step's code in a thread."""

    def __init__(self, execution: Execution) -> None:
        super().__init__(execution)
        self._sync = Step(execution)

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
            # Each step of a gather runs in its own task (a copy of the context): the binding
            # is that step's alone; to_thread carries it into the thread.
            with logcontext.bind(step=p.label, attempt=ctx.attempt), x.log_capture(p, ctx) as logs:
                try:
                    result = await invoke_async(fn, ctx, p, x.overrides)
                except CONTROL_FLOW:
                    raise
                except BaseException as exc:  # noqa: BLE001 - includes a budget's AwaitApproval
                    if isinstance(exc, KeyboardInterrupt | SystemExit | asyncio.CancelledError):
                        raise
                    await asyncio.to_thread(x.failed, p, ctx, started, exc, logs.kept())
                    continue
                return await asyncio.to_thread(x.succeeded, p, ctx, started, result, logs.kept())

    async def all_settled(self, calls: Sequence[StepCall], *, concurrency: int | None = None) -> list[Settled]:
        """Run steps concurrently as tasks; each is memoised on its own, one failing loses no
        other's result. `concurrency` caps how many run at once (default: all of them)."""
        _concurrency_checked(concurrency)
        prepared = [self._x.prepare_do(c.name, c.options) for c in calls]  # in call order, before any await
        gate = asyncio.Semaphore(concurrency or max(1, len(calls)))

        async def one(p: Prepared, fn: Callable[..., Any]) -> Any:
            async with gate:
                return await self._run_async(p, fn)

        outcomes = await asyncio.gather(
            *(one(p, c.fn) for p, c in zip(prepared, calls, strict=True)), return_exceptions=True
        )
        return settle([(not isinstance(o, BaseException), o) for o in outcomes])

    async def all(self, calls: Sequence[StepCall], *, concurrency: int | None = None) -> list[Any]:
        """Like `all_settled`, but raise the first failure (after every step has settled)."""
        results = await self.all_settled(calls, concurrency=concurrency)
        for r in results:
            if not r.ok:
                assert r.error is not None
                raise r.error
        return [r.value for r in results]

    async def set_search_attributes(self, **values: Any) -> dict[str, str]:
        from ingest.engine.services.attributes import attributes_check, attributes_set

        attributes_check(values)
        instance_id = self._x.instance.id
        merged: dict[str, str] = await self.do(
            "search-attributes", lambda: attributes_set(instance_id=instance_id, values=values), **ATTRIBUTES_STEP
        )
        return merged

    # The waits, children, polls and fan-outs: the sync step's own methods, run in a thread.
    sleep = _threaded(Step.sleep)
    sleep_until = _threaded(Step.sleep_until)
    wait_for_event = _threaded(Step.wait_for_event)
    wait_for_approval = _threaded(Step.wait_for_approval)
    child = _threaded(Step.child)
    poll = _threaded(Step.poll)
    fan_out = _threaded(Step.fan_out)


if TYPE_CHECKING:  # mypy holds both classes to the shapes workflow authors type against
    _sync_shape: type[StepApi] = Step
    _async_shape: type[AsyncStepApi] = AsyncStep
