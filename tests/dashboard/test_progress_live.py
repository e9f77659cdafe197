"""A step's `ctx.progress` reaches the open instance page live: the engine writes the report, the
history follower picks it up, and the socket receives that step's row with its progress bar (not
the whole page), while the page's history list stays free of progress lines."""

from __future__ import annotations

import asyncio
import re
from datetime import timedelta

import pytest
from asgiref.sync import sync_to_async
from django.utils import timezone
from ledger_factories import make_instance
from test_live import _connect, _drain, layer, live_settings, people  # noqa: F401 - fixtures

from dashboard.live.follower import HistoryFollower
from ingest.engine.models import Step
from ingest.engine.runtime.context import StepContext

pytestmark = pytest.mark.django_db(transaction=True)


async def test_a_progress_report_is_pushed_to_the_instance_page_as_its_steps_row(people, layer):  # noqa: F811
    def setup() -> StepContext:
        inst = make_instance("acme-prog", tenant="acme", status="running")
        Step.objects.create(
            instance=inst,
            name="embed-chunks",
            seq=1,
            position=0,
            status="running",
            attempts=1,
            started_at=timezone.now() - timedelta(minutes=1),
        )
        return StepContext(
            name="embed-chunks",
            count=1,
            attempt=1,
            config={},
            idempotency_key="k",
            instance_id=inst.id,
            workflow=inst.workflow,
            tenant="acme",
            step_label="embed-chunks",
        )

    ctx = await sync_to_async(setup)()
    follower = HistoryFollower()
    await follower.poll_once()
    comm, ok, _ = await _connect(people["operator"], "view=instance&instance=acme-prog")
    assert ok
    await sync_to_async(ctx.progress)(120, 480, "chunk 120")
    assert await follower.poll_once() == 1
    whole = (await _drain(comm, 10.0, until=1))[0]  # the first push sends the page whole
    assert re.search(r'<progress max="100" value="25"', whole) and "chunk 120" in whole

    await asyncio.sleep(0.3)
    ctx._throttle.last = float("-inf")  # the next report passes the throttle at once
    await sync_to_async(ctx.progress)(360, 480, "chunk 360")
    assert await follower.poll_once() == 1
    push = (await _drain(comm, 10.0, until=1))[0]
    assert 'id="step-embed-chunks-1" hx-swap-oob="true"' in push and 'id="instance-steps"' not in push
    assert '<progress max="100" value="75"' in push and "chunk 360" in push
    assert "step.progress" not in push  # no history line per report
    await comm.disconnect()
