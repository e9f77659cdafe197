"""Workflows and the item handler bench/fan_out.py runs (worker processes import this module
via RUNLEDGER_WORKFLOW_MODULES)."""

from __future__ import annotations

from typing import Any

from ingest.engine import Workflow, fan_out_handler


@fan_out_handler("bench-noop")
def noop_item(ctx: Any, item: Any) -> None:
    return None


def noop() -> None:
    return None


class FanOutNoops(Workflow):
    """One fan-out of `items` no-op items, `pack` to a carrier instance (0: an instance each)."""

    name = "bench-fan-out"

    def run(self, event, step):
        pack = event.payload.get("pack") or 0
        options = {"pack": pack} if pack else {}  # a ledger without the option runs this too
        settled = step.fan_out("noops", noop_item, list(range(event.payload["items"])), timeout="1 hour", **options)
        return {"ok": sum(1 for s in settled if s.ok)}


class PlainNoops(Workflow):
    """The same items as plain steps of one instance."""

    name = "bench-plain-steps"

    def run(self, event, step):
        for i in range(event.payload["items"]):
            step.do(f"noop-{i}", noop)
        return None
