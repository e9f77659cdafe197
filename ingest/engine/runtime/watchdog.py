"""Per-attempt timeouts for synchronous step functions.

A thread cannot be killed, so the watchdog raises StepTimeout inside the step's thread at its
next Python bytecode (PyThreadState_SetAsyncExc). A step blocked inside a C call without its
own timeout is interrupted when that call returns; either way its result is discarded and the
attempt is recorded as timed out. One watchdog thread serves every step of a process.
"""

from __future__ import annotations

import ctypes
import heapq
import itertools
import threading
import time

from ingest.engine.errors import StepTimeout


class _Arm:
    __slots__ = ("thread_id", "deadline", "fired", "done", "lock")

    def __init__(self, thread_id: int, deadline: float) -> None:
        self.thread_id = thread_id
        self.deadline = deadline
        self.fired = False
        self.done = False
        self.lock = threading.Lock()


class Watchdog:
    def __init__(self) -> None:
        self._heap: list[tuple[float, int, _Arm]] = []
        self._counter = itertools.count()
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._live = 0

    def arm(self, seconds: float) -> _Arm:
        arm = _Arm(threading.get_ident(), time.monotonic() + seconds)
        with self._cond:
            self._live += 1
            if len(self._heap) > 1024 and len(self._heap) > 4 * self._live:
                # Disarmed entries wait for their deadline; drop them before they pile up.
                self._heap = [entry for entry in self._heap if not entry[2].done]
                heapq.heapify(self._heap)
            earliest = self._heap[0][0] if self._heap else None
            heapq.heappush(self._heap, (arm.deadline, next(self._counter), arm))
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name="runledger-watchdog", daemon=True)
                self._thread.start()
            if earliest is None or arm.deadline < earliest:
                # Wake the watchdog only when its next deadline moves earlier: most steps arm a
                # later deadline than one already waited for, and need no thread switch.
                self._cond.notify()
        return arm

    def disarm(self, arm: _Arm) -> None:
        with self._cond:
            self._live -= 1
        with arm.lock:
            arm.done = True
            if arm.fired:
                # Withdraw a StepTimeout that was sent but not yet raised.
                ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(arm.thread_id), None)

    def _loop(self) -> None:
        while True:
            with self._cond:
                while not self._heap:
                    self._cond.wait()
                deadline, _, arm = self._heap[0]
                wait = deadline - time.monotonic()
                if wait > 0:
                    self._cond.wait(timeout=wait)
                    continue
                heapq.heappop(self._heap)
            with arm.lock:
                if not arm.done:
                    arm.fired = True
                    ctypes.pythonapi.PyThreadState_SetAsyncExc(
                        ctypes.c_ulong(arm.thread_id), ctypes.py_object(StepTimeout)
                    )


watchdog = Watchdog()
