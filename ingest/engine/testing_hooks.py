"""Overrides the testing helpers install and the runtime consults (see ingest.engine.testing)."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any


@dataclass
class _Planned:
    value: Any
    times: int | None  # None: every time
    is_error: bool = False


@dataclass
class Overrides:
    skip_sleeps: bool = False
    skip_retry_delays: bool = False
    step_plans: dict[str, list[_Planned]] = field(default_factory=dict)
    step_timeouts: dict[str, int | None] = field(default_factory=dict)
    event_timeouts: set[str] = field(default_factory=set)
    events: dict[str, list[Any]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def plan(self, step: str, value: Any, *, times: int | None, is_error: bool) -> None:
        with self.lock:
            self.step_plans.setdefault(step, []).append(_Planned(value, times, is_error))

    def take(self, step: str) -> tuple[bool, Any]:
        """(True, value) when a mock answers this attempt; raises a mocked error; else (False, None)."""
        from ingest.engine.errors import StepTimeout

        with self.lock:
            if step in self.step_timeouts:
                left = self.step_timeouts[step]
                if left is None or left > 0:
                    if left is not None:
                        self.step_timeouts[step] = left - 1
                    raise StepTimeout(f"step {step!r} timed out (forced by the test)")
            plans = self.step_plans.get(step) or []
            while plans:
                planned = plans[0]
                if planned.times is not None:
                    if planned.times <= 0:
                        plans.pop(0)
                        continue
                    planned.times -= 1
                if planned.is_error:
                    raise planned.value
                return True, planned.value
        return False, None

    def take_event(self, event_type: str) -> tuple[bool, Any]:
        with self.lock:
            queue = self.events.get(event_type) or []
            if queue:
                return True, queue.pop(0)
        return False, None


_by_instance: dict[str, Overrides] = {}
_by_workflow: dict[str, Overrides] = {}


def overrides_for(instance_id: str, workflow: str) -> Overrides | None:
    if not _by_instance and not _by_workflow:
        return None
    return _by_instance.get(instance_id) or _by_workflow.get(workflow)


def install(*, instance_id: str | None = None, workflow: str | None = None) -> Overrides:
    overrides = Overrides()
    if instance_id is not None:
        _by_instance[instance_id] = overrides
    if workflow is not None:
        _by_workflow[workflow] = overrides
    return overrides


def uninstall(*, instance_id: str | None = None, workflow: str | None = None) -> None:
    if instance_id is not None:
        _by_instance.pop(instance_id, None)
    if workflow is not None:
        _by_workflow.pop(workflow, None)
