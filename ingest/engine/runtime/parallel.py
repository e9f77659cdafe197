"""Parallel steps: `step.all` and `step.all_settled` run a group's steps on the calling thread and
on the process's pool of helper threads, and settle their outcomes."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from ingest.engine import logcontext
from ingest.engine.runtime.execution import Prepared
from ingest.engine.runtime.outcomes import CONTROL_FLOW, Suspend
from ingest.engine.sql.base import drop_broken_connection

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


def run_group(
    run: Callable[[Prepared, Callable[..., Any]], Any], work: list[tuple[Prepared, Callable[..., Any]]], *, width: int
) -> list[tuple[bool, Any]]:
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
    # Helper threads do not inherit the caller's contextvars: they log with its context too.
    fields = logcontext.current()
    helpers = [pool.submit(_helper, drain, fields) for _ in range(min(width - 1, size))]
    drain()
    for helper in helpers:
        if not helper.cancel():
            helper.result()
    return outcomes


def _helper(drain: Callable[[], None], fields: dict[str, Any]) -> None:
    try:
        with logcontext.bind(**fields):
            drain()
    finally:
        drop_broken_connection()


def settle(outcomes: list[tuple[bool, Any]]) -> list[Settled]:
    """Control flow wins over results: the first engine signal is re-raised after all settled."""
    control = [o for ok, o in outcomes if not ok and isinstance(o, CONTROL_FLOW) and not isinstance(o, Suspend)]
    if control:
        raise control[0]
    suspends = [o for ok, o in outcomes if not ok and isinstance(o, Suspend)]
    if suspends:
        raise earliest(suspends)
    for ok, o in outcomes:
        if not ok and isinstance(o, KeyboardInterrupt | SystemExit):
            raise o
    return [Settled(ok=True, value=o) if ok else Settled(ok=False, error=o) for ok, o in outcomes]


def earliest(suspends: list[Suspend]) -> Suspend:
    for s in suspends:
        if s.pause:
            return s
    timed = [s for s in suspends if s.until is not None]
    return min(timed, key=lambda s: s.until) if timed else suspends[0]  # type: ignore[arg-type, return-value]
