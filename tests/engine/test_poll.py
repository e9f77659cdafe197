"""`step.poll`: durable exponential pauses between checks, a deadline, replay-safe decisions.

The workflow below is DataForSEO's standard-queue cycle (task_post → tasks_ready → task_get)
against an in-memory task queue that turns a task ready after a number of checks.
"""

from __future__ import annotations

from collections import Counter
from datetime import datetime

import pytest

from ingest.engine import InvalidStepConfig, PollDeadlineExceeded, Workflow, create
from ingest.engine.models import Step

pytestmark = pytest.mark.db
CHECKS: Counter[str] = Counter()
READY_AFTER: dict[str, int] = {}


@pytest.fixture(autouse=True)
def _reset():
    CHECKS.clear()
    READY_AFTER.clear()


def tasks_ready(task_id: str) -> list[str]:
    CHECKS[task_id] += 1
    return [task_id] if CHECKS[task_id] >= READY_AFTER[task_id] else []


class TaskCycle(Workflow):
    name = "t-poll-task-cycle"

    def run(self, event, step):
        task_id = step.do("task-post", lambda ctx: f"task-{event.instance_id}")
        READY_AFTER.setdefault(task_id, event.payload["ready_after"])
        try:
            ready = step.poll(
                "tasks-ready",
                lambda ctx: tasks_ready(task_id),
                initial="10 seconds",
                factor=2,
                max_interval="40 seconds",
                deadline=event.payload.get("deadline", "1 hour"),
            )
        except PollDeadlineExceeded as late:
            return {"late": True, "checks": late.checks, "last": late.last}
        return step.do("task-get", lambda ctx: {"task": ready[0], "result": ["keyword"]})


def pauses(iid: str) -> list[float]:
    rows = Step.objects.filter(instance_id=iid, name="tasks-ready-wait").order_by("seq")
    return [(r.wake_at - r.started_at).total_seconds() for r in rows]


@pytest.mark.django_db
def test_it_checks_with_exponential_pauses_until_done_and_each_check_runs_once(drain):
    h = create("t-poll-task-cycle", id="poll-1", params={"ready_after": 5})
    drain(advance_clock=True)
    assert h.status()["output"] == {"task": "task-poll-1", "result": ["keyword"]}
    assert CHECKS["task-poll-1"] == 5  # four replays after four sleeps re-ran no check
    assert [round(p) for p in pauses("poll-1")] == [10, 20, 40, 40]  # capped at max_interval
    checks = Step.objects.filter(instance_id="poll-1", name="tasks-ready").order_by("seq")
    assert [c.result["done"] for c in checks] == [False, False, False, False, True]


@pytest.mark.django_db
def test_past_its_deadline_it_raises_with_the_last_value_after_a_last_check_at_the_deadline(drain):
    h = create("t-poll-task-cycle", id="poll-late", params={"ready_after": 99, "deadline": "60 seconds"})
    drain(advance_clock=True)
    # Checks at 0, 10, 30 s; the next pause (40 s) is cut to end at 60 s, where the last check runs.
    assert h.status()["output"] == {"late": True, "checks": 4, "last": []}
    assert [round(p) for p in pauses("poll-late")] == [10, 20, 30]
    checks = Step.objects.filter(instance_id="poll-late", name="tasks-ready").order_by("seq")
    first, last = (datetime.fromisoformat(c.result["at"]) for c in (checks[0], checks[3]))
    assert round((last - first).total_seconds()) == 60


class BadPoll(Workflow):
    name = "t-poll-bad"

    def run(self, event, step):
        return step.poll("p", lambda: True, **event.payload)


@pytest.mark.django_db
@pytest.mark.parametrize(
    "options", [{"factor": 0.5}, {"initial": "2 minutes", "max_interval": "1 minute"}, {"initial": 0}]
)
def test_a_bad_poll_policy_fails_the_instance_with_a_message_naming_the_poll(drain, options):
    h = create("t-poll-bad", params=options)
    drain()
    status = h.status()
    assert status["status"] == "errored" and status["error"]["name"] == InvalidStepConfig.__name__
    assert "poll 'p'" in status["error"]["message"]
