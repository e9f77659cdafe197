"""Workflows the alert tests run: one that fails, one that succeeds, two that wait for approval
(one lets the timeout end it, one catches it and goes on)."""

from __future__ import annotations

from typing import Any

from ingest.engine import NonRetryableError, WaitForEventTimeout, Workflow


class FailingForAlerts(Workflow):
    name = "alerts-test-fail"

    def run(self, event: Any, step: Any) -> Any:
        def boom(ctx: Any) -> dict[str, Any]:
            if event.payload.get("fail") is False:
                return {"charged": True}
            raise NonRetryableError(f"order {event.payload.get('order', '?')} refused by the fake")

        return step.do("charge", boom)


class PassingForAlerts(Workflow):
    name = "alerts-test-ok"

    def run(self, event: Any, step: Any) -> Any:
        return step.do("work", lambda ctx: {"done": event.payload.get("n", 0)})


class ApprovalForAlerts(Workflow):
    name = "alerts-test-approval"

    def run(self, event: Any, step: Any) -> Any:
        answer = step.wait_for_approval(
            "sign-off", title="Ship order 7", timeout="1 hour", escalation="senior@example.com"
        )
        return {"approved": answer["approved"]}


class ApprovalCaughtForAlerts(Workflow):
    name = "alerts-test-approval-caught"

    def run(self, event: Any, step: Any) -> Any:
        try:
            answer = step.wait_for_approval(
                "sign-off",
                title=f"Ship order {event.payload['order']}",
                timeout="1 hour",
                escalation="senior@example.com",
            )
        except WaitForEventTimeout:
            return {"approved": False, "timed_out": True}
        return {"approved": answer["approved"], "timed_out": False}
