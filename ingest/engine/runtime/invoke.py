"""Running a step function: sync or a coroutine function, with its timeout, in the deferred lane
when its checkpoint is deferred, or its mocked result under `ingest.engine.testing`."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
from collections.abc import Callable
from typing import Any

from ingest.engine import tracing
from ingest.engine.errors import StepTimeout
from ingest.engine.runtime import journal, lane
from ingest.engine.runtime.context import StepContext
from ingest.engine.runtime.execution import Prepared
from ingest.engine.runtime.watchdog import watchdog
from ingest.engine.testing_hooks import Overrides


def invoke(fn: Callable[..., Any], ctx: StepContext, p: Prepared, overrides: Overrides | None) -> Any:
    """Run a step function (sync, or a coroutine function run to completion) with its timeout;
    a deferred step's in the deferred lane (lane.py), which its timeout does not count."""
    mocked, value = _mocked(overrides, p.name)
    if mocked:
        return value
    if tracing.ENABLED:
        return tracing.step_attempt(ctx, lambda: _in_lane(fn, ctx, p), sensitive=p.sensitive)
    return _in_lane(fn, ctx, p)


def _in_lane(fn: Callable[..., Any], ctx: StepContext, p: Prepared) -> Any:
    with journal.bound(ctx._journal):  # the paid clients the step calls find its journal here
        if p.deferred:
            with lane.deferred_step():
                return _invoke(fn, ctx, p)
        return _invoke(fn, ctx, p)


def _invoke(fn: Callable[..., Any], ctx: StepContext, p: Prepared) -> Any:
    assert p.config is not None
    timeout = p.config.timeout.total_seconds()
    if inspect.iscoroutinefunction(fn):
        return asyncio.run(asyncio.wait_for(call(fn, ctx), timeout))
    arm = watchdog.arm(timeout)
    try:
        try:
            return call(fn, ctx)
        finally:
            watchdog.disarm(arm)
    except StepTimeout:
        raise StepTimeout(f"step {p.label!r} ran past its timeout of {timeout:g} s") from None


async def invoke_async(fn: Callable[..., Any], ctx: StepContext, p: Prepared, overrides: Overrides | None) -> Any:
    mocked, value = _mocked(overrides, p.name)
    if mocked:
        return value
    assert p.config is not None
    timeout = p.config.timeout.total_seconds()
    try:
        if inspect.iscoroutinefunction(fn):
            with journal.bound(ctx._journal):
                if tracing.ENABLED:
                    return await tracing.step_attempt_async(
                        ctx, lambda: asyncio.wait_for(call(fn, ctx), timeout), sensitive=p.sensitive
                    )
                return await asyncio.wait_for(call(fn, ctx), timeout)
        return await asyncio.to_thread(invoke, fn, ctx, p, overrides)
    except TimeoutError:
        raise StepTimeout(f"step {p.label!r} ran past its timeout of {timeout:g} s") from None


def _mocked(overrides: Overrides | None, name: str) -> tuple[bool, Any]:
    if overrides is None:
        return False, None
    return overrides.take(name)


def call(fn: Callable[..., Any], ctx: StepContext) -> Any:
    return fn(ctx) if arity(fn) >= 1 else fn()


_ARITY: dict[Any, int] = {}


def arity(fn: Callable[..., Any]) -> int:
    key = getattr(fn, "__code__", None) or fn
    try:
        return _ARITY[key]
    except (KeyError, TypeError):
        pass
    try:
        params = inspect.signature(fn).parameters.values()
        count = sum(
            1 for prm in params if prm.kind in (prm.POSITIONAL_ONLY, prm.POSITIONAL_OR_KEYWORD, prm.VAR_POSITIONAL)
        )
    except (TypeError, ValueError):
        count = 1
    with contextlib.suppress(TypeError):  # unhashable callables are simply not cached
        _ARITY[key] = count
    return count
