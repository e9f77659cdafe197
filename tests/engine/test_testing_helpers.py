"""The helpers users test their own workflows with: skipped sleeps and delays, mocks, forced timeouts."""

from __future__ import annotations

import time
from collections import Counter

import pytest

from ingest.engine import WaitForEventTimeout, Workflow
from ingest.engine.testing import introspect_workflow, run_workflow

pytestmark = pytest.mark.db
CALLS: Counter[str] = Counter()


class Onboard(Workflow):
    name = "t-onboard"

    def run(self, event, step):
        step.sleep("settle", "2 days")
        data = step.do("fetch-backlinks", self.fetch, retries={"limit": 2, "delay": "1 hour"})
        try:
            decision = step.wait_for_event("review", type="review", timeout="1 day")["payload"]
        except WaitForEventTimeout:
            decision = "timed out"
        return {"data": data, "decision": decision}

    def fetch(self, ctx):
        CALLS["fetch"] += 1
        return "live"


@pytest.fixture(autouse=True)
def _calls():
    CALLS.clear()


@pytest.mark.django_db
def test_mocked_results_errors_and_events_drive_a_workflow_without_waiting():
    started = time.monotonic()
    with introspect_workflow("t-onboard") as wf:
        wf.disable_sleeps().disable_retry_delays()
        wf.mock_step_error("fetch-backlinks", TimeoutError("dfs timeout"), times=2)
        wf.mock_step_result("fetch-backlinks", {"count": 100})
        wf.mock_event("review", "approved")
        status = run_workflow("t-onboard", id="onb-1", advance_clock=False)
    # Its sleep is 2 days and its retry delays an hour each: a run that waited any of them in real
    # time would not be over in a minute, whatever the machine.
    assert time.monotonic() - started < 60
    assert status["status"] == "complete"
    assert status["output"] == {"data": {"count": 100}, "decision": "approved"}
    assert CALLS["fetch"] == 0
    attempts = status["steps"][1]["attempts"]
    assert [a["error"]["message"] if a["error"] else "ok" for a in attempts] == ["dfs timeout", "dfs timeout", "ok"]
    assert status["steps"][0]["name"] == "settle" and status["steps"][0]["status"] == "complete"


@pytest.mark.django_db
def test_forced_timeouts_reach_the_workflow_as_real_timeouts():
    with introspect_workflow("t-onboard") as wf:
        wf.disable_sleeps().disable_retry_delays()
        wf.force_step_timeout("fetch-backlinks", times=1)
        wf.force_event_timeout("review")
        status = run_workflow("t-onboard", id="onb-2", advance_clock=False)
    assert status["output"] == {"data": "live", "decision": "timed out"}
    fetch = status["steps"][1]["attempts"]
    assert fetch[0]["error"]["name"] == "StepTimeout" and fetch[1]["ok"]


@pytest.mark.django_db
def test_overrides_end_with_the_block():
    with introspect_workflow("t-onboard") as wf:
        wf.mock_step_result("fetch-backlinks", "mocked")
    status = run_workflow("t-onboard", id="onb-3")  # the clock jumps over the 2 days and the 1 day
    assert status["output"] == {"data": "live", "decision": "timed out"}
