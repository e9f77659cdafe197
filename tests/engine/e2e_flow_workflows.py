"""Flow-controlled workflows for the real-process tests (tests/engine/test_flow_processes.py).

Worker processes import this beside tests.engine.e2e_workflows (RUNLEDGER_WORKFLOW_MODULES);
steps record their intervals in `e2e_effects`, so a test can compute how many ran at once.
"""

from __future__ import annotations

from ingest.engine import Workflow
from tests.engine.e2e_workflows import effect


class PerTenant(Workflow):
    name = "e2e-flow-tenant"
    concurrency = 2
    concurrency_key = "tenant"

    def run(self, event, step):
        return step.do("work", lambda ctx: effect(ctx, hold=event.payload.get("hold", 0.0)))


class RatePerTenant(Workflow):
    name = "e2e-flow-rated"
    rate_limit = {"limit": 5, "period": "2 seconds", "key": "tenant"}

    def run(self, event, step):
        return step.do("work", effect)


class TimedSleeper(Workflow):
    name = "e2e-flow-timeout"
    timeout = "2 seconds"

    def run(self, event, step):
        step.do("before", effect)
        step.sleep("nap", "1 hour")
        step.do("after", effect)
