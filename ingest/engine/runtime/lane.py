"""The deferred lane: how many deferred steps a process runs at once.

A deferred step (`checkpoint="deferred"`, docs/engine-contract.md) is short and acts only on this
database and this process: the pipelines' fact writes, their embeddings, their signal rows. Run
from every slot of a worker at once they compete for the interpreter's lock and for PostgreSQL's
CPU with the turns that wait on the outside world (an LLM's answer, a claim, a waited commit),
and every one of those round trips gets slower. Through a lane of one per process they run one
after another, each sooner, and the rest of the worker with them (bench/pipelines.py measures
it; docs/pipelines.md has the figures).

The lane is a priority, never a lock to wait on for long. No step waits for it longer than
`WAIT_SECONDS` (20 ms), and once the step holding it has held it that long, the steps waiting
for it and those that come while it is still held run beside it: a slow deferred step (an
embedding of many facts) delays the others by at most that in all, and a worker whose deferred
steps outgrow one lane runs them unthrottled, as without it. Steps inside the workflow's own
`transaction.atomic()` never wait: the thread may hold row locks the step in the lane needs.
Nor do the coroutine step functions of an async workflow, which run on its event loop (its
plain functions run on threads and take the lane).

`RUNLEDGER_DEFERRED_LANE` sets the width; 0, the default, turns the lane off. The lane buys a
little latency with CPU: each deferred step that finds it held sleeps and is woken again, and the
committer gets the completions one by one. On a loaded machine that CPU cost more than the
lane's gain in wall time, so it is off by default (docs/pipelines.md, "the deferred lane off by
default"). Turn it on where a process's deferred steps are long enough to crowd out its other
turns (in-process embeddings, say).
"""

from __future__ import annotations

import contextlib
import itertools
import threading
import time
from collections.abc import Iterator
from typing import Any

WAIT_SECONDS = 0.02


class Lane:
    """`width` deferred steps at a time. A step waits while the lane is full, for WAIT_SECONDS at
    most, and only until the step holding it longest has held it for WAIT_SECONDS: from then on
    the lane counts as clogged by a slow step and newcomers run beside it at once, so one slow
    step delays the others by WAIT_SECONDS in all, not each of them by that much; and however
    many short steps queue, none waits longer than that."""

    def __init__(self, width: int) -> None:
        self.width = width
        self._cond = threading.Condition(threading.Lock())
        self._since: dict[int, float] = {}  # holder's key -> when it took the lane
        self._keys = itertools.count()

    def enter(self) -> int | None:
        """The key to leave with, or None when the step runs beside a clogged lane."""
        mine = time.monotonic() + WAIT_SECONDS
        with self._cond:
            while len(self._since) >= self.width:
                left = min(mine, min(self._since.values()) + WAIT_SECONDS) - time.monotonic()
                if left <= 0:
                    return None
                self._cond.wait(left)
            key = next(self._keys)
            self._since[key] = time.monotonic()
            return key

    def leave(self, key: int) -> None:
        with self._cond:
            del self._since[key]
            self._cond.notify()


_lock = threading.Lock()
_lane: tuple[Lane | None] | None = None


def _current() -> Lane | None:
    global _lane
    if _lane is None:
        from django.conf import settings

        with _lock:
            if _lane is None:
                width = int(getattr(settings, "RUNLEDGER_DEFERRED_LANE", 0))
                _lane = (Lane(width) if width > 0 else None,)
    return _lane[0]


@contextlib.contextmanager
def deferred_step() -> Iterator[bool]:
    """Hold the lane while a deferred step's function runs; yields whether it got the lane
    (False: the lane is off, the thread is in an atomic block, or the lane is clogged)."""
    current = _current()
    if current is None or _in_atomic_block():
        yield False
        return
    key = current.enter()
    try:
        yield key is not None
    finally:
        if key is not None:
            current.leave(key)


def _in_atomic_block() -> bool:
    from django.db import connection

    return bool(connection.in_atomic_block)


def reset() -> None:
    """Read RUNLEDGER_DEFERRED_LANE again at the next deferred step."""
    global _lane
    with _lock:
        _lane = None


def _setting_changed(*, setting: str, **_: Any) -> None:
    if setting == "RUNLEDGER_DEFERRED_LANE":
        reset()


def _listen_for_setting_changes() -> None:
    from django.core.signals import setting_changed

    setting_changed.connect(_setting_changed, dispatch_uid="runledger-deferred-lane")


_listen_for_setting_changes()
