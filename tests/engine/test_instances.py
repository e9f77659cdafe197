"""The instance API and operator services: create, pause, resume, terminate, restart, retry, replay."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta

import pytest

from ingest.engine import (
    InstanceAlreadyExists,
    InstanceFinished,
    InstanceNotFound,
    InvalidInstanceId,
    InvalidParams,
    UnknownStep,
    UnknownWorkflow,
    Workflow,
    create,
    create_batch,
    get,
)
from ingest.engine.clock import clock
from ingest.engine.errors import BatchTooLarge, DeadLetterError, InvalidTransition
from ingest.engine.models import DeadLetter, History, Instance, Step
from ingest.engine.services import control, dead_letters

pytestmark = pytest.mark.db
RAN: Counter[str] = Counter()
FIXED: set[str] = set()


@pytest.fixture(autouse=True)
def _reset():
    RAN.clear()
    FIXED.clear()


class Pipeline(Workflow):
    name = "t-pipeline"

    def run(self, event, step):
        a = step.do("extract", lambda: RAN.update(["extract"]) or {"rows": 3})
        step.sleep("cool-down", "1 hour")
        b = step.do("transform", self.transform(event))
        c = step.do("load", lambda: RAN.update(["load"]) or b * 2)
        return {"a": a, "c": c}

    def transform(self, event):
        def fn(ctx):
            RAN["transform"] += 1
            if event.payload.get("fail") and event.instance_id not in FIXED:
                raise RuntimeError(f"bad row {event.payload['fail']}")
            return 21

        return fn


def steps_of(instance_id):
    return list(Step.objects.filter(instance_id=instance_id).order_by("position").values_list("name", "status"))


@pytest.mark.django_db
@pytest.mark.parametrize("bad", ["", "-starts-with-dash", "has space", "x" * 101, "semi;colon", "ünïcode"])
def test_create_refuses_bad_ids_with_the_rule(bad):
    with pytest.raises(InvalidInstanceId, match="1–100 characters"):
        create("t-pipeline", id=bad)
    assert Instance.objects.count() == 0


@pytest.mark.django_db
def test_create_accepts_ids_of_100_characters_and_generates_ids_when_none_is_given():
    assert create("t-pipeline", id="a" * 100).id == "a" * 100
    generated = create("t-pipeline")
    assert generated.id.startswith("t-pipeline-") and len(generated.id) <= 100


@pytest.mark.django_db
def test_a_duplicate_id_raises_already_exists_and_changes_nothing():
    create("t-pipeline", id="gong-acme-123", params={"v": 1})
    with pytest.raises(InstanceAlreadyExists, match="already processed"):
        create("t-pipeline", id="gong-acme-123", params={"v": 2})
    assert Instance.objects.get(id="gong-acme-123").params == {"v": 1}


@pytest.mark.django_db
def test_unknown_workflows_and_bad_params_are_refused_by_name():
    with pytest.raises(UnknownWorkflow, match="'no-such-flow'.*t-pipeline"):
        create("no-such-flow")
    with pytest.raises(InvalidParams, match="JSON object"):
        create("t-pipeline", params=[1, 2])
    with pytest.raises(InvalidParams, match="serialisable"):
        create("t-pipeline", params={"when": object()})


@pytest.mark.django_db
def test_create_batch_takes_at_most_100_and_is_all_or_nothing():
    handles = create_batch("t-pipeline", [{"id": f"b-{i}", "params": {"i": i}} for i in range(100)])
    assert len(handles) == 100 and Instance.objects.count() == 100
    with pytest.raises(BatchTooLarge, match="101"):
        create_batch("t-pipeline", [{"id": f"c-{i}"} for i in range(101)])
    with pytest.raises(InstanceAlreadyExists, match="b-5"):
        create_batch("t-pipeline", [{"id": "new-1"}, {"id": "b-5"}])
    assert not Instance.objects.filter(id="new-1").exists()


@pytest.mark.django_db
def test_get_raises_for_an_unknown_instance():
    with pytest.raises(InstanceNotFound, match="'nope'"):
        get("nope")


@pytest.mark.django_db
def test_pause_and_resume_shift_the_sleep_by_the_paused_time(drain):
    h = create("t-pipeline", id="p-1")
    drain()
    wake = Instance.objects.get(id="p-1").ready_at
    before_pause = clock.now()
    h.pause(actor="ana", reason="investigating")
    assert h.status()["status"] == "paused"
    clock.advance(timedelta(minutes=30))
    drain()  # nothing runs while paused
    assert RAN["transform"] == 0
    h.resume(actor="ana")
    after_resume = clock.now()
    inst = Instance.objects.get(id="p-1")
    assert inst.status == "waiting"
    # The sleep moves by exactly the paused time: the 30 minutes plus however long the real
    # clock took between the pause and the resume (bounded by what this test saw around them).
    paused_at_most = after_resume - before_pause
    assert timedelta(minutes=30) <= inst.ready_at - wake <= paused_at_most
    step = Step.objects.get(instance_id="p-1", name="cool-down")
    assert step.wake_at == inst.ready_at
    clock.advance(timedelta(minutes=31))
    drain()
    assert h.status()["status"] == "waiting"  # the hour restarted its count at the pause
    drain(advance_clock=True)
    assert h.status()["status"] == "complete"
    actions = list(
        History.objects.filter(instance_id="p-1", kind="operator").values_list("data__action", "actor", "reason")
    )
    assert actions == [("pause", "ana", "investigating"), ("resume", "ana", "")]


@pytest.mark.django_db
def test_pausing_a_running_instance_waits_for_its_step_then_pauses(drain):
    h = create("t-pipeline", id="p-2")
    Instance.objects.filter(id="p-2").update(
        lease_token="tok", lease_owner="w", lease_expires_at=clock.now() + timedelta(seconds=30), status="running"
    )
    h.pause()
    assert h.status()["status"] == "waitingForPause"
    h.resume()
    assert h.status()["status"] == "running"
    with pytest.raises(InvalidTransition, match="not paused"):
        h.resume()


@pytest.mark.django_db
def test_terminate_ends_an_instance_and_refuses_a_finished_one(drain):
    h = create("t-pipeline", id="t-1")
    drain()
    h.terminate(actor="bo", reason="duplicate")
    assert h.status()["status"] == "terminated"
    drain(advance_clock=True)
    assert RAN["transform"] == 0
    with pytest.raises(InstanceFinished, match="terminate.*terminated"):
        h.terminate()


@pytest.mark.django_db
def test_restart_from_a_step_keeps_every_result_before_it(drain):
    h = create("t-pipeline", id="r-1")
    drain(advance_clock=True)
    assert RAN == {"extract": 1, "transform": 1, "load": 1}
    h.restart(from_step="transform", actor="ana")
    assert steps_of("r-1") == [("extract", "complete"), ("cool-down", "complete")]
    drain(advance_clock=True)
    assert h.status()["status"] == "complete"
    assert RAN == {"extract": 1, "transform": 2, "load": 2}
    h.restart()
    drain(advance_clock=True)
    assert RAN == {"extract": 2, "transform": 3, "load": 3}
    assert Instance.objects.get(id="r-1").generation == 2


@pytest.mark.django_db
def test_restart_from_an_unknown_step_names_the_steps_there_are(drain):
    h = create("t-pipeline", id="r-2")
    drain()
    with pytest.raises(UnknownStep, match="'nope'.*extract, cool-down"):
        h.restart(from_step="nope")


@pytest.mark.django_db
def test_retry_runs_an_errored_instance_again_from_its_failed_step(drain):
    create("t-pipeline", id="e-1", params={"fail": 7})
    drain(advance_clock=True)
    assert Instance.objects.get(id="e-1").status == "errored"
    assert RAN["transform"] == 6
    FIXED.add("e-1")  # the cause is fixed upstream
    control.instance_retry(instance_id="e-1", actor="ana", reason="upstream fixed")
    assert DeadLetter.objects.get(instance_id="e-1").state == "redriven"
    drain(advance_clock=True)
    assert Instance.objects.get(id="e-1").status == "complete"
    assert RAN["extract"] == 1 and RAN["transform"] == 7


@pytest.mark.django_db
def test_retry_refuses_an_instance_that_did_not_error(drain):
    create("t-pipeline", id="e-3")
    with pytest.raises(InvalidTransition, match="only errored"):
        control.instance_retry(instance_id="e-3", actor="ana")


@pytest.mark.django_db
def test_replay_starts_a_linked_instance_with_edited_params(drain):
    create("t-pipeline", id="e-4", params={"fail": 1, "keep": "x"})
    drain(advance_clock=True)
    new = control.instance_replay(instance_id="e-4", params={"keep": "x"}, actor="ana", reason="drop bad flag")
    assert new.id == "e-4-replay-1" and new.replay_of_id == "e-4" and new.params == {"keep": "x"}
    drain(advance_clock=True)
    assert Instance.objects.get(id="e-4-replay-1").status == "complete"
    assert Instance.objects.get(id="e-4").status == "errored"
    assert DeadLetter.objects.get(instance_id="e-4").resolution == "replayed as e-4-replay-1: drop bad flag"
    assert control.instance_replay(instance_id="e-4", actor="ana").id == "e-4-replay-2"


@pytest.mark.django_db
def test_dead_letters_are_discarded_only_with_a_reason_and_only_once(drain):
    create("t-pipeline", id="d-1", params={"fail": 1})
    drain(advance_clock=True)
    letter = DeadLetter.objects.get(instance_id="d-1")
    with pytest.raises(DeadLetterError, match="reason"):
        dead_letters.dead_letter_discard(dead_letter_id=letter.id, actor="ana", reason=" ")
    dead_letters.dead_letter_discard(dead_letter_id=letter.id, actor="ana", reason="test data")
    with pytest.raises(DeadLetterError, match="already discarded"):
        dead_letters.dead_letter_discard(dead_letter_id=letter.id, actor="bo", reason="again")


@pytest.mark.django_db
def test_bulk_redrive_selects_by_filters_and_spaces_starts_at_the_capped_rate(drain):
    for i in range(6):
        create("t-pipeline", id=f"bulk-{i}", params={"fail": i + 1}, tenant="acme" if i < 4 else "globex")
    drain(advance_clock=True)
    assert DeadLetter.objects.filter(state="open").count() == 6
    now = clock.now()
    count = dead_letters.dead_letter_redrive(
        filter=dead_letters.DeadLetterFilter(tenants=("acme",), step_name="transform"), rate_per_second=2, actor="ana"
    )
    assert count == 4
    ready = sorted(Instance.objects.filter(tenant="acme").values_list("ready_at", flat=True))
    offsets = [round((r - now).total_seconds() * 2) / 2 for r in ready]
    assert offsets == [0.0, 0.5, 1.0, 1.5]
    assert DeadLetter.objects.filter(state="open", tenant="globex").count() == 2
    assert History.objects.filter(kind="operator", data__action="retry", actor="ana").count() == 4
