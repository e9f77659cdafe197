"""Workflows the benchmarks run (registered in worker processes via RUNLEDGER_WORKFLOW_MODULES)."""

from __future__ import annotations

import time

from ingest.engine import Workflow

STEP_TIMES: list[float] = []


def noop() -> None:
    return None


class TenNoops(Workflow):
    name = "bench-ten-noops"

    def run(self, event, step):
        for i in range(10):
            step.do(f"noop-{i}", noop)
        return None


class TimedTenNoops(Workflow):
    """Times each step.do call in-process: the engine's overhead per step (the step does nothing)."""

    name = "bench-timed-noops"

    def run(self, event, step):
        for i in range(10):
            t = time.perf_counter()
            step.do(f"noop-{i}", noop)
            STEP_TIMES.append(time.perf_counter() - t)
        return None


class Sleeper(Workflow):
    name = "bench-sleeper"

    def run(self, event, step):
        step.sleep_until("nap", event.payload["until"])
        return None


class Noop(Workflow):
    """One no-op step: what an event-started instance costs (bench/debounce.py)."""

    name = "bench-noop"

    def run(self, event, step):
        step.do("noop", noop)
        return None
