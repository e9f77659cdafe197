"""RUNLEDGER_MAX_STEPS: an instance runs at most that many steps (default 10,000); the step past
the cap fails the instance with an error naming the cap and the setting."""

from __future__ import annotations

import pytest
from django.test import override_settings

from ingest.engine import Workflow, create
from ingest.engine.models import DeadLetter, Step

pytestmark = pytest.mark.db


class Loop(Workflow):
    name = "t-fault-loop"

    def run(self, event, step):
        for n in range(event.payload["steps"]):
            step.do(f"step-{n}", lambda ctx: ctx.name)
        return "done"


class SleepyLoop(Workflow):
    name = "t-fault-sleepy-loop"

    def run(self, event, step):
        for n in range(event.payload["steps"]):
            step.sleep(f"nap-{n}", 1)
        return "done"


@pytest.mark.django_db
@override_settings(RUNLEDGER_MAX_STEPS=5)
def test_the_step_past_the_cap_fails_the_instance_naming_the_cap_and_the_setting(drain):
    handle = create("t-fault-loop", id="cap-over", params={"steps": 8})
    drain()
    status = handle.status()
    assert status["status"] == "errored"
    assert status["error"]["name"] == "StepLimitExceeded"
    message = status["error"]["message"]
    assert "RUNLEDGER_MAX_STEPS" in message and "5 steps" in message and "'step-5'" in message
    assert Step.objects.filter(instance_id="cap-over", status="complete").count() == 5
    assert not Step.objects.filter(instance_id="cap-over", name__in=["step-5", "step-6", "step-7"]).exists()
    assert DeadLetter.objects.get(instance_id="cap-over").error_name == "StepLimitExceeded"


@pytest.mark.django_db
@override_settings(RUNLEDGER_MAX_STEPS=5)
def test_an_instance_of_exactly_the_cap_completes(drain):
    handle = create("t-fault-loop", id="cap-exact", params={"steps": 5})
    drain()
    assert handle.status()["status"] == "complete"


@pytest.mark.django_db
@override_settings(RUNLEDGER_MAX_STEPS=3)
def test_sleeps_count_as_steps_across_turns(drain):
    handle = create("t-fault-sleepy-loop", id="cap-sleeps", params={"steps": 4})
    drain(advance_clock=True)
    status = handle.status()
    assert status["status"] == "errored"
    assert "RUNLEDGER_MAX_STEPS" in status["error"]["message"]


@pytest.mark.django_db
def test_the_default_cap_is_ten_thousand_steps(drain, settings):
    del settings.RUNLEDGER_MAX_STEPS  # unset: the engine's own default applies
    handle = create("t-fault-loop", id="cap-default", params={"steps": 10_001})
    drain()
    status = handle.status()
    assert status["status"] == "errored"
    assert "10,000 steps" in status["error"]["message"]
    assert Step.objects.filter(instance_id="cap-default").count() == 10_000
