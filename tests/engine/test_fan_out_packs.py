"""step.fan_out(..., pack=K): K items a carrier instance, each item a step of it, with its own
retries, result, cost rows and count into the aggregate; failed items errored and redrivable."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta
from decimal import Decimal

import pytest

from ingest.engine import InvalidStepConfig, Workflow, create, fan_out_handler
from ingest.engine.clock import clock
from ingest.engine.models import ApiCost, Attempt, DeadLetter, FanOut, FanOutItem, History, Instance, Step
from ingest.engine.selectors import fan_out_list
from ingest.engine.services.control import instance_restart, instance_terminate
from ingest.engine.services.dead_letters import dead_letter_redrive
from ingest.engine.worker.turns import run_until_idle

pytestmark = pytest.mark.db
CALLS: Counter[str] = Counter()
FLAKY: dict[str, int] = {}  # item -> how many first attempts fail
CRASH: set[str] = set()  # items whose first run aborts the worker's turn (a crash)


@pytest.fixture(autouse=True)
def _reset():
    CALLS.clear()
    FLAKY.clear()
    CRASH.clear()


class Declined(Exception):
    def __init__(self, code: int, reason: str) -> None:
        super().__init__(f"{code}: {reason}")
        self.code, self.reason = code, reason


class Crash(KeyboardInterrupt):
    """Stands for the worker dying inside a step: nothing of the step is recorded."""


@fan_out_handler("t-pack-classify")
def classify(ctx, item):
    CALLS[item] += 1
    if item in CRASH:
        CRASH.discard(item)
        raise Crash(item)
    if FLAKY.get(item, 0) >= ctx.attempt:
        raise ConnectionError(f"{item}: flaky, attempt {ctx.attempt}")
    if item.startswith("bad"):
        raise Declined(422, f"cannot classify {item}")
    ctx.track_cost("t-llm", cost=Decimal("0.01"))
    return {"url": item, "label": len(item)}


class PackedClassify(Workflow):
    name = "t-pack-parent"

    def run(self, event, step):
        settled = step.fan_out(
            "classify-urls",
            classify,
            event.payload["urls"],
            pack=event.payload.get("pack", 3),
            batch_size=2,
            timeout=event.payload.get("timeout", "1 day"),
            retries={"limit": 2, "delay": event.payload.get("delay", "1 second"), "backoff": "constant"},
        )
        return [{"ok": s.ok, "value": s.value, "error": type(s.error).__name__ if s.error else None} for s in settled]


def _items(parent: str) -> list[tuple[int, str]]:
    fo = FanOut.objects.get(instance_id=parent)
    return list(FanOutItem.objects.filter(fan_out=fo).order_by("index").values_list("index", "state"))


@pytest.mark.django_db
def test_items_are_packed_into_carriers_and_each_is_a_step_with_its_result_and_cost(drain):
    urls = [f"u{i}" for i in range(7)]
    h = create("t-pack-parent", id="pack-order", params={"urls": urls})
    drain(advance_clock=True)
    assert h.status()["status"] == "complete", h.status()["error"]
    assert [r["value"]["url"] for r in h.status()["output"]] == urls
    carriers = list(Instance.objects.filter(parent_id="pack-order").order_by("created_at", "id"))
    fo = FanOut.objects.get(instance_id="pack-order")
    assert sorted(c.id for c in carriers) == [f"_fo{fo.id}-0-2", f"_fo{fo.id}-3-5", f"_fo{fo.id}-6-6"]
    assert {c.workflow for c in carriers} == {"fan-out.t-pack-classify"}
    assert {c.status for c in carriers} == {"complete"}
    steps = Step.objects.filter(instance__parent_id="pack-order")
    assert sorted(steps.values_list("name", flat=True)) == sorted(f"item-{i}.t-pack-classify" for i in range(7))
    assert Counter(urls) == CALLS
    fo.refresh_from_db()
    assert (fo.expected, fo.created, fo.received, fo.failed, fo.state) == (7, 7, 7, 0, "complete")
    assert [r["url"] for r in fo.results()] == urls
    costs = ApiCost.objects.filter(instance__parent_id="pack-order")
    assert sorted(costs.values_list("step_name", flat=True)) == sorted(f"item-{i}.t-pack-classify" for i in range(7))
    assert {c.workflow_type for c in costs} == {"fan-out.t-pack-classify"}


@pytest.mark.django_db
def test_an_item_failing_twice_then_succeeding_has_its_own_attempts_and_counts_once_complete(drain):
    FLAKY["flaky"] = 2
    h = create("t-pack-parent", id="pack-retry", params={"urls": ["a", "flaky", "c"]})
    drain(advance_clock=True)
    assert [r["ok"] for r in h.status()["output"]] == [True, True, True]
    step = Step.objects.get(instance__parent_id="pack-retry", name="item-1.t-pack-classify")
    assert Attempt.objects.filter(step=step).count() == 3
    assert step.status == "complete"
    assert Counter({"a": 1, "flaky": 3, "c": 1}) == CALLS  # its siblings ran once, not per retry
    fo = FanOut.objects.get(instance_id="pack-retry")
    assert (fo.received, fo.failed) == (3, 0)
    assert _items("pack-retry") == [(0, "complete"), (1, "complete"), (2, "complete")]


@pytest.mark.django_db
def test_a_failed_item_is_errored_with_its_class_while_its_siblings_complete_and_its_dead_letter_redrives_it(drain):
    h = create("t-pack-parent", id="pack-fail", params={"urls": ["ok0", "bad1", "ok2"]})
    drain(advance_clock=True)
    out = h.status()["output"]
    assert [r["ok"] for r in out] == [True, False, True]
    assert out[1]["error"] == "Declined"
    item = FanOutItem.objects.get(fan_out__instance_id="pack-fail", index=1)
    assert item.state == "errored"
    assert item.error_name.endswith("Declined") and "422: cannot classify bad1" in item.error_message
    fo = FanOut.objects.get(instance_id="pack-fail")
    assert (fo.received, fo.failed) == (3, 1)
    [carrier] = Instance.objects.filter(parent_id="pack-fail")
    assert carrier.status == "errored" and carrier.error_name == "FanOutItemFailed"
    letter = DeadLetter.objects.get(instance_id=carrier.id)
    assert letter.step_name == "item-1.t-pack-classify" and letter.state == "open"
    [row] = fan_out_list(instance_id="pack-fail")
    [failed] = row["failed_items"]
    assert failed["index"] == 1 and failed["instance_id"] == carrier.id  # where its steps and letter are
    # the operator redrives it: only the failed item runs again, nothing is counted twice
    CALLS.clear()
    assert dead_letter_redrive(ids=[letter.id], actor="op", rate_per_second=100) == 1
    drain(advance_clock=True)
    assert Counter({"bad1": 3}) == CALLS  # the item's own three attempts again; its siblings not at all
    assert Instance.objects.get(id=carrier.id).status == "errored"
    fo.refresh_from_db()
    assert (fo.received, fo.failed) == (3, 1)


@pytest.mark.django_db
def test_a_crash_between_items_replays_the_done_items_without_running_or_counting_them_again(drain):
    CRASH.add("u2")
    h = create("t-pack-parent", id="pack-crash", params={"urls": ["u0", "u1", "u2", "u3"], "pack": 4})
    drain(max_turns=1)  # the parent inserts the carrier
    with pytest.raises(Crash):
        run_until_idle(max_turns=1, lease_seconds=60)  # the carrier runs u0 and u1, then dies inside u2
    [carrier] = Instance.objects.filter(parent_id="pack-crash")
    steps = dict(Step.objects.filter(instance=carrier).values_list("name", "status"))
    assert steps["item-0.t-pack-classify"] == steps["item-1.t-pack-classify"] == "complete"
    # the interrupted item's start may or may not be recorded yet (PostgreSQL writes it with its end)
    assert steps.get("item-2.t-pack-classify") in (None, "running")
    assert "item-3.t-pack-classify" not in steps
    assert FanOut.objects.get(instance_id="pack-crash").received == 0
    clock.advance(timedelta(minutes=2))  # its lease expires; a worker takes the carrier again
    drain(advance_clock=True)
    assert h.status()["status"] == "complete", h.status()["error"]
    assert Counter({"u0": 1, "u1": 1, "u2": 2, "u3": 1}) == CALLS
    fo = FanOut.objects.get(instance_id="pack-crash")
    assert (fo.expected, fo.received, fo.failed, fo.state) == (4, 4, 0, "complete")
    assert [r["url"] for r in fo.results()] == ["u0", "u1", "u2", "u3"]


@pytest.mark.django_db
def test_terminating_the_parent_stops_its_outstanding_items(drain):
    FLAKY["slow"] = 1  # item 0 waits a second for its retry: the carrier is not done
    h = create("t-pack-parent", id="pack-stop", params={"urls": ["slow", "b", "c", "d", "e", "f"]})
    drain(max_turns=2)  # the parent, then the first carrier: its items 1-2 done, item 0 waiting
    instance_terminate(instance_id="pack-stop", actor="op")
    CALLS.clear()
    drain(advance_clock=True)
    assert Counter() == CALLS  # neither the retry nor the second carrier's items ran
    assert h.status()["status"] == "terminated"
    assert set(Instance.objects.filter(parent_id="pack-stop").values_list("status", flat=True)) == {"terminated"}


@pytest.mark.django_db
def test_restarting_the_parent_stops_the_old_carriers_and_runs_a_new_fan_out(drain):
    h = create("t-pack-parent", id="pack-restart", params={"urls": ["a", "b", "c", "d"]})
    drain(max_turns=1)
    instance_restart(instance_id="pack-restart", actor="op")
    drain(advance_clock=True)
    assert h.status()["status"] == "complete", h.status()["error"]
    assert Counter({"a": 1, "b": 1, "c": 1, "d": 1}) == CALLS  # the first fan-out's carriers ran none
    assert FanOut.objects.filter(instance_id="pack-restart").count() == 1


@pytest.mark.django_db
def test_at_the_timeout_items_still_out_are_missing_and_their_done_siblings_count(drain):
    FLAKY["late"] = 1  # its retry is due after the fan-out's timeout: its carrier is still out then
    h = create(
        "t-pack-parent",
        id="pack-late",
        params={"urls": ["x", "late", "y", "z"], "pack": 4, "timeout": "1 minute", "delay": "1 hour"},
    )
    drain()
    assert h.status()["status"] == "waiting"
    clock.advance(timedelta(minutes=2))
    drain()
    assert h.status()["status"] == "complete", h.status()["error"]
    assert [(r["ok"], r["error"]) for r in h.status()["output"]] == [
        (True, None),
        (False, "FanOutItemMissing"),
        (True, None),
        (True, None),
    ]
    fo = FanOut.objects.get(instance_id="pack-late")
    assert (fo.state, fo.received) == ("timed_out", 3)
    assert _items("pack-late") == [(0, "complete"), (1, "missing"), (2, "complete"), (3, "complete")]
    clock.advance(timedelta(hours=2))
    drain()  # the late item still runs to its end; the aggregate no longer counts it
    assert CALLS["late"] == 2 and Instance.objects.get(parent_id="pack-late").status == "complete"
    fo.refresh_from_db()
    assert fo.received == 3 and _items("pack-late")[1] == (1, "missing")


class Enrich(Workflow):
    name = "t-pack-enrich-item"

    def run(self, event, step):
        n = event.payload["n"]
        if step.version_at_least(1):
            step.set_search_attributes(n=n)
        doubled = step.do("double", lambda ctx: n * 2)
        if n == 2:
            step.sleep("pause", "5 seconds")
        if n < 0:
            raise ValueError(f"negative {n}")
        return step.do("add", lambda ctx: doubled + 1)


class EnrichAll(Workflow):
    name = "t-pack-enrich"

    def run(self, event, step):
        settled = step.fan_out("enrich", Enrich, event.payload["items"], pack=10)
        return [[s.ok, s.value, type(s.error).__name__ if s.error else None] for s in settled]


@pytest.mark.django_db
def test_workflow_items_are_packed_with_their_steps_named_per_item(drain):
    h = create("t-pack-enrich", id="pack-wf", params={"items": [{"n": 1}, {"n": 2}, {"n": -1}, {"n": 4}]})
    drain(advance_clock=True)
    assert h.status()["output"] == [[True, 3, None], [True, 5, None], [False, None, "ValueError"], [True, 9, None]]
    [carrier] = Instance.objects.filter(parent_id="pack-wf")
    assert carrier.workflow == "t-pack-enrich-item" and carrier.status == "errored"
    names = set(Step.objects.filter(instance=carrier).values_list("name", flat=True))
    assert {"item-0.double", "item-0.add", "item-1.pause", "item-2.double", "item-3.add"} <= names
    assert "search-attributes" not in names
    assert DeadLetter.objects.get(instance_id=carrier.id).step_name == "item-2.double"
    assert History.objects.filter(instance_id=carrier.id, kind="instance.created").count() == 1


class BadPack(Workflow):
    name = "t-pack-bad"

    def run(self, event, step):
        return step.fan_out("x", classify, ["a"], pack=event.payload["pack"])


@pytest.mark.django_db
@pytest.mark.parametrize("pack", [0, 1001, "3", True])
def test_a_bad_pack_is_refused_before_anything_is_written(drain, pack):
    h = create("t-pack-bad", id="pack-bad", params={"pack": pack})
    drain()
    status = h.status()
    assert status["status"] == "errored" and status["error"]["name"] == "InvalidStepConfig"
    assert "pack must be a whole number from 1" in status["error"]["message"]
    assert not Instance.objects.filter(parent_id="pack-bad").exists()
    assert not FanOut.objects.exists()


def test_pack_is_checked_as_a_step_option():
    from ingest.engine.handlers import resolve_handler
    from ingest.engine.runtime.fan_out import plan

    target = resolve_handler(classify, step="s")
    with pytest.raises(InvalidStepConfig):
        plan(step="s", target=target, batch_size=10, timeout="1 minute", retries=None, item_timeout=None, pack=-2)
    assert plan(step="s", target=target, batch_size=10, timeout="1 minute", retries=None, item_timeout=None,
                pack=50).pack == 50  # fmt: skip
