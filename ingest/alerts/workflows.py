"""The delivery workflows: every notification and every callback is an instance of the engine,
so a receiver that is down gets retries with backoff, and one that stays down a dead letter an
operator can redrive."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.conf import settings

from ingest.alerts.delivery import callback_deliver, notification_deliver
from ingest.engine import Workflow

if TYPE_CHECKING:
    from ingest.engine import StepApi


def retry_policy() -> dict[str, Any]:
    """Settings may shorten the delay (tests, benches); 6 attempts over about a minute by default."""
    return {
        "limit": int(getattr(settings, "RUNLEDGER_DELIVERY_RETRIES", 5)),
        "delay": getattr(settings, "RUNLEDGER_DELIVERY_RETRY_DELAY", "2 seconds"),
        "backoff": "exponential",
    }


class AlertDeliver(Workflow):
    name = "alert-deliver"
    priority = 10  # an alert should not wait behind the backlog it may be about

    def run(self, event: Any, step: StepApi) -> Any:
        notification = int(event.payload["notification"])
        return step.do(
            "send",
            lambda ctx: notification_deliver(notification_id=notification),
            retries=retry_policy(),
            timeout="1 minute",
        )


class CallbackDeliver(Workflow):
    name = "callback-deliver"
    priority = 5

    def run(self, event: Any, step: StepApi) -> Any:
        callback = int(event.payload["callback"])
        return step.do(
            "post-outcome",
            lambda ctx: callback_deliver(callback_id=callback),
            retries=retry_policy(),
            timeout="1 minute",
        )
