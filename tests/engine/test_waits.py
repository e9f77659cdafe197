"""Sleeps, events, children, parallel steps, async workflows and rollbacks."""

from __future__ import annotations

import asyncio
from collections import Counter
from datetime import timedelta

import pytest

from ingest.engine import InstanceFinished, InvalidDuration, WaitForEventTimeout, Workflow, create
from ingest.engine.clock import clock
from ingest.engine.models import History, Instance, PendingEvent, Step

pytestmark = pytest.mark.db
RAN: Counter[str] = Counter()
ORDER: list[str] = []


@pytest.fixture(autouse=True)
def _reset():
    RAN.clear()
    ORDER.clear()


class Sleeper(Workflow):
    name = "t-sleeper"

    def run(self, event, step):
        step.sleep("nap", event.payload.get("for", "10 minutes"))
        return "awake"


@pytest.mark.django_db
def test_a_sleeping_instance_waits_for_its_wake_up_time_without_a_thread(drain):
    h = create("t-sleeper", id="sleep-1")
    drain()
    inst = Instance.objects.get(id="sleep-1")
    assert inst.status == "waiting" and inst.lease_token == ""
    assert timedelta(minutes=9, seconds=59) < inst.ready_at - inst.created_at <= timedelta(minutes=10, seconds=1)
    clock.advance(timedelta(minutes=9))
    drain()
    assert h.status()["status"] == "waiting"
    clock.advance(timedelta(minutes=1, seconds=1))
    drain()
    assert h.status()["output"] == "awake"


class SleepThenWork(Workflow):
    name = "t-sleep-then-work"

    def run(self, event, step):
        step.do("before", lambda ctx: 1)
        step.sleep("nap", "1 minute")
        step.do("after", lambda ctx: 2)
        if event.payload.get("second_nap"):
            step.sleep("nap-2", "1 minute")
        return "done"


@pytest.mark.django_db
@pytest.mark.parametrize("second_nap", [False, True])
def test_a_sleep_leaves_its_whole_story_in_the_ledger_whatever_write_carries_its_end(drain, second_nap):
    # The sleep's end is written with the next write of the turn: the next step's completion,
    # or (when the sleep is the run's last step) the instance's completion. Either way the step
    # row and the history have it, in order.
    iid = f"sleep-story-{int(second_nap)}"
    create("t-sleep-then-work", id=iid, params={"second_nap": second_nap})
    drain()
    clock.advance(timedelta(minutes=1, seconds=1))
    drain()
    clock.advance(timedelta(minutes=1, seconds=1))
    drain()
    assert Instance.objects.get(id=iid).status == "complete"
    steps = list(Step.objects.filter(instance_id=iid).order_by("position").values_list("name", "kind", "status"))
    expected = [("before", "do", "complete"), ("nap", "sleep", "complete"), ("after", "do", "complete")]
    if second_nap:
        expected.append(("nap-2", "sleep", "complete"))
    assert steps == expected
    story = list(
        History.objects.filter(instance_id=iid)
        .exclude(kind="instance.status")
        .order_by("id")
        .values_list("kind", "step_name")
    )
    expected_story = [
        ("instance.created", ""),
        ("step.started", "before"),
        ("step.completed", "before"),
        ("step.sleep", "nap"),
        ("step.completed", "nap"),
        ("step.started", "after"),
        ("step.completed", "after"),
    ]
    if second_nap:
        expected_story += [("step.sleep", "nap-2"), ("step.completed", "nap-2")]
    assert story == expected_story
    statuses = list(
        History.objects.filter(instance_id=iid, kind="instance.status").order_by("id").values_list("status", flat=True)
    )
    assert statuses == ["running", "waiting", "running"] + (["waiting", "running"] if second_nap else []) + ["complete"]


@pytest.mark.django_db
def test_sleeps_are_limited_to_365_days(drain):
    h = create("t-sleeper", id="sleep-long", params={"for": "366 days"})
    drain()
    status = h.status()
    assert status["error"]["name"] == "InvalidDuration" and "365 days" in status["error"]["message"]


class Until(Workflow):
    name = "t-until"

    def run(self, event, step):
        step.sleep_until("alarm", event.payload["at"])
        return "rang"


@pytest.mark.django_db
def test_sleep_until_wakes_at_the_given_time(drain):
    at = (clock.now() + timedelta(hours=3)).isoformat()
    h = create("t-until", id="until-1", params={"at": at})
    drain()
    assert Instance.objects.get(id="until-1").ready_at.isoformat() == at
    drain(advance_clock=True)
    assert h.status()["output"] == "rang"


class Waiter(Workflow):
    name = "t-waiter"

    def run(self, event, step):
        first = step.wait_for_event("first", type="decision", timeout="1 hour")
        second = step.wait_for_event("second", type="decision", timeout="1 hour")
        return [first["payload"], second["payload"]]


@pytest.mark.django_db
def test_events_sent_before_the_wait_are_buffered_first_in_first_out(drain):
    h = create("t-waiter", id="wait-1")
    h.send_event("decision", {"n": 1})
    h.send_event("other", {"n": 99})
    h.send_event("decision", {"n": 2})
    drain()
    assert h.status()["output"] == [{"n": 1}, {"n": 2}]
    assert PendingEvent.objects.filter(instance_id="wait-1", consumed_at__isnull=True).count() == 1


@pytest.mark.django_db
def test_an_event_wakes_a_waiting_instance(drain):
    h = create("t-waiter", id="wait-2")
    drain()
    assert h.status()["status"] == "waiting"
    h.send_event("decision", "yes")
    assert Instance.objects.get(id="wait-2").ready_at <= clock.now()
    drain()
    h.send_event("decision", "again")
    drain()
    assert h.status()["output"] == ["yes", "again"]


class Escalate(Workflow):
    name = "t-escalate"

    def run(self, event, step):
        try:
            got = step.wait_for_event("primary", type="approval", timeout="48 hours")
            return {"by": "primary", "payload": got["payload"]}
        except WaitForEventTimeout:
            step.do("notify-senior", lambda: RAN.update(["senior"]) or True)
            got = step.wait_for_event("senior", type="approval", timeout="24 hours")
            return {"by": "senior", "payload": got["payload"]}


@pytest.mark.django_db
def test_a_wait_timeout_raises_an_error_the_workflow_can_catch_to_escalate(drain):
    h = create("t-escalate", id="esc-1")
    drain()
    clock.advance(timedelta(hours=48, seconds=1))
    drain()
    assert RAN["senior"] == 1 and h.status()["status"] == "waiting"
    h.send_event("approval", {"ok": True})
    drain()
    assert h.status()["output"] == {"by": "senior", "payload": {"ok": True}}


@pytest.mark.django_db
def test_events_to_a_finished_instance_are_refused_clearly(drain):
    h = create("t-sleeper", id="done-1", params={"for": 0})
    drain()
    with pytest.raises(InstanceFinished, match="done-1.*complete"):
        h.send_event("late", {})


class Parent(Workflow):
    name = "t-parent"

    def run(self, event, step):
        out = step.child("enrich", workflow="t-child", params={"x": event.payload["x"]})
        return {"child_said": out}


class Child(Workflow):
    name = "t-child"

    def run(self, event, step):
        step.sleep("think", "5 seconds")
        if event.payload["x"] < 0:
            raise ValueError("negative")
        return step.do("double", lambda: event.payload["x"] * 2)


@pytest.mark.django_db
def test_a_step_can_start_a_child_workflow_and_wait_for_its_result(drain):
    h = create("t-parent", id="parent-1", params={"x": 21})
    drain(advance_clock=True)
    assert h.status()["output"] == {"child_said": 42}
    child = Instance.objects.get(parent_id="parent-1")
    assert (child.workflow, child.status, child.output) == ("t-child", "complete", 42)


@pytest.mark.django_db
def test_a_failed_child_raises_in_its_parent(drain):
    h = create("t-parent", id="parent-2", params={"x": -1})
    drain(advance_clock=True)
    status = h.status()
    assert status["status"] == "errored" and status["error"]["name"] == "ChildWorkflowFailed"
    assert "negative" in status["error"]["message"]


class FanOut(Workflow):
    name = "t-fanout"

    def run(self, event, step):
        def fetch(name, fail_times):
            def fn(ctx):
                RAN[name] += 1
                if RAN[name] <= fail_times:
                    raise TimeoutError(f"{name} timed out")
                return f"{name}-data"

            return fn

        results = step.all_settled(
            [
                step.call("fetch-backlinks", fetch("backlinks", 0)),
                step.call("fetch-keywords", fetch("keywords", 9), retries={"limit": 1, "delay": "1 second"}),
                step.call("fetch-brand", fetch("brand", 1), retries={"limit": 2, "delay": "5 seconds"}),
            ]
        )
        return [[r.status, r.value, type(r.error).__name__ if r.error else None] for r in results]


@pytest.mark.django_db(transaction=True)
def test_parallel_steps_settle_independently_and_keep_each_others_results(drain):
    h = create("t-fanout", id="fan-1")
    drain(advance_clock=True)
    assert h.status()["output"] == [
        ["fulfilled", "backlinks-data", None],
        ["rejected", None, "TimeoutError"],
        ["fulfilled", "brand-data", None],
    ]
    assert RAN == {"backlinks": 1, "keywords": 2, "brand": 2}  # nothing ran again on replay


class AsyncFlow(Workflow):
    name = "t-async"

    async def run(self, event, step):
        async def slow(ctx):
            await asyncio.sleep(0.05)
            ORDER.append(ctx.name)
            return ctx.name

        a, b = await asyncio.gather(step.do("a", slow), step.do("b", lambda ctx: ctx.name))
        await step.sleep("rest", "1 minute")
        c = await step.do("c", slow)
        return [a, b, c]


@pytest.mark.django_db(transaction=True)
def test_async_workflows_run_with_awaited_steps_and_replay_alike(drain):
    h = create("t-async", id="async-1")
    drain(advance_clock=True)
    assert h.status()["output"] == ["a", "b", "c"]
    assert ORDER == ["a", "c"]


class AsyncGroup(Workflow):
    name = "t-async-group"

    async def run(self, event, step):
        running = {"now": 0, "most": 0}

        async def one(ctx):
            running["now"] += 1
            running["most"] = max(running["most"], running["now"])
            await asyncio.sleep(0.02)
            running["now"] -= 1
            if ctx.name == "item-2":
                raise ValueError("item 2 is bad")
            return ctx.name

        settled = await step.all_settled(
            [step.call(f"item-{n}", one, retries={"limit": 0}) for n in range(6)], concurrency=2
        )
        ORDER.append(str(running["most"]))
        return [r.status for r in settled]


@pytest.mark.django_db(transaction=True)
def test_an_async_group_runs_at_most_its_concurrency_at_once_and_settles_each_step(drain):
    h = create("t-async-group", id="async-group-1")
    drain(advance_clock=True)
    assert h.status()["output"] == ["fulfilled", "fulfilled", "rejected", "fulfilled", "fulfilled", "fulfilled"]
    assert max(int(most) for most in ORDER) == 2  # two at a time, not six


def test_the_async_step_refuses_a_group_concurrency_below_one():
    from ingest.engine import InvalidStepConfig
    from ingest.engine.runtime.steps import AsyncStep

    step = AsyncStep.__new__(AsyncStep)
    with pytest.raises(InvalidStepConfig, match="at least 1"):
        asyncio.run(step.all_settled([], concurrency=0))


class Saga(Workflow):
    name = "t-saga"

    def run(self, event, step):
        step.do("reserve-seat", lambda: "seat-7", rollback=lambda ctx, seat: ORDER.append(f"release {seat}"))
        step.do("charge-card", lambda: "ch_1", rollback=lambda ctx, charge: ORDER.append(f"refund {charge}"))
        step.do("log", lambda: None)
        if event.payload.get("wait"):
            step.wait_for_event("confirm", type="confirm")
        step.do("issue-ticket", self.issue, retries={"limit": 0})

    def issue(self, ctx):
        raise RuntimeError("printer on fire")


@pytest.mark.django_db
def test_rollbacks_run_in_reverse_order_of_their_steps_when_the_instance_fails(drain):
    h = create("t-saga", id="saga-1")
    drain()
    assert h.status()["status"] == "errored"
    assert ORDER == ["refund ch_1", "release seat-7"]
    rollback_steps = [s["name"] for s in h.status()["steps"] if s["kind"] == "rollback"]
    assert sorted(rollback_steps) == ["rollback:charge-card", "rollback:reserve-seat"]


@pytest.mark.django_db
def test_terminate_with_rollback_replays_and_unwinds_a_waiting_instance(drain):
    h = create("t-saga", id="saga-2", params={"wait": True})
    drain()
    assert h.status()["status"] == "waiting" and ORDER == []
    h.terminate(rollback=True, actor="ops", reason="customer cancelled")
    drain()
    assert h.status()["status"] == "terminated"
    assert ORDER == ["refund ch_1", "release seat-7"]


@pytest.mark.django_db
def test_sleep_rejects_a_bad_duration_clearly(drain):
    h = create("t-sleeper", id="sleep-bad", params={"for": "a while"})
    drain()
    assert "'a while'" in h.status()["error"]["message"]
    with pytest.raises(InvalidDuration):
        from ingest.engine.durations import parse_duration

        parse_duration("a while")
