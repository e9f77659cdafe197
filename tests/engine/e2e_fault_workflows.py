"""Workflows of the fault tests (tests/engine/test_faults_*.py) and bench/faults.py.

Their steps write their side effects to `e2e_effects` (tests/engine/e2e_workflows.py), so a test
can tell which step ran how often, in which process and when. No step touches the ledger.
"""

from __future__ import annotations

from decimal import Decimal

from ingest.engine import Workflow
from tests.engine.e2e_workflows import effect


class FiveSteps(Workflow):
    """Five steps of `hold` seconds each (default 0.05)."""

    name = "e2e-five-steps"

    def run(self, event, step):
        hold = float(event.payload.get("hold", 0.05))
        for n in range(1, 6):
            step.do(f"s{n}", lambda ctx: effect(ctx, hold=hold))
        return event.payload.get("n")


class Costed(Workflow):
    """Each step holds money on a budget before its work and records the spend after it: a
    worker killed inside a step leaves a held reservation behind."""

    name = "e2e-costed"

    def run(self, event, step):
        hold = float(event.payload.get("hold", 0.3))

        def spend(ctx):
            ctx.check_budget("e2e-llm", Decimal("1"))
            result = effect(ctx, hold=hold)
            ctx.track_cost("e2e-llm", cost=Decimal("0.5"))
            return result

        for n in range(1, 4):
            step.do(f"spend-{n}", spend)
        return None
