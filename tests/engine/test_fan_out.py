"""step.fan_out: every item its own durable unit, the results back to the parent in input order."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta
from decimal import Decimal

import pytest

from ingest.engine import (
    FanOutItemMissing,
    InvalidStepConfig,
    Workflow,
    create,
    fan_out_handler,
)
from ingest.engine.clock import clock
from ingest.engine.models import ApiCost, Attempt, DeadLetter, FanOut, FanOutItem, Instance, Step
from ingest.engine.selectors import fan_out_list
from ingest.engine.services.control import instance_retry

pytestmark = pytest.mark.db
CALLS: Counter[str] = Counter()


@pytest.fixture(autouse=True)
def _reset():
    CALLS.clear()


class Declined(Exception):
    def __init__(self, code: int, reason: str) -> None:
        super().__init__(f"{code}: {reason}")
        self.code, self.reason = code, reason


@fan_out_handler("t-classify")
def classify(ctx, item):
    CALLS[f"{item}#{ctx.attempt}"] += 1
    if isinstance(item, str) and item.startswith("bad"):
        raise Declined(422, f"cannot classify {item}")
    ctx.track_cost("t-llm", cost=Decimal("0.01"))
    return {"url": item, "label": len(str(item))}


class Classify(Workflow):
    name = "t-fan-classify"

    def run(self, event, step):
        settled = step.fan_out(
            "classify-urls",
            classify,
            event.payload["urls"],
            batch_size=2,
            retries={"limit": 1, "delay": "1 second", "backoff": "constant"},
        )
        step.sleep("after", "1 minute")  # the results must survive the replay after it
        return [
            {
                "ok": s.ok,
                "value": s.value,
                "error": type(s.error).__name__ if s.error else None,
                "code": getattr(s.error, "code", None),
            }
            for s in settled
        ]


@pytest.mark.django_db
def test_each_item_runs_as_its_own_instance_and_the_results_come_back_in_input_order(drain):
    urls = [f"u{i}" for i in range(5)]
    h = create("t-fan-classify", id="fan-order", params={"urls": urls})
    drain(advance_clock=True)
    assert h.status()["status"] == "complete"
    assert [r["value"]["url"] for r in h.status()["output"]] == urls
    items = list(Instance.objects.filter(parent_id="fan-order").order_by("fan_out_item__index"))
    assert [i.workflow for i in items] == ["fan-out.t-classify"] * 5
    assert [i.status for i in items] == ["complete"] * 5
    assert sum(CALLS.values()) == 5  # each ran once: the replay after the sleep ran none again
    fo = FanOut.objects.get(instance_id="fan-order")
    assert (fo.expected, fo.received, fo.failed, fo.state) == (5, 5, 0, "complete")
    assert fo.started_at <= fo.updated_at
    assert [r["url"] for r in fo.results()] == urls


@pytest.mark.django_db
def test_the_parent_sleeps_until_its_last_item_lands_and_is_woken_by_it_not_by_a_poll(drain):
    h = create("t-fan-classify", id="fan-push", params={"urls": ["a", "b", "c"]})
    drain(max_turns=1)  # the parent's first turn: items created, the parent waits
    parent = Instance.objects.get(id="fan-push")
    assert parent.status == "waiting"
    assert parent.ready_at - clock.now() > timedelta(minutes=9)  # only the timeout would wake it
    assert Instance.objects.filter(parent_id="fan-push", status="queued").count() == 3
    drain(max_turns=2)  # two of three items
    assert Instance.objects.get(id="fan-push").ready_at - clock.now() > timedelta(minutes=9)
    drain(max_turns=1)  # the last item lands: the parent is runnable now
    assert Instance.objects.get(id="fan-push").ready_at <= clock.now()
    drain()  # the parent resolves the fan-out, then sleeps a minute: no clock jump was needed before
    assert Step.objects.get(instance_id="fan-push", name="classify-urls").status == "complete"
    assert h.status()["status"] == "waiting"


@pytest.mark.django_db
def test_a_failing_item_has_its_own_retries_attempts_and_dead_letter_and_the_parent_gets_its_error(drain):
    h = create("t-fan-classify", id="fan-fail", params={"urls": ["ok1", "bad2", "ok3"]})
    drain(advance_clock=True)
    out = h.status()["output"]
    assert [r["ok"] for r in out] == [True, False, True]
    assert out[1]["error"] == "Declined" and out[1]["code"] == 422  # its own class, rebuilt
    bad = Instance.objects.get(parent_id="fan-fail", fan_out_item__index=1)
    assert bad.status == "errored"
    assert Attempt.objects.filter(step__instance_id=bad.id).count() == 2  # limit 1: two attempts
    assert DeadLetter.objects.filter(instance_id=bad.id).exists()
    assert CALLS["bad2#1"] == CALLS["bad2#2"] == 1
    fo = FanOut.objects.get(instance_id="fan-fail")
    assert (fo.received, fo.failed) == (3, 1)
    # costs are the items': one row per successful attempt, on the item's instance
    costs = ApiCost.objects.filter(instance__parent_id="fan-fail")
    assert costs.count() == 2 and {c.workflow_type for c in costs} == {"fan-out.t-classify"}


@pytest.mark.django_db
def test_an_item_run_again_is_not_counted_twice(drain):
    create("t-fan-classify", id="fan-once", params={"urls": ["bad-1", "ok"]})
    drain(max_turns=1)
    bad = Instance.objects.get(parent_id="fan-once", fan_out_item__index=0)
    drain(advance_clock=False, max_turns=50)
    clock.advance(timedelta(seconds=2))
    drain(max_turns=50)
    assert Instance.objects.get(id=bad.id).status == "errored"
    instance_retry(instance_id=bad.id, actor="op")  # an operator runs the failed item again
    drain(advance_clock=True)
    fo = FanOut.objects.get(instance_id="fan-once")
    assert (fo.expected, fo.received, fo.failed) == (2, 2, 1)
    assert FanOutItem.objects.get(instance_id=bad.id).state == "errored"


@fan_out_handler("t-slow-mark")
def slow_mark(ctx, item):
    return item


class Enrich(Workflow):
    """An item handler may be a whole workflow: its instances are the items."""

    name = "t-fan-enrich-item"

    def run(self, event, step):
        if event.payload.get("slow"):
            step.sleep("slow", "1 hour")
        return step.do("enrich", lambda ctx: event.payload["n"] * 10)


class EnrichAll(Workflow):
    name = "t-fan-enrich"

    def run(self, event, step):
        settled = step.fan_out("enrich-all", Enrich, event.payload["items"], timeout="10 minutes")
        return [{"ok": s.ok, "value": s.value, "missing": isinstance(s.error, FanOutItemMissing)} for s in settled]


@pytest.mark.django_db
def test_items_can_be_child_workflows_whose_outputs_come_back_in_order(drain):
    h = create("t-fan-enrich", id="fan-wf", params={"items": [{"n": 1}, {"n": 2}, {"n": 3}]})
    drain()
    assert [r["value"] for r in h.status()["output"]] == [10, 20, 30]
    assert set(Instance.objects.filter(parent_id="fan-wf").values_list("workflow", flat=True)) == {"t-fan-enrich-item"}


@pytest.mark.django_db
def test_at_the_timeout_the_parent_moves_on_with_the_partial_results_and_the_missing_marked(drain):
    h = create("t-fan-enrich", id="fan-late", params={"items": [{"n": 1}, {"n": 2, "slow": True}, {"n": 3}]})
    drain()
    assert h.status()["status"] == "waiting"
    clock.advance(timedelta(minutes=10, seconds=1))
    drain()
    assert h.status()["status"] == "complete"
    assert h.status()["output"] == [
        {"ok": True, "value": 10, "missing": False},
        {"ok": False, "value": None, "missing": True},
        {"ok": True, "value": 30, "missing": False},
    ]
    fo = FanOut.objects.get(instance_id="fan-late")
    assert (fo.expected, fo.received, fo.state) == (3, 2, "timed_out")
    clock.advance(timedelta(hours=1))
    drain()  # the late item still finishes on its own; the aggregate no longer counts it
    assert Instance.objects.get(parent_id="fan-late", fan_out_item__index=1).status == "complete"
    fo.refresh_from_db()
    assert fo.received == 2 and FanOutItem.objects.get(fan_out=fo, index=1).state == "missing"


class Empty(Workflow):
    name = "t-fan-empty"

    def run(self, event, step):
        return step.fan_out("none", classify, [])


@pytest.mark.django_db
def test_an_empty_fan_out_returns_at_once(drain):
    h = create("t-fan-empty", id="fan-empty")
    drain()
    assert h.status()["status"] == "complete" and h.status()["output"] == []


def _plain(ctx, item):
    return item


class Unregistered(Workflow):
    name = "t-fan-unregistered"

    def run(self, event, step):
        return step.fan_out("x", _plain, [1])


@pytest.mark.django_db
def test_a_handler_that_is_not_registered_is_refused_with_how_to_register_it(drain):
    h = create("t-fan-unregistered", id="fan-unregistered")
    drain()
    status = h.status()
    assert status["status"] == "errored" and status["error"]["name"] == "InvalidStepConfig"
    assert "fan_out_handler" in status["error"]["message"]
    assert not Instance.objects.filter(parent_id="fan-unregistered").exists()


def test_handler_names_follow_the_workflow_name_rules():
    with pytest.raises(InvalidStepConfig):
        fan_out_handler("Not A Name")(_plain)


class AsyncFans(Workflow):
    name = "t-fan-async"

    async def run(self, event, step):
        settled = await step.fan_out("marks", "t-slow-mark", [3, 1, 2])
        return [s.value for s in settled]


@pytest.mark.django_db(transaction=True)  # the async step API runs in a thread
def test_an_async_workflow_awaits_its_fan_out_and_handlers_may_be_named(drain):
    h = create("t-fan-async", id="fan-async")
    drain()
    assert h.status()["output"] == [3, 1, 2]


@pytest.mark.django_db
def test_the_dashboard_selector_reports_progress_and_failed_items(drain):
    create("t-fan-classify", id="fan-progress", params={"urls": ["a", "bad-b", "c"]})
    drain(max_turns=1)
    [row] = fan_out_list(instance_id="fan-progress")
    assert (row["step"], row["handler"], row["expected"], row["received"], row["state"]) == (
        "classify-urls",
        "t-classify",
        3,
        0,
        "open",
    )
    drain(advance_clock=True)
    [row] = fan_out_list(instance_id="fan-progress")
    assert (row["received"], row["failed"], row["missing"]) == (3, 1, 0)
    [failed] = row["failed_items"]
    assert failed["index"] == 1 and failed["error_name"].endswith("Declined")
    assert failed["instance_id"] == Instance.objects.get(parent_id="fan-progress", fan_out_item__index=1).id
