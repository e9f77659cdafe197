"""A step's retries through the real engine: `max_delay` caps when the next attempt is scheduled."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from ingest.engine import Workflow, create
from ingest.engine.clock import clock
from ingest.engine.models import Attempt, Instance, Step

pytestmark = pytest.mark.db

START = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


def _upstream_down(ctx):
    raise ConnectionError(f"upstream 503 on attempt {ctx.attempt}")


class CappedRetries(Workflow):
    name = "t-capped-retries"

    def run(self, event, step):
        return step.do(
            "call-upstream",
            _upstream_down,
            retries={
                "limit": 3,
                "delay": "30 seconds",
                "backoff": "exponential",
                "backoff_coefficient": 3,
                "max_delay": "1 minute",
            },
        )


@pytest.mark.django_db
def test_a_step_with_max_delay_is_rescheduled_at_the_capped_delay(drain):
    clock.freeze(START)
    create("t-capped-retries", id="capped-1")
    drain()
    step = Step.objects.get(instance_id="capped-1", name="call-upstream")
    assert step.wake_at == START + timedelta(seconds=30)  # the first delay is below the cap
    assert Instance.objects.get(id="capped-1").ready_at == START + timedelta(seconds=30)

    clock.advance(timedelta(seconds=30))
    drain()
    second = START + timedelta(seconds=30)
    # 30 s × 3 would be 90 s; max_delay holds it to one minute.
    step.refresh_from_db()
    assert step.wake_at == second + timedelta(minutes=1)
    assert Instance.objects.get(id="capped-1").ready_at == second + timedelta(minutes=1)

    clock.advance(timedelta(seconds=59))
    drain()
    assert Attempt.objects.filter(step_id=step.id).count() == 2  # not due a second early
    clock.advance(timedelta(seconds=1))
    drain()
    clock.advance(timedelta(minutes=1))
    drain()
    delays = list(
        Attempt.objects.filter(step_id=step.id).order_by("number").values_list("retry_delay_seconds", flat=True)
    )
    assert delays == [30.0, 60.0, 60.0, None]  # 270 s uncapped for the third retry
    assert Instance.objects.get(id="capped-1").status == "errored"
