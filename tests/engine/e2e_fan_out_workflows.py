"""The fan-out the real-process tests run (worker processes import this beside
tests.engine.e2e_workflows, via RUNLEDGER_WORKFLOW_MODULES)."""

from __future__ import annotations

from ingest.engine import Workflow, fan_out_handler
from tests.engine.e2e_workflows import effect


@fan_out_handler("e2e-item")
def e2e_item(ctx, item):
    effect(ctx, hold=item.get("hold", 0.0))
    return item["n"] * 2


class FanOutCrash(Workflow):
    name = "e2e-fan-out-crash"

    def run(self, event, step):
        settled = step.fan_out("items", e2e_item, event.payload["items"], batch_size=5)
        return [s.value if s.ok else None for s in settled]


class PackedFanOutCrash(Workflow):
    """The same items, 5 to a carrier instance."""

    name = "e2e-packed-fan-out-crash"

    def run(self, event, step):
        settled = step.fan_out("items", e2e_item, event.payload["items"], pack=5)
        return [s.value if s.ok else None for s in settled]
