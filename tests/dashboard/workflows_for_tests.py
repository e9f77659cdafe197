"""A workflow registered for the dashboard tests (replay needs the workflow to exist)."""

from __future__ import annotations

from typing import Any

from ingest.engine import Workflow

DEMO = "dash-demo"


class DashDemo(Workflow):
    name = DEMO

    def run(self, event: Any, step: Any) -> Any:
        first = step.do("first", lambda ctx: {"n": 1})
        step.do("second", lambda ctx: {"n": first["n"] + 1})
        return {"ok": True}
